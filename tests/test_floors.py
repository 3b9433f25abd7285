"""Imports point one way: no module imports a module on a higher floor, and no modules import
each other in a circle (docs/architecture.md, "Floors"; shared/DESIGN.md §7).

Every import counts — top level, inside a function, and under ``if TYPE_CHECKING:`` — because
a function-local import of a higher floor is the same dependency, only hidden.

Every module is named in :data:`FLOORS`, one by one: a new module fails
:func:`test_every_module_has_a_floor` until it is placed. The checks are functions of a source
tree and a floor table, so the ``test_planted_*`` tests can show each of them failing on a
small tree written for the purpose.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import shortrun

SRC = Path(shortrun.__file__).parent
PACKAGE = "shortrun"


def rooms(floor: int, package: str, *names: str) -> dict[str, int]:
    """``{package.name: floor}`` for each name; ``__init__`` is the package itself."""
    return {package if n == "__init__" else f"{package}.{n}": floor for n in names}


# The floor of every module (docs/architecture.md has the same table, by package).
FLOORS: dict[str, int] = {
    **rooms(6, "shortrun", "__init__", "__main__", "cli", "info"),
    **rooms(6, "shortrun.sklearn", "__init__", "_common", "density", "rbm"),
    **rooms(5, "shortrun", "run", "report"),
    **rooms(5, "shortrun.evaluation", "__init__", "classifier", "density", "dispatch",
            "dual_mcmc", "features", "lebm", "lebm_selection", "plan", "progress", "provenance",
            "rbm", "registry", "sampling", "text", "chains", "likelihood", "jem"),
    **rooms(4, "shortrun.train", "__init__", "batcher", "checkpoint", "config", "device",
            "distributed", "fit", "logger", "own_data", "progress", "provenance", "rundir",
            "schema", "stopping", "threads", "trainer", "recovery"),
    **rooms(3, "shortrun.models", "__init__", "base", "chain_free", "classifier",
            "damc", "damc_nets", "density_eval", "dual_mcmc", "dual_nets", "ebm", "ed_lebm",
            "ed_rbm", "grbm", "inputs", "latent_chains", "lebm", "lebm_nets",
            "lebm_text", "lstm_lm", "jem", "rbm", "rbm_learning", "rbm_sgd",
            "registry", "score", "text_nets"),
    **rooms(2, "shortrun.metrics", "__init__", "anomaly", "features", "frechet", "inception",
            "kid", "mmd", "text", "chains", "calibration"),
    **rooms(2, "shortrun.estimators", "__init__", "ais", "exact", "grid", "annealing", "bases",
            "binary", "latent"),
    **rooms(1, "shortrun.samplers", "__init__", "diffusion", "driver", "gibbs", "hmc",
            "independence", "langevin", "mala", "metropolis", "sources", "tempering",
            "adapt", "traced"),
    **rooms(1, "shortrun.energies", "__init__", "conditional", "conv", "mlp", "rbm", "guided"),
    **rooms(1, "shortrun.speed", "__init__", "engine", "cache", "policy", "rbm_numpy",
            "rbm_step", "layout", "deconv"),
    **rooms(1, "shortrun.objectives", "__init__", "contrastive", "score_matching", "nce",
            "energy_discrepancy"),
    **rooms(1, "shortrun.data", "__init__", "anomaly_split", "array", "base", "celeba", "cifar10",
            "digits", "idx", "mnist", "ptb", "registry", "svhn", "toy2d"),
    **rooms(0, "shortrun", "errors", "fields", "plotting", "collectives", "extras",
            "version", "hardware"),
}


def module_name(path: Path, src: Path = SRC) -> str:
    parts = list(path.relative_to(src.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_module(name: str, src: Path = SRC) -> bool:
    rel = Path(*name.split(".")[1:]) if "." in name else Path()
    return (src / rel).with_suffix(".py").is_file() or (src / rel / "__init__.py").is_file()


def imported_modules(path: Path, module: str, src: Path = SRC) -> list[str]:
    """Every module of the package ``path`` imports, wherever the import statement sits."""
    package = src.name
    is_package = path.name == "__init__.py"
    out: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names if a.name.split(".")[0] == package]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source.split(".")[0] != package:
                continue
            for alias in node.names:  # `from shortrun import errors` imports a submodule
                sub = f"{source}.{alias.name}"
                out.append(sub if is_module(sub, src) else source)
    return out


def all_modules(src: Path = SRC) -> list[tuple[str, Path]]:
    return sorted((module_name(p, src), p) for p in src.rglob("*.py"))


def import_graph(src: Path = SRC) -> dict[str, set[str]]:
    """``module -> the package's modules it imports`` (itself excluded)."""
    return {m: set(imported_modules(p, m, src)) - {m} for m, p in all_modules(src)}


# --- the checks: each returns one line per violation ------------------------------------
def unplaced(src: Path, floors: dict[str, int]) -> list[str]:
    """Modules with no entry in ``floors``, and entries naming no module."""
    names = {m for m, _ in all_modules(src)}
    return ([f"{m} has no floor" for m in sorted(names - set(floors))]
            + [f"{m} is on a floor but is not a module" for m in sorted(set(floors) - names)])


