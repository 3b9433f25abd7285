"""The test-set log-likelihood tables of bench/result_tables.py (``loglik-other``,
``loglik-latent``, ``loglik-betas``): the latent models' ``bench/loglik_table.py`` lines
(``bench/results/loglik_latent_mnist``: each run's ``eval.json`` and ``loglik.json``;
``gap_sweep.jsonl``, the sandwich gap at other path lengths) and the other models'
(``bench/results/loglik_other_mnist/*/eval.json``).
"""

from __future__ import annotations

import json
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[1] / "bench" / "results"

LOGLIK_OTHER = (  # bench/results/loglik_other_mnist/<dir>/eval.json, the row's label
    ("dual_mcmc_mnist", "Dual-MCMC generator (`dual_mcmc_mnist`)"),
    ("ebm_mnist", "`ebm_mnist` (data-space EBM)"),
    ("rbm_mnist", "RBM (`rbm_mnist`, 16 hidden; binarized MNIST)"),
)


def num(v: float) -> str:
    """Two decimals with the typographic minus of the pages."""
    return f"{v:.2f}".replace("-", "−")


def loglik_other_table() -> list[str]:
    """The issue-41 rows other than the latent priors: each ``eval.json`` is what
    ``bench/loglik_table.py`` printed (or, for the RBM, ``shortrun eval --metrics loglik``
    wrote, with the CPU and wall seconds of that command in ``timing.json``)."""
    lines = ["| model (training steps) | test images | AIS distributions | log p(x), nats | "
             "bits/dim | sandwich on simulated data [lower, upper] | gap | spread of log Z "
             "over 4 estimates, K / 2K / 4K | CPU s (wall s) |",
             "|---" * 9 + "|"]
    for directory, label in LOGLIK_OTHER:
        path = RESULTS / "loglik_other_mnist" / directory / "eval.json"
        r = json.loads(path.read_text())
        timing = path.with_name("timing.json")  # `eval` writes no times: measured around it
        if timing.exists():
            r.update(json.loads(timing.read_text()))
        name = f"{label}, {r['step']} steps"
        if "loglik_test" in r:  # the RBM: exact log Z, a discrete likelihood
            lines.append(f"| {name} | all 10,000 | exact log Z | "
                         f"{num(r['loglik_test'])} (exact) | – | – | – | – | "
                         f"{r['cpu_s']:.1f} ({r['wall_s']:.0f}) |")
            continue
        k = int(r["loglik_betas"]) // 4 if "loglik_log_z_betas" + str(
            int(r["loglik_betas"])) in r else int(r["loglik_betas"])
        if "bdmc_gap" in r:
            sandwich = (f"[{num(r['bdmc_lower'])}, {num(r['bdmc_upper'])}], "
                        f"S = {int(r['bdmc_n'])}")
            gap, spread = f"{r['bdmc_gap']:.1f}", "–"
        else:
            sandwich, gap = "none (no exact model samples)", "–"
            spread = " / ".join(f"{r[f'loglik_log_z_sd_betas{m * k}']:.2f}" for m in (1, 2, 4))
        lines.append(f"| {name} | first {int(r['loglik_n'])} | {int(r['loglik_betas'])} | "
                     f"{num(r['loglik'])} ± {r['loglik_se']:.2f} | {r['loglik_bpd']:.3f} | "
                     f"{sandwich} | {gap} | {spread} | {r['cpu_s']:.1f} ({r['wall_s']:.0f}) |")
    return lines


LOGLIK_DIR = "loglik_latent_mnist"
LOGLIK_ROWS = (  # label, run folder under bench/results/loglik_latent_mnist
    ("`lebm_mnist`, EBM prior", "lebm_ebm_1000"),
    ("`lebm_mnist`, Gaussian prior", "lebm_gauss_1000"),
    ("`damc_mnist_short`", "damc_short_783"),
)


def signed(value: float, digits: int) -> str:
    return f"{value:.{digits}f}".replace("-", "−")


