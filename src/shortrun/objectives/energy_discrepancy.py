"""Energy discrepancy (Schröder, Ou, Lim, Li, Vollmer & Duncan, NeurIPS 2023).

For a perturbation ``q(y | x)`` the energy discrepancy of ``E`` (our sign, p ∝ exp(−E)) is

    ED_q(E) = E_data[E(x)] − E_data E_{y~q(·|x)}[U_q(y)],   U_q(y) = −log ∫ q(y|x') e^{−E(x')} dx'

(their Eq. 2), minimised uniquely by ``E = −log p_data`` + const (their Theorem 1), with no
sample from the model and no score. For a symmetric kernel (``q(y|x) = q(x|y)``: Gaussian
``N(y; x, tI)``, independent bit flips) ``e^{−U_q(y)} = E_{x'~q(·|y)} e^{−E(x')}``, so with
``y = x + √t ξ`` and ``M`` draws ``x⁻_j = y + √t ξ'_j`` the stabilised estimator is (their
Eq. 8, the ``w`` term keeping ``log`` away from ``−∞`` for small ``M``)

    L_{t,M,w}(E) = mean_i log( w/M + (1/M) Σ_j exp(E(x_i) − E(x⁻_ij)) ),

computed as ``logsumexp([log w, d_i1, …, d_iM]) − log M`` with ``d_ij = E(x_i) − E(x⁻_ij)``.
It tends to ED as ``M → ∞`` for any fixed ``w``. Binary data use Bernoulli flips: each bit of
``x`` flips with probability ``ε`` to make ``y``, and each bit of ``y`` again for every
``x⁻_j`` (the discrete version: Schröder et al., "Training Discrete EBMs with Energy
Discrepancy", 2023).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from shortrun.objectives.contrastive import LossOutput

EnergyFn = Callable[[torch.Tensor], torch.Tensor]
PERTURBATIONS = ("gaussian", "bernoulli")


def perturb(
    x: torch.Tensor,
    m: int,
    *,
    perturbation: str = "gaussian",
    t: float = 0.25,
    flip_prob: float = 0.1,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """The negatives ``x⁻`` of shape ``(M, B, *shape)``: one shared ``y ~ q(·|x)`` per example,
    then ``M`` independent ``x⁻_j ~ q(·|y)``. Gaussian: ``x⁻ − x`` has variance ``2t`` per
    coordinate and two negatives of one example share the covariance ``t``."""
    if m < 1:
        raise ValueError(f"energy discrepancy needs M >= 1 perturbations; got {m}")
    if perturbation == "gaussian":
        if t <= 0:
            raise ValueError(f"the Gaussian perturbation needs t > 0 (its variance); got {t}")
        s = math.sqrt(t)
        y = x + s * torch.randn(x.shape, generator=generator, dtype=x.dtype, device=x.device)
        eps = torch.randn((m, *x.shape), generator=generator, dtype=x.dtype, device=x.device)
        return y.unsqueeze(0) + s * eps
    if perturbation == "bernoulli":
        if not 0 < flip_prob < 1:
            raise ValueError(f"the Bernoulli perturbation needs 0 < flip_prob < 1; got "
                             f"{flip_prob}")
        if not bool(((x == 0) | (x == 1)).all()):
            raise ValueError("the Bernoulli perturbation flips bits: the data must be {0, 1} "
                             "(binarize it, or use perturbation='gaussian')")

        def flip(v: torch.Tensor) -> torch.Tensor:
            u = torch.rand(v.shape, generator=generator, dtype=v.dtype, device=v.device)
            return torch.where(u < flip_prob, 1 - v, v)

        y = flip(x)
        return flip(y.unsqueeze(0).expand(m, *x.shape).contiguous())
    raise ValueError(f"perturbation must be one of {', '.join(PERTURBATIONS)}; got "
                     f"{perturbation!r}")


def energy_discrepancy(
    energy_fn: EnergyFn,
    x: torch.Tensor,
    *,
    m: int = 16,
    w: float = 1.0,
    perturbation: str = "gaussian",
    t: float = 0.25,
    flip_prob: float = 0.1,
    generator: torch.Generator | None = None,
    x_neg: torch.Tensor | None = None,
) -> LossOutput:
    """``L_{t,M,w}`` (module docstring) on a batch ``x``; ``x_neg`` ``(M, B, *shape)``
    overrides the perturbation draw (then ``m`` is its first dimension).

    Metrics: ``loss``; ``energy_pos`` (mean ``E`` at the data), ``energy_neg`` (at the
    negatives), ``energy_gap`` = energy_neg − energy_pos (positive once the data sit in
    basins); ``w_weight``, the mean softmax share of the ``w`` term in the logsumexp (near 1:
    the stabiliser dominates and the energy gets little signal; near 0: ``w`` is idle)."""
    if w < 0:
        raise ValueError(f"the stabiliser w must be >= 0; got {w}")
    if x_neg is None:
        x_neg = perturb(x, m, perturbation=perturbation, t=t, flip_prob=flip_prob,
                        generator=generator)
    elif x_neg.shape[1:] != x.shape:
        raise ValueError(f"x_neg must have shape (M, {', '.join(map(str, x.shape))}); got "
                         f"{tuple(x_neg.shape)}")
    m = x_neg.shape[0]
    b = x.shape[0]
    e_pos = energy_fn(x)
    e_neg = energy_fn(x_neg.reshape(m * b, *x.shape[1:])).reshape(m, b)
    d = e_pos.unsqueeze(0) - e_neg  # (M, B): E(x_i) − E(x⁻_ij)
    if w > 0:
        d = torch.cat([torch.full_like(d[:1], math.log(w)), d])
    per = torch.logsumexp(d, 0) - math.log(m)
    loss = per.mean()
    with torch.no_grad():
        share = torch.softmax(d, 0)[0].mean() if w > 0 else torch.zeros(())
    pos, neg = e_pos.detach().mean(), e_neg.detach().mean()
    metrics = {"loss": float(loss.detach()), "energy_pos": float(pos), "energy_neg": float(neg),
               "energy_gap": float(neg - pos), "w_weight": float(share)}
    return LossOutput(loss, metrics, x_neg)
