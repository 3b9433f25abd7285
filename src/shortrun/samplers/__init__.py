"""MCMC kernels (pure transitions) and chain sources (where chains start, what persists).

Every kernel has one shape, ``kernel(energy, state, *, <kernel params>, generator=None) ->
(state, info)``, with the energy passed at call time: :func:`langevin_step`,
:func:`mala_step`, :func:`hmc_step`, :func:`gibbs_step`, :func:`independence_step`,
:func:`swap_step` and :func:`tempering_step`. The Metropolis–Hastings kernels share one
accept step (:func:`mh_accept`). The multi-step drivers run the one loop of
:mod:`shortrun.samplers.driver`.

Three drivers share their module's name: ``from shortrun.samplers import langevin`` is the
driver function, as are ``mala`` and ``hmc``, so the attribute ``shortrun.samplers.langevin``
is a function, not the module. The modules stay importable by statement
(``from shortrun.samplers.langevin import energy_grad``) and are reachable as attributes under
``langevin_kernel``, ``mala_kernel`` and ``hmc_kernel``.
"""

import importlib as _importlib

from shortrun.samplers.gibbs import GibbsInfo, GibbsState, block_gibbs, gibbs_init, gibbs_step
from shortrun.samplers.hmc import HMCInfo, HMCState, hmc, hmc_init, hmc_step
from shortrun.samplers.independence import (
    IndependenceInfo,
    IndependenceState,
    independence_init,
    independence_mh,
    independence_step,
)
from shortrun.samplers.langevin import LangevinInfo, langevin, langevin_step
from shortrun.samplers.mala import MALAInfo, MALAState, mala, mala_init, mala_step
from shortrun.samplers.metropolis import MCMCInfo, mh_accept, mh_select
from shortrun.samplers.sources import (
    ChainSource,
    DataSource,
    NoiseSource,
    PersistentChains,
    ReplayBuffer,
    TemperedChains,
)
from shortrun.samplers.tempering import (
    SwapInfo,
    TemperingState,
    beta_ladder,
    swap_step,
    tempering_step,
)

# the modules the driver functions of the same name hide (module docstring)
langevin_kernel = _importlib.import_module("shortrun.samplers.langevin")
mala_kernel = _importlib.import_module("shortrun.samplers.mala")
hmc_kernel = _importlib.import_module("shortrun.samplers.hmc")

__all__ = [
    "ChainSource", "DataSource", "GibbsInfo", "GibbsState", "HMCInfo", "HMCState",
    "IndependenceInfo", "IndependenceState", "LangevinInfo", "MALAInfo", "MALAState",
    "MCMCInfo", "NoiseSource", "PersistentChains", "ReplayBuffer", "SwapInfo",
    "TemperedChains", "TemperingState", "beta_ladder", "block_gibbs", "gibbs_init",
    "gibbs_step", "hmc", "hmc_init", "hmc_step", "independence_init", "independence_mh",
    "independence_step", "langevin", "langevin_step", "mala", "mala_init", "mala_step",
    "mh_accept", "mh_select", "swap_step", "tempering_step",
    "langevin_kernel", "mala_kernel", "hmc_kernel",
]
