"""``bench/gallery.py`` end to end at tiny sizes: it trains every run it needs (2 steps each),
draws every picture of the gallery, and on a second call reuses the finished runs."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # eight 2-step trainings and every picture: ~1-2 CPU min

ROOT = Path(__file__).resolve().parents[1]
PICTURES = [f"lebm_{d}_{kind}.png" for d in ("mnist", "fashion")
            for kind in ("prior", "recon", "long_chain", "interpolation")] + [
    "dual_mcmc_fashion_revision.png", "dual_mcmc_fashion_recon.png", "lebm_mnist_anomaly.png"]


def gallery(*args: str, data_dir: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "SHORTRUN_DATA": str(data_dir), "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, str(ROOT / "bench" / "gallery.py"), *args], env=env,
                          capture_output=True, text=True, check=False)


def test_gallery_writes_every_picture_and_reuses_finished_runs(tmp_path, data_dir):
    from PIL import Image

    runs, out = tmp_path / "runs", tmp_path / "img"
    done = gallery("--runs", str(runs), "--out", str(out), "--tiny", "--set", "train.steps=2",
                   data_dir=data_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    for name in PICTURES:
        with Image.open(out / name) as img:
            assert img.width > 100 and img.height > 50, name
    table = (out / "lebm_ptb_small_samples.md").read_text()
    assert table.startswith("| # | EBM prior (2 steps) | Gaussian prior (2 steps) |")
    assert len(table.strip().splitlines()) == 2 + 3  # header, rule, three sentences
    record = json.loads((out / "gallery_numbers.json").read_text())
    assert set(record["numbers"]) == {"mnist", "fashion", "dual", "anomaly", "text"}
    assert set(record["numbers"]["anomaly"]) >= {"joint", "tilt", "prevalence"}
    assert record["runs"]["lebm_fashion"]["data"] == "fashion"
    assert record["runs"]["lebm_mnist_gaussian"]["prior"] == "gaussian"

    again = gallery("--runs", str(runs), "--out", str(out), "--tiny", "--only", "dual",
                    data_dir=data_dir)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"reuse {runs / 'dual_mcmc_fashion'} (step 2)" in again.stdout
    assert "train " not in again.stdout


def test_gallery_names_an_unknown_section(tmp_path, data_dir):
    done = gallery("--runs", str(tmp_path), "--only", "lebm", data_dir=data_dir)
    assert done.returncode == 1
    assert "unknown section 'lebm'; choose from mnist, fashion, dual, anomaly, text" in done.stderr
