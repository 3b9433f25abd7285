"""Evaluation: the floor above ``train/`` (it loads runs, trains helper models, samples).

- :mod:`~shortrun.evaluation.dispatch`: ``evaluate`` / ``evaluate_run`` (``shortrun eval``).
- :mod:`~shortrun.evaluation.registry`: model name → metric names, defaults and planner.
- :mod:`~shortrun.evaluation.plan`: metric groups, checked before any is computed.
- :mod:`~shortrun.evaluation.sampling`: the one chunked sampler.
- :mod:`~shortrun.evaluation.progress`: tqdm on a terminal, log lines elsewhere.
- per model family: ``density`` (EBM, score models), ``rbm``, ``lebm``, ``dual_mcmc``,
  ``text`` (text LEBM, LSTM LM), ``classifier``; ``features`` finds and loads FD/KID
  extractors.
"""

from shortrun.evaluation.dispatch import evaluate, evaluate_run

__all__ = ["evaluate", "evaluate_run"]
