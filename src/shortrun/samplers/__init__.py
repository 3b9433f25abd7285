"""MCMC kernels (pure transitions) and chain sources (where chains start, what persists)."""

from shortrun.samplers.langevin import LangevinInfo, langevin, langevin_step
from shortrun.samplers.sources import (
    ChainSource,
    DataSource,
    NoiseSource,
    PersistentChains,
    ReplayBuffer,
)

__all__ = ["ChainSource", "DataSource", "LangevinInfo", "NoiseSource", "PersistentChains",
           "ReplayBuffer", "langevin", "langevin_step"]
