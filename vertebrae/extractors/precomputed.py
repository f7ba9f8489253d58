"""PrecomputedExtractor: the dataset rows already are embeddings; passed through unchanged."""

from __future__ import annotations

from typing import Any

from vertebrae.extractors.base import Extractor


class PrecomputedExtractor(Extractor):
    """Identity extractor for precomputed embeddings (dense or CSR, dtype kept)."""

    def __init__(self, name: str = "precomputed") -> None:
        self.name = name

    def recipe(self) -> dict[str, Any]:
        return {"type": "precomputed"}

    def transform(self, inputs: Any, *, branch: str | None = None) -> Any:
        return inputs
