"""`shortrun report`: a real (tiny) run → an HTML page whose every image exists and opens."""

from __future__ import annotations

import json
from html.parser import HTMLParser

import numpy as np
import pytest
from PIL import Image

from shortrun.cli import main

TINY_DEMO = ["train.steps=50", "train.batch_size=64", "train.log_every=10",
             "train.sample_every=25", "train.ckpt_every=50", "train.progress=false",
             "model.hidden=16", "model.langevin_steps=5", "model.buffer_size=256",
             "sample.n=200", "sample.steps=10"]


class _Images(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.srcs: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.srcs.append(dict(attrs)["src"])

    def handle_data(self, data):
        self.text.append(data)


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("report") / "demo"
    args = ["train", "ebm_8gaussians", "--out", str(run)]
    for o in TINY_DEMO:
        args += ["--set", o]
    assert main(args) == 0
    return run


def _parse(path):
    parser = _Images()
    parser.feed(path.read_text())
    return parser


def test_report_images_exist_and_open(demo_run, capsys):
    assert main(["eval", str(demo_run)]) == 0
    rng = np.random.default_rng(0)
    labels = (np.arange(200) < 40).astype(int)
    np.savez(demo_run / "eval_scores.npz", scores=labels + rng.standard_normal(200),
             labels=labels)
    assert main(["report", str(demo_run)]) == 0
    page = demo_run / "report" / "index.html"
    assert f"wrote {page}" in capsys.readouterr().out
    parsed = _parse(page)
    # loss, energies, other metrics, PR curve, and the grids at steps 25 and 50
    assert {"curve_loss.png", "curve_energies.png", "curve_other.png", "pr_curve.png",
            "samples_step_0000025.png", "samples_step_0000050.png"} <= set(parsed.srcs)
    for src in parsed.srcs:
        assert "/" not in src, "images are referenced beside the page"
        with Image.open(page.parent / src) as img:
            assert img.format == "PNG" and img.width > 50
    text = " ".join(parsed.text)
    for key in json.loads((demo_run / "eval.json").read_text()):
        assert key in text, f"eval key {key} missing from the table"
    assert "Anomaly detection" in text and "higher score is more anomalous" in text


def test_report_without_eval_says_what_to_run(demo_run, tmp_path):
    out = tmp_path / "elsewhere"
    (demo_run / "eval.json").unlink(missing_ok=True)
    (demo_run / "eval_scores.npz").unlink(missing_ok=True)
    assert main(["report", str(demo_run), "--out", str(out)]) == 0
    parsed = _parse(out / "index.html")
    assert "pr_curve.png" not in parsed.srcs
    assert "shortrun eval" in " ".join(parsed.text)
    assert all((out / s).is_file() for s in parsed.srcs)


def test_report_of_a_non_run_is_one_line_error(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "is not a run directory (no config.yaml)" in err and err.count("\n") == 1


def test_long_runs_show_evenly_spaced_grids_with_the_last():
    from pathlib import Path

    from shortrun.report import MAX_GRIDS, _pick_grids

    paths = [Path(f"step_{i:07d}.png") for i in range(1, 101)]
    picked = _pick_grids(paths)
    assert len(picked) == MAX_GRIDS and picked[0] == paths[0] and picked[-1] == paths[-1]
    assert _pick_grids(paths[:3]) == paths[:3]


def test_names_from_the_run_are_escaped(tmp_path):
    """A recipe, description or metric name holding markup shows as text, never runs."""
    from shortrun.report import write_report

    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("recipe: <script>alert('recipe')</script>\n"
                                     "description: a & b <b>bold</b>\n")
    (run / "eval.json").write_text(json.dumps({"<script>alert(1)</script>": 0.5,
                                               "fd": "<img src=x onerror=alert(2)>"}))
    (run / "metrics.jsonl").write_text(json.dumps({"step": 1, "<script>m</script>": 1.0}) + "\n"
                                       + json.dumps({"step": 2, "<script>m</script>": 2.0})
                                       + "\n")
    page = write_report(run).read_text()
    assert "<script" not in page and "<img src=x" not in page and "<b>bold" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;script&gt;alert(&#x27;recipe&#x27;)&lt;/script&gt;" in page
    assert "a &amp; b &lt;b&gt;bold&lt;/b&gt;" in page
    assert "&lt;img src=x onerror=alert(2)&gt;" in page
    parsed = _parse(run / "report" / "index.html")
    assert "<script>alert(1)</script>" in " ".join(parsed.text)  # shown as text
