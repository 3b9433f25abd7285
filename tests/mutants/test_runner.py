"""The mutation runner itself, on a toy repository (CI checks it without running every mutant):
a mutant is applied to the copy only and restored, a killed and a surviving mutant are told
apart, a snippet that is missing or not unique is an error, and the mutant list is well formed."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
run = runpy.run_path(str(HERE / "run.py"))
Mutant = run["Mutant"]

TOY_SOURCE = "def add(a, b):\n    return a + b\n\n\ndef twice(a):\n    return a + a\n"
TOY_TEST = "from toy import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    """A repository with ``src/toy`` and one test, copied as the runner copies."""
    root = tmp_path / "repo"
    (root / "src" / "toy").mkdir(parents=True)
    (root / "src" / "toy" / "__init__.py").write_text(TOY_SOURCE)
    (root / "tests").mkdir()
    (root / "tests" / "test_toy.py").write_text(TOY_TEST)
    (root / "src" / "toy" / "__pycache__").mkdir()
    return run["copy_tree"](root, tmp_path / "work")


def toy_mutant(original: str, replacement: str) -> Mutant:
    return Mutant(id="toy", file="src/toy/__init__.py", original=original,
                  replacement=replacement, tests=("tests/test_toy.py",), why="toy")


def run_mutant_globals() -> dict:
    """The namespace ``run_mutant`` looks names up in (run.py loaded by runpy)."""
    return run["run_mutant"].__globals__


def test_copy_skips_caches(toy):
    assert (toy / "src" / "toy" / "__init__.py").is_file()
    assert not (toy / "src" / "toy" / "__pycache__").exists()


def test_a_killed_mutant_is_applied_then_restored(toy, monkeypatch):
    seen = {}
    real = run["run_pytest"]

    def spy(workdir, tests, timeout):
        seen["during"] = (workdir / "src" / "toy" / "__init__.py").read_text()
        return real(workdir, tests, timeout)

    monkeypatch.setitem(run_mutant_globals(), "run_pytest", spy)
    outcome = run["run_mutant"](toy, toy_mutant("return a + b", "return a - b"))
    assert outcome.status == "KILLED", outcome
    assert "return a - b" in seen["during"]
    assert (toy / "src" / "toy" / "__init__.py").read_text() == TOY_SOURCE


def test_an_equivalent_mutant_survives(toy):
    outcome = run["run_mutant"](toy, toy_mutant("return a + b", "return b + a"))
    assert outcome.status == "SURVIVED", outcome
    assert (toy / "src" / "toy" / "__init__.py").read_text() == TOY_SOURCE


@pytest.mark.parametrize("original,message", [
    ("return a * b", "snippet not found"),
    ("return a + ", "occurs 2 times"),
])
def test_a_missing_or_repeated_snippet_is_an_error_not_a_kill(toy, original, message):
    outcome = run["run_mutant"](toy, toy_mutant(original, "return 0"))
    assert outcome.status == "ERROR" and message in outcome.detail
    assert (toy / "src" / "toy" / "__init__.py").read_text() == TOY_SOURCE


def test_the_copy_is_what_the_tests_import(toy):
    run["check_import_path"](toy, "toy")  # toy is importable only from the copy's src/
    env = run["environment"](toy)
    assert env["PYTHONPATH"].split(":")[0] == str(toy / "src")
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"


def test_the_listed_mutants_are_well_formed_and_anchor_once():
    mutants = run["load_mutants"]()
    assert len(mutants) >= 40
    for m in mutants:
        text = (REPO / m.file).read_text()
        assert run["snippet_problem"](text, m) is None, m.id
        assert "\n" not in m.original and m.why, m.id
        for t in m.tests:
            assert (REPO / t.split("::")[0]).is_file(), (m.id, t)


def test_the_copy_holds_bench_so_a_bench_script_can_be_mutated(tmp_path):
    root = tmp_path / "repo"
    for folder in ("src", "tests", "bench"):
        (root / folder).mkdir(parents=True)
    (root / "bench" / "protocol.py").write_text("CHOICE = 'validation'\n")
    work = run["copy_tree"](root, tmp_path / "work")
    assert (work / "bench" / "protocol.py").read_text() == "CHOICE = 'validation'\n"


def test_the_summary_line_records_kills_wall_time_jobs_and_cpu(tmp_path, monkeypatch):
    cpuinfo = tmp_path / "cpuinfo"
    cpu = "model name\t: Toy CPU\ncpu family\t: 25\nmodel\t\t: 17\nflags\t\t: fpu avx2 fma\n"
    cpuinfo.write_text(f"processor\t: 0\n{cpu}\nprocessor\t: 1\n{cpu}")
    assert run["cpu_description"](cpuinfo) == "Toy CPU (cpu family 25 model 17, avx2, 2 CPUs)"
    Outcome = run["Outcome"]
    outcomes = [Outcome("(baseline)", "PASSED", "", 1.0), Outcome("a", "KILLED", "", 2.0),
                Outcome("b", "SURVIVED", "", 1.0)]
    monkeypatch.setitem(run_mutant_globals(), "cpu_description", lambda: "Toy CPU")
    monkeypatch.setitem(run_mutant_globals(), "commit_of", lambda: "abc1234")
    line = run["summary_line"](outcomes, 2, 5, 123.4, 2, 201.0)
    assert line.startswith("mutants: 1/2 killed (subset of 5); baseline passed; 123 s wall, "
                           "201 s CPU on 2 jobs; Toy CPU; commit abc1234; ")
    assert "\n" not in line
    assert run["summary_line"](outcomes[1:], 2, 2, 9.0, 1).startswith(
        "mutants: 1/2 killed (all); baseline skipped; 9 s wall on 1 job; ")
