"""The contract between a Model and the one Trainer.

A model owns its networks, its chain sources and the order of its updates (some methods update
several networks in a fixed order, RBMs update in closed form). The Trainer owns everything
else: data order, optimiser schedules, logging, checkpoints, the divergence guard, RNG state.
Stateful chain sources are submodules, so their state is checkpointed with the parameters.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import nn

from shortrun.collectives import average_gradients_now
from shortrun.errors import ConfigError, ShortrunError
from shortrun.fields import fld
from shortrun.models.registry import RegisteredName

if TYPE_CHECKING:
    from shortrun.data.base import DataInfo, LoadedData


@dataclass
class ModelOptions:
    """Options every model understands; models subclass this."""

    name: str = fld("")  # the registered name (models/registry.py); "": the model's own


@dataclass
class OptimOptions:
    """What a model's optimisers need from the training options (``train.lr``, ``betas``,
    ``weight_decay``, ``grad_clip``). ``lr`` is the default of every network whose model
    option ``lr_<net>`` is unset."""

    lr: float = 1e-3
    betas: tuple[float, float] = (0.9, 0.999)
    weight_decay: float = 0.0
    grad_clip: float | None = None

    @classmethod
    def from_train(cls, train: Any) -> OptimOptions:
        """From a ``TrainConfig`` (duck-typed: anything with those four attributes)."""
        return cls(lr=train.lr, betas=tuple(train.betas), weight_decay=train.weight_decay,
                   grad_clip=train.grad_clip)


class Model(nn.Module):
    """Base class. Subclasses set ``name``, ``Config`` and implement ``training_step`` and
    ``sample``; ``reconstruct`` / ``score`` where meaningful. Evaluation lives above the
    models, in :mod:`shortrun.evaluation`."""

    name: ClassVar[str] = RegisteredName()  # type: ignore[assignment]
    Config: ClassVar[type] = ModelOptions
    #: True: ``training_step`` receives ``(x, labels)`` batches instead of ``x``.
    supervised: ClassVar[bool] = False

    #: Constructor arguments that are networks (``EBM(energy, ...)``); ``shortrun.load``
    #: needs the ones a user supplied passed back by these names.
    networks: ClassVar[tuple[str, ...]] = ()

    def __init__(self, options: Any = None, info: DataInfo | None = None) -> None:
        super().__init__()
        self.options = options if options is not None else type(self).Config()
        if getattr(self.options, "name", None) == "":
            self.options = dataclasses.replace(self.options, name=type(self).name)
        self.info: DataInfo | None = None
        #: default chain length of :meth:`sample` (``sample.steps``); None: the model's own
        self.sample_steps: int | None = None
        #: max gradient norm in :meth:`optimizer_step` (``train.grad_clip``); None: no clip
        self.grad_clip: float | None = None
        #: names of the networks a user passed in (not rebuildable from the options)
        self.user_networks: tuple[str, ...] = ()
        #: the run's own data, for pictures that draw the data beside the samples
        self.reference_data: LoadedData | None = None
        self._pending_info = info

    @classmethod
    def from_config(cls, options: Any, info: DataInfo) -> Model:
        """Build the networks named by ``options`` (the recipe path) and the model."""
        return cls(options=options, info=info)

    def _given(self, **nets: nn.Module | None) -> None:
        """Record which networks the caller supplied (``from_config`` clears it)."""
        self.user_networks = tuple(k for k, v in nets.items() if v is not None)

    def _finish_init(self) -> None:
        """Subclasses call this at the end of ``__init__``: binds the info given, if any."""
        info, self._pending_info = self._pending_info, None
        if info is not None:
            self.bind(info)

    def bind(self, info: DataInfo) -> None:
        """Attach the data's shape and range and build what depends on them (chain sources,
        an RBM's weights). Done by the constructor when it gets ``info``, else by the Trainer
        (``shortrun.fit``) from the data; binding again to another shape is an error."""
        if self.info is not None:
            if tuple(self.info.shape) != tuple(info.shape) or self.info.kind != info.kind:
                raise ConfigError(f"model {self.name!r} was built for {self.info.kind} data of "
                                  f"shape {tuple(self.info.shape)}; this data is {info.kind} of "
                                  f"shape {tuple(info.shape)}")
            return
        self.info = info
        self.setup(info)

    def setup(self, info: DataInfo) -> None:
        """Hook: build the parts that depend on the data (called once, by :meth:`bind`)."""

    def lr_of(self, net: str, optim: OptimOptions) -> float:
        """The learning rate of network ``net``: model option ``lr_<net>``, else ``train.lr``."""
        lr = getattr(self.options, f"lr_{net}", None)
        return optim.lr if lr is None else lr

    def configure_training(self, optim: OptimOptions) -> dict[str, torch.optim.Optimizer]:
        """Store what the updates read (``grad_clip``) and build the optimisers."""
        self.grad_clip = optim.grad_clip
        return self.build_optimizers(optim)

    # --- training -------------------------------------------------------------------------
    def on_train_start(self, data: LoadedData) -> None:
        """Data-dependent initialisation of a fresh run (not called on resume)."""

    def build_optimizers(self, optim: OptimOptions | None = None,
                         ) -> dict[str, torch.optim.Optimizer]:
        """Default: one Adam over every parameter with ``train.lr``/``betas``/``weight_decay``."""
        t = optim or OptimOptions()
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
        """zero_grad → backward → optional norm clip (``self.grad_clip``) → step.

        Returns the gradient norm before clipping when clipping is on."""
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        norm = None
        if self.grad_clip is not None:
            # data parallel: clip the rank-averaged gradient (as DDP would), not each rank's
            average_gradients_now(optimizer)
            if params is None:
                params = [p for g in optimizer.param_groups for p in g["params"]]
            norm = float(nn.utils.clip_grad_norm_(list(params), self.grad_clip))
        optimizer.step()
        return norm

    def fit(self, data: Any, **options: Any) -> Model:
        """``model.fit(x, steps=..., ...)``: the same call as ``shortrun.fit(model, x, ...)``
        (in memory unless ``run_dir=`` is given); returns the model."""
        if _FIT is None:
            raise ShortrunError(f"{type(self).__name__}.fit needs shortrun's training loop, "
                                "which is not loaded: import shortrun (or shortrun.train.fit) "
                                "first, or call shortrun.fit(model, x, ...)")
        return _FIT(self, data, **options)

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
        self.require_info("draw")
        from shortrun.plotting import save_samples

        save_samples(self.sample(n), self.info, path)

    @property
    def device(self) -> torch.device:
        for p in self.parameters():
            return p.device
        return torch.device("cpu")

    def require_info(self, what: str) -> DataInfo:
        """``self.info``, or a one-line error when the model has not seen any data yet."""
        if self.info is None:
            raise ConfigError(f"{type(self).__name__}.{what}: the model does not know the data's "
                              "shape yet; pass info=DataInfo(...) to the constructor or train it "
                              "first (shortrun.fit(model, data))")
        return self.info


# ``Model.fit``'s loop: installed by the training floor (shortrun.train.fit), which imports this
# floor and not the other way round
_FIT: Callable[..., Model] | None = None


def install_fit(fit: Callable[..., Model]) -> None:
    """Make ``fit`` (``shortrun.fit``) what :meth:`Model.fit` calls."""
    global _FIT
    _FIT = fit


def merge_options(cls: type, options: Any, overrides: dict[str, Any]) -> Any:
    """``options`` (default: ``cls()``) with keyword overrides, each checked like a YAML key."""
    from shortrun.fields import build_section

    base = options if options is not None else cls()
    if not overrides:
        return base
    try:
        checked = build_section("model", cls, overrides)
    except ConfigError as exc:  # the message names the YAML key; say the keyword too
        keys = dict.fromkeys(re.findall(r"\bmodel\.([a-z_][a-z0-9_]*)\b", str(exc)))
        if not keys:
            raise
        names = ", ".join(f"{k}= of the model's constructor for model.{k}" for k in keys)
        raise ConfigError(f"{exc} (from Python: {names})") from None
    return dataclasses.replace(base, **{k: getattr(checked, k) for k in overrides})
