"""DAG-time planning from a workflow config (pure: the Snakefile imports it; no Snakemake here).

``plan(config)`` validates the config against ``schemas/config.schema.yaml`` (unknown keys are errors, defaults
are filled), computes every fingerprint and shard boundary, and returns a WorkflowPlan: one job spec per
fingerprint plus the file layout the rules use. ``benchmarks_from_config`` builds the in-process twins.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from vertebrae.core.errors import ConfigError
from vertebrae.core.fingerprint import canonical_json, fingerprint
from vertebrae.data.declared import declared_identity_key, declared_targets, identity_from_decl, declared_row_count, load_declared_dataset
from vertebrae.extractors.registry import build_extractor
from vertebrae.scoring.overlap import ContinuousOverlapScoringConfig, OverlapScoringConfig
from vertebrae.stages.common import embedding_recipe, fit_recipe, shard_bounds
from vertebrae.compression import EmbeddingCompressionConfig, variant_name
from vertebrae.scoring.metrics import metric_from_config
from vertebrae.scoring.separatix import SeparatixConfig
from vertebrae.scoring.stability import StabilityConfig
from vertebrae.stages.labelled import ScoringPlan, compression_recipe, protocol_recipe, score_recipe

RESULTS = "results"
ENDPOINT = "samples"
SCHEMA_PATH = Path(__file__).parent / "schemas" / "config.schema.yaml"


def plan_path(fp: str) -> str:
    return f"{RESULTS}/plans/{fp}.json"


def fitted_path(fp: str) -> str:
    return f"{RESULTS}/fitted/{fp}.json"


def shard_path(fp: str, index: int, count: int) -> str:
    return f"{RESULTS}/embeddings/{fp}/shard-{index}-of-{count}.h5"


def embedding_path(fp: str) -> str:
    return f"{RESULTS}/embeddings/{fp}.h5"


def compressed_path(fp: str) -> str:
    return f"{RESULTS}/compressed/{fp}/samples.h5"


def protocol_path(fp: str) -> str:
    return f"{RESULTS}/protocols/{fp}.json"


def score_path(fp: str) -> str:
    return f"{RESULTS}/scores/{fp}.json"


def retrieval_shard_path(fp: str, index: int, count: int) -> str:
    return f"{RESULTS}/retrieval/embeddings/{fp}/shard-{index}-of-{count}.h5"


def retrieval_embedding_path(fp: str) -> str:
    return f"{RESULTS}/retrieval/embeddings/{fp}.h5"


def retrieval_compressed_paths(fp: str) -> dict[str, str]:
    return {side: f"{RESULTS}/retrieval/compressed/{fp}/{side}.h5" for side in ("query", "gallery")}


def retrieval_protocol_path(fp: str) -> str:
    return f"{RESULTS}/retrieval/relevance/{fp}.json"


def retrieval_score_path(fp: str) -> str:
    return f"{RESULTS}/retrieval/scores/{fp}.json"


def report_paths(benchmark: str) -> dict[str, str]:
    return {"json": f"{RESULTS}/reports/{benchmark}/report.json", "markdown": f"{RESULTS}/reports/{benchmark}/report.md"}


@lru_cache(maxsize=1)
def config_schema() -> dict[str, Any]:
    import yaml

    return yaml.safe_load(SCHEMA_PATH.read_text(encoding="utf-8"))


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
    config = copy.deepcopy(dict(config))
    errors = sorted(validator_cls(config_schema()).iter_errors(config), key=lambda e: list(e.absolute_path))
    if errors:
        error = errors[0]
        where = _key_path(error.absolute_path)
        if error.validator == "additionalProperties":
            known = sorted(error.schema.get("properties", {}))
            unknown = sorted(set(error.instance) - set(known))
            raise ConfigError(f"config key {where}: unknown key(s) {unknown}; allowed keys: {known}")
        raise ConfigError(f"config key {where}: {error.message}")
    return config


def scoring_from_decl(bench: Mapping[str, Any], *, where: str) -> OverlapScoringConfig | ContinuousOverlapScoringConfig:
    """The benchmark's ``scoring`` (classes, labels) or ``continuous_scoring`` (regression) config."""
    regression = bench["dataset"].get("target_type") == "regression"
    key = "continuous_scoring" if regression else "scoring"
    try:
        return (ContinuousOverlapScoringConfig if regression else OverlapScoringConfig)(**bench[key])
    except ValueError as exc:
        raise ConfigError(f"{where}.{key}: {exc}") from None