def upward_imports(src: Path, floors: dict[str, int]) -> list[str]:
    """``module -> target (floor a -> floor b)`` for every import of a higher floor."""
    out = []
    for module, targets in sorted(import_graph(src).items()):
        for target in sorted(targets):
            a, b = floors.get(module), floors.get(target)
            if a is not None and b is not None and b > a:
                out.append(f"{module} -> {target} (floor {a} -> floor {b})")
    return out


def circles(src: Path) -> list[str]:
    """Every set of modules that import each other round a loop (a strongly connected
    component of the import graph with more than one module; Tarjan's algorithm)."""
    graph = import_graph(src)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [" <-> ".join(c) for c in sorted(found)]


# --- the package itself ---------------------------------------------------------------------
def test_every_module_has_a_floor():
    bad = unplaced(SRC, FLOORS)
    assert not bad, ("place every module in FLOORS here and in docs/architecture.md's table:\n"
                     + "\n".join(bad))


@pytest.mark.parametrize("floor", range(7))
def test_no_import_reaches_a_higher_floor(floor):
    violations = [v for v in upward_imports(SRC, FLOORS) if f"(floor {floor} ->" in v]
    assert not violations, "imports that reach a higher floor:\n" + "\n".join(violations)


def test_no_import_circle():
    found = circles(SRC)
    assert not found, "modules that import each other in a circle:\n" + "\n".join(found)


def test_import_scan_sees_hidden_imports(tmp_path):
    source = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
              "    from shortrun.train.config import Config\n"
              "def f():\n    import shortrun.run\n    from shortrun import errors\n")
    path = SRC / "models" / "_probe_never_written.py"
    fake = tmp_path / "probe.py"
    fake.write_text(source)
    got = imported_modules(fake, module_name(path))
    assert sorted(got) == ["shortrun.errors", "shortrun.run", "shortrun.train.config"]


# --- planted violations: each check fails on a tree that breaks its rule ---------------------
def plant(tmp_path: Path, files: dict[str, str]) -> Path:
    """A package ``shortrun`` under ``tmp_path`` with ``files`` (relative path -> source)."""
    src = tmp_path / PACKAGE
    for rel, text in {"__init__.py": "", "low/__init__.py": "", "high/__init__.py": "",
                      **files}.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    return src


PLANTED_FLOORS = {**rooms(2, "shortrun", "__init__"),
                  **rooms(0, "shortrun.low", "__init__", "a", "b"),
                  **rooms(1, "shortrun.high", "__init__", "c")}


def test_planted_tree_passes_when_it_keeps_the_rules(tmp_path):
    src = plant(tmp_path, {"low/a.py": "", "low/b.py": "from shortrun.low import a\n",
                           "high/c.py": "from shortrun.low.b import x\n"})
    assert unplaced(src, PLANTED_FLOORS) == []
    assert upward_imports(src, PLANTED_FLOORS) == []
    assert circles(src) == []


def test_planted_unplaced_module_fails(tmp_path):
    src = plant(tmp_path, {"low/a.py": "", "low/b.py": "", "high/c.py": "", "low/new.py": ""})
    assert unplaced(src, PLANTED_FLOORS) == ["shortrun.low.new has no floor"]
    (src / "low" / "b.py").unlink()
    assert "shortrun.low.b is on a floor but is not a module" in unplaced(src, PLANTED_FLOORS)


@pytest.mark.parametrize("statement", [
    "from shortrun.high.c import y\n",
    "def f():\n    import shortrun.high.c\n",
    "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from shortrun.high import c\n",
    "from ..high import c\n",
])
def test_planted_upward_import_fails(tmp_path, statement):
    src = plant(tmp_path, {"low/a.py": statement, "low/b.py": "", "high/c.py": ""})
    assert upward_imports(src, PLANTED_FLOORS) == [
        "shortrun.low.a -> shortrun.high.c (floor 0 -> floor 1)"]


def test_planted_circle_inside_a_floor_fails(tmp_path):
    """``a -> b -> a`` on one floor, the second import hidden in a function."""
    src = plant(tmp_path, {"low/a.py": "from shortrun.low.b import x\n",
                           "low/b.py": "def f():\n    from shortrun.low import a\n",
                           "high/c.py": ""})
    assert upward_imports(src, PLANTED_FLOORS) == []
    assert circles(src) == ["shortrun.low.a <-> shortrun.low.b"]


def test_planted_circle_through_a_package_init_fails(tmp_path):
    """A package's ``__init__`` re-exporting a module that imports the package back."""
    src = plant(tmp_path, {"low/__init__.py": "from shortrun.low.a import x\n",
                           "low/a.py": "from shortrun.low import b\nfrom shortrun.low import x\n",
                           "low/b.py": "", "high/c.py": ""})
    assert circles(src) == ["shortrun.low <-> shortrun.low.a"]
