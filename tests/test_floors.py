"""Imports point one way: no module imports a module on a higher floor (CONTRACT.md, DESIGN §7).

Every import counts — top level, inside a function, and under ``if TYPE_CHECKING:`` — because
a function-local import of a higher floor is the same dependency, only hidden.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import shortrun

SRC = Path(shortrun.__file__).parent
PACKAGE = "shortrun"

# Floor of each module or package, most specific prefix first (see CONTRACT.md).
FLOORS: dict[str, int] = {
    "shortrun.cli": 6, "shortrun.__main__": 6, "shortrun": 6, "shortrun.sklearn": 6,
    "shortrun.run": 5, "shortrun.evaluation": 5, "shortrun.report": 5,
    "shortrun.train": 4,
    "shortrun.models": 3,
    "shortrun.metrics": 2, "shortrun.estimators": 2,
    "shortrun.samplers": 1, "shortrun.energies": 1, "shortrun.objectives": 1, "shortrun.data": 1,
    "shortrun.errors": 0, "shortrun.fields": 0, "shortrun.plotting": 0,
    "shortrun.collectives": 0, "shortrun.onednn": 0, "shortrun.extras": 0,
    "shortrun.version": 0, "shortrun.products": 0, "shortrun.hardware": 0,
    "shortrun.routes": 0,
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def floor_of(module: str) -> int | None:
    """The floor of ``module``: its longest prefix in :data:`FLOORS` (``None``: unmapped)."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        prefix = ".".join(parts[:n])
        if prefix in FLOORS:
            return FLOORS[prefix]
    return None


def is_module(name: str) -> bool:
    rel = Path(*name.split(".")[1:]) if "." in name else Path()
    return (SRC / rel).with_suffix(".py").is_file() or (SRC / rel / "__init__.py").is_file()


def imported_modules(path: Path, module: str) -> list[str]:
    """Every shortrun module ``path`` imports, wherever the import statement sits."""
    is_package = path.name == "__init__.py"
    out: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names if a.name.split(".")[0] == PACKAGE]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source.split(".")[0] != PACKAGE:
                continue
            for alias in node.names:  # `from shortrun import errors` imports a submodule
                sub = f"{source}.{alias.name}"
                out.append(sub if is_module(sub) else source)
    return out


def all_modules() -> list[tuple[str, Path]]:
    return sorted((module_name(p), p) for p in SRC.rglob("*.py"))


def test_every_module_has_a_floor():
    unmapped = [m for m, _ in all_modules() if floor_of(m) is None]
    assert not unmapped, ("modules with no floor (add them to FLOORS here and to CONTRACT.md): "
                          + ", ".join(unmapped))


def test_floor_lookup():
    assert floor_of("shortrun.models.lebm") == 3 and floor_of("shortrun.train.config") == 4
    assert floor_of("shortrun") == 6 and floor_of("shortrun.evaluation.sampling") == 5
    assert floor_of("shortrun.errors") == 0 and floor_of("shortrun.metrics") == 2


def test_import_scan_sees_hidden_imports(tmp_path):
    source = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
              "    from shortrun.train.config import Config\n"
              "def f():\n    import shortrun.run\n    from shortrun import errors\n")
    path = SRC / "models" / "_probe_never_written.py"
    fake = tmp_path / "probe.py"
    fake.write_text(source)
    got = imported_modules(fake, module_name(path))
    assert sorted(got) == ["shortrun.errors", "shortrun.run", "shortrun.train.config"]


@pytest.mark.parametrize("floor", range(7))
def test_no_import_reaches_a_higher_floor(floor):
    violations = []
    for module, path in all_modules():
        if floor_of(module) != floor:
            continue
        for target in imported_modules(path, module):
            to = floor_of(target)
            if to is not None and to > floor:
                violations.append(f"{module} -> {target} (floor {floor} -> floor {to})")
    assert not violations, "imports that reach a higher floor:\n" + "\n".join(violations)
