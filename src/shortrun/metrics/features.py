"""Feature extractors for the Fréchet distance and KID: the frozen feature map and FD/KID.

An :class:`Extractor` maps image batches in *model space* ``(B, C, H, W)`` to ``(B, D)`` float
features. Pass the :class:`DataInfo` of the space the images live in and the extractor maps its
``[low, high]`` range onto its own input range, so a ``[0, 1]`` or binary model can be measured
with a classifier trained on ``[-1, 1]`` images.

Finding and loading an extractor (a classifier run, ``mnist``/``fashion``, ``inception:PATH``)
loads runs, so it lives on the evaluation floor: :mod:`shortrun.evaluation.features`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import numpy as np
import torch

from shortrun.data.base import DataInfo


class Extractor:
    """A frozen network used as a feature map; call it on a batch, or :meth:`features`."""

    def __init__(self, name: str, net: Callable[[torch.Tensor], torch.Tensor], dim: int,
                 info: DataInfo, channels: int | None = None,
                 weights_sha256: str | None = None) -> None:
        self.name, self.net, self.dim, self.info = name, net, dim, info
        self.channels = channels
        # provenance of every Fréchet number: which weights made the features
        self.weights_sha256 = weights_sha256 or module_sha256(net)

    def to_input_space(self, x: torch.Tensor, info: DataInfo | None) -> torch.Tensor:
        x = x.float()
        if x.dim() == 2:  # flattened square images
            side = int(round(x.shape[1] ** 0.5))
            x = x.reshape(-1, 1, side, side)
        if info is not None and (info.low, info.high) != (self.info.low, self.info.high):
            # Range to range: [low, high] of the caller's space onto the extractor's
            # (binary {0, 1} data counts as the range [0, 1]).
            unit = (x.clamp(info.low, info.high) - info.low) / (info.high - info.low)
            x = self.info.low + unit * (self.info.high - self.info.low)
        return x

    @torch.no_grad()
    def __call__(self, x: torch.Tensor, info: DataInfo | None = None) -> torch.Tensor:
        return self.net(self.to_input_space(x, info)).float()

    @torch.no_grad()
    def features(self, x: torch.Tensor, info: DataInfo | None = None,
                 batch_size: int = 500) -> np.ndarray:
        """Features of a whole set, in batches, as float64 numpy ``(n, D)``."""
        parts = [self(x[i : i + batch_size], info).double().cpu().numpy()
                 for i in range(0, len(x), batch_size)]
        return np.concatenate(parts) if parts else np.zeros((0, self.dim))


def state_dict_sha256(module: torch.nn.Module) -> str:
    """SHA-256 of a module's parameters and buffers: names, dtypes, shapes and bytes, in name
    order. The same weights give the same hash whatever file or device they came from."""
    h = hashlib.sha256()
    for name, t in sorted(module.state_dict().items()):
        t = t.detach().cpu().contiguous()
        h.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.numpy().tobytes() if t.dtype != torch.bfloat16 else
                 t.float().numpy().tobytes())
    return h.hexdigest()


def module_sha256(net: object) -> str | None:
    """:func:`state_dict_sha256` of ``net``, or of the module a bound method belongs to
    (``model.features``); None for a plain function, whose weights cannot be read."""
    owner = net if isinstance(net, torch.nn.Module) else getattr(net, "__self__", None)
    return state_dict_sha256(owner) if isinstance(owner, torch.nn.Module) else None


def fd_kid(extractor: Extractor, generated: torch.Tensor, reference: torch.Tensor | None,
           info: DataInfo | None = None, metrics: tuple[str, ...] = ("fd", "kid"),
           batch_size: int = 500, seed: int = 0, kid_subsets: int = 100,
           reference_features: np.ndarray | None = None) -> dict[str, float]:
    """FD and/or KID between ``generated`` and ``reference`` images (model space of ``info``).

    ``reference_features`` (the extractor's features of ``reference``) skips that pass when
    they are already computed. Keys: ``fd`` with ``fd_n`` / ``fd_n_ref`` (sample sizes, always
    beside the value) and ``kid`` with ``kid_std`` / ``kid_n``."""
    from shortrun.metrics.frechet import frechet_distance_from_stats, frechet_stats
    from shortrun.metrics.kid import kid

    fa = extractor.features(generated, info, batch_size)
    fb = (reference_features if reference_features is not None
          else extractor.features(reference, info, batch_size))
    out: dict[str, float] = {}
    if "fd" in metrics:
        sa, sb = frechet_stats(fa), frechet_stats(fb)
        out.update(fd=frechet_distance_from_stats(sa, sb), fd_n=sa.n, fd_n_ref=sb.n)
    if "kid" in metrics:
        mean, std = kid(fa, fb, n_subsets=kid_subsets, subset_size=1000, seed=seed)
        out.update(kid=mean, kid_std=std, kid_n=min(len(fa), len(fb)))
    return out
