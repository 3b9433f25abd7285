"""Mutation check: every listed single-line mutant of the source must make its tests fail.

    python tests/mutants/run.py              # all mutants in tests/mutants/mutants.py, 2 jobs
    python tests/mutants/run.py --only ebm_pos_neg_swap --jobs 1
    python tests/mutants/run.py --list
    python tests/mutants/run.py --record bench/results/mutants.log   # what `make mutants` does

Each job owns a temporary copy of ``src/``, ``tests/``, ``bench/`` and ``pyproject.toml`` (so
a mutant may target a bench script, e.g. the anomaly protocol's). A mutant replaces
one exact snippet (it must occur exactly once in its file; otherwise the mutant is an ERROR,
never counted as killed) in that copy, runs
``python -m pytest -x -q -p no:cacheprovider <tests>`` with the copy's ``src`` first on
PYTHONPATH, and restores the file. pytest's exit status 1 (a test failed) is KILLED, 0 is
SURVIVED, anything else (collection error, no tests, timeout) is an ERROR. A baseline job runs
every listed test unmutated first and must pass, so a failing test cannot pass for a kill.
Bytecode is never written, so a restored file can never be shadowed by a stale ``.pyc``.
Exit status 0 only when the baseline passes and every mutant is killed. The last line printed
is a one-line record (killed / total, wall time, jobs, CPU model, commit, date); ``--record
PATH`` also appends it to PATH. Standard library only.
"""

from __future__ import annotations

import argparse
import datetime
import os
import queue
import resource
import runpy
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MUTANTS_FILE = Path(__file__).resolve().with_name("mutants.py")
COPIED = ("src", "tests", "bench", "docs", "pyproject.toml")
KILLED, SURVIVED, ERROR = "KILLED", "SURVIVED", "ERROR"


@dataclass(frozen=True)
class Mutant:
    """One single-line change: ``original`` (exact, unique in ``file``) → ``replacement``."""

    id: str
    file: str
    original: str
    replacement: str
    tests: tuple[str, ...]
    why: str


@dataclass
class Outcome:
    mutant_id: str
    status: str
    detail: str
    seconds: float


def load_mutants(path: Path = MUTANTS_FILE) -> list[Mutant]:
    """The ``MUTANTS`` list of dicts in ``path`` as :class:`Mutant` objects; ids are unique."""
    raw = runpy.run_path(str(path))["MUTANTS"]
    mutants = [Mutant(**{**m, "tests": tuple(m["tests"])}) for m in raw]
    seen: set[str] = set()
    for m in mutants:
        if m.id in seen:
            raise ValueError(f"{path}: mutant id {m.id!r} is listed twice")
        if not m.tests:
            raise ValueError(f"{path}: mutant {m.id!r} lists no tests")
        seen.add(m.id)
    return mutants


