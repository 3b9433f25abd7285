"""JEM (Grathwohl et al. 2020): its update against autograd of the loss written out, p(y|x)
read off the energies, class-conditional sampling on a 2-D mixture with known class densities
(JEM and the data-space EBM with guidance), its stabilisers and its bad inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from shortrun.data.base import DataInfo
from shortrun.errors import ConfigError
from shortrun.models.ebm import EBM
from shortrun.models.jem import JEM, UNLABELLED
from shortrun.samplers.sources import ReplayBuffer

VEC2 = DataInfo(shape=(2,), kind="vector")
IMG = DataInfo(shape=(1, 8, 8), kind="image", low=-1.0, high=1.0)


def small_net(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 3))


def test_update_equals_autograd_of_the_written_out_loss():
    """One SGD step of lr 1 moves θ by −∇θ[CE(f(x⁺), y) + w(mean E(x⁺) − mean E(x⁻))
    + wλ(mean E(x⁺)² + mean E(x⁻)²)] with E = −logsumexp f and x⁻ the chains' end states;
    unlabelled rows (−1) enter only the generative term."""
    w, lam = 0.7, 0.05
    jem = JEM(small_net(), info=VEC2, n_classes=3, generative_weight=w, energy_reg=lam,
              langevin_steps=3, step_size=0.1, noise_scale=1.0, buffer_size=50)
    before = {k: v.detach().clone() for k, v in jem.classifier.named_parameters()}
    x = torch.randn(12, 2)
    y = torch.tensor([0, 1, 2, 1, UNLABELLED, 0, 2, UNLABELLED, 1, 1, 0, 2])
    opt = torch.optim.SGD(jem.classifier.parameters(), lr=1.0)
    jem.training_step((x, y), 0, {"main": opt})
    x_neg = jem.last_negatives

    ref = small_net()  # the same initial weights
    keep = y != UNLABELLED
    f_pos, f_neg = ref(x), ref(x_neg)
    e_pos, e_neg = -torch.logsumexp(f_pos, 1), -torch.logsumexp(f_neg, 1)
    loss = (F.cross_entropy(f_pos[keep], y[keep]) + w * (e_pos.mean() - e_neg.mean())
            + w * lam * ((e_pos ** 2).mean() + (e_neg ** 2).mean()))
    grads = torch.autograd.grad(loss, list(ref.parameters()))
    for (name, p), g in zip(jem.classifier.named_parameters(), grads, strict=True):
        torch.testing.assert_close(before[name] - p.detach(), g, rtol=1e-5, atol=1e-6,
                                   msg=name)


def test_generative_weight_zero_is_a_plain_classifier():
    jem = JEM(small_net(), info=VEC2, n_classes=3, generative_weight=0.0)
    x, y = torch.randn(10, 2), torch.randint(3, (10,))
    opt = torch.optim.SGD(jem.classifier.parameters(), lr=1.0)
    ref = small_net()
    grads = torch.autograd.grad(F.cross_entropy(ref(x), y), list(ref.parameters()))
    start = [p.detach().clone() for p in jem.classifier.parameters()]
    metrics = jem.training_step((x, y), 0, {"main": opt})
    assert "energy_pos" not in metrics and not bool(jem.source.filled)
    for p0, p, g in zip(start, jem.classifier.parameters(), grads, strict=True):
        torch.testing.assert_close(p0 - p.detach(), g)


def test_p_y_given_x_from_the_energies_is_the_softmax():
    jem = JEM(small_net(), info=VEC2, n_classes=3)
    x = torch.randn(20, 2)
    from_energy = torch.stack([torch.exp(jem.energy(x) - jem.energy(x, y=k))
                               for k in range(3)], 1)
    torch.testing.assert_close(from_energy, F.softmax(jem(x), 1))
    torch.testing.assert_close(jem.predict_proba(x), F.softmax(jem(x), 1))
    assert torch.equal(jem.predict(x), jem(x).argmax(1))
    torch.testing.assert_close(jem.ood_score(x), -torch.logsumexp(jem(x), 1))


# --- a 2-D three-class mixture with known class densities -------------------------------------
MEANS = torch.tensor([[1.0, 0.0], [-0.5, math.sqrt(3) / 2], [-0.5, -math.sqrt(3) / 2]])
SIGMA = 0.6


class MixtureLogits(nn.Module):
    """Exact ``f(x)[y] = log p(x, y)`` of an equal-weight mixture N(μ_y, σ²I): then
    ``E(x, y) = −log p(x, y)`` and ``p(x|y)`` is the y-th Gaussian."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d2 = ((x[:, None, :] - MEANS.to(x)) ** 2).sum(-1)
        return -d2 / (2 * SIGMA ** 2) - math.log(2 * math.pi * SIGMA ** 2) - math.log(3)


