"""Annealed Langevin sampling of a noise-conditional energy by value (Song & Ermon 2019,
Alg. 1): level i runs ``steps / L`` Langevin steps at ``s_i = ε·σ_i/σ_L`` (step ``α_i ∝ σ_i²``).
On a flat energy (output layer zeroed) the drift vanishes and the chain is the start plus
``Σ_i s_i Σ_k ξ_ik``, which is replayed here from the same generator."""

from __future__ import annotations

import math

import torch

from shortrun.data.base import DataInfo
from shortrun.models.registry import build_model
from shortrun.train.config import resolve


def test_each_level_steps_with_its_own_scaled_step_size():
    eps, s_max, s_min, levels, steps = 0.05, 1.0, 0.1, 4, 12
    torch.manual_seed(0)
    cfg = resolve("dsm_8gaussians", [f"model.n_sigmas={levels}", "model.conditional=true",
                                     f"model.sigma_max={s_max}", f"model.sigma_min={s_min}",
                                     "model.hidden=8", f"model.step_size={eps}"])
    model = build_model(cfg, DataInfo((2,), "vector"))
    with torch.no_grad():
        model.energy.out.weight.zero_()
        model.energy.out.bias.zero_()
    got = model.sample(5, steps=steps, generator=torch.Generator().manual_seed(1))

    g = torch.Generator().manual_seed(1)
    x = model.noise.start(5, generator=g)
    sigmas = [math.exp(math.log(s_max) + i / (levels - 1) * (math.log(s_min) - math.log(s_max)))
              for i in range(levels)]
    for sigma in sigmas:
        for _ in range(steps // levels):
            x = x + eps * sigma / s_min * torch.randn(x.shape, generator=g)
    torch.testing.assert_close(got, x, rtol=1e-5, atol=1e-6)
