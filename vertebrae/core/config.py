"""Run settings every protocol shares: how embeddings are computed and whether merged embeddings are cached."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vertebrae.core.errors import ConfigError, ValidationError

#: The config sections that declare benchmarks, and their protocols (``vertebrae.planning.config.SECTIONS``)
BENCHMARK_SECTIONS = {"benchmarks": "labelled", "retrieval": "retrieval", "zero_shot": "zero-shot"}


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


def require_benchmarks(config: Any, files: Iterable[str | Path] = ()) -> None:
    """ConfigError naming the config file(s) when the config has none of the ``BENCHMARK_SECTIONS`` (an empty file,
    ``{}``, or a typo such as ``benchmark:``): what is missing, and what the file holds instead. A config that is not
    a mapping is left to the checks that name that."""
    if not isinstance(config, Mapping) or any(section in config for section in BENCHMARK_SECTIONS):
        return
    names = [str(f) for f in files]
    what = (f"config file{'s' if len(names) > 1 else ''} {', '.join(names)}" if names else "the config")
    *first, last = (f"{key!r} ({kind})" for key, kind in BENCHMARK_SECTIONS.items())
    sections = f"{', '.join(first)} or {last}"
    empty = "they are empty" if len(names) > 1 else "it is empty"
    holds = f"its keys are {', '.join(map(str, config))}" if config else empty
    raise ConfigError(f"{what}: no benchmark to run: a config needs at least one of the sections {sections}, each "
                      f"naming benchmarks with their dataset and extractors; {holds}")


def take_option(args: Sequence[str], flag: str, missing: str) -> tuple[str | None, list[str]]:
    """``flag VALUE`` (or ``flag=VALUE``) taken out of ``args`` before a ``--``, the last one given winning:
    ``(value or None, the other arguments)``; ``flag`` with nothing after it raises ConfigError ``missing``."""
    value, rest, it = None, [], iter(args)
    for arg in it:
        if arg == "--":
            rest += [arg, *it]
            break
        if arg == flag:
            value = next(it, None)
            if value is None:
                raise ConfigError(missing)
        elif arg.startswith(flag + "="):
            value = arg.partition("=")[2]
        else:
            rest.append(arg)
    return value, rest