class MixtureEnergy(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return -torch.logsumexp(MixtureLogits()(x), 1)


def in_own_class(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Lands in its class: the Bayes classifier of the mixture assigns x to y."""
    return MixtureLogits()(x).argmax(1) == y


def known_probability(n: int = 400_000) -> float:
    """P(Bayes class = y | x ~ N(μ_y, σ²I)), the same for each class by symmetry; exact
    samples, n large enough that its SE (≤ 0.0008) is far below the test's tolerance."""
    g = torch.Generator().manual_seed(123)
    y = torch.arange(n) % 3
    x = MEANS[y] + SIGMA * torch.randn(n, 2, generator=g)
    return float(in_own_class(x, y).float().mean())


N_CHAINS = 1500
# ULA at s = 0.1 (time ½s² = 0.005 a step, relaxation time σ² = 0.36: 600 steps are 8 of
# them) has a relative variance error of ½s²/(2σ²) ≈ 0.7 %, far below the SE
CHAIN = {"step_size": 0.1, "noise_scale": 1.0, "langevin_steps": 600}


def assert_lands_with_known_probability(x: torch.Tensor, y: torch.Tensor) -> None:
    p = known_probability()
    got = float(in_own_class(x, y).float().mean())
    se = math.sqrt(p * (1 - p) / len(y))
    assert abs(got - p) < 4 * se, f"{got:.4f} in class, want {p:.4f} ± 4 SE ({se:.4f})"
    for k in range(3):  # and each class's mean where its Gaussian puts it (SE σ/√(n/3))
        mean = x[y == k].mean(0)
        assert float((mean - MEANS[k]).norm()) < 5 * SIGMA / math.sqrt(len(y) / 3)


def test_jem_conditional_samples_land_in_their_class_with_known_probability():
    torch.manual_seed(0)
    jem = JEM(MixtureLogits(), info=VEC2, n_classes=3, sample_from="noise", init_scale=2.0,
              **CHAIN)
    y = torch.arange(N_CHAINS) % 3
    x = jem.sample(N_CHAINS, y=y)
    assert_lands_with_known_probability(x, y)


def test_ebm_guided_samples_land_in_their_class_with_known_probability():
    torch.manual_seed(1)
    ebm = EBM(MixtureEnergy(), info=VEC2, chain="noise", init_scale=2.0, **CHAIN)
    y = torch.arange(N_CHAINS) % 3
    x = ebm.sample(N_CHAINS, y=y, classifier=MixtureLogits())
    assert_lands_with_known_probability(x, y)


def test_guidance_sharpens_the_class():
    """w > 0 targets p(x) p(y|x)^(1+w): more of the mass lies in the own class than at w = 0."""
    torch.manual_seed(2)
    jem = JEM(MixtureLogits(), info=VEC2, n_classes=3, sample_from="noise", init_scale=2.0,
              **CHAIN)
    y = torch.arange(N_CHAINS) % 3
    hit = float(in_own_class(jem.sample(N_CHAINS, y=y, guidance=3.0), y).float().mean())
    p = known_probability()
    assert hit > p + 4 * math.sqrt(p * (1 - p) / N_CHAINS)


# --- stabilisers ----------------------------------------------------------------------------
def test_buffer_reinit_rate_restarts_that_fraction_from_noise():
    """reinit ρ: each chain start is fresh noise with probability ρ (binomial, 4 SE)."""
    rho, n = 0.3, 4000
    jem = JEM(small_net(), info=VEC2, n_classes=3, reinit=rho, buffer_size=100, init_scale=1.0)
    assert isinstance(jem.source, ReplayBuffer) and jem.source.reinit == rho
    jem.source.start(1)
    jem.source.store.fill_(5.0)  # outside the noise's [-1, 1]: a fresh start is recognisable
    x0 = jem.source.start(n)
    fresh = float((x0.abs() <= 1.0).all(1).float().mean())
    assert abs(fresh - rho) < 4 * math.sqrt(rho * (1 - rho) / n)


def test_sgld_step_and_noise_are_decoupled():
    """The chain moves by −½s²∇E + s·τ·ξ: on E = ½|x|² with τ = 0 one step is x(1 − ½s²); on a
    flat energy the increments have std s·τ whatever the drift (chi-square, 4 SE)."""
    jem = JEM(MixtureLogits(), info=VEC2, n_classes=3, step_size=0.5, noise_scale=0.0)
    quad = lambda x: 0.5 * (x ** 2).sum(1)  # noqa: E731
    x0 = torch.randn(50, 2)
    torch.testing.assert_close(jem.run_chain(quad, x0, steps=1), x0 * (1 - 0.125))
    jem.options.noise_scale = 0.02
    flat = lambda x: 0.0 * x.sum(1)  # noqa: E731
    torch.manual_seed(3)
    step = jem.run_chain(flat, torch.zeros(20_000, 2), steps=1)
    std = float(step.std())
    assert abs(std - 0.5 * 0.02) < 4 * 0.01 / math.sqrt(2 * 40_000)


# --- bad inputs -----------------------------------------------------------------------------
def test_bad_inputs_name_the_fix():
    jem = JEM(small_net(), info=VEC2, n_classes=3)
    with pytest.raises(ConfigError, match=r"y: classes must lie in 0..2; got 0..3"):
        jem.sample(4, y=torch.tensor([0, 1, 2, 3]))
    with pytest.raises(ConfigError, match=r"y: 2 labels for 4 samples"):
        jem.sample(4, y=[0, 1])
    with pytest.raises(ConfigError, match=r"guidance: must be >= 0"):
        jem.sample(4, y=1, guidance=-1.0)
    with pytest.raises(ValueError, match=r"JEM.predict: expected"):
        jem.predict(torch.zeros(3, 5))
    with pytest.raises(ConfigError, match=r"generative_weight.*>= 0|generative_weight"):
        JEM(small_net(), generative_weight=-1.0)
    ebm = EBM(MixtureEnergy(), info=VEC2)
    with pytest.raises(ConfigError, match=r"needs classifier=, a module returning logits"):
        ebm.sample(4, y=1)


def test_training_refuses_missing_or_out_of_range_labels():
    from shortrun.data.base import LoadedData

    jem = JEM(small_net(), info=VEC2, n_classes=3)
    with pytest.raises(ConfigError, match=r"model jem needs labels"):
        jem.on_train_start(LoadedData(train=torch.zeros(4, 2), info=VEC2))
    with pytest.raises(ConfigError, match=r"labels span 0..5; they must lie in 0..2"):
        jem.on_train_start(LoadedData(train=torch.zeros(4, 2), info=VEC2,
                                      train_labels=torch.tensor([0, 5, -1, 1])))


def test_fit_with_labels_and_unlabelled_data(tmp_path):
    from shortrun.train.fit import fit

    rng = np.random.default_rng(0)
    y = np.arange(60) % 3
    x = MEANS.numpy()[y] + 0.3 * rng.standard_normal((60, 2))
    extra = rng.standard_normal((20, 2))
    jem = JEM(small_net(), n_classes=3, langevin_steps=2, buffer_size=50)
    fit(jem, x, labels=y, unlabelled=extra, steps=3, batch_size=16, run_dir=tmp_path / "run",
        progress=False)
    saved = np.load(tmp_path / "run" / "data.npz")
    assert (saved["y_train"][60:] == UNLABELLED).all() and len(saved["y_train"]) == 80
    assert jem.predict(torch.as_tensor(x, dtype=torch.float32)).shape == (60,)
    with pytest.raises(ConfigError, match=r"unlabelled= needs labels="):
        fit(JEM(small_net(), n_classes=3), x, unlabelled=extra, steps=1)


def test_images_get_the_conv_network_and_draw(tmp_path):
    from shortrun.models.jem import JEMOptions

    jem = JEM.from_config(JEMOptions(width=4, buffer_size=20, langevin_steps=2), IMG)
    assert jem(torch.zeros(3, 1, 8, 8)).shape == (3, 10)
    x = jem.sample(10, y=torch.arange(10))
    assert x.shape == (10, 1, 8, 8) and float(x.abs().max()) <= 1.0
