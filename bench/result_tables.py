"""The docs' tables of recorded results, generated from the kept files under bench/results/.

The pages of :data:`DOCS` hold each table between two marker comments::

    <!-- table: NAME -->
    | ... the generated table ... |
    <!-- /table -->

``python bench/result_tables.py`` rewrites every marked block from the files;
``--check`` only compares and exits 1 naming each stale block (tests/test_result_tables.py runs
the same check, so a docs number that differs from its file fails the suite). To change a
number, change or add the result file and rerun this script; never edit a block by hand.

Sources: the anomaly protocol's ``d{digit}/s{seed}/result.json`` files
(bench/lebm_anomaly_protocol.py; trapezoid AUPRC, the papers' formula, mean ± sample std over
the seeds kept), the same-budget DAMC and ED-LEBM runs' ``eval.json`` files, the ``make bench``
speed files (``bench/results/<cpu>.md``, the column "shortrun better by"), the test-set
log-likelihoods (bench/tables_loglik.py) and the JEM seeds (bench/tables_jem.py).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tables_jem import jem_table  # noqa: E402  (bench/ is not a package)
from tables_loglik import gap_sweep_table, loglik_other_table, loglik_table  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
DOCS = ("docs/lebm.md", "docs/damc.md", "bench/README.md", "docs/losses.md", "docs/jem.md")
VARIANTS = ("joint", "joint_sigma", "tilt", "unweighted")
LABEL = {"joint": "joint (the paper's score)", "joint_sigma": "joint, σ′ chosen on validation",
         "tilt": "tilt", "unweighted": "unweighted"}
PAPER = {1: 0.336, 4: 0.630, 5: 0.619, 7: 0.463, 9: 0.413}  # Pang et al. 2020, Table 4
SUCCESSOR = {1: 0.684, 4: 0.911, 5: 0.939, 7: 0.801}  # Yu et al. 2023 (selects on test)
BLOCK = re.compile(r"(<!-- table: (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /table -->)",
                   re.DOTALL)


def seeds_of(directory: str) -> dict[int, list[dict]]:
    """digit -> the result.json records of ``bench/results/DIRECTORY``, by seed."""
    out: dict[int, list[dict]] = {}
    for path in sorted((RESULTS / directory).glob("d*/s*/result.json")):
        rec = json.loads(path.read_text())
        out.setdefault(int(rec["digit"]), []).append(rec)
    return out


def mean_std(values: list[float]) -> str:
    a = np.asarray(values, dtype=np.float64)
    return f"{a.mean():.3f} ± {a.std(ddof=1):.3f}" if len(a) > 1 else f"{a.mean():.3f}"


def seed_list(recs: list[dict]) -> str:
    return ", ".join(str(r["seed"]) for r in sorted(recs, key=lambda r: r["seed"]))


def seeds_named(recs: list[dict]) -> str:
    return ("seed " if len(recs) == 1 else "seeds ") + seed_list(recs)


def cell(recs: list[dict] | None, variant: str) -> str:
    if not recs:
        return "–"
    return mean_std([r["variants"][variant]["test_auprc_trapezoid"] for r in recs])


def ref(values: dict[int, float], digit: int) -> str:
    return f"{values[digit]:.3f}" if digit in values else "–"


def variant_table(directory: str, digits: tuple[int, ...]) -> list[str]:
    """Rows: score variants, the prevalence (a random score) and the papers; columns: digits
    (with their validation digit and the seeds kept)."""
    res = seeds_of(directory)
    head = [f"{d} (val {res[d][0]['val_digit']}; {seeds_named(res[d])})" for d in digits]
    lines = ["| score, held-out digit | " + " | ".join(head) + " |",
             "|---|" + "---|" * len(digits)]
    for v in VARIANTS:
        lines.append(f"| {LABEL[v]} | " + " | ".join(cell(res[d], v) for d in digits) + " |")
    joint = {d: np.mean([r["variants"]["joint"]["test_auprc_trapezoid"] for r in res[d]])
             for d in digits}
    gap = [f"{joint[d] - PAPER[d]:+.3f}" if d in PAPER else "–" for d in digits]
    lines.append("| joint − Pang et al. 2020 | " + " | ".join(gap) + " |")
    lines.append("| random (the prevalence) | "
                 + " | ".join(f"{res[d][0]['prevalence']:.3f}" for d in digits) + " |")
    lines.append("| Pang et al. 2020 | " + " | ".join(ref(PAPER, d) for d in digits) + " |")
    lines.append("| Yu et al. 2023 (selects on test) | "
                 + " | ".join(ref(SUCCESSOR, d) for d in digits) + " |")
    return lines


def choice_table(sources: tuple[tuple[str, str, int | None], ...]) -> list[str]:
    """One seed per row, for each ``(label, directory, seed or None for all)``: the step (and
    σ′) validation chose for each variant and the test AUPRC there."""
    lines = ["| run | held-out, seed | " + " | ".join(LABEL[v] for v in VARIANTS) + " |",
             "|---|---|" + "---|" * len(VARIANTS)]
    for label, directory, seed in sources:
        for digit, recs in sorted(seeds_of(directory).items()):
            for r in (r for r in recs if seed is None or r["seed"] == seed):
                cells = []
                for v in VARIANTS:
                    c = r["variants"][v]
                    sigma = f", σ′ {c['sigma']:g}" if v == "joint_sigma" else ""
                    cells.append(f"{c['test_auprc_trapezoid']:.3f} (step {c['step']}{sigma})")
                lines.append(f"| {label} | {digit}, {r['seed']} | " + " | ".join(cells) + " |")
    return lines


DAMC_ROWS = (  # label, results directory
    ("DAMC, `damc_mnist_anomaly`, 1120 iterations", "damc_anomaly_retrain"),
    ("DAMC, 10-step posterior chain, 1560 iterations", "damc_short_anomaly_retrain"),
    ("DAMC with the 2020 recipe's model settings, 1780 iterations",
     "damc_2020_settings_anomaly_retrain"),
    ("2020 prior, `lebm_mnist_anomaly`, 3000 iterations", "lebm_anomaly_retrain"),
)


def source_table(rows: tuple[tuple[str, str], ...], variant: str,
                 digits: tuple[int, ...] = (4, 5, 7, 9)) -> list[str]:
    """One row per results directory: the variant's mean ± std per digit, seeds named."""
    lines = ["| model (results directory) | " + " | ".join(str(d) for d in digits) + " |",
             "|---|" + "---|" * len(digits)]
    for label, directory in rows:
        res = seeds_of(directory)
        cells = [f"{cell(res[d], variant)} ({seeds_named(res[d])})" if d in res else "–"
                 for d in digits]
        lines.append(f"| {label} (`{directory}`) | " + " | ".join(cells) + " |")
    lines.append("| Pang et al. 2020 | " + " | ".join(ref(PAPER, d) for d in digits) + " |")
    lines.append("| Yu et al. 2023 (selects on test) | "
                 + " | ".join(ref(SUCCESSOR, d) for d in digits) + " |")
    return lines


