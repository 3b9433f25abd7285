"""The Langevin kernel against closed forms.

For E(x) = ‖x‖²/(2σ²) the kernel is linear: x' = (1 − a) x + sτξ with a = s²/(2σ²). From a fixed
x₀, after k steps every coordinate is Gaussian with mean (1 − a)^k x₀ and variance
v (1 − (1 − a)^{2k}), v = s²τ² / (1 − (1 − a)²) — the exact law of the discretised chain, bias
included. Tolerances: 4 standard errors of the sample mean (√(var/N)) and of the sample
variance (var·√(2/(N − 1))).
"""

import math

import pytest
import torch

from shortrun.samplers.langevin import langevin, langevin_step


def quadratic(sigma):
    return lambda x: (x**2).sum(1) / (2 * sigma**2)


@pytest.mark.parametrize("step_size, noise_scale, k", [(0.3, 1.0, 5), (0.5, 0.3, 40)])
def test_exact_law_on_gaussian(step_size, noise_scale, k):
    sigma, n, x0 = 1.5, 40_000, 2.0
    g = torch.Generator().manual_seed(0)
    x, info = langevin(quadratic(sigma), torch.full((n, 1), x0), k, step_size, noise_scale,
                       generator=g)
    a = step_size**2 / (2 * sigma**2)
    v = (step_size * noise_scale) ** 2 / (1 - (1 - a) ** 2)
    mean, var = (1 - a) ** k * x0, v * (1 - (1 - a) ** (2 * k))
    assert abs(x.mean().item() - mean) < 4 * math.sqrt(var / n)
    assert abs(x.var().item() - var) < 4 * var * math.sqrt(2 / (n - 1))
    assert info.energy.shape == (n,) and info.grad_norm.shape == (n,)


def test_gradient_matches_autograd_and_sign():
    """One noiseless step moves downhill by exactly ½s²∇E."""
    w = torch.tensor([[1.0, -2.0], [0.5, 3.0]])

    def energy(x):
        return torch.tanh(x @ w).pow(2).sum(1) + x.pow(3).sum(1)

    x = torch.randn(7, 2, generator=torch.Generator().manual_seed(1))
    xr = x.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(energy(xr).sum(), xr)
    out, _ = langevin_step(energy, x, step_size=0.2, noise_scale=0.0)
    torch.testing.assert_close(out, x - 0.5 * 0.2**2 * grad)


def test_no_parameter_gradients_and_no_graph():
    net = torch.nn.Linear(3, 1)
    x, _ = langevin(lambda z: net(z).squeeze(1), torch.randn(5, 3), 3, 0.1)
    assert all(p.grad is None for p in net.parameters())
    assert not x.requires_grad and x.grad_fn is None


def test_create_graph_lets_gradients_flow_through_the_chain():
    scale = torch.tensor(2.0, requires_grad=True)
    x, _ = langevin(lambda z: scale * (z**2).sum(1), torch.ones(4, 2), 3, 0.1,
                    noise_scale=0.0, create_graph=True)
    x.sum().backward()
    # x_k = (1 − s²·scale)^k x_0, so d/dscale of the sum is k(1 − s²·scale)^(k−1)(−s²)·Σx0.
    expected = 3 * (1 - 0.01 * 2.0) ** 2 * (-0.01) * 8
    assert scale.grad.item() == pytest.approx(expected, rel=1e-5)


def test_drift_clamp_and_domain():
    steep = lambda x: 1e6 * x.sum(1)  # noqa: E731
    x, _ = langevin(steep, torch.zeros(3, 2), 1, 0.1, noise_scale=0.0, drift_clamp=0.01)
    torch.testing.assert_close(x, torch.full((3, 2), -0.01))
    x, _ = langevin(steep, torch.zeros(3, 2), 1, 0.1, noise_scale=0.0, domain=(-1.0, 1.0))
    torch.testing.assert_close(x, torch.full((3, 2), -1.0))


def test_generator_reproducible():
    run = lambda seed: langevin(quadratic(1.0), torch.zeros(4, 3), 5, 0.1,  # noqa: E731
                                generator=torch.Generator().manual_seed(seed))[0]
    assert torch.equal(run(3), run(3)) and not torch.equal(run(3), run(4))


def test_bad_energy_shape_and_arguments():
    wrong = r"energy must map a batch of 4 to shape \(4,\); got \(4, 1\)"
    with pytest.raises(ValueError, match=wrong):
        langevin(lambda x: x.sum(1, keepdim=True), torch.zeros(4, 2), 1, 0.1)
    with pytest.raises(ValueError, match="step_size must be > 0"):
        langevin(quadratic(1.0), torch.zeros(4, 2), 1, 0.0)
