"""Job specs: every check a spec passes before ``vertebrae plan`` writes it, and the plan reader every job uses.

The workflow hands ``vertebrae plan`` each spec as a file (``--spec-file``, see ``spec_file_text``) rather than as a
shell argument, which Linux caps at 128 KiB (a report spec of 1,000 candidates is about 750 KB).

A job spec is one JSON object of ``vertebrae.planning.plan``. ``stage`` names the job; ``fingerprint`` names its
output and is the hash of ``recipe`` under the stage's artifact kind (``KIND_OF_STAGE``), except a zero-shot
protocol, whose fingerprint is the protocol payload's own: the write-protocol job builds the protocol and checks it.
Specs that declare an extractor are re-derived against it (recipe, row count, shard bounds).

A plan job reads only its spec file and the user's files it checks, never the run's caches (issue 47): the checks
of its extractor that the planner recorded (``vertebrae.core.check_records``) come in the spec file's text
(``with_checks``: key ``checked``, outside the digest of its name), and the tar files of a WebDataset source are
checked by their headers here, their bytes against the planned digests by the shard jobs that read them.

Imports: JSON, the fingerprint, the JSON artifact I/O and the check records only; the extractor, its recipe and the data source (numpy,
scikit-learn, a model library) come in inside the checks of the fit and embedding specs that need them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from vertebrae.core.artifacts import read_json_artifact, write_json_artifact
from vertebrae.core.errors import ArtifactError, CorruptArtifactError, ValidationError
from vertebrae.core.fingerprint import FINGERPRINT_LENGTH, canonical_json, fingerprint, sha256_hex
from vertebrae.core.check_records import collecting, given

KIND_OF_STAGE = {
    "fit": "fitted-extractor", "embed": "embedding", "compress": "compressed", "protocol": "protocol", "score": "score",
    "report": "report", "retrieval-protocol": "protocol", "compress-retrieval": "compressed",
    "score-retrieval": "score", "retrieval-report": "report",
    "score-retrieval-partial": "retrieval-partial", "merge-retrieval-partials": "score",
    "zero-shot-embed": "embedding", "compress-zero-shot": "compressed", "score-zero-shot": "score",
    "zero-shot-report": "report", "compare": "comparison", "embed-sweep": "embedding-sweep",
    "score-labelled-partial": "labelled-partial", "merge-labelled-partials": "score",
    "views": "views",
}
BASE_DIR = Path(".")  # relative data paths in job specs resolve against the working directory
SPEC_FILE_NAME = re.compile(r"(?P<fp>[0-9a-f]{16})-(?P<digest>[0-9a-f]{16})\.json")
CHECKED = "checked"  # a spec file's records of its extractor's checks (``with_checks``): not part of the job spec
EXTRACTOR_STAGES = ("fit", "embed", "zero-shot-embed", "embed-sweep")


def spec_kind(spec: Mapping[str, Any]) -> str:
    """The protocol a fit or embed spec serves: "retrieval" or "labelled".

    The spec's ``protocol`` key is "retrieval" for a retrieval endpoint (zero-shot specs use that key for the
    protocol's ``{fingerprint, path}`` reference and have stages of their own).
    """
    return "retrieval" if spec.get("protocol") == "retrieval" else "labelled"


def spec_extractor(spec: Mapping[str, Any]):
    """The extractor a job spec declares (``spec["extractor"]``: name, declaration, config location)."""
    from vertebrae.extractors.registry import build_extractor

    decl = spec["extractor"]
    return build_extractor(decl["name"], decl["decl"], where=decl["where"])


def check_spec(spec: Mapping[str, Any]) -> None:
    """Re-derive a job spec's fingerprint (and, for extractor jobs, its recipe and shards) from its content."""
    stage = spec.get("stage")
    if stage == "zero-shot-protocol":
        if spec["recipe"].get("zero_shot_protocol") != spec["fingerprint"]:
            raise ValidationError(f"job spec {spec['fingerprint']}: its recipe names protocol "
                                  f"{spec['recipe'].get('zero_shot_protocol')!r}")
        return
    if not isinstance(stage, str) or stage not in KIND_OF_STAGE:
        raise ValidationError(f"job spec has unknown stage {stage!r}")
    if fingerprint(KIND_OF_STAGE[stage], spec["recipe"]) != spec["fingerprint"]:
        raise ValidationError(f"job spec {spec['fingerprint']}: its recipe does not hash to its fingerprint")
    if stage == "embed-sweep":  # every layer: the single-layer embedding spec it stands for
        if [layer["fingerprint"] for layer in spec["layers"]] != spec["recipe"]["embeddings"]:
            raise ValidationError(f"job spec {spec['fingerprint']}: its layers are not the embeddings of its recipe")
        for layer in spec["layers"]:
            extractor = spec_extractor(layer)
            if fingerprint("embedding", _extractor_recipe({**spec, "stage": "embed"}, extractor)) != layer["fingerprint"]:
                raise ValidationError(f"job spec {spec['fingerprint']}: extractor {extractor.name!r} does not match the "
                                      f"embedding {layer['fingerprint']} it sweeps")
        check_rows(spec, endpoint_rows(spec), endpoint_segments(spec))
        check_tars(spec)
        return
    if stage in ("fit", "embed", "zero-shot-embed"):
        extractor = spec_extractor(spec)
        if _extractor_recipe(spec, extractor) != spec["recipe"]:
            raise ValidationError(f"job spec {spec['fingerprint']}: extractor {extractor.name!r} does not match its recipe")
        if stage == "embed" or (stage == "zero-shot-embed" and spec["side"] == "samples"):
            check_rows(spec, endpoint_rows(spec), endpoint_segments(spec))
            check_tars(spec)
        elif stage == "zero-shot-embed":
            # the prompts' count is fixed by the protocol fingerprint in the recipe: only their shard bounds can be off
            check_rows(spec, spec["n_rows"])


