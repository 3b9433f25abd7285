"""The kernel's no-graph path (in-place update, energies' ``energy_and_grad``) against the
update written out with autograd, with the same ``torch.Generator`` draws. Fixed seeds."""

from __future__ import annotations

import pytest
import torch

from shortrun.energies import MLPEnergy
from shortrun.samplers.langevin import energy_grad, langevin, langevin_step


def by_hand(energy_fn, x, s, tau, seed, drift_clamp=None, domain=None):
    """``x − clamp(½s²∇E) + sτξ``, then the domain clamp; ∇E by autograd, ξ from ``seed``."""
    xr = x.detach().clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(energy_fn(xr).sum(), xr)
    drift = 0.5 * s**2 * grad
    if drift_clamp is not None:
        drift = drift.clamp(-drift_clamp, drift_clamp)
    noise = torch.randn(x.shape, generator=torch.Generator().manual_seed(seed), dtype=x.dtype)
    out = x - drift + s * tau * noise
    return out.clamp(*domain) if domain is not None else out


def mlp(seed=0, dtype=torch.float32):
    torch.manual_seed(seed)
    return MLPEnergy(2, 128, 2).to(dtype)


@pytest.mark.parametrize("n", [10, 3000])
@pytest.mark.parametrize("clamps", [{}, {"drift_clamp": 1e-5}, {"domain": (-0.5, 0.5)},
                                    {"drift_clamp": 1e-5, "domain": (-0.5, 0.5)}])
def test_step_equals_the_update_written_out(n, clamps):
    energy = mlp()
    x = torch.randn(n, 2, generator=torch.Generator().manual_seed(1))
    x_before = x.clone()
    s, tau = 0.05, 0.7
    out, info = langevin_step(energy, x, s, tau, generator=torch.Generator().manual_seed(2),
                              **clamps)
    torch.testing.assert_close(out, by_hand(energy, x, s, tau, 2, **clamps),
                               rtol=1e-6, atol=1e-7)
    assert torch.equal(x, x_before), "the kernel must not write into its input"
    e_ref, g_ref = energy_grad(lambda z: energy(z), x)
    torch.testing.assert_close(info.energy, e_ref.detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(info.grad_norm, g_ref.norm(dim=1), rtol=1e-4, atol=1e-6)
    if "drift_clamp" in clamps:  # the clamp binds: |∇E|·½s² exceeds it somewhere
        assert (0.5 * s**2 * g_ref.abs() > clamps["drift_clamp"]).any()


@pytest.mark.parametrize("clamps", [{}, {"drift_clamp": 1e-3, "domain": (-1.0, 1.0)}])
def test_graph_and_no_graph_paths_take_the_same_step(clamps):
    energy = mlp(dtype=torch.float64)
    x = torch.randn(64, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    a, _ = langevin_step(energy, x, 0.1, 1.0, generator=torch.Generator().manual_seed(4),
                         **clamps)
    b, _ = langevin_step(energy, x.clone().requires_grad_(True), 0.1, 1.0, create_graph=True,
                         generator=torch.Generator().manual_seed(4), **clamps)
    assert b.requires_grad and not a.requires_grad
    torch.testing.assert_close(a, b.detach(), rtol=1e-12, atol=1e-12)


def test_float32_chain_with_fast_gradient_follows_the_autograd_chain():
    """The benchmark's case (2→128→128→1, s = 0.01), 100 steps: the two chains differ only by
    float32 rounding, and the fast one really is taken (the energy is passed as the module)."""
    energy = mlp(5)
    x0 = torch.randn(4000, 2, generator=torch.Generator().manual_seed(6))
    calls = []
    fast = energy.energy_and_grad
    energy.energy_and_grad = lambda x: calls.append(1) or fast(x)
    a, info_a = langevin(energy, x0, 100, 0.01, generator=torch.Generator().manual_seed(7))
    b, info_b = langevin(lambda z: energy(z), x0, 100, 0.01,
                         generator=torch.Generator().manual_seed(7))
    assert len(calls) == 100
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(info_a.energy, info_b.energy, rtol=1e-5, atol=1e-5)


def test_same_generator_seed_same_chain_different_seed_different_chain():
    energy = mlp()
    x0 = torch.randn(500, 2, generator=torch.Generator().manual_seed(8))
    run = lambda seed: langevin(energy, x0, 10, 0.05,  # noqa: E731
                                generator=torch.Generator().manual_seed(seed))[0]
    assert torch.equal(run(1), run(1)) and not torch.equal(run(1), run(2))
