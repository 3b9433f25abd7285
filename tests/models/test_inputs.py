"""Public model methods check shape, dtype and scale and say what they expected."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from shortrun.data.base import DataInfo
from shortrun.errors import InputError
from shortrun.models.inputs import check_batch, check_sample_args
from shortrun.models.registry import build_model
from shortrun.train.config import resolve

MNIST = DataInfo((1, 28, 28), "image", -1.0, 1.0, 127.5, 127.5)
DIGITS_BINARY = DataInfo((1, 8, 8), "binary", 0.0, 1.0)
TEXT = DataInfo((8,), "text", 0.0, 11.0)
EXPECT_MNIST = "expected (B, 1, 28, 28) float in [-1, 1] (the model's scale)"


def model(recipe: str, info: DataInfo, *overrides: str):
    torch.manual_seed(0)
    return build_model(resolve(recipe, list(overrides)), info)


@pytest.fixture(scope="module")
def lebm():
    return model("lebm_mnist", MNIST, "model.nz=4", "model.ngf=2", "model.ndf=8",
                 "model.prior_steps=2", "model.post_steps=2")


@pytest.fixture(scope="module")
def rbm():
    return model("rbm_digits", DIGITS_BINARY, "model.n_hidden=6", "model.n_chains=4")


# ----------------------------------------------------------------------------- check_batch

def test_missing_channel_axis_is_named_with_the_fix():
    with pytest.raises(InputError) as err:
        check_batch(torch.zeros(3, 28, 28), MNIST, "anomaly_score")
    assert str(err.value) == (f"anomaly_score: {EXPECT_MNIST}; got (B, 28, 28); add the "
                              "channel axis: x[:, None]")


def test_one_example_without_batch_axis_is_named():
    with pytest.raises(InputError, match=r"got shape \(2,\); one example\? add the batch axis"):
        check_batch(torch.zeros(2), DataInfo((2,), "vector"), "reconstruct")


def test_other_wrong_shapes_say_what_was_expected():
    with pytest.raises(InputError, match=r"expected \(B, 1, 28, 28\) float .*; got \(B, 3, 32, "
                                         r"32\)$"):
        check_batch(torch.zeros(2, 3, 32, 32), MNIST, "reconstruct")
    with pytest.raises(InputError, match=r"expected \(B, 1, 8, 8\) or \(B, 64\) float in "
                                         r"\[0, 1\] \(the model's scale: binary data\); got "
                                         r"\(B, 63\)"):
        check_batch(torch.zeros(2, 63), DIGITS_BINARY, "free_energy", flat_ok=True)


def test_uint8_is_refused_with_the_map_named():
    with pytest.raises(InputError) as err:
        check_batch(torch.zeros(2, 1, 28, 28, dtype=torch.uint8), MNIST, "anomaly_score")
    assert str(err.value) == (f"anomaly_score: {EXPECT_MNIST}; got dtype torch.uint8: map data "
                              "in its own scale with model.info.to_model_scale(x)")


def test_data_scale_floats_are_refused_and_the_helper_fixes_them():
    pixels = torch.linspace(0, 255, 784).reshape(1, 1, 28, 28)
    with pytest.raises(InputError, match=r"got values in \[0, 255\]: map data in its own scale "
                                         r"with model.info.to_model_scale\(x\)"):
        check_batch(pixels, MNIST, "reconstruct")
    assert check_batch(MNIST.to_model_scale(pixels), MNIST, "reconstruct").shape == (1, 1, 28, 28)


def test_small_overshoot_is_tolerated():
    x = torch.full((1, 1, 28, 28), 1.015)
    assert check_batch(x, MNIST, "reconstruct") is x
    with pytest.raises(InputError, match=r"got values in \[1.03, 1.03\]"):
        check_batch(torch.full((1, 1, 28, 28), 1.03), MNIST, "reconstruct")


def test_binary_model_refuses_zero_to_sixteen_and_takes_zero_one_integers():
    with pytest.raises(InputError, match=r"got values in \[0, 16\]: binarize it first, e\.g\. "
                                         r"\(x >= threshold\)\.float\(\), or use a real-valued "
                                         r"model \(grbm\)"):
        check_batch(torch.arange(17.0).repeat(4)[:64].reshape(1, 64), DIGITS_BINARY, "free_energy",
                    flat_ok=True)
    ints = check_batch(np.ones((2, 64), dtype=np.int64), DIGITS_BINARY, "free_energy",
                       flat_ok=True)
    assert ints.dtype == torch.get_default_dtype()


def test_numpy_is_converted_to_the_default_float_and_the_device():
    x = check_batch(np.zeros((2, 1, 28, 28)), MNIST, "reconstruct", device=torch.device("cpu"))
    assert isinstance(x, torch.Tensor) and x.dtype == torch.float32


def test_non_arrays_nan_and_text_dtype_are_refused():
    with pytest.raises(InputError, match=r"reconstruct: expected a torch.Tensor or numpy.ndarray, "
                                         r"\(B, 1, 28, 28\) float .*; got list"):
        check_batch([[0.0]], MNIST, "reconstruct")
    with pytest.raises(InputError, match="the input holds NaN or infinite values"):
        check_batch(torch.full((1, 1, 28, 28), float("nan")), MNIST, "reconstruct")
    with pytest.raises(InputError, match=r"expected \(B, 8\) integer token ids; got dtype "
                                         r"torch.float32"):
        check_batch(torch.zeros(2, 8), TEXT, "reconstruct")
    assert check_batch(torch.zeros(2, 8, dtype=torch.long), TEXT, "reconstruct").shape == (2, 8)


def test_input_error_is_a_value_error_with_exit_code_two():
    assert issubclass(InputError, ValueError) and InputError.exit_code == 2


@pytest.mark.parametrize("args, message", [
    ((0,), "sample: n (how many samples) must be a positive integer; got 0"),
    ((2.0,), "sample: n (how many samples) must be a positive integer; got 2.0"),
    ((True,), "sample: n (how many samples) must be a positive integer; got True"),
    ((2, 0), "sample: steps must be a positive integer (chain length) or None for the "
             "model's default; got 0"),
    ((2, None, 7), "sample: generator must be a torch.Generator or None; got int (use "
                   "torch.Generator().manual_seed(seed))"),
])
def test_sample_arguments(args, message):
    with pytest.raises(InputError) as err:
        check_sample_args(*args)
    assert str(err.value) == message


def test_sample_arguments_accept_numpy_integers():
    check_sample_args(np.int64(3), np.int32(2), torch.Generator())


# ----------------------------------------------------------------------------- the models

def test_lebm_anomaly_score_and_reconstruct_check_their_input(lebm):
    x = torch.rand(3, 1, 28, 28) * 2 - 1
    with pytest.raises(InputError, match=r"anomaly_score: .*; got \(B, 28, 28\); add the "
                                         r"channel axis"):
        lebm.anomaly_score(x[:, 0])
    with pytest.raises(InputError, match=r"anomaly_score: .*got dtype torch.uint8"):
        lebm.anomaly_score(MNIST.to_data_scale(x).round().to(torch.uint8))
    with pytest.raises(InputError, match=r"reconstruct: .*got values in \[0, 255\]"):
        lebm.reconstruct(torch.linspace(0, 255, 3 * 784).reshape(3, 1, 28, 28))
    assert lebm.anomaly_score(x.numpy()).shape == (3,)
    assert lebm.reconstruct(x.numpy().astype(np.float64)).shape == (3, 1, 28, 28)


def test_rbm_free_energy_and_likelihood_check_their_input(rbm):
    v = (torch.rand(5, 1, 8, 8) < 0.5).float()
    assert torch.equal(rbm.free_energy(v), rbm.free_energy(v.reshape(5, 64).numpy()))
    with pytest.raises(InputError, match=r"free_energy: .*got values in \[0, 16\]"):
        rbm.free_energy(torch.randint(0, 17, (5, 64)).float().index_fill_(1, torch.tensor([0]), 16))
    log_z, _, _ = rbm.log_z()
    with pytest.raises(InputError, match=r"mean_log_likelihood: .*; got \(B, 8, 8\); add the "
                                         r"channel axis"):
        rbm.mean_log_likelihood(v[:, 0], log_z)
    with pytest.raises(InputError, match=r"log_z: .*got \(B, 10\)"):
        rbm.log_z(torch.zeros(4, 10))


def test_dual_mcmc_reconstruct_checks_its_input():
    m = model("dual_mcmc_fashion", MNIST, "model.nz=4", "model.ebm_channels=4",
              "model.gen_channels=8", "model.gen_taper=true", "model.inf_channels=4",
              "model.x_steps=2", "model.z_steps=2")
    with pytest.raises(InputError, match=r"reconstruct: .*; got \(B, 28, 28\); add the channel "
                                         r"axis: x\[:, None\]"):
        m.reconstruct(torch.zeros(2, 28, 28))
    assert m.reconstruct(np.zeros((2, 1, 28, 28), np.float32), chain=False).shape == (2, 1, 28, 28)


@pytest.mark.parametrize("recipe, info, overrides", [
    ("ebm_8gaussians", DataInfo((2,), "vector"), ["model.hidden=8"]),
    ("dsm_8gaussians", DataInfo((2,), "vector"), ["model.hidden=8"]),
    ("rbm_digits", DIGITS_BINARY, ["model.n_hidden=6"]),
    ("grbm_digits", DataInfo((1, 8, 8), "image", -1.0, 1.0, 8.0, 8.0), ["model.n_hidden=6"]),
    ("lebm_mnist", MNIST, ["model.nz=4", "model.ngf=2", "model.ndf=8"]),
    ("lebm_ptb_small", TEXT, ["model.nz=4", "model.emb=6", "model.hidden=8", "model.ndf=8"]),
    ("lstm_lm_ptb", TEXT, ["model.emb=6", "model.hidden=8"]),
    ("classifier_mnist", MNIST, []),
    ("dual_mcmc_fashion", MNIST, ["model.nz=4", "model.ebm_channels=4", "model.gen_channels=8",
                                  "model.inf_channels=4"]),
])
def test_every_models_sample_checks_its_arguments(recipe, info, overrides):
    m = model(recipe, info, *overrides)
    with pytest.raises(InputError, match="sample: n .* must be a positive integer; got 0"):
        m.sample(0)
    with pytest.raises(InputError, match="sample: generator must be a torch.Generator"):
        m.sample(2, None, 1234)
