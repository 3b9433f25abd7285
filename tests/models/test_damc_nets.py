"""``shortrun.models.damc_nets``: the amortizer's noise net with a fixed condition
(:meth:`NoiseNet.conditioned`, what the sampler and the unconditional loss run) computes what the
plain forward computes, to float rounding, for per-row and one-row conditions and for per-row
and shared noise levels; so do the draws and the gradients built on it."""

from __future__ import annotations

import pytest
import torch

from shortrun.models.damc_nets import LatentDiffusionAmortizer, make_encoder
from shortrun.samplers.diffusion import ancestral_sample, denoising_loss

NZ, EMB, N = 6, 24, 16


def amortizer(seed: int = 0) -> LatentDiffusionAmortizer:
    torch.manual_seed(seed)
    net = LatentDiffusionAmortizer(NZ, make_encoder((1, 8, 8), "image", EMB, 4), EMB, width=16,
                                   time_dim=16, n_steps=12)
    with torch.no_grad():
        net.null.normal_()  # zeros at init would hide a dropped condition share
    return net


def close(a: torch.Tensor, b: torch.Tensor, rel: float = 1e-5) -> bool:
    return bool((a - b).abs().max() <= rel * (1 + b.abs().max()))


@pytest.mark.parametrize("shared_level", [False, True])
@pytest.mark.parametrize("one_row", [False, True])
def test_conditioned_net_is_the_forward_with_the_context_split(shared_level, one_row):
    net = amortizer()
    g = torch.Generator().manual_seed(1)
    z = torch.randn(N, NZ, generator=g)
    lam = torch.full((N,), 1.7) if shared_level else torch.randn(N, generator=g) * 4
    with torch.no_grad():
        cond = net.null if one_row else net.condition(torch.randn(N, 1, 8, 8, generator=g), N)
        want = net.net(z, lam, cond.expand(N, -1))
        got = net.net.conditioned(cond)(z, lam)
    assert got.shape == want.shape == (N, NZ)
    assert close(got, want), (got - want).abs().max()


def test_draws_are_the_per_step_networks_draws():
    net = amortizer()
    x = torch.randn(N, 1, 8, 8, generator=torch.Generator().manual_seed(2))
    for cond_x in (x, None):
        got = net.sample(N, cond_x, torch.Generator().manual_seed(3))
        with torch.no_grad():
            cond = net.condition(cond_x, N)
            want = ancestral_sample(lambda zt, lam, c=cond: net.net(zt, lam, c), N, NZ, 12,
                                    net.logsnr_min, net.logsnr_max,
                                    torch.Generator().manual_seed(3))
        assert close(got, want, 1e-4), (cond_x is None, (got - want).abs().max())


def test_unconditional_loss_and_its_gradients_are_the_forwards():
    net = amortizer()
    z = torch.randn(N, NZ, generator=torch.Generator().manual_seed(4))
    params = [net.null, *net.net.parameters()]
    got = net.loss(z, None, generator=torch.Generator().manual_seed(5)).mean()
    got_grads = torch.autograd.grad(got, params)
    want = denoising_loss(lambda zt, lam: net.net(zt, lam, net.null.expand(N, -1)), z,
                          net.logsnr_min, net.logsnr_max,
                          torch.Generator().manual_seed(5)).mean()
    want_grads = torch.autograd.grad(want, params)
    assert close(got, want)
    for a, b in zip(got_grads, want_grads, strict=True):
        assert close(a, b, 1e-4), (a - b).abs().max()
