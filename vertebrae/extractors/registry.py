"""Extractors declared in a workflow config, by ``type``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vertebrae.core.errors import ConfigError
from vertebrae.extractors.base import Extractor
from vertebrae.extractors.precomputed import PrecomputedExtractor
from vertebrae.extractors.sklearn import SklearnExtractor


def _precomputed(name: str, decl: Mapping[str, Any], where: str) -> Extractor:
    return PrecomputedExtractor(name)


def _sklearn(name: str, decl: Mapping[str, Any], where: str) -> Extractor:
    return SklearnExtractor.from_steps(
        name, decl.get("steps") or [], random_state=decl.get("random_state", 0),
        allow_sparse=decl.get("allow_sparse", True), where=where,
    )


BUILDERS = {"precomputed": _precomputed, "sklearn": _sklearn}


def build_extractor(name: str, decl: Mapping[str, Any], *, where: str) -> Extractor:
    """The extractor a config declares under ``where`` (e.g. ``benchmarks.digits.extractors.pca``)."""
    kind = decl.get("type")
    if kind not in BUILDERS:
        raise ConfigError(f"{where}.type: unknown extractor type {kind!r}; known types: {sorted(BUILDERS)}")
    return BUILDERS[kind](name, decl, where)