def _extractor_recipe(spec: Mapping[str, Any], extractor) -> dict[str, Any]:
    """The recipe a fit or embedding spec's extractor gives today."""
    if spec["stage"] == "zero-shot-embed":
        from vertebrae.stages.zero_shot import prompt_embedding_recipe, sample_embedding_recipe

        if spec["side"] == "samples":
            return sample_embedding_recipe(spec["identity"], extractor, spec["branch"])
        return prompt_embedding_recipe(spec["protocol"]["fingerprint"], extractor, spec["branch"])
    from vertebrae.stages.common import embedding_recipe, fit_recipe

    if spec["stage"] == "fit":
        return fit_recipe(spec["identity"], spec["endpoint"], extractor)
    return embedding_recipe(spec["identity"], spec["endpoint"], extractor, spec.get("branch"),
                            fit_endpoint=spec.get("fit_endpoint"), fit_identity=spec.get("fit_identity"))


def check_rows(spec: Mapping[str, Any], n_rows: int, segments: list[int] | None = None) -> None:
    """An embedding spec's planned row count, segments (``spec["segments"]``, only where the source has them) and
    shard bounds still hold for a source of ``n_rows`` rows in ``segments``."""
    from vertebrae.stages.common import shard_bounds

    if n_rows != spec["n_rows"] or segments != spec.get("segments"):
        raise ValidationError(f"{spec['where']}: the source now has {n_rows} rows"
                              + (f" in {len(segments)} tar file(s)" if segments is not None else "")
                              + f", the plan expected {spec['n_rows']}"
                              + (f" in {len(spec['segments'])}" if spec.get("segments") is not None else "") + "; re-plan")
    bounds = [list(b) for b in shard_bounds(n_rows, len(spec["shards"]), batch_size=spec["batch_size"], segments=segments)]
    if bounds != spec["shards"]:
        raise ValidationError(f"{spec['where']}: the plan's shard bounds are not the ones its rows give now; re-plan")


def endpoint_rows(spec: Mapping[str, Any]) -> int:
    """The number of rows an embedding spec's endpoint has now (the query or gallery side of a retrieval one)."""
    if spec_kind(spec) == "retrieval":
        from vertebrae.data.declared.retrieval import retrieval_row_counts

        counts = retrieval_row_counts(spec["dataset"]["source"], base_dir=BASE_DIR, where=f"{spec['where']}.source")
        return counts[0] if spec["side"] == "query" else counts[1]
    from vertebrae.data.declared.labelled import declared_row_count

    return declared_row_count(spec["dataset"], base_dir=BASE_DIR, where=spec["where"])


