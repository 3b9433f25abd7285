"""`shortrun report` draws the reliability diagram of a run whose eval.json has one (JEM's
``ece`` metric)."""

from __future__ import annotations

import json

import pytest
from PIL import Image

from shortrun.report import write_report

pytest.importorskip("matplotlib")


def test_report_draws_the_reliability_diagram(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("recipe: jem_mnist\ndescription: d\n")
    table = {"confidence": [0.0, 0.55, 0.9], "accuracy": [0.0, 0.5, 0.95], "count": [0, 4, 6]}
    (run / "eval.json").write_text(json.dumps({"ece": 0.05, "reliability": table}))
    page = write_report(run).read_text()
    assert 'src="reliability.png"' in page and "reliability diagram" in page
    with Image.open(run / "report" / "reliability.png") as img:
        assert img.size[0] > 100


def test_no_diagram_without_a_reliability_table(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("recipe: x\n")
    (run / "eval.json").write_text(json.dumps({"accuracy": 0.9}))
    assert "reliability.png" not in write_report(run).read_text()
