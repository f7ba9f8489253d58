"""Callables that cross process boundaries as importable ``package.module:qualname`` paths."""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Sequence
from typing import Any

from vertebrae.core.errors import ConfigError

_PATH = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")


def import_callable(path: str) -> Any:
    """The object named by ``module:qualname``; ConfigError naming the path when it cannot be imported."""
    if not isinstance(path, str) or not _PATH.match(path):
        raise ConfigError(f"callable path {path!r} must look like 'package.module:function'")
    module_name, _, qualname = path.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - any import failure is reported with the path
        raise ConfigError(f"callable path {path!r}: cannot import module {module_name!r}: {type(exc).__name__}: {exc}") from None
    for part in qualname.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ConfigError(f"callable path {path!r}: module {module_name!r} has no attribute {qualname!r}") from None
    if not callable(obj):
        raise ConfigError(f"callable path {path!r} names a {type(obj).__name__}, which is not callable")
    return obj


def within_modules(module_name: str, modules: Sequence[str]) -> bool:
    """Whether ``module_name`` is one of ``modules`` or a submodule of one (``sklearn`` admits ``sklearn.x``)."""
    return any(module_name == m or module_name.startswith(m + ".") for m in modules)


def import_object(path: str, *, where: str, trusted_modules: Sequence[str] | None = None) -> Any:
    """Import ``module.attr`` or ``module:attr``; ConfigError naming ``where`` when it cannot.

    With ``trusted_modules`` a path outside them is refused before anything is imported (importing runs code).
    """
    module_name, _, attr = path.replace(":", ".").rpartition(".")
    if trusted_modules is not None and not within_modules(module_name, trusted_modules):
        raise ConfigError(
            f"{where}: {path!r} is not in a trusted module (trusted: {sorted(trusted_modules)}); "
            "nothing was imported"
        )
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, ValueError):
        raise ConfigError(f"{where}: cannot import {path!r}") from None


def callable_path(fn: Any) -> str | None:
    """``module:qualname`` of an importable top-level function that resolves back to ``fn``, else None."""
    module_name = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None)
    if not isinstance(module_name, str) or not isinstance(qualname, str) or module_name == "__main__":
        return None
    if "<" in qualname:  # <lambda>, <locals>
        return None
    module = sys.modules.get(module_name)
    if module is None:
        return None
    obj: Any = module
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    path = f"{module_name}:{qualname}"
    return path if obj is fn and _PATH.match(path) else None
