"""What a user of the package looks for: one version, a declared dependency for every import,
extras for the optional paths, py.typed, a LICENSE matching pyproject, a CHANGELOG."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path
from typing import Any

import pytest

import shortrun
from shortrun.extras import EXTRAS

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "shortrun"
# import name -> distribution name, where they differ
DISTRIBUTIONS = {"sklearn": "scikit-learn", "PIL": "Pillow", "yaml": "PyYAML"}


def pyproject() -> dict[str, Any]:
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower() for r in requirements}


def third_party_imports() -> set[str]:
    """Top-level modules imported anywhere in src/shortrun (function-local imports too)."""
    found = set()
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module.split(".")[0])
    return {m for m in found if m not in sys.stdlib_module_names and m != "shortrun"}


def test_every_imported_package_is_declared():
    project = pyproject()["project"]
    declared = _names(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        declared |= _names(extra)
    missing = {m for m in third_party_imports()
               if DISTRIBUTIONS.get(m, m).lower() not in declared}
    assert not missing, f"imported but not declared in pyproject.toml: {sorted(missing)}"
    assert "threadpoolctl" in _names(project["dependencies"])


def test_optional_packages_are_extras_and_dev_pulls_them_all():
    project = pyproject()["project"]
    core = _names(project["dependencies"])
    extras = project["optional-dependencies"]
    for module, (_, extra) in EXTRAS.items():
        assert module not in core, f"{module} is optional: it belongs in the {extra} extra"
        assert module in _names(extras[extra])
        assert extra in extras["all"][0]
    assert "shortrun[all]" in extras["dev"]  # `make setup` installs .[dev]: no test skips


def test_one_version():
    project = pyproject()
    assert "version" in project["project"]["dynamic"]
    attr = project["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    assert attr == "shortrun.version.__version__"
    from shortrun.version import __version__

    assert shortrun.__version__ == __version__
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__)


def test_py_typed_is_shipped():
    assert (SRC / "py.typed").is_file()
    assert "py.typed" in pyproject()["tool"]["setuptools"]["package-data"]["shortrun"]


def test_license_matches_pyproject():
    assert pyproject()["project"]["license"] == {"text": "MIT"}
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License")
    assert "Permission is hereby granted, free of charge" in text


def test_changelog_has_unreleased_and_this_version():
    text = (ROOT / "CHANGELOG.md").read_text()
    assert "## [Unreleased]" in text
    assert f"## [{shortrun.__version__}]" in text