def fd_table() -> list[str]:
    """DAMC (`damc_mnist_short`, 1850 iterations) against the 2020 prior (3000) at the same
    15-minute budget: FD and test MSE per seed, mean ± sample std."""
    base = RESULTS / "damc_fd_same_budget"
    sides = ("langevin_3000", "damc_1850")
    seeds = sorted({int(p.name[1:].split("_")[0]) for p in base.glob("s*_*") if p.is_dir()})
    ev = {(s, side): json.loads((base / f"s{s}_{side}" / "eval.json").read_text())
          for s in seeds for side in sides}
    lines = ["| seed | FD, 2020 prior | FD, DAMC | test MSE, 2020 prior | test MSE, DAMC |",
             "|---|---|---|---|---|"]
    for s in seeds:
        lines.append(f"| {s} | {ev[s, sides[0]]['fd']:.2f} | {ev[s, sides[1]]['fd']:.2f} | "
                     f"{ev[s, sides[0]]['mse']:.4f} | {ev[s, sides[1]]['mse']:.4f} |")

    def ms(key: str, side: str, digits: int) -> str:
        a = np.array([ev[s, side][key] for s in seeds])
        return f"{a.mean():.{digits}f} ± {a.std(ddof=1):.{digits}f}"

    lines.append(f"| mean ± std | {ms('fd', sides[0], 2)} | {ms('fd', sides[1], 2)} | "
                 f"{ms('mse', sides[0], 4)} | {ms('mse', sides[1], 4)} |")
    return lines