def endpoint_segments(spec: Mapping[str, Any], base_dir: Path = BASE_DIR) -> list[int] | None:
    """The segment starts of an embedding spec's endpoint rows (``shard_bounds``): a WebDataset source's or
    retrieval side's tar files (``retrieval_segments``), read from their headers; None for any other source. The planners call it on the spec they
    build (with the config's ``base_dir``), ``check_spec`` on the spec it checks."""
    if spec_kind(spec) == "retrieval":
        from vertebrae.data.declared.retrieval import retrieval_segments

        queries, gallery = retrieval_segments(spec["dataset"]["source"], base_dir=base_dir, where=f"{spec['where']}.source")
        return queries if spec["side"] == "query" else gallery
    from vertebrae.data.sources.webdataset import source_segments

    return source_segments(spec["dataset"]["source"], base_dir=base_dir, where=f"{spec['where']}.source")


def endpoint_tars(spec: Mapping[str, Any], base_dir: Path = BASE_DIR) -> list[list] | None:
    """``[[rows, sha256], ...]`` of every tar file of an embedding spec's endpoint rows where they come from a
    WebDataset source or ``source_pair`` side (``wds_tars``), else None (a ``label_split`` too: its sides interleave
    the tars). A shard job then opens only its own tar files, checking each against its entry
    (``vertebrae.stages.jobs.planned_tar_rows``)."""
    from vertebrae.core.file_digests import FileDigests

    source = spec["dataset"]["source"]
    digests = FileDigests.under(base_dir)
    if spec_kind(spec) == "retrieval":
        if not isinstance(source, Mapping) or source.get("type") != "source_pair":
            return None
        from vertebrae.data.declared.sides import pair_tars

        queries, gallery = pair_tars(source, base_dir=base_dir, where=f"{spec['where']}.source", digests=digests)
        found = queries if spec["side"] == "query" else gallery
    else:
        from vertebrae.data.sources.webdataset import source_tars

        found = source_tars(source, base_dir=base_dir, where=f"{spec['where']}.source", digests=digests)
    digests.save()
    return found


def endpoint_layout(spec: Mapping[str, Any], base_dir: Path = BASE_DIR) -> tuple[list[int] | None, list[list] | None]:
    """``(endpoint_segments, endpoint_tars)`` of an embedding spec, the tar headers read once: where the endpoint
    records tar files, its segments are where each non-empty tar's rows start."""
    from vertebrae.data.sources.webdataset import segment_starts

    tars = endpoint_tars(spec, base_dir)
    if tars is None:
        return endpoint_segments(spec, base_dir), None
    return segment_starts([count for count, _ in tars]), tars


def check_tars(spec: Mapping[str, Any]) -> None:
    """An embedding spec's recorded tar files (``endpoint_tars``) agree with its rows and segments, which
    ``check_rows`` checked against the tars' headers: their bytes are checked against the recorded digests by the
    shard jobs that read them (``vertebrae.stages.jobs.planned_tar_rows``), not here, where a multi-GB tar set would
    be hashed again (a job reads no digest cache)."""
    from vertebrae.data.sources.webdataset import segment_starts

    tars = spec.get("tars")
    if tars is None:
        return
    counts = [count for count, _ in tars]
    if sum(counts) != spec["n_rows"] or segment_starts(counts) != spec.get("segments"):
        raise ValidationError(f"{spec['where']}: the plan's tar files do not hold its rows; re-plan")


def spec_content(value: Any) -> Any:
    """``value`` (a job spec, or part of one) without its context: every ``where`` key at any depth, and ``name``
    where it names a candidate (a mapping that also holds its ``decl``). A dataset or extractor declaration keeps
    its own keys: a declared identity's ``name`` is data, not context."""
    if isinstance(value, Mapping):
        context = {"where"} | ({"name"} if "decl" in value else set())
        return {k: v if k in ("decl", "dataset", "recipe") else spec_content(v)
                for k, v in value.items() if k not in context}
    if isinstance(value, list) and value and isinstance(value[0], Mapping):  # a spec's lists are homogeneous:
        return [spec_content(item) for item in value]  # only lists of mappings (candidates, layers) hold context
    return value


