"""The workflow config: schema validation (``schemas/config.schema.yaml``) and declaration -> config objects.

``validate_config`` returns a deep copy with the schema's defaults filled in; unknown keys are errors, and a
benchmark name must be one safe path component (``check_benchmark_name``: the schema's pattern, re-checked by
the planner). ``load_config_file`` reads YAML (or JSON) refusing a key given twice in one mapping, naming the
key and both lines (YAML would silently keep the last one, dropping a whole block); ``check_config_files``
re-reads the files Snakemake loaded with it. Every ``*_from_decl`` helper turns the ``ValueError`` of a config
class into a ``ConfigError`` naming the config key.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

from vertebrae.compression import EmbeddingCompressionConfig
from vertebrae.core.config import EmbeddingConfig
from vertebrae.core.errors import ConfigError
from vertebrae.planning.resources import auto_shards
from vertebrae.core.records import seed_int
from vertebrae.extractors.checkpoints import expand_checkpoint_sweeps
from vertebrae.extractors.registry import expand_layer_sweeps

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schemas" / "config.schema.yaml"
T = TypeVar("T")


@lru_cache(maxsize=1)
def config_schema() -> dict[str, Any]:
    import yaml

    return yaml.load(SCHEMA_PATH.read_text(encoding="utf-8"), Loader=_safe_loader())


def _safe_loader():
    """PyYAML's SafeLoader, on libyaml when PyYAML was built with it (the same documents, parsed ~10x faster)."""
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _key_path(path) -> str:
    return ".".join(str(p) for p in path) or "(top level)"


def validate_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """A validated deep copy of ``config`` with schema defaults filled in; ConfigError names the key."""
    import jsonschema

    base = jsonschema.Draft202012Validator

    def fill_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for name, sub in properties.items():
                if "default" in sub and name not in instance:
                    instance[name] = copy.deepcopy(sub["default"])
        yield from base.VALIDATORS["properties"](validator, properties, instance, schema)

    validator_cls = jsonschema.validators.extend(base, {"properties": fill_defaults})
    check_top_level(config, "the config")
    config = copy.deepcopy(dict(config))
    errors = sorted(validator_cls(config_schema()).iter_errors(config), key=lambda e: list(e.absolute_path))
    if errors:
        error = errors[0]
        where = _key_path(error.absolute_path)
        if "propertyNames" in error.schema_path and where in SECTIONS:
            raise ConfigError(_name_problem(where, error.instance))
        if error.validator == "additionalProperties":
            known = sorted(error.schema.get("properties", {}))
            unknown = sorted(set(error.instance) - set(known))
            raise ConfigError(f"config key {where}: unknown key(s) {unknown}; allowed keys: {known}")
        raise ConfigError(f"config key {where}: {error.message}")
    seed_int(config.get("seed", 0), "config", "seed")  # the schema bounds it below; jobs' RNGs above
    for section in SECTIONS:  # a layer sweep is its layers' candidates (hidden_layers: [4, 8] -> NAME@4, NAME@8)
        for name, bench in (config.get(section) or {}).items():  # a checkpoint sweep its checkpoints' (NAME@STEP)
            where = f"{section}.{name}.extractors"
            bench["extractors"] = expand_layer_sweeps(expand_checkpoint_sweeps(bench["extractors"], where=where),
                                                      where=where)
    return config


SECTIONS = ("benchmarks", "retrieval", "zero_shot")


def _name_problem(section: str, name: Any) -> str:
    return (f"config key {section}: {name!r} is not a safe benchmark name (it names the folder "
            f"results/reports/NAME/): use letters, digits, '_', '-' and '.', starting with a letter, digit or '_'")


#: Longest benchmark name: it names a folder whose files add their own names (file systems stop at 255 bytes)
MAX_NAME_LENGTH = 100


