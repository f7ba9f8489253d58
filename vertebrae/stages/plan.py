"""``vertebrae plan`` (and ``plan-retrieval``, ``plan-zero-shot``): check one job spec and write it as a plan artifact.

A workflow runs this about fifty times, once per job spec, so it imports only what a spec needs: JSON, the
fingerprint and the JSON artifact writer for every stage; the extractor, its recipe and the data source (numpy,
scikit-learn, a model library) only for the fit and embedding specs that are checked against them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vertebrae.core.artifacts import write_json_artifact
from vertebrae.core.errors import ValidationError
from vertebrae.core.fingerprint import fingerprint

KIND_OF_STAGE = {
    "fit": "fitted-extractor", "embed": "embedding", "compress": "compressed", "protocol": "protocol", "score": "score",
    "report": "report", "retrieval-protocol": "protocol", "compress-retrieval": "compressed",
    "score-retrieval": "score", "retrieval-report": "report",
}
ZERO_SHOT_STAGES = ("zero-shot-embed", "zero-shot-protocol", "compress-zero-shot", "score-zero-shot", "zero-shot-report")
BASE_DIR = Path(".")  # relative data paths in job specs resolve against the working directory


def spec_extractor(spec: Mapping[str, Any]):
    """The extractor a job spec declares (``spec["extractor"]``: name, declaration, config location)."""
    from vertebrae.extractors.registry import build_extractor

    decl = spec["extractor"]
    return build_extractor(decl["name"], decl["decl"], where=decl["where"])


def check_spec(spec: Mapping[str, Any]) -> None:
    """Re-derive a job spec's fingerprint (and, for extractor jobs, its recipe and shards) from its content."""
    stage = spec.get("stage")
    if isinstance(stage, str) and stage in ZERO_SHOT_STAGES:
        from vertebrae.stages.zero_shot_jobs import check_zero_shot_spec

        check_zero_shot_spec(spec)
        return
    if stage not in KIND_OF_STAGE:
        raise ValidationError(f"job spec has unknown stage {stage!r}")
    if fingerprint(KIND_OF_STAGE[stage], spec["recipe"]) != spec["fingerprint"]:
        raise ValidationError(f"job spec {spec['fingerprint']}: its recipe does not hash to its fingerprint")
    if stage in ("fit", "embed"):
        from vertebrae.stages.common import embedding_recipe, fit_recipe

        extractor = spec_extractor(spec)
        recipe = (fit_recipe(spec["identity"], spec["endpoint"], extractor) if stage == "fit"
                  else embedding_recipe(spec["identity"], spec["endpoint"], extractor, spec.get("branch"),
                                        fit_endpoint=spec.get("fit_endpoint")))
        if recipe != spec["recipe"]:
            raise ValidationError(f"job spec {spec['fingerprint']}: extractor {extractor.name!r} does not match its recipe")
        if stage == "embed":
            check_rows(spec, endpoint_rows(spec))


def check_rows(spec: Mapping[str, Any], n_rows: int) -> None:
    """An embedding spec's planned row count and shard bounds still hold for a source of ``n_rows`` rows."""
    from vertebrae.stages.common import shard_bounds

    bounds = [list(b) for b in shard_bounds(n_rows, len(spec["shards"]), batch_size=spec["batch_size"])]
    if n_rows != spec["n_rows"] or bounds != spec["shards"]:
        raise ValidationError(f"{spec['where']}: the source now has {n_rows} rows, the plan expected {spec['n_rows']}; re-plan")


def endpoint_rows(spec: Mapping[str, Any]) -> int:
    """The number of rows an embedding spec's endpoint has now (the query or gallery side of a retrieval one)."""
    if spec.get("protocol") == "retrieval":
        from vertebrae.data.retrieval_sources import retrieval_row_counts

        counts = retrieval_row_counts(spec["dataset"]["source"], base_dir=BASE_DIR, where=f"{spec['where']}.source")
        return counts[0] if spec["side"] == "query" else counts[1]
    from vertebrae.data.declared import declared_row_count

    return declared_row_count(spec["dataset"], base_dir=BASE_DIR, where=spec["where"])


def run_plan(spec_text: str, output: str | Path) -> None:
    try:
        spec = json.loads(spec_text)
    except json.JSONDecodeError as exc:
        raise ValidationError(f"job spec is not JSON: {exc}") from None
    check_spec(spec)
    write_json_artifact(output, "plan", spec, fingerprint=spec["fingerprint"], recipe=spec["recipe"])


__all__ = ["BASE_DIR", "KIND_OF_STAGE", "ZERO_SHOT_STAGES", "check_rows", "check_spec", "endpoint_rows", "run_plan",
           "spec_extractor"]
