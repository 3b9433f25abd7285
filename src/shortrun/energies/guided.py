"""Energies read off a classifier's logits, and class-conditional (guided) energies.

Grathwohl et al. (2020, "Your classifier is secretly an energy based model", Eq. 4-5) write a
classifier's logits ``f(x)`` as negative energies: ``p(x, y) ∝ exp f(x)[y]`` and
``p(x) ∝ Σ_y exp f(x)[y]``. In the library's convention ``p ∝ exp(−E)`` that is, translated
once here,

- ``E(x, y) = −f(x)[y]``                       (:class:`LogitEnergy` with ``y``),
- ``E(x)    = −logsumexp_y f(x)[y]``           (:class:`LogitEnergy`),
- ``log p(y|x) = −E(x, y) + E(x) = log_softmax(f(x))[y]``.

Class-conditional sampling targets ``p(x|y) ∝ p(x) p(y|x)``, i.e. the energy
``E(x) − log p(y|x)``. :class:`GuidedEnergy` scales the class term by ``1 + w``:
``E_w(x, y) = E(x) − (1 + w) log p(y|x)``, ``w = 0`` being exact Bayes. This is the
classifier-free guidance of Ho & Salimans (2022, Eq. 6) written with energies: the
conditional and unconditional models are one network, and ``w > 0`` sharpens the class.
For JEM, ``E_0(x, y) = E(x, y) = −f(x)[y]`` exactly.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn


class LogitEnergy(nn.Module):
    """``x ↦ −logsumexp f(x)`` (``y`` None) or ``x ↦ −f(x)[y]``: a classifier as an energy."""

    def __init__(self, logits: Callable[[torch.Tensor], torch.Tensor],
                 y: torch.Tensor | None = None) -> None:
        super().__init__()
        self.logits, self.y = logits, y

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = self.logits(x)
        if self.y is None:
            return -torch.logsumexp(f, dim=1)
        return -f.gather(1, self.y.view(-1, 1).to(f.device)).squeeze(1)


class GuidedEnergy(nn.Module):
    """``E_w(x, y) = E(x) − (1 + w) log_softmax(f(x))[y]`` for labels ``y`` (one per chain).

    ``energy`` is the unconditional energy ``E(x)`` and ``logits`` any classifier ``f``; for a
    JEM both come from the same network (see the module doc)."""

    def __init__(self, energy: Callable[[torch.Tensor], torch.Tensor],
                 logits: Callable[[torch.Tensor], torch.Tensor], y: torch.Tensor,
                 guidance: float = 0.0) -> None:
        super().__init__()
        self.energy, self.logits, self.y = energy, logits, y
        self.scale = 1.0 + float(guidance)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        log_p = F.log_softmax(self.logits(x), dim=1)
        log_p_y = log_p.gather(1, self.y.view(-1, 1).to(log_p.device)).squeeze(1)
        return self.energy(x) - self.scale * log_p_y


class JointLogitEnergy(nn.Module):
    """``E_w`` for a JEM from one forward pass: ``−LSE f − (1 + w)(f[y] − LSE f)``."""

    def __init__(self, logits: Callable[[torch.Tensor], torch.Tensor], y: torch.Tensor,
                 guidance: float = 0.0) -> None:
        super().__init__()
        self.logits, self.y = logits, y
        self.scale = 1.0 + float(guidance)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = self.logits(x)
        lse = torch.logsumexp(f, dim=1)
        f_y = f.gather(1, self.y.view(-1, 1).to(f.device)).squeeze(1)
        return -lse - self.scale * (f_y - lse)
