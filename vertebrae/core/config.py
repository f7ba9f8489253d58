"""Run settings every protocol shares: how embeddings are computed and whether merged embeddings are cached."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from vertebrae.core.errors import ValidationError


@dataclass(frozen=True)
class EmbeddingConfig:
    """How embeddings are computed: rows per extractor call and shards per endpoint (cut on batch edges, so
    the embeddings do not depend on ``shards``; at most ceil(rows / batch_size) of them)."""

    batch_size: int = 256
    shards: int = 1

    def __post_init__(self) -> None:
        for name in ("batch_size", "shards"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValidationError(f"EmbeddingConfig.{name} must be a positive integer, got {value!r}")


@dataclass(frozen=True)
class CacheConfig:
    """Reuse merged embeddings across runs from ``cache_dir`` (off by default)."""

    enabled: bool = False
    cache_dir: str | Path | None = None

    def __post_init__(self) -> None:
        if self.enabled and self.cache_dir is None:
            raise ValidationError("CacheConfig.cache_dir is required when the cache is enabled")
