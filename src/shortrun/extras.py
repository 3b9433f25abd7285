"""Optional dependencies: imported only on the paths that use them.

Each extra of ``pyproject.toml`` brings the packages of one path (SciPy for SVHN ``.mat``
files, TensorBoard for its event files, matplotlib for 2-D pictures and report curves);
``pip install 'shortrun[all]'`` brings them all. A missing one is reported in one line that
names the extra to install, never as a bare ``ModuleNotFoundError``.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from shortrun.errors import MissingExtraError

# top-level module -> (name users know it by, the extra that installs it)
EXTRAS: dict[str, tuple[str, str]] = {
    "scipy": ("SciPy", "svhn"),
    "tensorboard": ("TensorBoard", "tensorboard"),
    "matplotlib": ("matplotlib", "plots"),
}


def install_hint(module: str) -> str:
    """``pip install 'shortrun[EXTRA]'`` for an optional module's extra."""
    top = module.split(".")[0]
    return f"pip install 'shortrun[{EXTRAS[top][1]}]'"


def require(module: str, needed_for: str) -> ModuleType:
    """Import ``module`` (an optional dependency), or raise :class:`MissingExtraError`.

    ``needed_for`` names the path in plural, e.g. ``"SVHN .mat files"``; the message reads
    ``"SVHN .mat files need SciPy: pip install 'shortrun[svhn]'"``.
    """
    top = module.split(".")[0]
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        # only the optional package itself being absent is the user's to fix by an extra;
        # a broken install of something it imports must surface as itself
        missing = (getattr(exc, "name", None) or "").split(".")[0]
        if missing and missing != top:
            raise
        raise MissingExtraError(f"{needed_for} need {EXTRAS[top][0]}: "
                                f"{install_hint(module)}") from None