@dataclass
class WorkflowPlan:
    """Every job spec by fingerprint, and the targets the rules build."""

    specs: dict[str, dict[str, Any]] = field(default_factory=dict)
    shard_counts: dict[str, int] = field(default_factory=dict)
    reports: dict[str, str] = field(default_factory=dict)
    retrieval_reports: dict[str, str] = field(default_factory=dict)
    zero_shot_reports: dict[str, str] = field(default_factory=dict)

    def add(self, spec: dict[str, Any]) -> str:
        self.specs.setdefault(spec["fingerprint"], spec)
        return spec["fingerprint"]

    def spec(self, fp: str) -> dict[str, Any]:
        return self.specs[fp]

    def spec_json(self, fp: str) -> str:
        return canonical_json(self.specs[fp])

    def shard_paths(self, fp: str) -> list[str]:
        n = self.shard_counts[fp]
        if self.specs[fp]["stage"] == "zero-shot-embed":
            from vertebrae.workflow_zero_shot import shard_path as zero_shot_shard_path

            return [zero_shot_shard_path(self.specs[fp]["side"], fp, i, n) for i in range(n)]
        path = retrieval_shard_path if self.specs[fp].get("protocol") == "retrieval" else shard_path
        return [path(fp, i, n) for i in range(n)]

    def final_outputs(self) -> list[str]:
        names = [*self.reports, *self.retrieval_reports, *self.zero_shot_reports]
        return [path for name in names for path in report_paths(name).values()]

    def fingerprints(self, stage: str) -> list[str]:
        return [fp for fp, spec in self.specs.items() if spec["stage"] == stage]


def _ref(fp: str, path: str) -> dict[str, str]:
    return {"fingerprint": fp, "path": path}