def check_benchmark_name(section: str, name: Any) -> None:
    """ConfigError naming ``section`` and ``name`` unless ``name`` matches the schema's benchmark-name pattern and
    is at most MAX_NAME_LENGTH characters long."""
    import re

    pattern = config_schema()["properties"][section]["propertyNames"]["pattern"]
    if not isinstance(name, str) or re.fullmatch(pattern, name) is None:
        raise ConfigError(_name_problem(section, name))
    if len(name) > MAX_NAME_LENGTH:
        raise ConfigError(f"config key {section}.{name[:40]}...: a benchmark name of {len(name)} characters is too "
                          f"long for a folder name (at most {MAX_NAME_LENGTH})")


def check_benchmark_names(config: Mapping[str, Any]) -> None:
    """Every benchmark name (``check_benchmark_name``), and no two that differ only in case: their report folders
    would be one folder on a case-insensitive file system (macOS, Windows)."""
    seen: dict[str, str] = {}
    for section in SECTIONS:
        for name in config.get(section, {}):
            check_benchmark_name(section, name)
            other = seen.setdefault(name.casefold(), f"{section}.{name}")
            if other != f"{section}.{name}" and other.split(".", 1)[1] != name:
                raise ConfigError(f"config key {section}.{name}: {other} differs from it only in case; their report "
                                  "folders collide on case-insensitive file systems, so rename one")


def compressions_from_decl(decls: Iterable[Mapping[str, Any]], *, where: str) -> list[EmbeddingCompressionConfig]:
    """The ``compression`` list of a labelled benchmark; an entry given twice is refused naming both indices."""
    configs = [compression_from_decl(d, where=f"{where}[{i}]") for i, d in enumerate(decls)]
    for i, item in enumerate(configs):
        if item in configs[:i]:
            raise ConfigError(f"{where}[{i}]: the same compression as {where}[{configs.index(item)}]; each entry "
                              "is one candidate variant, so list it once")
    return configs


class _DuplicateKey(Exception):
    def __init__(self, key: Any, line: int, first: int) -> None:
        super().__init__(key, line, first)
        self.key, self.line, self.first = key, line, first


@lru_cache(maxsize=1)
def _unique_key_loader() -> type:
    """A ``yaml.SafeLoader`` that refuses a key repeated in one mapping (merge keys ``<<`` may be overridden)."""

    class UniqueKeyLoader(_safe_loader()):
        def construct_mapping(self, node, deep=False):
            first: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    line = first.get(key)
                except TypeError:  # an unhashable key: SafeLoader refuses it itself
                    continue
                if line is not None:
                    raise _DuplicateKey(key, key_node.start_mark.line + 1, line)
                first[key] = key_node.start_mark.line + 1
            return super().construct_mapping(node, deep=deep)

    return UniqueKeyLoader


def check_top_level(config: Any, what: str) -> None:
    """ConfigError unless ``config`` is a mapping (a YAML file whose top level is a list or a scalar is not a config)."""
    if not isinstance(config, Mapping):
        raise ConfigError(f"{what}: the top level must be a mapping of config keys (seed:, benchmarks:, ...), got a "
                          f"{'list' if isinstance(config, list) else type(config).__name__}")


# A config is data: the most YAML nodes it may stand for once every alias is expanded (a real config has a few
# hundred; eight nested aliases of ten items stand for 10^8), checked on the composed node graph before any object
# is built, and the key that turns Snakemake's YTE templating on (it runs Python from the file).
MAX_EXPANDED_NODES = 100_000
YTE_KEY = "__use_yte__"


def _expanded_nodes(root: Any, path: str | Path) -> int:
    """The number of nodes ``root`` stands for with every alias expanded (each shared node counted once per use);
    ConfigError naming the file past MAX_EXPANDED_NODES or for an alias that contains itself."""
    import yaml

    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if key in sizes and not done:
            continue
        children = ([n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode)
                    else list(node.value) if isinstance(node, yaml.SequenceNode) else [])
        if done:
            open_nodes.discard(key)
            sizes[key] = min(1 + sum(sizes[id(c)] for c in children), MAX_EXPANDED_NODES + 1)
            continue
        if key in open_nodes:
            raise ConfigError(f"config file {path}, line {node.start_mark.line + 1}: a YAML alias that contains "
                              "itself; a config is data, recursive aliases are refused")
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in sizes)
    if sizes[id(root)] > MAX_EXPANDED_NODES:
        raise ConfigError(f"config file {path}: its YAML aliases expand to more than {MAX_EXPANDED_NODES:,} nodes; a "
                          "config is data, alias expansion beyond that bound is refused")
    return sizes[id(root)]


