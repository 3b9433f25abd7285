"""The contract between a Model and the one Trainer.

A model owns its networks, its chain sources and the order of its updates (some methods update
several networks in a fixed order, RBMs update in closed form). The Trainer owns everything
else: data order, optimiser schedules, logging, checkpoints, the divergence guard, RNG state.
Stateful chain sources are submodules, so their state is checkpointed with the parameters.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import torch
from torch import nn

from shortrun.collectives import average_gradients_now
from shortrun.fields import fld

if TYPE_CHECKING:
    from shortrun.data.base import DataInfo, LoadedData


class RunConfig(Protocol):
    """What a model reads of the run config (``train.config.Config`` is one); a Protocol so
    models never import the train floor above them."""

    model: Any
    train: Any


@dataclass
class ModelOptions:
    """Options every model understands; models subclass this."""

    name: str = fld("ebm")


class Model(nn.Module):
    """Base class. Subclasses set ``name``, ``Config`` and implement ``training_step`` and
    ``sample``; ``reconstruct`` / ``score`` where meaningful. Evaluation lives above the
    models, in :mod:`shortrun.evaluation`."""

    name: ClassVar[str] = ""
    Config: ClassVar[type] = ModelOptions
    #: True: ``training_step`` receives ``(x, labels)`` batches instead of ``x``.
    supervised: ClassVar[bool] = False

    def __init__(self, cfg: RunConfig, info: DataInfo) -> None:
        super().__init__()
        self.cfg = cfg
        self.info = info

    # --- training -------------------------------------------------------------------------
    def on_train_start(self, data: LoadedData) -> None:
        """Data-dependent initialisation of a fresh run (not called on resume)."""

    def build_optimizers(self) -> dict[str, torch.optim.Optimizer]:
        """Default: one Adam over every parameter with ``train.lr``/``betas``/``weight_decay``."""
        t = self.cfg.train
        params = [p for p in self.parameters() if p.requires_grad]
        if not params:
            return {}
        return {"main": torch.optim.Adam(params, lr=t.lr, betas=t.betas,
                                         weight_decay=t.weight_decay)}

    def training_step(self, batch: torch.Tensor, step: int,
                      optimizers: dict[str, torch.optim.Optimizer]) -> dict[str, float]:
        """One update on ``batch``; returns scalar metrics (``loss`` and energies at least)."""
        raise NotImplementedError

    def optimizer_step(self, optimizer: torch.optim.Optimizer, loss: torch.Tensor,
                       params: Iterable[nn.Parameter] | None = None) -> float | None:
        """zero_grad → backward → optional norm clip (``train.grad_clip``) → step.

        Returns the gradient norm before clipping when clipping is on."""
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        norm = None
        if self.cfg.train.grad_clip is not None:
            # data parallel: clip the rank-averaged gradient (as DDP would), not each rank's
            average_gradients_now(optimizer)
            if params is None:
                params = [p for g in optimizer.param_groups for p in g["params"]]
            norm = float(nn.utils.clip_grad_norm_(list(params), self.cfg.train.grad_clip))
        optimizer.step()
        return norm

    def compile_networks(self, backend: str = "inductor") -> None:
        """``torch.compile`` every network in place (``nn.Module.compile`` keeps state-dict
        keys, so checkpoints are unchanged); chain sources hold no computation and are skipped.
        """
        for child in self.children():
            if hasattr(child, "start") and hasattr(child, "finish"):
                continue
            child.compile(backend=backend, dynamic=False)

    # --- use ------------------------------------------------------------------------------
    def sample(self, n: int, steps: int | None = None,
               generator: torch.Generator | None = None) -> torch.Tensor:
        """``n`` samples in model space (the space the data tensors live in)."""
        raise NotImplementedError

    def draw(self, path: Path, n: int) -> None:
        """Save a picture of ``n`` samples at ``path`` (PNG); models may draw more."""
        from shortrun.plotting import save_samples

        save_samples(self.sample(n), self.info, path)

    @property
    def device(self) -> torch.device:
        for p in self.parameters():
            return p.device
        return torch.device("cpu")
