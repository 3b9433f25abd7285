"""The speed wing: everything that chooses or implements a faster route for a computation.

:mod:`~shortrun.speed.engine` runs every route family (pins, ``train.routes``, the float64
cross-check, size rules, races, the cache of :mod:`~shortrun.speed.cache`, the provenance
record); the families are :mod:`~shortrun.speed.products` (``rbm``),
:mod:`~shortrun.speed.rbm_step` (``rbm_step``, with the NumPy update of
:mod:`~shortrun.speed.rbm_numpy`), :mod:`~shortrun.speed.mlp` (``mlp``),
:mod:`~shortrun.speed.layout` (``conv``) and :mod:`~shortrun.speed.deconv` (``deconv``).
Models and energies call one seam each. This file imports nothing, so that an energy may import
a family without importing the others.
"""