def scoring_plan_from_decl(bench: Mapping[str, Any], seed: int, *, where: str) -> ScoringPlan:
    """The benchmark's ScoringPlan: overlap config, metrics, stability, Separatix, primary metric."""
    stability, separatix = bench["stability"], bench["separatix"]
    try:
        return ScoringPlan(
            scoring=scoring_from_decl(bench, where=where),
            seed=seed,
            metrics=tuple(metric_from_config(entry) for entry in bench["metrics"]),
            stability=StabilityConfig(**stability) if stability["enabled"] else None,
            separatix=SeparatixConfig(**separatix) if separatix["enabled"] else None,
            primary_metric=bench["primary_metric"],
        )
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def compression_from_decl(decl: Mapping[str, Any], *, where: str) -> EmbeddingCompressionConfig:
    try:
        return EmbeddingCompressionConfig(**decl)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def plan(config: Mapping[str, Any], *, base_dir: str | Path = ".") -> WorkflowPlan:
    """Validate ``config`` and plan every job; paths in the config resolve against ``base_dir``."""
    config = validate_config(config)
    base_dir = Path(base_dir)
    result = WorkflowPlan()
    for name, bench in config.get("benchmarks", {}).items():
        where = f"benchmarks.{name}"
        dataset = bench["dataset"]
        identity_key = declared_identity_key(dataset, base_dir=base_dir, where=f"{where}.dataset")
        n_rows = declared_row_count(dataset, base_dir=base_dir, where=f"{where}.dataset")
        bounds = shard_bounds(n_rows, bench.get("shards", config["embedding"]["shards"]),
                              batch_size=config["embedding"]["batch_size"])
        scoring_plan = scoring_plan_from_decl(bench, config["seed"], where=where)
        compressions = [compression_from_decl(d, where=f"{where}.compression[{i}]") for i, d in enumerate(bench["compression"])]
        common = {"dataset": dataset, "identity": identity_key, "where": f"{where}.dataset"}
        p_recipe = protocol_recipe(identity_key, declared_targets(dataset))
        protocol_fp = result.add({"stage": "protocol", "fingerprint": fingerprint("protocol", p_recipe), "recipe": p_recipe, **common})
        protocol_ref = _ref(protocol_fp, protocol_path(protocol_fp))
        candidates = []
        for ext_name, decl in bench["extractors"].items():
            ext_where = f"{where}.extractors.{ext_name}"
            extractor = build_extractor(ext_name, decl, where=ext_where)
            job = {**common, "extractor": {"name": ext_name, "decl": decl, "where": ext_where}, "endpoint": ENDPOINT}
            fit_ref = None
            if extractor.learns:
                f_recipe = fit_recipe(identity_key, ENDPOINT, extractor)
                fit_fp = result.add({"stage": "fit", "fingerprint": fingerprint("fitted-extractor", f_recipe), "recipe": f_recipe, **job})
                fit_ref = _ref(fit_fp, fitted_path(fit_fp))
            e_recipe = embedding_recipe(identity_key, ENDPOINT, extractor)
            embed_fp = result.add({
                "stage": "embed", "fingerprint": fingerprint("embedding", e_recipe), "recipe": e_recipe, **job,
                "n_rows": n_rows, "shards": [list(b) for b in bounds], "batch_size": config["embedding"]["batch_size"],
                "fit": fit_ref,
            })
            result.shard_counts.setdefault(embed_fp, len(result.specs[embed_fp]["shards"]))
            variants = [(ext_name, _ref(embed_fp, embedding_path(embed_fp)), None)]
            for compression in compressions:
                c_recipe = compression_recipe(embed_fp, compression)
                compressed_fp = result.add({
                    "stage": "compress", "fingerprint": fingerprint("compressed", c_recipe), "recipe": c_recipe,
                    "embedding": _ref(embed_fp, embedding_path(embed_fp)), "compression": compression.to_dict(),
                })
                variants.append((variant_name(ext_name, compression), _ref(compressed_fp, compressed_path(compressed_fp)),
                                 compression.to_dict()))
            for variant, embedding_ref, compression in variants:
                s_recipe = score_recipe(embedding_ref["fingerprint"], protocol_fp, scoring_plan)
                score_fp = result.add({
                    "stage": "score", "fingerprint": fingerprint("score", s_recipe), "recipe": s_recipe,
                    "embedding": embedding_ref, "protocol": protocol_ref, "plan": scoring_plan.to_dict(),
                    "target_type": dataset["target_type"],
                })
                candidates.append({"name": variant, "score": _ref(score_fp, score_path(score_fp)), "embedding": embed_fp,
                                   "scored_embedding": embedding_ref["fingerprint"], "extractor": extractor.recipe(),
                                   "compression": compression})
        r_recipe = {"benchmark": name, "protocol": protocol_fp, "candidates": candidates, "plan": scoring_plan.to_dict()}
        result.reports[name] = result.add({
            **r_recipe, "stage": "report", "fingerprint": fingerprint("report", r_recipe), "recipe": r_recipe,
            "protocol": protocol_ref, "target_type": dataset["target_type"],
        })
    for name, bench in config.get("retrieval", {}).items():
        if name in result.reports:
            raise ConfigError(f"retrieval.{name}: a labelled benchmark has the same name; report names must be unique")
        _plan_retrieval(result, name, bench, config, base_dir)
    for name, bench in config.get("zero_shot", {}).items():
        if name in result.reports or name in result.retrieval_reports:
            raise ConfigError(f"zero_shot.{name}: another benchmark has the same name; report names must be unique")
        from vertebrae.workflow_zero_shot import plan_zero_shot

        plan_zero_shot(result, name, bench, config, base_dir)
    return result


def retrieval_config_from_decl(bench: Mapping[str, Any], *, where: str):
    from vertebrae.scoring.retrieval import RetrievalConfig

    decl = dict(bench["retrieval"])
    decl["ks"] = tuple(decl["ks"])
    try:
        return RetrievalConfig(**decl)
    except ValueError as exc:
        raise ConfigError(f"{where}.retrieval: {exc}") from None


