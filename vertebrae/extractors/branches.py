"""CallableBranchExtractor: named branches, each an importable ``module:function`` (config type ``callable``).

Config: ``{type: callable, branches: {image: "my_pkg.enc:image", text: "my_pkg.enc:text"}, cache_identity: ...}``.
Each function maps a batch of raw rows to one embedding row per input row. The recipe (and so every cache key)
is the function paths plus the optional declared ``cache_identity`` (bump it when the functions' behaviour changes).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vertebrae.core.callables import import_callable
from vertebrae.core.errors import ConfigError
from vertebrae.core.fingerprint import to_json_value
from vertebrae.extractors.base import Extractor


class CallableBranchExtractor(Extractor):
    """Branch encoders given by importable paths; every branch encodes independently."""

    def __init__(self, name: str, branches: Mapping[str, str], *, cache_identity: Any = None, where: str = "extractor") -> None:
        if not isinstance(branches, Mapping) or not branches:
            raise ConfigError(f"{where}.branches: give at least one branch name -> 'module:function' path")
        self.name = name
        self.paths = {}
        self.functions = {}
        for branch, path in branches.items():
            if not isinstance(branch, str) or not branch:
                raise ConfigError(f"{where}.branches: branch names must be non-empty strings, got {branch!r}")
            try:
                self.functions[branch] = import_callable(path)
            except ConfigError as exc:
                raise ConfigError(f"{where}.branches.{branch}: {exc}") from None
            self.paths[branch] = path
        self.branches = tuple(self.paths)
        self.cache_identity = to_json_value(cache_identity, f"{where}.cache_identity")

    def recipe(self) -> dict[str, Any]:
        return {"type": "callable", "paths": dict(self.paths), "cache_identity": self.cache_identity}

    def branch_recipe(self, branch: str) -> dict[str, Any]:
        """The recipe with ``branch``'s own function only: each branch encodes independently."""
        return {**self.recipe(), "paths": {b: path for b, path in self.paths.items() if b == branch}}

    def branch_decl(self, decl: dict[str, Any], branch: str) -> dict[str, Any]:
        """``decl`` with ``branch``'s function only."""
        return {**decl, "branches": {b: path for b, path in decl["branches"].items() if b == branch}}

    def transform(self, inputs: Any, *, branch: str | None = None) -> Any:
        self.check_branch(branch)
        return self.functions[branch](inputs)