def load_config_file(path: str | Path) -> dict[str, Any]:
    """The config in a YAML (or JSON) file; ConfigError naming the file for unreadable text, a duplicate key, a top
    level that is not a mapping, YAML aliases expanding past MAX_EXPANDED_NODES or Snakemake's YTE key
    (``__use_yte__``)."""
    import yaml

    try:
        loader = _unique_key_loader()(Path(path).read_text(encoding="utf-8"))
        try:
            node = loader.get_single_node()
            if node is None:
                return {}
            _expanded_nodes(node, path)
            config = loader.construct_document(node) or {}
        finally:
            loader.dispose()
        check_top_level(config, f"config file {path}")
        if YTE_KEY in config:
            raise ConfigError(f"config file {path}: key {YTE_KEY!r} turns on Snakemake's YTE templating, which runs "
                              "Python written in the file; a config is data, so it is refused")
        return config
    except _DuplicateKey as dup:
        raise ConfigError(f"config file {path}, line {dup.line}: key {dup.key!r} is given twice in one mapping (first "
                          f"at line {dup.first}); YAML would keep only the last one, so duplicate keys are refused"
                          ) from None
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from None


def check_config_files(paths: Iterable[str | Path]) -> None:
    """Re-read config files another parser loaded (Snakemake's ``workflow.configfiles``) refusing duplicate keys."""
    for path in paths:
        load_config_file(path)


def config_from_decl(cls: type[T], decl: Mapping[str, Any], *, where: str) -> T:
    """``cls(**decl)``; a ``ValueError`` becomes ``ConfigError("<where>: <message>")``."""
    try:
        return cls(**decl)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def compression_from_decl(decl: Mapping[str, Any], *, where: str) -> EmbeddingCompressionConfig:
    return config_from_decl(EmbeddingCompressionConfig, decl, where=where)


def paired_compression(bench: Mapping[str, Any], where: str) -> EmbeddingCompressionConfig | None:
    """The optional ``compression`` of a retrieval or zero-shot benchmark (one paired compressor or null)."""
    decl = bench["compression"]
    return None if decl is None else compression_from_decl(decl, where=f"{where}.compression")


def shard_count(bench: Mapping[str, Any], config: Mapping[str, Any]) -> int | str:
    """The benchmark's ``shards``, else the config's ``embedding.shards``: a count or "auto"."""
    return bench.get("shards", config["embedding"]["shards"])


def endpoint_shards(bench: Mapping[str, Any], config: Mapping[str, Any], extractor: Any, rows: int) -> int:
    """Shards of one endpoint of ``rows`` rows embedded by ``extractor``: the declared count, or for "auto" the
    count its rows are worth (``resources.auto_shards``); ``shard_bounds`` caps it at the batch count."""
    requested = shard_count(bench, config)
    return auto_shards(extractor, rows) if requested == "auto" else requested


def embedding_config(bench: Mapping[str, Any], config: Mapping[str, Any]) -> EmbeddingConfig:
    """The in-process twin of the workflow's embedding settings for one benchmark ("auto" shards: one, as no
    process is started per shard in process; the embeddings do not depend on it)."""
    shards = shard_count(bench, config)
    return EmbeddingConfig(batch_size=config["embedding"]["batch_size"], shards=1 if shards == "auto" else shards)


__all__ = ["SCHEMA_PATH", "SECTIONS", "check_benchmark_name", "check_benchmark_names", "check_config_files",
           "compression_from_decl", "compressions_from_decl",
           "config_from_decl", "config_schema", "embedding_config", "load_config_file", "paired_compression",
           "endpoint_shards", "shard_count", "validate_config"]
