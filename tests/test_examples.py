"""Every script in examples/ runs at a small size, and docs/python.md shows each one verbatim."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
SMALL = {"rbm_numpy.py": 20, "ebm_own_energy.py": 5, "lebm_own_generator.py": 5,
         "dual_mcmc_own_networks.py": 3, "load_run.py": 3, "sklearn_digits.py": 1,
         "sklearn_grid_search.py": 1, "log_likelihood.py": 5,
         "jem_own_classifier.py": 5, "chain_free_own_energy.py": 5}


def test_every_example_has_a_small_size():
    assert sorted(p.name for p in EXAMPLES) == sorted(SMALL)


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.name)
def test_example_runs(script, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "MPLBACKEND": "Agg"}
    done = subprocess.run([sys.executable, str(script), "--steps", str(SMALL[script.name])],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.name)
def test_docs_show_the_example_as_it_is(script):
    docs = (ROOT / "docs" / "python.md").read_text()
    assert f"```python\n{script.read_text()}```" in docs, f"docs/python.md: update {script.name}"
