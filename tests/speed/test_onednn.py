"""``shortrun.onednn``: the probe, the guard, and products against a float64 reference."""

from __future__ import annotations

import pytest
import torch

from shortrun.hardware import has_native_bf16
from shortrun.speed.onednn import onednn_linear, onednn_linear_works, onednn_usable

needs_onednn = pytest.mark.skipif(
    not (torch.backends.mkldnn.is_available() and onednn_linear_works()),
    reason="no usable oneDNN linear in this torch build")


def rand(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@needs_onednn
@pytest.mark.parametrize("transpose_x", [False, True])
@pytest.mark.parametrize("transpose_w", [False, True])
@pytest.mark.parametrize("bias", [False, True])
def test_linear_matches_float64_reference(transpose_x, transpose_w, bias):
    """Transposed views are read in place; the result is float32 rounding away from float64."""
    x = rand(37, 50, seed=1).t().contiguous().t() if transpose_x else rand(37, 50, seed=1)
    w = rand(29, 50, seed=2).t().contiguous().t() if transpose_w else rand(29, 50, seed=2)
    b = rand(29, seed=3) if bias else None
    out = onednn_linear(x, w, b)
    ref = x.double() @ w.double().t() + (b.double() if bias else 0.0)
    assert out.dtype == torch.float32 and out.shape == (37, 29)
    # |error| ≤ a few ulps of Σ|x||w| (here ≈ 50 · 1 · 1, so ~1e-5)
    torch.testing.assert_close(out.double(), ref, rtol=0, atol=5e-5)


def test_guard_refuses_what_it_cannot_run(mkldnn_enabled):
    x = torch.zeros(4, 3)
    assert not onednn_usable(x.double())
    assert not onednn_usable(x.requires_grad_(True))
    mkldnn_enabled(False)
    assert not onednn_usable(torch.zeros(4, 3))


@needs_onednn
def test_guard_accepts_float32_cpu_tensors():
    """Guards the speed-up itself: on a CPU build with oneDNN the route must be taken."""
    assert onednn_usable(torch.zeros(4, 3), torch.zeros(3, 5).t())


@needs_onednn
@pytest.mark.skipif(not has_native_bf16("cpu"),
                    reason="no native bf16 on this CPU: oneDNN has no bf16 inner product for it "
                           "(and train.precision=bf16 is refused here)")
def test_bf16_autocast_multiplies_in_bfloat16_and_returns_float32():
    x, w, b = rand(64, 300, seed=4), rand(40, 300, seed=5), rand(40, seed=6)
    ref = x.double() @ w.double().t() + b.double()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = onednn_linear(x, w.t().contiguous().t(), b)
    assert out.dtype == torch.float32
    err = (out.double() - ref).abs().max().item()
    # bf16 factors (8-bit mantissa): error of order 2⁻⁸ · √300 per product, far above float32's
    assert 1e-4 < err < 2 ** -8 * 300 ** 0.5 * 4


def test_probe_treats_any_failure_as_unusable(monkeypatch):
    """A private op can fail in any way (a changed signature raises TypeError): never crash."""
    from shortrun.speed import onednn

    def broken(*args, **kwargs):
        raise TypeError("_linear_pointwise() got an unexpected keyword argument")

    monkeypatch.setattr(onednn, "_WORKS", {})
    monkeypatch.setattr(onednn, "_probe", broken)
    assert not onednn.onednn_linear_works(torch.float32)
    assert not onednn.onednn_linear_works(torch.bfloat16)
    assert not onednn_usable(torch.zeros(4, 3))


def test_probe_covers_the_bf16_branch_separately(monkeypatch):
    """Under bf16 autocast the guard asks about bfloat16 factors, not float32 ones."""
    from shortrun.speed import onednn

    monkeypatch.setattr(onednn, "_WORKS", {torch.float32: True, torch.bfloat16: False})
    x = torch.zeros(4, 3)
    assert onednn_usable(x) == torch.backends.mkldnn.is_available()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert not onednn_usable(x)


@needs_onednn
def test_bf16_probe_runs_here():
    assert isinstance(onednn_linear_works(torch.bfloat16), bool)