def spec_file_text(spec: Mapping[str, Any]) -> tuple[str, str]:
    """The name (``{fingerprint}-{digest}.json``) and text (canonical JSON) of ``spec``'s spec file.

    ``digest``: the first 16 hex digits of the SHA-256 of the canonical JSON of ``spec_content(spec)``: everything
    the job reads to write its output, its context left out, so two configs that plan the same job (a shared
    candidate under another benchmark or candidate name) name the same file and rerun nothing of each other's;
    the text keeps the context of the config that wrote it last, for the job's messages. Not a fingerprint: it
    names no artifact and is recorded nowhere but in the spec file's name.
    """
    return spec_file_name(spec), canonical_json(spec)


def spec_file_name(spec: Mapping[str, Any]) -> str:
    """The name of ``spec``'s spec file (``spec_file_text``), without its text."""
    return f"{spec['fingerprint']}-{_content_digest(spec)}.json"


def _content_digest(spec: Mapping[str, Any]) -> str:
    return sha256_hex(canonical_json(spec_content({k: v for k, v in spec.items() if k != CHECKED})))[:FINGERPRINT_LENGTH]


def checks_of(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The check records (``vertebrae.core.check_records.collecting``) that building a fit or embedding spec's
    extractor and its recipe consults, as ``check_spec`` builds them; empty for any other spec."""
    stage = spec.get("stage")
    if stage not in EXTRACTOR_STAGES:
        return {}
    with collecting() as found:
        if stage == "embed-sweep":
            for layer in spec["layers"]:
                _extractor_recipe({**spec, "stage": "embed"}, spec_extractor(layer))
        else:
            _extractor_recipe(spec, spec_extractor(spec))
    return found


def with_checks(spec: dict[str, Any], memo: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """``spec`` with the records of its extractor's checks (``checks_of``, key ``CHECKED``) where it has any: the
    planner's (inside ``check_records.remembered_in``), handed to the plan job in its spec file's text so that the job
    recalls them without reading the record folder. They are not in the digest of the file's name (the same spec
    keeps its name) nor in the plan the job writes; a job under other package versions than the planner's finds
    no record of its own and checks in full. ``memo`` (one per planning): the records of each extractor declaration
    and stage found once, so a check that keeps no record (a timm ``hf-hub:`` model) runs once more, not per spec."""
    if spec.get("stage") not in EXTRACTOR_STAGES:
        return spec
    key = canonical_json({"stage": spec["stage"], "side": spec.get("side"),
                          "extractors": [s.get("extractor") for s in spec.get("layers") or [spec]]})
    found = memo.get(key) if memo is not None else None
    if found is None:
        found = checks_of(spec)
        if memo is not None:
            memo[key] = found
    return {**spec, CHECKED: found} if found else spec


def read_spec_file(path: str | Path) -> dict[str, Any]:
    """The job spec of the spec file ``path`` (``spec_file_text``), refused naming the file unless its text hashes
    to the digest in its name and the spec's fingerprint is the one in its name."""
    name = SPEC_FILE_NAME.fullmatch(Path(path).name)
    if name is None:
        raise ValidationError(f"{path}: not a job spec file name ({{fingerprint}}-{{digest}}.json, 16 hex digits each)")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ArtifactError(f"{path}: cannot read the job spec file: {exc}") from None
    try:
        spec = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValidationError(f"{path}: the job spec is not JSON (edited or truncated): {exc}; delete it: the next "
                              "Snakemake start writes it again") from None
    if not isinstance(spec, dict) or _content_digest(spec) != name["digest"] or canonical_json(spec) != text:
        raise ValidationError(f"{path}: its content does not hash to the digest in its name (edited or truncated); "
                              "delete it: the next Snakemake start writes it again")
    if not isinstance(spec, dict) or spec.get("fingerprint") != name["fp"]:
        found = spec.get("fingerprint") if isinstance(spec, dict) else None
        raise ValidationError(f"{path}: holds the job spec {found!r}, not {name['fp']}")
    return spec


