"""The LEBM generator's layout (``conv`` family): both layouts give float64's chain step to
float32 rounding, pins and ``model.channels_last`` decide without timing, ``auto`` is measured
once by :func:`settle_layouts` (the Trainer's and a loaded run's call, before the first chain
step) and the generator keeps the winner; the generator's forward never measures."""

from __future__ import annotations

import pytest
import torch

from shortrun.errors import ConfigError
from shortrun.models.lebm_nets import Generator
from shortrun.speed import engine as routes
from shortrun.speed import layout as conv_routes


def _generator(channels_last="auto") -> Generator:
    torch.manual_seed(0)
    return Generator("mnist28", 4, 4, channels_last)


def _z(batch: int = 3) -> torch.Tensor:
    return torch.randn(batch, 4, generator=torch.Generator().manual_seed(5))


@pytest.fixture
def unpinned(monkeypatch):
    monkeypatch.delenv("SHORTRUN_ROUTE")
    monkeypatch.delenv("SHORTRUN_ROUTE_CONV")
    monkeypatch.setenv("SHORTRUN_ROUTE_DECONV", "conv")  # only the layout is timed here


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_each_layout_agrees_with_the_float64_step(layout):
    g = _generator()
    z = _z().reshape(3, 4, 1, 1)
    assert conv_routes.layout_works(g.net, z, layout)
    assert conv_routes.layout_works(g.net, z.double(), layout)


def test_a_layout_whose_kernel_fails_is_no_route(unpinned, monkeypatch):
    real = conv_routes._copy_in

    def broken(net, layout, dtype):
        if layout == "nchw" and dtype == torch.float32:
            raise RuntimeError("no kernel for this layout")
        return real(net, layout, dtype)

    monkeypatch.setattr(conv_routes, "_copy_in", broken)
    monkeypatch.setattr(routes, "measure", lambda name, fn: pytest.fail("timed"))
    g = _generator()
    conv_routes.settle_layouts(g, 3)
    assert g.layout == "nhwc"  # the one route left: taken without a race


@pytest.mark.parametrize("winner", ["nchw", "nhwc"])
def test_auto_is_measured_once_by_settle_layouts_and_kept(winner, unpinned, monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(routes, "measure",
                        lambda name, fn: (calls.append(name), fn(), 0.0 if name == winner
                                          else 1.0)[2])
    g = _generator()
    assert g.layout is None
    before = torch.get_rng_state()
    conv_routes.settle_layouts(g, 3)
    assert torch.equal(torch.get_rng_state(), before)  # the measurement drew no global numbers
    assert g.layout == winner and sorted(calls) == sorted(["nchw", "nhwc"] * routes.ROUNDS)
    out = g(_z())
    assert out.is_contiguous(memory_format=conv_routes.FORMATS[winner])
    conv_routes.settle_layouts(g, 3)
    g(_z())
    assert len(calls) == 2 * routes.ROUNDS  # settled: not measured again
    [key] = [k for k in routes.remembered() if k.startswith("conv|")]
    assert key == "conv|float32|threads=1|batch=4|mnist28-nz4-ngf4"
    ref = _generator(winner == "nhwc")  # the same weights, layout given
    torch.testing.assert_close(out, ref(_z()), rtol=1e-5, atol=1e-6)


def test_the_generators_forward_never_measures(unpinned, monkeypatch):
    """An ``auto`` generator nobody settled runs NCHW, as built; its forward asks the speed
    wing nothing (the layer takes its layout, :func:`settle_layouts` decides it)."""
    settle = routes.settle  # the layers' own (deconv) routes are pinned by ``unpinned``

    def no_layout(family, *args):
        assert family is not conv_routes.LAYOUT, "the forward settled its layout"
        return settle(family, *args)

    monkeypatch.setattr(routes, "settle", no_layout)
    monkeypatch.setattr(routes, "measure", lambda name, fn: pytest.fail("the forward timed"))
    g = _generator()
    out = g(_z())
    assert g.layout is None and out.is_contiguous()
    torch.testing.assert_close(out, _generator(False)(_z()), rtol=0, atol=0)
    g.set_layout("nhwc")
    assert g(_z()).is_contiguous(memory_format=torch.channels_last) and g.layout == "nhwc"


@pytest.mark.parametrize("value", ["NHWC", "channels_last"])
def test_a_bad_layout_names_the_fix(value):
    with pytest.raises(ConfigError, match=rf"^Generator layout '{value}': use 'nchw' or 'nhwc'$"):
        _generator().set_layout(value)
    with pytest.raises(ConfigError, match="use 'nchw' or 'nhwc'"):
        _generator(value)


def test_a_layout_name_is_taken_as_channels_last():
    assert _generator("nhwc").layout == "nhwc" and _generator("nchw").layout == "nchw"


@pytest.mark.parametrize(("setting", "layout"), [(True, "nhwc"), (False, "nchw")])
def test_true_and_false_pin_the_layout_without_timing(setting, layout, unpinned,
                                                       monkeypatch):
    monkeypatch.setattr(routes, "measure", lambda name, fn: pytest.fail("timed"))
    g = _generator(setting)
    assert g.layout == layout
    conv_routes.settle_layouts(g, 3)
    g(_z())
    assert g.layout == layout


@pytest.mark.parametrize(("env", "value", "layout"), [
    ("SHORTRUN_ROUTE_CONV", "nchw", "nchw"), ("SHORTRUN_ROUTE_CONV", "nhwc", "nhwc"),
    ("SHORTRUN_ROUTE", "onednn", "nhwc")])  # a deleted family's route: the fixed NHWC
def test_pins_settle_auto_without_timing(env, value, layout, unpinned, monkeypatch):
    monkeypatch.setenv(env, value)
    monkeypatch.setattr(routes, "measure", lambda name, fn: pytest.fail("timed"))
    g = _generator()
    conv_routes.settle_layouts(g, 3)
    assert g.layout == layout


def test_a_bad_conv_pin_names_the_fix(unpinned, monkeypatch):
    monkeypatch.setenv("SHORTRUN_ROUTE_CONV", "channels_last")
    with pytest.raises(ConfigError, match=r"^SHORTRUN_ROUTE_CONV=channels_last is not a conv "
                                          r"route; use one of nchw, nhwc, or unset it"):
        conv_routes.settle_layouts(_generator(), 3)


def test_the_config_key_takes_true_false_and_auto():
    from shortrun.train.config import resolve

    for value, expect in (("true", True), ("false", False), ("auto", "auto")):
        cfg = resolve("lebm_mnist", [f"model.channels_last={value}"])
        assert cfg.model.channels_last == expect
    assert resolve("lebm_mnist", []).model.channels_last == "auto"
    with pytest.raises(ConfigError, match="channels_last"):
        resolve("lebm_mnist", ["model.channels_last=sometimes"])


def test_the_layout_check_times_no_layer_route_at_its_probe_shapes(monkeypatch):
    """The cross-check runs batch-2 copies in float32 and float64; their first and last layers
    take the convolution there, so only the real batch's layer routes are timed and cached."""
    monkeypatch.delenv("SHORTRUN_ROUTE")
    monkeypatch.delenv("SHORTRUN_ROUTE_CONV")
    monkeypatch.delenv("SHORTRUN_ROUTE_DECONV", raising=False)
    monkeypatch.setattr(routes, "measure", lambda name, fn: (fn(), 1.0)[1])
    g = _generator()
    conv_routes.settle_layouts(g, 3)
    g(_z(batch=3))
    deconv = [k for k in routes.remembered() if k.startswith("deconv|")]
    assert deconv and all("|float32|" in k and "|batch=4|" in k for k in deconv), deconv
