"""Which optional extra of this package provides a missing module, so that an error can say what to install.

The extras are read back from the installed package's metadata (pyproject.toml's
``optional-dependencies``): one source, no second list to keep in step.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import re
import sys

from cwgrpo.configs import ConfigError

# Extras that bundle others for development; never the one to suggest for a missing module.
_BUNDLES = ("test", "dev")


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def extras_by_distribution() -> dict[str, list[str]]:
    """Distribution name (normalised) -> the extras that list it; empty without the package's metadata."""
    try:
        lines = importlib.metadata.requires("cwgrpo") or []
    except importlib.metadata.PackageNotFoundError:
        return {}
    found: dict[str, list[str]] = {}
    for line in lines:
        requirement, _, marker = line.partition(";")
        extra = re.search(r"""extra\s*==\s*["']([^"']+)["']""", marker)
        name = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
        if extra and name and _normalise(name.group(1)) != "cwgrpo":
            found.setdefault(_normalise(name.group(1)), []).append(extra.group(1))
    return found


def extra_for(module: str) -> str | None:
    """The extra to install for top-level module ``module`` (named as its library)."""
    extras = extras_by_distribution().get(_normalise(module.split(".")[0]), [])
    preferred = [e for e in extras if e not in _BUNDLES]
    return (preferred or extras or [None])[0]


def missing_modules(extra: str) -> list[str]:
    """The libraries of ``extra`` that do not import here, sorted."""
    names = [name for name, extras in extras_by_distribution().items() if extra in extras]
    return sorted(n for n in names if not _importable(n.replace("-", "_")))


def _importable(module: str) -> bool:
    if module in sys.modules:  # None there blocks the import (Python's own convention)
        return sys.modules[module] is not None
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def require_extra(extra: str, what: str) -> None:
    """Fail with one line naming ``extra`` unless all its libraries are there, before a command starts."""
    missing = missing_modules(extra)
    if missing:
        raise ConfigError(
            f"{what} needs the {extra!r} extra (missing: {', '.join(missing)}): pip install 'cwgrpo[{extra}]' "
            f"(from a checkout: pip install -e '.[{extra}]')"
        )


def missing_extra_error(err: ModuleNotFoundError, what: str) -> ConfigError | None:
    """A one-line error naming the extra that provides the missing module, or None when no extra does."""
    module = err.name or ""
    extra = extra_for(module)
    if extra is None:
        return None
    return ConfigError(
        f"{what} needs {module.split('.')[0]!r}, from the {extra!r} extra: pip install 'cwgrpo[{extra}]' "
        f"(from a checkout: pip install -e '.[{extra}]')"
    )
