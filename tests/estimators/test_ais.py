"""AIS (Salakhutdinov & Murray 2008) against exact enumeration."""

import pytest
import torch

from shortrun.energies.rbm import BernoulliRBMParams
from shortrun.estimators.ais import ais_log_partition, base_rate_bias, default_betas
from shortrun.estimators.exact import log_partition


def test_ais_matches_exact_on_a_small_model_within_its_standard_error():
    """20 × 8 RBM with strong weights: |AIS − exact| must be within 4 reported standard errors
    (plus 0.02 nats for the small bias AIS has at this number of temperatures)."""
    g = torch.Generator().manual_seed(0)
    p = BernoulliRBMParams(torch.randn(20, 8, generator=g, dtype=torch.float64),
                           torch.randn(20, generator=g, dtype=torch.float64) - 1,
                           torch.randn(8, generator=g, dtype=torch.float64))
    data = (torch.rand(500, 20, generator=g) < 0.3).double()
    res = ais_log_partition(p, base_rate_bias(data), n_runs=200, betas=2000, generator=g)
    exact = log_partition(p, torch.float64)
    assert res.stderr > 0
    assert abs(res.log_z - exact) < 4 * res.stderr + 0.02, (res.log_z, exact, res.stderr)


def test_ais_within_0p2_nats_of_exact_on_a_784x16_mnist_rbm(tmp_path, data_dir):
    """The issue's check: a 784 × 16 RBM trained (briefly: PCD-1, 2 epochs over 5k MNIST
    images) and AIS with 100 runs × 3,000 temperatures (float32 chains, float64 weights) from
    the data's base-rate model lands within 0.2 nats of exact log Z."""
    from shortrun.train.config import resolve
    from shortrun.train.trainer import Trainer

    cfg = resolve("rbm_mnist", ["data.n_train=5000", "train.epochs=2", "train.lr=0.05",
                                "train.progress=false", "train.sample_every=100000",
                                "train.ckpt_every=100000", "train.log_every=100"])
    trainer = Trainer(cfg, tmp_path / "run")
    trainer.fit()
    model = trainer.model
    p = model.params()
    p64 = BernoulliRBMParams(p.W.double(), p.b.double(), p.c.double())
    exact = log_partition(p64, torch.float64)
    g = torch.Generator().manual_seed(0)
    res = ais_log_partition(p, base_rate_bias(trainer.data.train), n_runs=100, betas=3000,
                            generator=g, dtype=torch.float32)
    assert abs(res.log_z - exact) < 0.2, (res.log_z, exact, res.stderr)
    assert res.stderr < 0.2


def test_schedule_and_input_checks():
    b = default_betas(100)
    assert len(b) == 100 and float(b[0]) == 0.0 and float(b[-1]) == 1.0
    assert bool((b[1:] >= b[:-1]).all())
    with pytest.raises(ValueError, match="at least 10 inverse temperatures"):
        default_betas(5)
    p = BernoulliRBMParams(torch.zeros(3, 2), torch.zeros(3), torch.zeros(2))
    with pytest.raises(ValueError, match="at least 2 runs"):
        ais_log_partition(p, torch.zeros(3), n_runs=1)
    with pytest.raises(ValueError, match="must run from 0 to 1"):
        ais_log_partition(p, torch.zeros(3), betas=torch.linspace(0.1, 1, 20))
    # an RBM with no couplings and the base rate's biases is the base-rate model itself
    bias = torch.tensor([0.3, -1.0, 2.0], dtype=torch.float64)
    q = BernoulliRBMParams(torch.zeros(3, 2, dtype=torch.float64), bias,
                           torch.zeros(2, dtype=torch.float64))
    res = ais_log_partition(q, bias, n_runs=4, betas=20)
    assert res.log_z == pytest.approx(log_partition(q, torch.float64), abs=1e-12)
    assert res.stderr == pytest.approx(0.0, abs=1e-12)