def run_plan(spec: str | None, output: str | Path, spec_file: str | Path | None = None) -> None:
    """``vertebrae plan``: check the job spec (JSON text ``spec``, or the spec file ``spec_file`` the workflow
    writes, see ``read_spec_file``) and write it as the plan artifact ``output``."""
    if (spec is None) == (spec_file is None):
        raise ValidationError("give the job spec as exactly one of --spec (JSON text) or --spec-file (a spec file)")
    if spec_file is not None:
        spec = read_spec_file(spec_file)
    else:
        try:
            spec = json.loads(spec)
        except json.JSONDecodeError as exc:
            raise ValidationError(f"job spec is not JSON: {exc}") from None
    if not isinstance(spec, dict):
        raise ValidationError(f"job spec is a JSON {type(spec).__name__}, not an object")
    spec = dict(spec)
    checked = spec.pop(CHECKED, None)
    with given(checked if isinstance(checked, dict) else {}):  # the planner's records only: no cache is read
        check_spec(spec)
    write_json_artifact(output, "plan", spec, fingerprint=spec["fingerprint"], recipe=spec["recipe"])


def check_plan_recipe(path: str | Path, spec: Any) -> None:
    """A plan artifact's job spec must declare the recipe its fingerprint hashes (a zero-shot protocol spec: name
    itself in its recipe); CorruptArtifactError naming the file (moved aside: the plan rule writes it again)."""
    try:
        stage = spec["stage"]
        ok = (spec["recipe"].get("zero_shot_protocol") == spec["fingerprint"] if stage == "zero-shot-protocol"
              else fingerprint(KIND_OF_STAGE[stage], spec["recipe"]) == spec["fingerprint"])
    except (KeyError, TypeError, AttributeError, ValueError):
        ok = False
    if not ok:
        raise CorruptArtifactError(f"{path}: a job spec whose declaration does not hash to its fingerprint "
                                   f"({spec.get('fingerprint') if isinstance(spec, dict) else None!r})", str(path))


def load_plan(path: str | Path, stage: str) -> dict[str, Any]:
    """The job spec of the plan artifact ``path``, which must be a ``stage`` spec stored under its own fingerprint."""
    spec = read_json_artifact(path, "plan", fingerprint=None)
    check_plan_recipe(path, spec)
    if spec.get("stage") != stage:
        raise ArtifactError(f"{path}: a {spec.get('stage')!r} job spec where a {stage!r} one was expected")
    if Path(path).stem != spec["fingerprint"]:
        raise ArtifactError(f"{path}: holds the job spec {spec['fingerprint']}, not {Path(path).stem}")
    return spec


def shard_fingerprint(spec: Mapping[str, Any], index: int) -> str:
    """Fingerprint of shard ``index`` of an embedding spec: its parent endpoint and its row range."""
    return fingerprint("embedding", {"parent": spec["fingerprint"], "rows": spec["shards"][index]})



def references(value: Any) -> Iterator[dict[str, Any]]:
    """Every ``{"fingerprint", "path"}`` reference (a mapping holding both keys) inside a job spec, nested mappings
    and lists included, in order."""
    if isinstance(value, dict):
        if "fingerprint" in value and "path" in value:
            yield value
        for item in value.values():
            yield from references(item)
    elif isinstance(value, list):
        for item in value:
            yield from references(item)


__all__ = ["BASE_DIR", "CHECKED", "EXTRACTOR_STAGES", "KIND_OF_STAGE", "SPEC_FILE_NAME", "checks_of", "check_plan_recipe", "references", "check_rows", "check_spec", "check_tars", "endpoint_layout", "endpoint_rows", "endpoint_segments", "endpoint_tars", "load_plan",
           "read_spec_file", "run_plan", "shard_fingerprint", "spec_extractor", "spec_file_name", "spec_file_text",
           "spec_kind", "with_checks"]