def ed_lebm_table() -> list[str]:
    """ED-LEBM (`ed_lebm_mnist`) beside the 2020 prior and DAMC of `fd_table` at the same
    15-minute budget: FD and test MSE, mean ± sample std over each side's seeds, and every
    side's seed-1 values (the seed all three ran); FDs with another extractor are refused."""
    sides = (("`lebm_mnist` (2020 prior, 60-step prior chain)", "damc_fd_same_budget",
              "_langevin_3000"),
             ("`damc_mnist_short` (DAMC amortizer, 10-step posterior chain)",
              "damc_fd_same_budget", "_damc_1850"),
             ("`ed_lebm_mnist` (energy discrepancy, no prior chain)", "ed_lebm_same_budget", ""))
    lines = ["| recipe | iterations | seeds | FD | test MSE | FD, seed 1 | test MSE, seed 1 |",
             "|---|---|---|---|---|---|---|"]
    extractors = set()
    for label, directory, suffix in sides:
        runs = sorted((RESULTS / directory).glob(f"s[0-9]*{suffix}/eval.json"))
        runs = [r for r in runs if r.parent.name[1:].split("_")[0].isdigit()
                and r.parent.name.endswith(suffix)]
        ev = {int(r.parent.name[1:].split("_")[0]): json.loads(r.read_text()) for r in runs}
        extractors |= {e["fd_extractor_sha256"] for e in ev.values()}

        def ms(key: str, digits: int, ev: dict = ev) -> str:
            a = np.array([e[key] for e in ev.values()])
            if len(a) == 1:
                return f"{a[0]:.{digits}f} (one seed)"
            return f"{a.mean():.{digits}f} ± {a.std(ddof=1):.{digits}f}"

        steps = sorted({e["step"] for e in ev.values()})
        lines.append(f"| {label} | {', '.join(map(str, steps))} | "
                     f"{', '.join(map(str, sorted(ev)))} | {ms('fd', 2)} | {ms('mse', 4)} | "
                     f"{ev[1]['fd']:.2f} | {ev[1]['mse']:.4f} |")
    if len(extractors) != 1:
        raise SystemExit(f"ed-lebm-fd: the runs' FD extractors differ ({sorted(extractors)}); "
                         "FDs are comparable only with the same extractor")
    return lines


def ed_lebm_loglik_table() -> list[str]:
    """The test log-likelihood lines (`bench/loglik_table.py`) of the ED-LEBM runs."""
    lines = ["| run | test log p(x), nats per image (± s.e.) | bits/dim | BDMC on simulated "
             "data: lower / upper (gap) | AIS ESS | CPU s |", "|---|---:|---:|---:|---:|---:|"]
    for path in sorted((RESULTS / "ed_lebm_same_budget").glob("s[0-9]*/loglik.jsonl")):
        for line in path.read_text().splitlines():
            r = json.loads(line)
            lines.append(
                f"| `{r['recipe']}`, {path.parent.name}, {r['step']} iterations; "
                f"{r['loglik_n']:.0f} test images, {r['loglik_betas']:.0f} betas, "
                f"{r['loglik_chains']:.0f} chains | {r['loglik']:.2f} ± {r['loglik_se']:.2f} | "
                f"{r['loglik_bpd']:.3f} | {r['bdmc_lower']:.2f} / {r['bdmc_upper']:.2f} "
                f"({r['bdmc_gap']:.2f}; {r['bdmc_n']:.0f} points) | "
                f"{r['loglik_ess']:.1f} of {r['loglik_chains']:.0f} | {r['cpu_s']:.0f} |")
    return lines


SPEED_FILES = ("amd-epyc-avx512-f25m17.md", "amd-epyc-avx512-f26m2.md", "amd-epyc-avx512.md",
               "amd-epyc-avx2.md")
SPEED_ROWS = (  # label, pattern of the results file's row name
    ("`lebm_svhn` iteration vs the official formulation, 1 thread",
     r"LEBM lebm_svhn iteration \(batch 100\), 1 thread"),
    ("same, 2 threads", r"LEBM lebm_svhn iteration \(batch 100\), 2 threads"),
    ("`lebm_svhn` vs the authors' networks in the same loop, 1 thread",
     r"LEBM authors' .*, 1 thread"),
    ("same, 2 threads", r"LEBM authors' .*, 2 threads"),
    ("`lebm_svhn` with `train.precision=bf16` (opt-in) vs fp32, 1 thread",
     r"LEBM .*bf16.*, 1 thread"),
    ("CD-1 epoch, MNIST 784×500, vs scikit-learn, 2 threads", r"CD-1 epoch .*, 2 threads"),
    ("same, 1 thread", r"CD-1 epoch .*, 1 thread"),
    ("`rbm_digits` training vs scikit-learn", r"rbm_digits training \(shortrun train "
                                                r"rbm_digits\), 2 threads"),
    ("same with scikit-learn's update", r"rbm_digits .*scikit-learn's update"),
    ("Langevin, MLP 2-128-128-1, vs a plain autograd loop, 1 thread",
     r"Langevin MLP .*, 1 thread"),
    ("same, 2 threads", r"Langevin MLP .*, 2 threads"),
    ("exact log Z 784×20 vs a plain enumeration, 2 threads", r"exact log Z .*, 2 threads"),
    ("same, 1 thread", r"exact log Z .*, 1 thread"),
)


