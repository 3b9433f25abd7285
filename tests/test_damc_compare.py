"""``bench/damc_compare.py`` end to end at tiny sizes: both recipes trained for the budget's
iterations, evaluated, the mean ± std table printed, the pictures drawn, and a rerun reusing
the finished runs (a rerun calibrates again, so its step counts may differ)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # two 1-step trainings, their evaluation and the pictures

ROOT = Path(__file__).resolve().parents[1]


def compare(*args: str, data_dir: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "SHORTRUN_DATA": str(data_dir), "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, str(ROOT / "bench" / "damc_compare.py"), *args],
                          env=env, capture_output=True, text=True, check=False)


def test_compare_trains_evaluates_draws_and_reuses(tmp_path, data_dir):
    from PIL import Image

    runs, img = tmp_path / "runs", tmp_path / "img"
    args = ["--seeds", "1", "--budget-s", "0.001", "--calibrate", "1", "--metrics", "mse",
            "--set", "data.n_train=300", "--set", "eval.n_samples=16",
            "--set", "model.eval_post_steps=1", "--out", str(runs)]
    done = compare(*args, "--pictures", str(img), "--picture-mse-images", "16",
                   data_dir=data_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "steps in the budget: {'langevin': 1, 'damc': 1}" in done.stdout
    assert sorted(p.name for p in runs.iterdir()) == ["s1_damc_1", "s1_langevin_1"]
    assert "| mean ± std |" in done.stdout
    for name in ("damc_prior_samples.png", "damc_reconstructions.png"):
        with Image.open(img / name) as picture:
            assert picture.width > 300 and picture.height > 100, name

    again = compare(*args, data_dir=data_dir)
    assert again.returncode == 0, again.stdout + again.stderr
    assert sorted(p.name for p in runs.iterdir()) == ["s1_damc_1", "s1_langevin_1"]


def test_equal_iterations_one_side(tmp_path, data_dir):
    """``--steps`` trains exactly that many iterations without timing anything, and
    ``--recipes langevin`` leaves DAMC alone; a finished run of another length is not
    reused, and an unknown side is refused by name."""
    runs = tmp_path / "runs"
    (runs / "s1_langevin_1").mkdir(parents=True)
    (runs / "s1_langevin_1" / "eval.json").write_text('{"mse": 1.0}')
    args = ["--seeds", "1", "--steps", "2", "--recipes", "langevin", "--metrics", "mse",
            "--set", "data.n_train=300", "--set", "eval.n_samples=16",
            "--set", "model.eval_post_steps=1", "--out", str(runs)]
    done = compare(*args, data_dir=data_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "s/iteration" not in done.stdout and "2 iterations per run" in done.stdout
    assert "| seed | mse 2020 prior |" in done.stdout
    assert sorted(p.name for p in runs.iterdir()) == ["s1_langevin_1", "s1_langevin_2"]
    from shortrun.train.checkpoint import load_checkpoint
    assert int(load_checkpoint(runs / "s1_langevin_2" / "checkpoints" / "last.pt")["step"]) == 2

    bad = compare("--recipes", "langevin,mala", "--out", str(runs), data_dir=data_dir)
    assert bad.returncode == 2 and "unknown ['mala']" in bad.stderr


def test_calibrate_only_anomaly_pair(tmp_path, data_dir):
    """``--calibrate-only --task anomaly`` times the two anomaly recipes, prints how many DAMC
    iterations take as long as ``--steps`` of the 2020 prior's, and trains nothing; the
    anomaly pair without ``--calibrate-only`` is refused with the script that trains it."""
    runs = tmp_path / "runs"
    args = ["--task", "anomaly", "--calibrate", "1", "--set", "data.n_train=300",
            "--out", str(runs)]
    done = compare(*args, "--calibrate-only", "--steps", "3000", data_dir=data_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "lebm_mnist_anomaly" in done.stdout and "damc_mnist_anomaly" in done.stdout
    assert "3000 iterations of lebm_mnist_anomaly take as long as" in done.stdout
    assert not runs.exists()

    refused = compare(*args, data_dir=data_dir)
    assert refused.returncode == 2 and "lebm_anomaly_protocol.py" in refused.stderr


def test_damc_set_changes_the_damc_side_only(tmp_path, data_dir):
    """``--damc-set`` reaches the DAMC run's recorded config and not the 2020 prior's, so a
    cheaper DAMC (shorter chains from the amortizer) is compared against the recipe as
    shipped."""
    import yaml

    runs = tmp_path / "runs"
    done = compare("--seeds", "1", "--steps", "1", "--metrics", "mse",
                   "--set", "data.n_train=300", "--set", "eval.n_samples=16",
                   "--set", "model.eval_post_steps=1", "--damc-set", "model.post_steps=3",
                   "--damc-set", "model.damc_noise_chains=false", "--out", str(runs),
                   data_dir=data_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    model = {side: yaml.safe_load((runs / f"s1_{side}_1" / "config.yaml").read_text())["model"]
             for side in ("langevin", "damc")}
    assert model["damc"]["post_steps"] == 3 and model["damc"]["damc_noise_chains"] is False
    assert model["langevin"]["post_steps"] == 20
