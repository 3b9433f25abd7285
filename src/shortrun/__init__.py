"""shortrun: train, sample and evaluate energy-based models with MCMC.

Sign convention, stated once for the whole library: an energy maps a batch ``(B, *shape)``
to ``(B,)`` and ``p(x) ∝ exp(-E(x))`` — lower energy is more probable.
"""

from shortrun.errors import ConfigError, ShortrunError
from shortrun.version import __version__

__all__ = ["ConfigError", "ShortrunError", "__version__"]