def _plan_retrieval(result: WorkflowPlan, name: str, bench: Mapping[str, Any], config: Mapping[str, Any], base_dir: Path) -> None:
    from vertebrae.data.retrieval_sources import retrieval_row_counts
    from vertebrae.stages.retrieval import (
        FIT_ENDPOINT, retrieval_branch, retrieval_compression_recipe, retrieval_protocol_recipe, retrieval_score_recipe,
    )

    where = f"retrieval.{name}"
    dataset = bench["dataset"]
    identity = identity_from_decl(dataset["identity"], where=f"{where}.dataset.identity")
    if not identity.resolved:
        raise ConfigError(f"{where}.dataset.identity: retrieval datasets take a declared or manifest identity")
    identity_key = identity.key()
    counts = dict(zip(("query", "gallery"), retrieval_row_counts(dataset["source"], base_dir=base_dir, where=f"{where}.dataset.source")))
    retrieval_config = retrieval_config_from_decl(bench, where=where)
    compression = None if bench["compression"] is None else compression_from_decl(bench["compression"], where=f"{where}.compression")
    common = {"protocol": "retrieval", "dataset": dataset, "identity": identity_key, "where": f"{where}.dataset"}
    p_recipe = retrieval_protocol_recipe(identity_key, dataset["exclude_same_id"])
    protocol_fp = result.add({"stage": "retrieval-protocol", "fingerprint": fingerprint("protocol", p_recipe), "recipe": p_recipe, **common})
    protocol_ref = _ref(protocol_fp, retrieval_protocol_path(protocol_fp))
    n_shards = bench.get("shards", config["embedding"]["shards"])
    candidates = []
    for ext_name, decl in bench["extractors"].items():
        ext_where = f"{where}.extractors.{ext_name}"
        extractor = build_extractor(ext_name, decl, where=ext_where)
        job = {**common, "extractor": {"name": ext_name, "decl": decl, "where": ext_where}}
        fit_ref = None
        if extractor.learns:
            f_recipe = fit_recipe(identity_key, FIT_ENDPOINT, extractor)
            fit_fp = result.add({"stage": "fit", "fingerprint": fingerprint("fitted-extractor", f_recipe), "recipe": f_recipe,
                                 **job, "endpoint": FIT_ENDPOINT})
            fit_ref = _ref(fit_fp, fitted_path(fit_fp))
        refs = {}
        for side in ("query", "gallery"):
            branch = retrieval_branch(extractor, side, bench.get(f"{side}_branch"), where=where)
            e_recipe = embedding_recipe(identity_key, side, extractor, branch, fit_endpoint=FIT_ENDPOINT)
            bounds = shard_bounds(counts[side], n_shards, batch_size=config["embedding"]["batch_size"])
            fp = result.add({
                "stage": "embed", "fingerprint": fingerprint("embedding", e_recipe), "recipe": e_recipe, **job,
                "endpoint": side, "side": side, "branch": branch, "fit_endpoint": FIT_ENDPOINT, "n_rows": counts[side],
                "shards": [list(b) for b in bounds], "batch_size": config["embedding"]["batch_size"], "fit": fit_ref,
            })
            result.shard_counts.setdefault(fp, len(result.specs[fp]["shards"]))
            refs[side] = _ref(fp, retrieval_embedding_path(fp))
        variants = [(ext_name, refs["query"], refs["gallery"], None)]
        if compression is not None:
            c_recipe = retrieval_compression_recipe(refs["query"]["fingerprint"], refs["gallery"]["fingerprint"], compression)
            pair_fp = result.add({"stage": "compress-retrieval", "fingerprint": fingerprint("compressed", c_recipe),
                                  "recipe": c_recipe, "query": refs["query"], "gallery": refs["gallery"],
                                  "compression": compression.to_dict()})
            paths = retrieval_compressed_paths(pair_fp)
            variants.append((variant_name(ext_name, compression), _ref(f"{pair_fp}/query", paths["query"]),
                             _ref(f"{pair_fp}/gallery", paths["gallery"]), compression.to_dict()))
        for variant, q_ref, g_ref, compression_decl in variants:
            s_recipe = retrieval_score_recipe(q_ref["fingerprint"], g_ref["fingerprint"], protocol_fp, retrieval_config)
            score_fp = result.add({
                "stage": "score-retrieval", "fingerprint": fingerprint("score", s_recipe), "recipe": s_recipe,
                "query": q_ref, "gallery": g_ref, "protocol": protocol_ref, "retrieval": retrieval_config.to_dict(),
            })
            candidates.append({"name": variant, "score": _ref(score_fp, retrieval_score_path(score_fp)),
                               "query": q_ref["fingerprint"], "gallery": g_ref["fingerprint"],
                               "extractor": extractor.recipe(), "compression": compression_decl})
    r_recipe = {"benchmark": name, "protocol": protocol_fp, "candidates": candidates, "retrieval": retrieval_config.to_dict()}
    result.retrieval_reports[name] = result.add({
        **r_recipe, "stage": "retrieval-report", "fingerprint": fingerprint("report", r_recipe), "recipe": r_recipe,
        "protocol": protocol_ref, "identity": identity_key,
    })


