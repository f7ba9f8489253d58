"""Extractors around plain Python callables.

A callable crosses process boundaries (and keys caches) only by its importable ``module:qualname`` path or
an explicit ``cache_identity``; a lambda, a nested function or a ``__main__`` function without one still runs,
but its embeddings are never reused across runs (``reusable`` is False, with a warning).
"""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Callable, Mapping
from typing import Any

from vertebrae.core.callables import callable_path
from vertebrae.core.errors import ValidationError, VertebraeWarning
from vertebrae.core.fingerprint import to_json_value
from vertebrae.extractors.base import Extractor


def _identity_of(name: str, functions: Mapping[str, Callable[..., Any]], cache_identity: Any) -> tuple[dict[str, Any], bool]:
    """(recipe part, reusable) for a set of named callables."""
    for role, fn in functions.items():
        if not callable(fn):
            raise ValidationError(f"extractor {name!r}: {role} must be callable, got {type(fn).__name__}")
    if cache_identity is not None:
        return {"cache_identity": to_json_value(cache_identity, "cache_identity")}, True
    paths = {role: callable_path(fn) for role, fn in functions.items()}
    if all(paths.values()):
        return {"paths": paths}, True
    missing = sorted(role for role, path in paths.items() if path is None)
    warnings.warn(
        f"extractor {name!r}: {', '.join(missing)} is not an importable top-level function (lambda, nested or __main__) "
        "and no cache_identity was given; its embeddings will not be cached or reused",
        VertebraeWarning, stacklevel=3,
    )
    return {"unsafe_session": uuid.uuid4().hex}, False


class CallableExtractor(Extractor):
    """Embeddings from ``fn(rows) -> matrix`` (one output row per input row), the same for every endpoint."""

    def __init__(self, name: str, fn: Callable[[Any], Any], *, modality: str = "any", recipe_data: Any = None,
                 cache_identity: Any = None) -> None:
        self.name = name
        self.fn = fn
        self.modality = modality
        self._identity, self._reusable = _identity_of(name, {"fn": fn}, cache_identity)
        self._recipe_data = to_json_value(recipe_data, "recipe_data")

    @property
    def reusable(self) -> bool:
        return self._reusable

    def recipe(self) -> dict[str, Any]:
        return {"type": "callable", "modality": self.modality, "recipe_data": self._recipe_data, **self._identity}

    def transform(self, inputs: Any, *, branch: str | None = None) -> Any:
        return self.fn(inputs)


class CallableRetrievalExtractor(Extractor):
    """Branch encoders for retrieval: ``query_fn`` for the query endpoint, ``gallery_fn`` for the gallery."""

    branches = ("query", "gallery")

    def __init__(self, name: str, query_fn: Callable[[Any], Any], gallery_fn: Callable[[Any], Any], *,
                 query_modality: str = "any", gallery_modality: str = "any", cache_identity: Any = None) -> None:
        self.name = name
        self.functions = {"query": query_fn, "gallery": gallery_fn}
        self.modalities = {"query": query_modality, "gallery": gallery_modality}
        self._identity, self._reusable = _identity_of(name, {"query_fn": query_fn, "gallery_fn": gallery_fn}, cache_identity)

    @property
    def reusable(self) -> bool:
        return self._reusable

    def recipe(self) -> dict[str, Any]:
        return {"type": "callable_retrieval", "modalities": self.modalities, **self._identity}

    def transform(self, inputs: Any, *, branch: str | None = None) -> Any:
        self.check_branch(branch)
        return self.functions[branch](inputs)
