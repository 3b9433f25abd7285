"""``make bench``'s driver (bench/run_all.py) runs end to end at toy sizes, so it cannot rot.

Nothing here asserts a time: only that the results file names the machine and has every row.
Without ``$SHORTRUN_DATA`` the MNIST rows are written as "not run" with the reason, and the
row names are still there.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ROW_PREFIXES = (
    "GEMM peak ",
    "LEBM lebm_svhn iteration",
    "LEBM authors' train_svhn.py",
    "CD-1 epoch MNIST 784x500 batch 100 (shortrun train)",
    "rbm_digits training (shortrun train rbm_digits),",
    "rbm_digits training (shortrun train rbm_digits) with scikit-learn's update",
    "Langevin MLP 2-128-128-1",
    "exact log Z 784x20",
)


@pytest.mark.slow
def test_quick_run_writes_every_row_and_the_machine(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1",
           "XDG_CACHE_HOME": str(tmp_path / "cache")}
    env.pop("SHORTRUN_AUTHORS_LEBM", None)
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "run_all.py"), "--quick",
                           "--out", str(tmp_path / "results")], env=env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    files = list((tmp_path / "results").glob("*-quick.md"))
    assert len(files) == 1, files
    text = files[0].read_text()
    lines = text.splitlines()
    assert any(line.startswith("- CPU: ") and len(line) > len("- CPU: ") for line in lines)
    for key in ("- CPU flags: ", "- torch: ", "- load average", "- wall time of the whole run",
                "- command: "):
        assert any(line.startswith(key) for line in lines), key
    table = [line for line in lines if line.startswith("| ") and not line.startswith("| row")]
    for prefix in ROW_PREFIXES:
        assert any(line.startswith(f"| {prefix}") for line in table), prefix
    assert "SHORTRUN_AUTHORS_LEBM not set" in text


def test_results_file_names_tell_apart_cpus_with_one_model_name(monkeypatch):
    """Two EPYCs with the same name and flags must not overwrite each other's results file."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import speed_common
    finally:
        sys.path.remove(str(ROOT / "bench"))
    from shortrun import hardware

    monkeypatch.setattr(hardware, "cpu_model", lambda: "AMD EPYC")
    monkeypatch.setattr(speed_common, "vector_tier", lambda: "avx512")
    names = set()
    for fm in ((25, 17), (26, 2)):
        monkeypatch.setattr(hardware, "cpu_family_model", lambda fm=fm: fm)
        names.add(speed_common.cpu_slug())
    assert names == {"amd-epyc-avx512-f25m17", "amd-epyc-avx512-f26m2"}
    monkeypatch.setattr(hardware, "cpu_family_model", lambda: None)
    assert speed_common.cpu_slug() == "amd-epyc-avx512"