def load_config_file(path: str | Path) -> dict[str, Any]:
    import yaml

    try:
        return yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from None


def benchmarks_from_config(config: Mapping[str, Any], *, base_dir: str | Path = "."):
    """In-process ``Benchmark`` objects for every benchmark of ``config``, with the workflow's settings."""
    from vertebrae.protocols.labelled import Benchmark
    from vertebrae.core.config import EmbeddingConfig

    config = validate_config(config)
    benchmarks = {}
    for name, bench in config.get("benchmarks", {}).items():
        where = f"benchmarks.{name}"
        dataset = load_declared_dataset(bench["dataset"], base_dir=Path(base_dir), where=f"{where}.dataset")
        extractors = [build_extractor(n, d, where=f"{where}.extractors.{n}") for n, d in bench["extractors"].items()]
        embedding = EmbeddingConfig(batch_size=config["embedding"]["batch_size"],
                                    shards=bench.get("shards", config["embedding"]["shards"]))
        scoring_plan = scoring_plan_from_decl(bench, config["seed"], where=where)
        benchmarks[name] = Benchmark(
            dataset, extractors, metrics=scoring_plan.metrics, primary_metric=scoring_plan.primary_metric,
            scoring_config=scoring_plan.scoring,
            compression_configs=[compression_from_decl(d, where=f"{where}.compression[{i}]") for i, d in enumerate(bench["compression"])],
            stability_config=scoring_plan.stability, separatix_config=scoring_plan.separatix,
            embedding_config=embedding, seed=config["seed"], name=name,
        )
    return benchmarks


def retrieval_benchmarks_from_config(config: Mapping[str, Any], *, base_dir: str | Path = "."):
    """In-process ``RetrievalBenchmark`` objects for every retrieval benchmark of ``config``."""
    from vertebrae.data.retrieval_sources import load_retrieval_source
    from vertebrae.core.config import EmbeddingConfig
    from vertebrae.protocols.retrieval import RetrievalBenchmark

    config = validate_config(config)
    benchmarks = {}
    for name, bench in config.get("retrieval", {}).items():
        where = f"retrieval.{name}"
        decl = bench["dataset"]
        data = load_retrieval_source(decl["source"], base_dir=Path(base_dir), where=f"{where}.dataset.source")
        dataset = data.to_dataset(identity_from_decl(decl["identity"], where=f"{where}.dataset.identity"),
                                  exclude_same_id=decl["exclude_same_id"])
        extractors = [build_extractor(n, d, where=f"{where}.extractors.{n}") for n, d in bench["extractors"].items()]
        compression = None if bench["compression"] is None else compression_from_decl(bench["compression"], where=f"{where}.compression")
        benchmarks[name] = RetrievalBenchmark(
            dataset, extractors, retrieval_config=retrieval_config_from_decl(bench, where=where), compression_config=compression,
            embedding_config=EmbeddingConfig(batch_size=config["embedding"]["batch_size"],
                                             shards=bench.get("shards", config["embedding"]["shards"])),
            query_branch=bench.get("query_branch"), gallery_branch=bench.get("gallery_branch"), name=name,
        )
    return benchmarks