def copy_tree(root: Path, dest: Path) -> Path:
    """``src/``, ``tests/``, ``bench/``, ``docs/`` (the result-table tests read its pages) and
    ``pyproject.toml`` of ``root`` into ``dest`` (no caches)."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
    for name in COPIED:
        source = root / name
        if source.is_dir():
            shutil.copytree(source, dest / name, ignore=ignore)
        elif source.is_file():
            shutil.copy2(source, dest / name)
    return dest


def snippet_problem(text: str, mutant: Mutant) -> str | None:
    """Why ``mutant`` cannot be applied to ``text`` (None when its snippet occurs once)."""
    count = text.count(mutant.original)
    if count == 0:
        return f"snippet not found in {mutant.file}: {mutant.original!r}"
    if count > 1:
        return f"snippet occurs {count} times in {mutant.file} (must be unique): " \
               f"{mutant.original!r}"
    if mutant.original == mutant.replacement:
        return "replacement equals the original"
    return None


def environment(workdir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(workdir / "src"), *filter(None, [env.get("PYTHONPATH")])])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def check_import_path(workdir: Path, package: str = "shortrun") -> None:
    """The copy, not an installed or editable package, must be what the tests import."""
    out = subprocess.run([sys.executable, "-c", f"import {package}; print({package}.__file__)"],
                         cwd=workdir, env=environment(workdir), capture_output=True, text=True)
    where = Path(out.stdout.strip() or "?").resolve()
    if out.returncode != 0 or workdir.resolve() not in where.parents:
        raise RuntimeError(f"the copy at {workdir} is not the imported {package} "
                           f"(got {where}; {out.stderr.strip()[-300:]})")


def run_pytest(workdir: Path, tests: tuple[str, ...], timeout: float) -> tuple[int, str]:
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests]
    try:
        out = subprocess.run(cmd, cwd=workdir, env=environment(workdir), capture_output=True,
                             text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return -1, f"timed out after {timeout:.0f} s"
    lines = [ln for ln in (out.stdout + out.stderr).splitlines() if ln.strip()]
    return out.returncode, lines[-1] if lines else ""


def run_mutant(workdir: Path, mutant: Mutant, timeout: float = 600.0) -> Outcome:
    """Apply ``mutant`` in ``workdir``, run its tests, restore the file (always)."""
    start = time.perf_counter()
    target = workdir / mutant.file
    if not target.is_file():
        return Outcome(mutant.id, ERROR, f"file not found: {mutant.file}", 0.0)
    original_text = target.read_text()
    problem = snippet_problem(original_text, mutant)
    if problem is not None:
        return Outcome(mutant.id, ERROR, problem, 0.0)
    target.write_text(original_text.replace(mutant.original, mutant.replacement, 1))
    try:
        rc, last = run_pytest(workdir, mutant.tests, timeout)
    finally:
        target.write_text(original_text)
    seconds = time.perf_counter() - start
    if rc == 1:
        return Outcome(mutant.id, KILLED, last, seconds)
    if rc == 0:
        return Outcome(mutant.id, SURVIVED, last, seconds)
    return Outcome(mutant.id, ERROR, f"pytest exit {rc}: {last}", seconds)


def run_baseline(workdir: Path, mutants: list[Mutant], timeout: float) -> Outcome:
    """Every listed test, unmutated, must pass."""
    start = time.perf_counter()
    tests = tuple(dict.fromkeys(t for m in mutants for t in m.tests))
    rc, last = run_pytest(workdir, tests, timeout)
    status = "PASSED" if rc == 0 else ERROR
    return Outcome("(baseline)", status, last, time.perf_counter() - start)


def run_all(mutants: list[Mutant], jobs: int = 2, timeout: float = 600.0,
            baseline: bool = True, root: Path = ROOT) -> list[Outcome]:
    """Baseline first in the queue, then the mutants, over ``jobs`` private copies."""
    with tempfile.TemporaryDirectory(prefix="shortrun-mutants-") as tmp:
        free: queue.Queue[Path] = queue.Queue()
        for i in range(jobs):
            workdir = copy_tree(root, Path(tmp) / f"job{i}")
            check_import_path(workdir)
            free.put(workdir)

        def task(work):
            workdir = free.get()
            try:
                outcome = work(workdir)
            finally:
                free.put(workdir)
            print(f"{outcome.status:9s} {outcome.mutant_id:32s} {outcome.seconds:6.1f} s  "
                  f"{outcome.detail}", flush=True)
            return outcome

        works = [lambda w: run_baseline(w, mutants, timeout)] if baseline else []
        works += [lambda w, m=m: run_mutant(w, m, timeout) for m in mutants]
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            return list(pool.map(task, works))


def cpu_description(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """``<model name> (cpu family F model M, <vector tier>, N CPUs)`` from /proc/cpuinfo, else
    the platform's."""
    import platform

    try:
        fields: dict[str, str] = {}
        count = 0
        for line in cpuinfo.read_text().splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            count += key == "processor"
            fields.setdefault(key, value.strip())
        name = fields.get("model name") or platform.processor() or platform.machine()
        flags = set(fields.get("flags", "").split())
        tier = "avx512" if "avx512f" in flags else "avx2" if "avx2" in flags else "no avx2"
        return f"{name} (cpu family {fields.get('cpu family', '?')} model " \
               f"{fields.get('model', '?')}, {tier}, {count} CPUs)"
    except OSError:
        return platform.processor() or platform.machine() or "unknown CPU"


