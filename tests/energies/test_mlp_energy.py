"""``MLPEnergy.energy_and_grad`` (the Langevin kernel's fast path) against autograd.

The reference is autograd through ``forward`` in float64 on the same weights; the fast pass is
checked in float64 (same arithmetic, tolerance at rounding level) and in float32 (``F.linear``
products, with torch's oneDNN backend on and off), both in one block and split into blocks.
Fixed seeds throughout.
"""

from __future__ import annotations

import pytest
import torch

from shortrun.energies import MLPEnergy
from shortrun.energies import mlp as energy_mlp


def reference(energy: MLPEnergy, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Energy and input gradient by autograd in float64."""
    ref = MLPEnergy(energy.net[0].in_features, energy.net[0].out_features,
                    sum(isinstance(m, torch.nn.Linear) for m in energy.net) - 1).double()
    ref.load_state_dict({k: v.double() for k, v in energy.state_dict().items()})
    xd = x.detach().double().requires_grad_(True)
    e = ref(xd)
    (g,) = torch.autograd.grad(e.sum(), xd)
    return e.detach(), g


def make(depth: int, in_dim: int = 2, hidden: int = 128, seed: int = 0) -> MLPEnergy:
    torch.manual_seed(seed)
    return MLPEnergy(in_dim, hidden, depth)


@pytest.mark.parametrize("depth", [1, 2, 3])
@pytest.mark.parametrize("n", [7, 300, 5000])
def test_float64_fast_pass_equals_autograd(depth, n):
    energy = make(depth).double()
    x = 2 * torch.randn(n, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    e, g = energy.energy_and_grad(x)
    e_ref, g_ref = reference(energy, x)
    torch.testing.assert_close(e, e_ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(g, g_ref, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("depth", [1, 2, 3])
@pytest.mark.parametrize("n", [7, 255, 256, 2048, 10_000])
@pytest.mark.parametrize("mkldnn", [True, False])
def test_float32_fast_pass_matches_autograd(depth, n, mkldnn, mkldnn_enabled):
    """Float32 rounding only: relative error of order 1e-6 of the gradient's scale."""
    energy = make(depth)
    x = 2 * torch.randn(n, 2, generator=torch.Generator().manual_seed(2))
    mkldnn_enabled(mkldnn)
    e, g = energy.energy_and_grad(x)
    e_ref, g_ref = reference(energy, x)
    assert e.dtype == g.dtype == torch.float32 and g.shape == x.shape and e.shape == (n,)
    scale = g_ref.abs().max().item()
    torch.testing.assert_close(e.double(), e_ref, rtol=1e-5, atol=1e-5 * e_ref.abs().max().item())
    torch.testing.assert_close(g.double(), g_ref, rtol=1e-4, atol=1e-5 * scale)


def test_float32_fast_pass_agrees_with_float32_autograd_as_closely_as_two_float32_runs():
    """The fast pass is no further from float64 than float32 autograd itself (10,000 chains,
    the benchmark's 2→128→128→1 network)."""
    energy = make(2)
    x = torch.randn(10_000, 2, generator=torch.Generator().manual_seed(3))
    e, g = energy.energy_and_grad(x)
    xr = x.clone().requires_grad_(True)
    e_auto = energy(xr)
    (g_auto,) = torch.autograd.grad(e_auto.sum(), xr)
    e_ref, g_ref = reference(energy, x)
    err_fast = (g.double() - g_ref).abs().max().item()
    err_auto = (g_auto.double() - g_ref).abs().max().item()
    assert err_fast <= 4 * err_auto + 1e-9
    torch.testing.assert_close(g, g_auto, rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(e, e_auto.detach(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("block_rows", [1, 100, 999, 4096])
def test_blocks_give_the_same_result(block_rows):
    energy = make(2, in_dim=3, hidden=32)
    x = torch.randn(1000, 3, generator=torch.Generator().manual_seed(4))
    whole = energy.energy_and_grad(x)
    energy.block_rows = block_rows
    parts = energy.energy_and_grad(x)
    for a, b in zip(whole, parts, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_image_shaped_input_is_flattened_and_the_gradient_keeps_its_shape():
    energy = make(2, in_dim=12, hidden=16).double()
    x = torch.randn(300, 3, 2, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    e, g = energy.energy_and_grad(x)
    e_ref, g_ref = reference(energy, x)
    assert g.shape == x.shape
    torch.testing.assert_close(e, e_ref)
    torch.testing.assert_close(g, g_ref)


def test_no_graph_and_no_parameter_gradients():
    energy = make(2)
    x = torch.randn(400, 2)
    e, g = energy.energy_and_grad(x)
    assert not e.requires_grad and not g.requires_grad
    assert all(p.grad is None for p in energy.parameters())


def test_declines_where_only_autograd_applies():
    x = torch.randn(5, 3)
    assert MLPEnergy(3, 8, 2, act="tanh").energy_and_grad(x) is None
    assert MLPEnergy(3, 8, 2, spectral_norm=True).energy_and_grad(x) is None


def test_the_fast_pass_runs_plain_torch_products(monkeypatch):
    """Every product of the pass is a public ``F.linear`` (4 for two hidden layers: two
    forward, two backward), whatever the row count."""
    energy = make(2, hidden=16)
    calls = []
    linear = energy_mlp.F.linear
    monkeypatch.setattr(energy_mlp.F, "linear", lambda *a: calls.append(1) or linear(*a))
    for n in (7, 300):
        calls.clear()
        energy.energy_and_grad(torch.randn(n, 2))
        assert len(calls) == 4


def test_non_contiguous_input():
    energy = make(2)
    x = torch.randn(600, 4, generator=torch.Generator().manual_seed(9))[:, ::2]
    e, g = energy.energy_and_grad(x)
    e_ref, g_ref = reference(energy, x)
    torch.testing.assert_close(e.double(), e_ref, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(g.double(), g_ref, rtol=1e-4, atol=1e-6)


def test_declines_under_bf16_autocast_so_the_cast_policy_applies():
    energy = MLPEnergy(2, 16, 2)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert energy.energy_and_grad(torch.randn(8, 2)) is None
    assert energy.energy_and_grad(torch.randn(8, 2)) is not None


def test_without_the_fused_silu_backward_the_public_ops_give_the_same_gradient(monkeypatch):
    """``aten.silu_backward`` is private: forced off, the fallback must equal autograd (which
    differentiates the public ``F.silu``) and the fused op."""
    energy = make(3).double()
    x = 2 * torch.randn(300, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    e_fused, g_fused = energy.energy_and_grad(x)
    monkeypatch.setattr(energy_mlp, "_FUSED_SILU_BACKWARD", False)
    e, g = energy.energy_and_grad(x)
    e_ref, g_ref = reference(energy, x)
    torch.testing.assert_close(e, e_ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(g, g_ref, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(g, g_fused, rtol=1e-12, atol=1e-14)
