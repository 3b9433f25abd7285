"""The Markdown report of bench/route_gains.py: the machine, each part's date, commit, command
and load, one table per workload, and each family's best gain per thread count."""

from __future__ import annotations

import statistics

# "rbm": the products family, removed in issue 42 (its records still render)
FAMILY_ORDER = ("rbm", "rbm_step", "mlp", "conv", "deconv")


def _med(values: list[float]) -> float:
    return statistics.median(values)


def _time(values: list[float]) -> str:
    scale, unit = (1e3, "ms") if _med(values) >= 1e-3 else (1e6, "µs")
    if _med(values) >= 1.0:
        scale, unit = 1.0, "s"
    return (f"{_med(values) * scale:.3g} {unit} [{min(values) * scale:.3g}–"
            f"{max(values) * scale:.3g}]")


def gain_text(gains: list[float]) -> str:
    """``1.23× [1.10–1.31]``: the median gain over the rounds and its range."""
    if not gains:
        return "–"
    return f"{_med(gains):.2f}× [{min(gains):.2f}–{max(gains):.2f}]"


def one_thread(label: str) -> bool:
    """Whether a candidate runs its routed work on one thread (``torch@1``, ``numpy@1``):
    at more threads that is a thread-count choice, not a kernel at the same threads."""
    return label.endswith("@1")


def best_gains(data: dict, dropped: bool = False
               ) -> dict[tuple[str, int], tuple[float, list[float], str]]:
    """(family, threads) -> (median gain, the gains, "workload: candidate") of the family's
    best candidate over all workloads: among the candidates at the run's thread count, or
    (``dropped``) among those that drop to one thread."""
    best: dict[tuple[str, int], tuple[float, list[float], str]] = {}
    for part in data["parts"].values():
        for w in part["workloads"]:
            for c in w["cands"]:
                if not c["family"] or not c["gains"] or one_thread(c["label"]) != dropped:
                    continue
                key = (c["family"], w["threads"])
                g = _med(c["gains"])
                if key not in best or g > best[key][0]:
                    best[key] = (g, c["gains"], f"{w['name']}: {c['label']}")
    return best


def lead_split(workload: dict) -> list[str]:
    """For the LEBM iteration: its lead over the official formulation split into the graph
    (plain torch over the official formulation) and the routes (fixed and auto over plain
    torch), each round by round."""
    times = {c["label"]: c["times"] for c in workload["cands"]}
    ref, plain = times.get("official formulation"), times.get("plain torch")
    if not ref or not plain:
        return []

    def over(base: list[float], other: list[float]) -> str:
        return gain_text([b / t for b, t in zip(base, other, strict=True)])

    out = [f"The lead split, round by round: the graph (plain torch over the official "
           f"formulation) {over(ref, plain)}"]
    out += [f"; the routes, {name} over plain torch {over(plain, times[name])}"
            for name in ("fixed", "auto") if name in times]
    return ["", "".join(out) + "."]


def render(data: dict) -> str:
    lines = ["# Route gains per family (bench/route_gains.py)", ""]
    lines += [f"- {m}" for m in data["machine"]]
    lines += ["", "Each part ran in one process; the machine was shared with other jobs "
              "(load average below). Times are per call, the median over the rounds "
              "[min–max]; a gain is the baseline's block time / the candidate's in the same "
              "round, median [min–max] over the rounds. \"plain torch\" pins every family to "
              "plain torch; \"fixed\" is `train.routes=fixed`; \"auto\" the routes the engine "
              "chose in this process from an empty route cache.", ""]
    for name, part in data["parts"].items():
        lines += [f"## {name}", "",
                  f"- date: {part['date']}; commit {part['commit']}"
                  + ("; **--quick: toy sizes, the times mean nothing**" if part["quick"] else ""),
                  f"- command: `{part['command']}`",
                  f"- load average (1/5/15 min) at start: {part['load_before']}; at end: "
                  f"{part['load_after']}; wall {part['wall_s']:.0f} s", ""]
        for w in part["workloads"]:
            lines += [f"### {w['name']}, {w['threads']} thread{'s' if w['threads'] > 1 else ''}",
                      "", f"{len(w['cands'][0]['times'])} rounds of {w['calls']} call(s) a "
                      "candidate.", "",
                      "| candidate | family measured | time per call | gain | over |",
                      "|---|---|---|---|---|"]
            for c in w["cands"]:
                lines.append(f"| {c['label']} | {c['family'] or '–'} | {_time(c['times'])} | "
                             f"{gain_text(c['gains'])} | "
                             f"{c['base'] if c['gains'] else '–'} |")
            lines += lead_split(w)
            if w["routes"]:
                lines += ["", "Routes the engine chose here (key: route (µs per candidate in "
                          "its race)):", ""]
                lines += [f"- `{k}`: {v}" for k, v in sorted(w["routes"].items())]
            lines.append("")
    best, dropped = best_gains(data), best_gains(data, dropped=True)
    if best:
        lines += ["## Best gain per family", "",
                  "At the same thread count (a kernel or layout route against plain torch); "
                  "the last columns are the best candidate that drops the family's work to one "
                  "thread (`torch@1`, `onednn@1`, `numpy@1`), a thread-count choice, shown "
                  "apart.", "",
                  "| family | threads | best gain, same threads | where | best gain on one "
                  "thread | where |", "|---|---|---|---|---|---|"]
        for fam in FAMILY_ORDER:
            for (f, n), (_, gains, where) in sorted(best.items()):
                if f == fam:
                    d = dropped.get((f, n))
                    lines.append(f"| {fam} | {n} | {gain_text(gains)} | {where} | "
                                 + (f"{gain_text(d[1])} | {d[2]} |" if d else "– | – |"))
        lines.append("")
    return "\n".join(lines)