def commit_of(root: Path = ROOT) -> str:
    """The source's git commit, ``+dirty`` when it has uncommitted changes; ``?`` outside git."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root,
                              capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "src", "tests", "bench"],
                               cwd=root, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return "?"
    if head.returncode != 0:
        return "?"
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def children_cpu_seconds() -> float:
    """User + system CPU seconds of the finished child processes (the pytest runs)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def summary_line(outcomes: list[Outcome], n_listed: int, n_all: int, seconds: float,
                 jobs: int, cpu_seconds: float | None = None) -> str:
    """The one-line record of a run: killed / total, wall time (and the pytest runs' CPU
    time, which a loaded machine does not inflate as it does the wall time), jobs, CPU,
    commit, date."""
    mutants = [o for o in outcomes if o.mutant_id != "(baseline)"]
    killed = sum(o.status == KILLED for o in mutants)
    baseline = next((o.status for o in outcomes if o.mutant_id == "(baseline)"), "skipped")
    which = "all" if n_listed == n_all else f"subset of {n_all}"
    today = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    cpu = "" if cpu_seconds is None else f", {cpu_seconds:.0f} s CPU"
    return (f"mutants: {killed}/{n_listed} killed ({which}); baseline {baseline.lower()}; "
            f"{seconds:.0f} s wall{cpu} on {jobs} job{'s' * (jobs > 1)}; {cpu_description()}; "
            f"commit {commit_of()}; {today}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", metavar="ID", help="run these mutant ids only")
    parser.add_argument("--jobs", type=int, default=2, help="parallel copies (default 2)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per pytest run")
    parser.add_argument("--no-baseline", action="store_true", help="skip the unmutated run")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--record", metavar="PATH",
                        help="append the one-line summary (killed/total, wall, CPU) to PATH")
    args = parser.parse_args(argv)
    mutants = load_mutants()
    n_all = len(mutants)
    if args.only:
        unknown = sorted(set(args.only) - {m.id for m in mutants})
        if unknown:
            parser.error(f"unknown mutant id(s): {', '.join(unknown)}")
        mutants = [m for m in mutants if m.id in args.only]
    if args.list:
        for m in mutants:
            print(f"{m.id:32s} {m.file}: {m.why}")
        return 0
    start, cpu_start = time.perf_counter(), children_cpu_seconds()
    try:
        outcomes = run_all(mutants, max(1, args.jobs), args.timeout, not args.no_baseline)
    except RuntimeError as err:
        print(f"mutants: {err}", file=sys.stderr)
        return 2
    counts = {s: sum(o.status == s for o in outcomes if o.mutant_id != "(baseline)")
              for s in (KILLED, SURVIVED, ERROR)}
    bad = [o for o in outcomes if o.status not in (KILLED, "PASSED")]
    seconds = time.perf_counter() - start
    print(f"\n{len(mutants)} mutants: {counts[KILLED]} killed, {counts[SURVIVED]} survived, "
          f"{counts[ERROR]} errors; {seconds:.0f} s wall")
    for o in bad:
        print(f"  {o.status}: {o.mutant_id}: {o.detail}")
    line = summary_line(outcomes, len(mutants), n_all, seconds, max(1, args.jobs),
                        children_cpu_seconds() - cpu_start)
    print(line)
    if args.record:
        path = Path(args.record)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as f:
            f.write(line + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
