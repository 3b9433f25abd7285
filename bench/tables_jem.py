"""The ``jem`` table of bench/result_tables.py: ``jem_mnist`` against the plain classifier of
the same network at the same CPU time, one row per seed and mean ± sample std per side, from
``bench/results/jem_mnist/<run>/``: ``eval.json`` (``shortrun eval RUN --metrics
accuracy,ece,ood_auroc,fd``), ``config.yaml``, ``provenance.json`` (its ``event: recovery``
entries are the automatic recoveries) and ``time.json`` (the ``user`` and ``real`` seconds of
``time shortrun train``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parents[1] / "bench" / "results" / "jem_mnist"
SIDES = (("jem", "`jem_mnist`"), ("plain", "plain classifier"))
# eval.json key, column head, scale, decimals
COLUMNS = (("accuracy", "test accuracy %", 100, 2), ("ece", "ECE", 1, 4),
           ("ood_auroc_logpx", "OOD AUROC, log p(x)", 1, 4),
           ("ood_auroc_maxsoftmax", "OOD AUROC, max-softmax", 1, 4),
           ("sample_accuracy", "samples classified as their class %", 100, 1),
           ("fd", "FD (class-conditional)", 1, 2))


def runs(side: str) -> list[tuple[int, Path]]:
    """(seed, folder) of every kept run of one side, by seed."""
    found = [(int(p.name.rsplit("_s", 1)[1]), p) for p in RESULTS.glob(f"{side}_s*")]
    return sorted(found)


def recoveries(folder: Path) -> int:
    entries = json.loads((folder / "provenance.json").read_text())
    entries = entries if isinstance(entries, list) else [entries]
    return sum(1 for e in entries if isinstance(e, dict) and e.get("event") == "recovery")


def fmt(values: list[float], decimals: int) -> str:
    a = np.asarray(values, dtype=np.float64)
    if len(a) == 1:
        return f"{a[0]:.{decimals}f}"
    return f"{a.mean():.{decimals}f} ± {a.std(ddof=1):.{decimals}f}"


def jem_table() -> list[str]:
    """Per-seed rows, then mean ± std rows: accuracy, ECE, the OOD AUROCs against the
    Fashion-MNIST test split, the class-conditional samples' accuracy and FD under
    ``classifier_mnist``, updates, CPU seconds and recoveries."""
    heads = " | ".join(h for _, h, _, _ in COLUMNS)
    lines = [f"| run | updates | CPU s (wall s) | {heads} | recoveries |",
             "|---" * (len(COLUMNS) + 4) + "|"]
    summary = []
    for side, label in SIDES:
        rows = runs(side)
        evals = [json.loads((p / "eval.json").read_text()) for _, p in rows]
        times = [json.loads((p / "time.json").read_text()) for _, p in rows]
        for (seed, folder), ev, t in zip(rows, evals, times, strict=True):
            cells = " | ".join(f"{ev[k] * scale:.{d}f}" for k, _, scale, d in COLUMNS)
            lines.append(f"| {label}, seed {seed} | {ev['step']} | {t['user_s']:.0f} "
                         f"({t['real_s']:.0f}) | {cells} | {recoveries(folder)} |")
        cells = " | ".join(fmt([ev[k] * scale for ev in evals], d)
                           for k, _, scale, d in COLUMNS)
        cpu = fmt([t["user_s"] for t in times], 0)
        total = sum(recoveries(p) for _, p in rows)
        summary.append(f"| **{label}, {len(rows)} seeds** | {evals[0]['step']} | {cpu} | "
                       f"{cells} | {total} |")
    return lines + summary
