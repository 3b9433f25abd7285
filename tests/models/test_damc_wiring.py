"""DAMC outside the training step: which copy of the amortizer each public path starts its
chains from, and which options it honours (docs/damc.md: "``sample(n)`` draws ``z ~ q_φ(z)``
and runs ``damc_sample_steps`` prior steps; ``reconstruct``, ``anomaly_score`` and every
posterior-based metric start the posterior chain at ``q_φ(z | x)``"; the training chains start
from the slow copy ``φ̄``).

The online copy ``φ`` and the slow copy ``φ̄`` are made to differ, and each path is compared
with the same chain written out here: the amortizer's draw followed by plain ULA steps
``z ← z − ½s²∇E(z) + s ξ`` on energies written from the networks themselves, with the same
random stream. A path that started from the other copy, from ``N(0, I)``, from the
unconditional ``q_φ(z)`` instead of ``q_φ(z | x)``, or ran another number of steps, another
step size or no noise gives another number.

Written against public behaviour only (the model built from options as docs/damc.md and the
recipes build it; the two copies found as the model's two ``LatentDiffusionAmortizer``
submodules, the online one being the one its optimisers step), so the tests hold however the
chain source is wired inside.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import shortrun
from shortrun.data.base import DataInfo
from shortrun.models.registry import build_model
from shortrun.train.config import resolve

VECTOR = DataInfo((3,), "vector", -10.0, 10.0)
SMALL = dict(damc_width=8, damc_emb=8, damc_time_emb=8, damc_encoder_width=4, damc_steps=4)
PRIOR_SIGMA, LLHD_SIGMA, PRIOR_S, POST_S = 1.3, 0.6, 0.35, 0.15


def damc_lebm(**options) -> shortrun.LEBM:
    torch.manual_seed(0)
    gen = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 3))
    values = dict(nz=2, prior_sampler="damc", prior_sigma=PRIOR_SIGMA, llhd_sigma=LLHD_SIGMA,
                  prior_steps=5, prior_step_size=PRIOR_S, post_steps=4, post_step_size=POST_S,
                  **SMALL)
    return shortrun.LEBM(gen, shortrun.PriorTilt(2, 8), info=VECTOR, **{**values, **options})


def copies(model) -> tuple[nn.Module, nn.Module]:
    """``(online φ, slow φ̄)``: the model's two amortizers; the online one is what the model's
    optimisers step, the slow one is stepped by none (it follows φ by its EMA)."""
    nets = [m for m in model.modules() if isinstance(m, shortrun.LatentDiffusionAmortizer)]
    stepped = {id(p) for opt in model.build_optimizers().values()
               for group in opt.param_groups for p in group["params"]}
    online = [n for n in nets if all(id(p) in stepped for p in n.parameters())]
    slow = [n for n in nets if not any(id(p) in stepped for p in n.parameters())]
    assert len(nets) == 2 and len(online) == 1 and len(slow) == 1, nets
    return online[0], slow[0]


def pull_apart(model: nn.Module) -> tuple[nn.Module, nn.Module]:
    """Move the online copy away from the slow one (as training does between EMA updates)."""
    online, slow = copies(model)
    g = torch.Generator().manual_seed(123)
    with torch.no_grad():
        for p in online.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=g))  # draws stay O(1): no saturation
    assert any(not torch.equal(a, b) for a, b in zip(online.parameters(), slow.parameters(),
                                                     strict=True))
    return online, slow


def prior_energy(model, z: torch.Tensor) -> torch.Tensor:
    """``E_α(z) = −f_α(z) + ‖z‖²/(2σ_p²)`` from the tilt network itself."""
    return z.pow(2).sum(1) / (2 * PRIOR_SIGMA ** 2) - model.tilt(z).reshape(-1)


def posterior_energy(model, z: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return (x - model.generator(z)).pow(2).sum(1) / (2 * LLHD_SIGMA ** 2) + prior_energy(model, z)


def ula(energy, z: torch.Tensor, steps: int, s: float, g: torch.Generator) -> torch.Tensor:
    """Plain ULA with noise, ξ drawn from ``g`` after each gradient."""
    for _ in range(steps):
        z = z.detach().requires_grad_(True)
        with torch.enable_grad():
            (grad,) = torch.autograd.grad(energy(z).sum(), z)
        z = z.detach() - 0.5 * s ** 2 * grad + s * torch.randn(z.shape, generator=g)
    return z.detach()


def seeded(seed: int = 7) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def data(n: int = 6) -> torch.Tensor:
    return torch.randn(n, 3, generator=seeded(3))


def close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return torch.allclose(a, b, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("k", [0, 3])
def test_sample_draws_the_online_unconditional_amortizer_then_damc_sample_steps(k):
    model = damc_lebm(damc_sample_steps=k)
    online, slow = pull_apart(model)
    got = model.sample(5, generator=seeded())

    def expected(net, steps=k):
        g = seeded()
        z0 = net.sample(5, None, g)
        return model.generator(ula(lambda z: prior_energy(model, z), z0, steps, PRIOR_S, g))

    with torch.no_grad():
        want = expected(online)
        assert close(got, want), (got, want)
        assert not close(got, expected(slow))  # the slow copy would give another draw
        assert not close(got, expected(online, 5))  # so would the training chain's 5 steps


def test_sample_steps_given_to_sample_win_over_damc_sample_steps():
    model = damc_lebm(damc_sample_steps=1)
    online, _ = pull_apart(model)
    got = model.sample(4, steps=6, generator=seeded())
    g = seeded()
    z = ula(lambda z: prior_energy(model, z), online.sample(4, None, g), 6, PRIOR_S, g)
    with torch.no_grad():
        assert close(got, model.generator(z))


@pytest.mark.parametrize("steps,k", [(None, 4), (2, 2)])
def test_reconstruct_starts_at_the_online_q_z_given_x_and_runs_the_posterior_chain(steps, k):
    model = damc_lebm()
    online, slow = pull_apart(model)
    x = data()
    got = model.reconstruct(x, steps, generator=seeded())

    def expected(start):
        g = seeded()
        z0 = start(g)
        return model.generator(ula(lambda z: posterior_energy(model, z, x), z0, k, POST_S, g))

    want = expected(lambda g: online.sample(len(x), x, g))
    assert close(got, want), (got, want)
    for wrong in (lambda g: slow.sample(len(x), x, g),      # the slow copy
                  lambda g: online.sample(len(x), None, g),  # q_φ(z), not q_φ(z | x)
                  lambda g: torch.randn(len(x), 2, generator=g)):  # the 2020 start N(0, I)
        assert not close(got, expected(wrong))


@pytest.mark.parametrize("score", ["joint", "unweighted", "tilt"])
def test_anomaly_score_is_computed_at_the_online_amortized_posterior_draw(score):
    sigma_prime = 2.5
    model = damc_lebm(anomaly_score=score, anomaly_llhd_sigma=sigma_prime)
    online, slow = pull_apart(model)
    x = data()
    got = model.anomaly_score(x, generator=seeded())

    def expected(net):
        g = seeded()
        z = ula(lambda z: posterior_energy(model, z, x), net.sample(len(x), x, g), 4, POST_S, g)
        with torch.no_grad():
            sse = (x - model.generator(z)).pow(2).sum(1)
            prior = prior_energy(model, z)
            return {"joint": sse / (2 * sigma_prime ** 2) + prior, "unweighted": sse + prior,
                    "tilt": -model.tilt(z).reshape(-1)}[score]

    assert close(got, expected(online)), (got, expected(online))
    assert not close(got, expected(slow))


def test_the_training_chains_start_from_the_slow_copy_not_the_online_one():
    """One training step: the generator's update depends on where the chains start. Moving
    the online copy leaves it unchanged (bit for bit); moving the slow copy changes it."""

    def generator_after_step(move: str | None) -> list[torch.Tensor]:
        model = damc_lebm(damc_updates=1)
        online, slow = copies(model)
        if move is not None:
            g = torch.Generator().manual_seed(5)
            with torch.no_grad():
                for p in (online if move == "online" else slow).parameters():
                    p.add_(0.1 * torch.randn(p.shape, generator=g))
        optimizers = model.build_optimizers()
        torch.manual_seed(11)
        model.training_step(data(8), 0, optimizers)
        return [p.detach().clone() for p in model.generator.parameters()]

    base = generator_after_step(None)
    assert all(torch.equal(a, b) for a, b in zip(base, generator_after_step("online"),
                                                 strict=True))
    assert not all(torch.allclose(a, b) for a, b in zip(base, generator_after_step("slow"),
                                                        strict=True))


TINY = ["model.nz=3", "model.ngf=2", "model.ndf=8", "model.channels_last=false",
        "model.prior_step_size=0.3", "model.damc_width=8", "model.damc_emb=8",
        "model.damc_time_emb=8", "model.damc_encoder_width=2", "model.damc_steps=3",
        "model.damc_sample_steps=2"]
IMAGE = DataInfo((1, 28, 28), "image", -1.0, 1.0, 127.5, 127.5)


@pytest.mark.parametrize("extra,k", [([], 2), (["sample.steps=4"], 4)])
def test_a_recipe_model_samples_with_sample_steps_else_damc_sample_steps(extra, k):
    """The recipe path (``shortrun sample`` / FD): ``sample.steps`` when the run sets it, else
    ``model.damc_sample_steps``, after a draw of the online ``q_φ(z)``."""
    torch.manual_seed(0)
    model = build_model(resolve("damc_mnist", [*TINY, *extra]), IMAGE)
    model.eval()
    online, slow = pull_apart(model)
    got = model.sample(3, generator=seeded())

    def expected(net):
        g = seeded()

        def e(z):  # the recipe's σ_p = 1
            return z.pow(2).sum(1) / 2 - model.tilt(z).reshape(-1)

        with torch.no_grad():
            z0 = net.sample(3, None, g)
        z = ula(e, z0, k, 0.3, g)
        with torch.no_grad():
            return model.generator(z)

    assert close(got, expected(online))
    assert not close(got, expected(slow))


@pytest.mark.parametrize("option,value", [("damc_steps", 7), ("damc_logsnr_min", -3.0),
                                          ("damc_logsnr_max", 6.0)])
def test_the_amortizers_schedule_options_reach_its_draws(option, value):
    """The same networks (same seed) and the same random stream: a draw of q_φ(z) changes
    when the diffusion's step count or log-SNR range changes, so the option is used."""
    base = damc_lebm().sample(4, generator=seeded())
    changed = damc_lebm(**{option: value}).sample(4, generator=seeded())
    assert torch.equal(damc_lebm().sample(4, generator=seeded()), base)  # deterministic
    assert not close(changed, base)


@pytest.mark.parametrize("noise_chains", [True, False])
def test_the_prior_chains_add_as_many_from_noise_with_damc_noise_chains(noise_chains,
                                                                         monkeypatch):
    """docs/damc.md, step 3: the prior chains start from z₀ and, with ``damc_noise_chains``,
    as many more from N(0, I): the prior energy then sees twice the batch."""
    model = damc_lebm(damc_noise_chains=noise_chains, damc_updates=1)
    rows: list[int] = []
    real = model.prior_energy

    def spy(z):
        rows.append(z.shape[0])
        return real(z)

    monkeypatch.setattr(model, "prior_energy", spy)
    model.training_step(data(8), 0, model.build_optimizers())
    assert max(rows) == (16 if noise_chains else 8)
