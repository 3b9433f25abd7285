"""torchrun with the gloo backend on CPU, shared by the data-parallel tests.

- :func:`torchrun`: one ``shortrun train RECIPE --set ...`` under ``torchrun --standalone``.
- :func:`torchrun_many`: several ``shortrun train`` commands in ONE torchrun launch: this file,
  run as the script, calls ``shortrun.cli.main`` for each in turn (the CLI's own code path, in
  one process group for the launch). Each launch spends seconds importing torch
  in every process, so one launch for all the model types keeps the test file short.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import traceback
from pathlib import Path

import pytest

TORCHRUN = Path(sys.executable).with_name("torchrun")


def train_argv(run_dir: Path, recipe: str, sets: list[str]) -> list[str]:
    args = ["train", recipe, "--out", str(run_dir)]
    for s in ["train.progress=false", *sets]:
        args += ["--set", s]
    return args


def _launch(target: list[str], nproc: int, timeout: float) -> subprocess.CompletedProcess:
    if not TORCHRUN.exists():
        pytest.skip("torchrun is not installed beside this Python")
    args = [str(TORCHRUN), "--standalone", f"--nproc_per_node={nproc}", *target]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    # Own process group, so that a launch that times out takes its worker ranks with it
    # instead of leaving them waiting in a collective.
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"torchrun did not finish in {timeout} s:\n{err[-3000:]}")
    return subprocess.CompletedProcess(args, proc.returncode, out, err)


def torchrun(run_dir, recipe, sets, nproc=2, timeout=120):
    proc = _launch(["-m", "shortrun", *train_argv(Path(run_dir), recipe, sets)], nproc, timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def torchrun_many(spec_dir: Path, runs: dict[str, list[str]], nproc=2, timeout=300
                  ) -> tuple[dict[str, str | None], str]:
    """Run ``{name: shortrun argv}`` in one launch; ``({name: None or the error}, stderr)``."""
    spec_dir.mkdir(parents=True, exist_ok=True)
    spec = spec_dir / "runs.json"
    spec.write_text(json.dumps(runs))
    proc = _launch([__file__, str(spec)], nproc, timeout)
    results: dict[str, str | None] = {}
    for rank in range(nproc):
        out = spec_dir / f"results.rank{rank}.json"
        got = json.loads(out.read_text()) if out.is_file() else {}
        for name in runs:
            if name not in got:
                got[name] = f"no result (torchrun exit code {proc.returncode})"
            if got[name] is not None and results.get(name) is None:
                results[name] = f"rank {rank}: {got[name]}"
            results.setdefault(name, None)
    return results, proc.stderr


def _main(spec_path: str) -> int:
    from shortrun.cli import main
    from shortrun.train import distributed

    runs = json.loads(Path(spec_path).read_text())
    rank = int(os.environ.get("RANK", "0"))
    # One process group for the whole launch: the first Trainer joins it and the later ones
    # find it initialised. Re-creating the default group on the same torchrun store after
    # destroy_process_group can hang in the first collective (stale rendezvous keys), so the
    # CLI's per-command teardown waits until every command has run.
    shutdown, distributed.shutdown = distributed.shutdown, lambda info: None
    results: dict[str, str | None] = {}
    for name, argv in runs.items():
        print(f"==== {name}: shortrun {' '.join(argv)}", file=sys.stderr, flush=True)
        try:
            rc = main(argv)
            results[name] = None if rc == 0 else f"shortrun exited with code {rc}"
        except Exception:  # noqa: BLE001 - reported per run, the next run still goes
            results[name] = traceback.format_exc()[-3000:]
    Path(spec_path).with_name(f"results.rank{rank}.json").write_text(json.dumps(results))
    shutdown(distributed.DistInfo(rank=rank, world=int(os.environ.get("WORLD_SIZE", "1"))))
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1]))
