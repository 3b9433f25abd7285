"""The LEBM MNIST anomaly protocol (Pang et al. 2020, §5.4) in one command: for each held-out
digit, train ``lebm_mnist_anomaly`` without it, then ``shortrun eval --metrics auprc`` on the
test split (that digit = positive class), with both anomaly scores (``joint``: −log p(x, z);
``tilt``: −f_α(z)). Prints a markdown table beside the paper's numbers: average precision
(``auprc``) and the trapezoid the papers compute (``auprc_trapezoid``), with the anomaly
prevalence of the test split (the AUPRC of a random score). The recipe's default split is the
pooled one (``data.anomaly_split=pooled``, Zenati et al.'s protocol as described; the split
of the papers' loader is ``zenati``).

    SHORTRUN_DATA=/work/shared/data .venv/bin/python bench/lebm_anomaly.py --digits 1,4,5,7,9 \
        --out runs/lebm_anomaly [--set train.steps=3000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

PAPER = {1: 0.336, 4: 0.630, 5: 0.619, 7: 0.463, 9: 0.413}  # LEBM, Table 4 (± ~0.01)


def shortrun(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "shortrun", *args], check=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--digits", default="1,4,5,7,9")
    ap.add_argument("--out", type=Path, default=Path("runs/lebm_anomaly"))
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    args = ap.parse_args()
    rows = []
    for d in [int(v) for v in args.digits.split(",")]:
        run = args.out / f"digit{d}"
        if not (run / "checkpoints").is_dir():
            sets = [f"--set=data.anomaly_digit={d}", "--set=train.progress=false",
                    *(f"--set={o}" for o in args.overrides)]
            shortrun("train", "lebm_mnist_anomaly", *sets, "--out", str(run))
        got = {}
        for score in ("joint", "tilt"):
            shortrun("eval", str(run), "--metrics", "auprc",
                     f"--set=model.anomaly_score={score}")
            got[score] = json.loads((run / "eval.json").read_text())
        rows.append((d, got, PAPER.get(d)))
    print("| held-out digit | prevalence | AP joint | AP tilt | trapezoid joint | trapezoid tilt "
          "| paper (trapezoid) |")
    print("|---|---|---|---|---|---|---|")
    for d, got, p in rows:
        j, t = got["joint"], got["tilt"]
        print(f"| {d} | {j['anomaly_prevalence']:.3f} | {j['auprc']:.3f} | {t['auprc']:.3f} "
              f"| {j['auprc_trapezoid']:.3f} | {t['auprc_trapezoid']:.3f} "
              f"| {p if p is not None else '-'} |")


if __name__ == "__main__":
    main()