def loglik_table() -> list[str]:
    """The latent models' test-set ``log p(x)`` (forward AIS, a stochastic lower bound) with
    its Monte-Carlo error, bits/dim, ``log Z_α``, the BDMC sandwich on simulated data, the CPU
    time of the estimate, and the run's FD and test MSE: one row per kept run."""
    lines = ["| model, seed 1 | iterations | FD | test MSE | log p(x), nats | bits/dim | "
             "log Z_α | sandwich on simulated data [lower, upper] | gap | CPU s (wall s) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for label, folder in LOGLIK_ROWS:
        base = RESULTS / LOGLIK_DIR / folder
        ev = json.loads((base / "eval.json").read_text())
        ll = json.loads((base / "loglik.json").read_text())
        log_z = (f"{signed(ll['loglik_log_z_prior'], 2)} ± {ll['loglik_log_z_prior_se']:.2f}"
                 if ll["loglik_log_z_prior_se"] > 0 else "0 (exact)")
        fd = f"{ev['fd']:.2f}" if "fd" in ev else "not measured"
        lines.append(
            f"| {label} | {ll['step']} | {fd} | {ev['mse']:.4f} | "
            f"{signed(ll['loglik'], 2)} ± {ll['loglik_se']:.2f} | "
            f"{ll['loglik_bpd']:.4f} ± {ll['loglik_bpd_se']:.4f} | {log_z} | "
            f"[{signed(ll['bdmc_lower'], 2)}, {signed(ll['bdmc_upper'], 2)}], "
            f"S = {ll['bdmc_n']:.0f} | {ll['bdmc_gap']:.2f} | "
            f"{ll['cpu_s']:.0f} ({ll['wall_s']:.0f}) |")
    return lines


def row_steps(rec: dict, n_test: float, n_simulated: float) -> float:
    """Posterior-energy evaluations (rows × distributions, pilots included) of an estimate
    on ``n_test`` test and ``n_simulated`` simulated points (the sandwich runs twice)."""
    return ((n_test + 2 * n_simulated) * rec["loglik_chains"]
            * (rec["loglik_betas"] + rec["loglik_pilot_betas"]))


def gap_sweep_table() -> list[str]:
    """The sandwich gap at each number of runs × distributions tried (``gap_sweep.jsonl`` and
    the main rows), and the CPU minutes a 1,000-image ``eval --metrics loglik`` with 100
    simulated points would take at that setting: the main row's CPU seconds per
    posterior-energy evaluation times the evaluations of that setting (a projection)."""
    main = {folder: json.loads((RESULTS / LOGLIK_DIR / folder / "loglik.json").read_text())
            for _, folder in LOGLIK_ROWS}
    recs = [json.loads(line) for line in
            (RESULTS / LOGLIK_DIR / "gap_sweep.jsonl").read_text().splitlines() if line]
    recs += list(main.values())
    label = {folder: lab for lab, folder in LOGLIK_ROWS}
    order = {folder: i for i, (_, folder) in enumerate(LOGLIK_ROWS)}
    recs.sort(key=lambda r: (order[Path(r["run"]).name], r["loglik_chains"] * r["loglik_betas"],
                             r["loglik_chains"]))
    lines = ["| model | runs × distributions | gap, nats [lower, upper] | simulated S | "
             "projected CPU min, 1,000 test + 100 simulated |", "|---|---|---|---|---|"]
    for r in recs:
        m = main[Path(r["run"]).name]
        per_step = m["cpu_s"] / row_steps(m, m["loglik_n"], m["bdmc_n"])
        projected = per_step * row_steps(r, 1000, 100) / 60
        lines.append(f"| {label[Path(r['run']).name]} | {r['loglik_chains']:.0f} × "
                     f"{r['loglik_betas']:.0f} | {r['bdmc_gap']:.1f} "
                     f"[{signed(r['bdmc_lower'], 1)}, {signed(r['bdmc_upper'], 1)}] | "
                     f"{r['bdmc_n']:.0f} | {projected:.1f} |")
    return lines