def speed_file(name: str) -> tuple[str, dict[str, str]]:
    """(column head, row name -> "shortrun better by") of one ``make bench`` file."""
    text = (RESULTS / name).read_text()
    facts = dict(re.findall(r"^- ([\w ]+): (.*)$", text, re.MULTILINE))
    flags = "AVX-512" if "avx512f" in facts["CPU flags"].split("(absent")[0] else "AVX2"
    cpu = facts["CPU"].replace("cpu family ", "family ").replace(", stepping 1", "")
    head = f"[{cpu}, {flags}, {facts['date'][:10]}](results/{name})"
    rows, inside = {}, False
    for line in text.splitlines():
        if line.startswith("| row | threads |"):
            inside = True
        elif inside and not line.startswith("|"):
            break
        elif inside and not line.startswith("|---"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows[cells[0]] = cells[5]
    return head, rows


def speed_table() -> list[str]:
    cols = [speed_file(name) for name in SPEED_FILES]
    lines = ["| shortrun faster by, same run | " + " | ".join(h for h, _ in cols) + " |",
             "|---|" + "---|" * len(cols)]
    for label, pattern in SPEED_ROWS:
        cells = []
        for _, rows in cols:
            hit = [v for k, v in rows.items() if re.match(pattern, k)]
            cells.append(hit[0] if hit else "–")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


TABLES: dict[str, Callable[[], list[str]]] = {
    "lebm-retrain": lambda: variant_table("lebm_anomaly_retrain", (1, 4, 5, 7, 9)),
    "lebm-select": lambda: variant_table("lebm_anomaly_protocol", (1, 5, 7, 9)),
    "lebm-6000": lambda: choice_table((("6000 steps", "lebm_anomaly_protocol_6000", None),)),
    "damc-select": lambda: variant_table("damc_anomaly_protocol", (4, 5, 7, 9)),
    "damc-select-langevin": lambda: choice_table((
        ("DAMC's settings, Langevin prior, 1770 iterations", "damc_anomaly_protocol_langevin",
         None),
        ("DAMC, 1120 iterations", "damc_anomaly_protocol", 1))),
    "damc-retrain": lambda: variant_table("damc_anomaly_retrain", (4, 5, 7, 9)),
    "damc-variants-joint": lambda: source_table(DAMC_ROWS, "joint"),
    "damc-variants-tilt": lambda: source_table(DAMC_ROWS, "tilt"),
    "damc-fd": fd_table,
    "ed-lebm-fd": ed_lebm_table,
    "ed-lebm-loglik": ed_lebm_loglik_table,
    "speed": speed_table,
    "loglik-other": loglik_other_table,
    "loglik-latent": loglik_table,
    "loglik-betas": gap_sweep_table,
    "jem": jem_table,
}


def render(text: str) -> str:
    """``text`` with every marked block regenerated; an unknown table name is an error."""
    def fill(m: re.Match) -> str:
        name = m["name"]
        if name not in TABLES:
            raise SystemExit(f"unknown table {name!r}; known: {', '.join(TABLES)}")
        return m.group(1) + "\n".join(TABLES[name]()) + "\n" + m.group(4)

    return BLOCK.sub(fill, text)


def stale(paths: tuple[str, ...] = DOCS) -> list[str]:
    """``PATH: table NAME`` for every block whose text differs from what the files give."""
    out = []
    for rel in paths:
        text = (ROOT / rel).read_text()
        for m in BLOCK.finditer(text):
            if render(m.group(0)) != m.group(0):
                out.append(f"{rel}: table {m['name']}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="write nothing; exit 1 if a docs table differs from its files")
    args = ap.parse_args()
    if args.check:
        bad = stale()
        if bad:
            print("stale tables (run python bench/result_tables.py):\n  " + "\n  ".join(bad),
                  file=sys.stderr)
            raise SystemExit(1)
        return
    for rel in DOCS:
        path = ROOT / rel
        text = path.read_text()
        new = render(text)
        if new != text:
            path.write_text(new)
            print(f"rewrote the tables of {rel}")


if __name__ == "__main__":
    main()
