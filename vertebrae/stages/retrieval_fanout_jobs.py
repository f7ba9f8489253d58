"""The fan-out retrieval jobs: ``vertebrae stage-retrieval-fanout`` (once per candidate: the fan-out bundle,
``stages.fanout_bundle``: merge spec, endpoints, the protocol's relevance rows), ``vertebrae score-retrieval-partial``
/ ``score-retrieval-fanout-partial`` (one partial: rows of the endpoints, and of the staged relevance rows, read by
range and verified chunk by chunk) and ``vertebrae merge-retrieval-partials`` (verify the partials against the
protocol, merge, write the score artifact ``score-retrieval`` writes, payload for payload; no embeddings are read).

Besides its counts a partial records what the merge needs of the endpoints without reading them: their
manifests' shape, dtype and sparsity, the query endpoint's compression metadata, the fingerprints of its inputs,
and, for the collapse check ``score-retrieval`` runs (``scoring.degenerate``), per endpoint rows it read the
column-wise minimum and maximum and the largest magnitude of the values compared (O(dimensions)): the rows of
an endpoint are one point exactly when every column's smallest and largest value quantise to the same grid
step, since quantising is monotone.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import scipy.sparse as sp

from vertebrae.core.throughput import COSTS_KEY, KEY as THROUGHPUT, PAYLOAD_KEY as THROUGHPUT_PAYLOAD, job_seconds
from vertebrae.core.throughput import score_costs
from vertebrae.core.artifact_rows import read_embedding_rows
from vertebrae.core.artifacts import read_json_document, read_manifest, write_embeddings, write_json_artifact
from vertebrae.core.errors import ArtifactError, CorruptArtifactError, StaleArtifactError, ValidationError
from vertebrae.core.fingerprint import fingerprint
from vertebrae.core.labels import describe_key
from vertebrae.core.phases import Phases
from vertebrae.data.relevance import RetrievalProtocol
from vertebrae.scoring.degenerate import GRID, _quantise, _unit_rows, detect_collapse, unit_csr_data, warn_collapse
from vertebrae.scoring.retrieval import RetrievalConfig, RetrievalScore
from vertebrae.stages.fanout_bundle import (ENDPOINTS, FANOUT_KIND, INPUTS, RELEVANCE, expected_files, link_or_copy,
                                            plan_name, resolve, write_bundle)
from vertebrae.stages.plan import load_plan
from vertebrae.stages.retrieval_fanout import (MERGE_STAGE, PARTIAL_STAGE, FanoutPartial, compute_partial,
                                               direction_inputs, merge_fanout, partial_spec_of)

if TYPE_CHECKING:
    from vertebrae.core.artifact_rows import EmbeddingRows

ROLES = ("query", "gallery")


def _read_protocol(ref: Mapping[str, str], path: str | Path) -> tuple[RetrievalProtocol, str]:
    """The verified protocol and its content hash."""
    manifest, payload = read_json_document(path, "protocol", fingerprint=ref["fingerprint"])
    try:
        return RetrievalProtocol.from_payload(payload), manifest["content_hash"]
    except ValueError as exc:
        raise ArtifactError(f"{path}: invalid retrieval protocol: {exc}") from None


def _endpoint_meta(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """``EmbeddingBlock.metadata()`` of an endpoint, from its manifest."""
    n_rows, dim = manifest["shape"]
    return {"n_rows": int(n_rows), "dim": int(dim), "dtype": manifest["dtype"], "sparse": manifest["format"] == "csr"}


def _check_ids(got: Sequence[str], expected: Sequence[str], rows: Sequence[int], role: str, path: Any) -> None:
    """Rows read from an endpoint carry the protocol's ids (``check_row_ids``, by row index)."""
    for i, (a, b) in enumerate(zip(got, expected)):
        if a != b:
            raise ValidationError(f"endpoint {role!r}: embedding row {int(rows[i])} is {describe_key(a)}, protocol row "
                                  f"is {describe_key(b)} ({path})")


def collapse_summary(matrix: Any, normalize: bool) -> np.ndarray:
    """(3, d) float64: the column-wise min and max of the compared values (L2-normalised rows when
    ``normalize``, implicit zeros of CSR rows included), then [largest magnitude, any nonzero raw value] in the
    first two entries of row 2 (a one-column endpoint: the magnitude only, ``any nonzero`` = magnitude > 0)."""
    d = matrix.shape[1]
    if sp.issparse(matrix):
        csr = sp.csr_matrix(matrix)
        data = np.asarray(csr.data, dtype=np.float64)
        any_nonzero = bool(np.any(data))
        if normalize:
            data = unit_csr_data(csr)
        values = sp.csr_matrix((data, csr.indices, csr.indptr), shape=csr.shape)
        low, high = values.min(axis=0).toarray().ravel(), values.max(axis=0).toarray().ravel()
        largest = float(np.abs(data).max()) if data.size else 0.0
    else:
        dense = np.asarray(matrix)
        any_nonzero = bool(np.any(dense))
        values = _unit_rows(dense) if normalize else np.asarray(dense, dtype=np.float64)
        low, high = values.min(axis=0), values.max(axis=0)
        largest = float(np.abs(values).max()) if values.size else 0.0
    stats = np.zeros(d)
    stats[0] = largest
    if d > 1:
        stats[1] = float(any_nonzero)
    return np.stack([np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64), stats])


def _collapsed(summaries: Sequence[np.ndarray], n_rows: int, sparse: bool, normalize: bool) -> bool:
    """``detect_collapse`` (no labels) of an endpoint whose row ranges have the given summaries: one point."""
    if n_rows < 2:
        return False
    low = np.min([s[0] for s in summaries], axis=0)
    high = np.max([s[1] for s in summaries], axis=0)
    largest = max(float(s[2, 0]) for s in summaries)
    any_nonzero = any(bool(s[2, 1] if s.shape[1] > 1 else s[2, 0] > 0) for s in summaries)
    scale = (1.0 if any_nonzero else 0.0) if normalize and not sparse else largest
    if scale == 0.0:
        return True
    return bool(np.array_equal(_quantise(low, GRID * scale), _quantise(high, GRID * scale)))


def relevance_rows(eligible: sp.csr_matrix, excluded: sp.csr_matrix | None) -> sp.csr_matrix:
    """One CSR float64 matrix of a direction's eligible grades (> 0) and excluded pairs (-1.0): the two are
    disjoint (``eligible_relevance`` drops excluded pairs), so :func:`split_relevance_rows` recovers both."""
    if excluded is None:
        return sp.csr_matrix(eligible, dtype=np.float64)
    rows = (sp.csr_matrix(eligible, dtype=np.float64) - sp.csr_matrix(excluded, dtype=np.float64)).tocsr()
    rows.sort_indices()
    return rows


def split_relevance_rows(matrix: Any, exclusions: bool, path: Any) -> tuple[sp.csr_matrix, sp.csr_matrix | None]:
    """(eligible grades, excluded pairs or None when the protocol has no exclusions) of rows of
    :func:`relevance_rows`, as canonical CSR like ``direction_inputs`` slices."""
    m = sp.csr_matrix(matrix)
    data = np.asarray(m.data, dtype=np.float64)
    if np.any((data <= 0) & (data != -1.0)):
        raise CorruptArtifactError(f"artifact {path}: relevance rows hold values other than grades > 0 and -1",
                                   str(path))
    row_of_entry = np.repeat(np.arange(m.shape[0]), np.diff(m.indptr))

    def part(keep: np.ndarray, values: np.ndarray) -> sp.csr_matrix:
        indptr = np.concatenate([[0], np.cumsum(np.bincount(row_of_entry[keep], minlength=m.shape[0]))])
        return sp.csr_matrix((values, m.indices[keep].astype(np.int32), indptr.astype(np.int32)), shape=m.shape)

    keep = data > 0
    excluded = part(~keep, np.ones(int((~keep).sum()), dtype=bool)) if exclusions else None
    return part(keep, data[keep]), excluded


def run_fanout_inputs(plan: str | Path, queries: str | Path, gallery: str | Path, protocol: str | Path,
                      output: str | Path) -> None:
    """``vertebrae stage-retrieval-fanout``: the fan-out bundle of a fanned-out candidate (``output``, a folder
    named by the merge spec's fingerprint; ``stages.fanout_bundle``), the one input of its partial jobs: the merge
    spec, the query and gallery endpoints (linked), the protocol's relevance rows (:func:`relevance_rows`) by
    query and by gallery item (the transpose: the reverse direction's) as embedding-format HDF5 keyed by the
    protocol's ids, so that each partial reads its rows by range, chunk-verified, instead of the whole protocol;
    and ``inputs.json``, which records each file's fingerprint and content hash and the protocol's content hash.

    A partial refuses a bundle file whose content is not the one recorded (naming the file); an edit of an endpoint
    or the protocol reruns this job and then all partials. A relevance error (a query, or for bidirectional scoring
    a gallery item, without an eligible positive) is raised here."""
    phases = Phases()
    spec = load_plan(plan, MERGE_STAGE)
    fp = spec["fingerprint"]
    with phases("read"):
        prot, protocol_hash = _read_protocol(spec["protocol"], protocol)
        plan_manifest, _ = read_json_document(plan, "plan", fingerprint=fp)
    args = (prot.relevance, prot.exclusions, (prot.n_queries, prot.n_gallery), prot.query_ids, prot.gallery_ids)
    eligible, excluded = direction_inputs(*args, "forward")
    if RetrievalConfig.from_dict(spec["retrieval"]).bidirectional:
        direction_inputs(*args, "reverse")  # every gallery item needs a reverse positive
    by_query = relevance_rows(eligible, excluded)
    payload: dict[str, Any] = {"plan": {"path": plan_name(fp), "fingerprint": fp,
                                        "content_hash": plan_manifest["content_hash"]},
                               "protocol": {"path": str(protocol), "fingerprint": spec["protocol"]["fingerprint"],
                                            "content_hash": protocol_hash},
                               "exclusions": excluded is not None, "relevance": {}}

    def fill(folder: Path) -> None:
        shutil.copyfile(plan, folder / plan_name(fp))
        for side, matrix, ids in (("query", by_query, prot.query_ids), ("gallery", by_query.T.tocsr(),
                                                                        prot.gallery_ids)):
            manifest = write_embeddings(folder / RELEVANCE[side], matrix, ids, fingerprint=fp,
                                        recipe={"score": fp, "relevance_rows": side})
            payload["relevance"][side] = {"path": RELEVANCE[side], "content_hash": manifest["content_hash"]}
        for role, path in (("query", queries), ("gallery", gallery)):
            manifest = read_manifest(path)
            if manifest.get("fingerprint") != spec[role]["fingerprint"]:
                raise StaleArtifactError(f"artifact {path}: stale: fingerprint {manifest.get('fingerprint')}, the "
                                         f"merge spec's {role} endpoint is {spec[role]['fingerprint']}", str(path))
            link_or_copy(path, folder / ENDPOINTS[role])
            payload[role] = {"path": ENDPOINTS[role], "fingerprint": spec[role]["fingerprint"],
                             "content_hash": manifest["content_hash"]}
        write_json_artifact(folder / INPUTS, FANOUT_KIND, payload, fingerprint=fp, recipe={"score": fp})

    with phases("write"):
        write_bundle(output, fill)
    phases.log()


def _unchanged(path: Any, got: str, recorded: Mapping[str, Any], what: str, source: Any) -> None:
    if got != recorded["content_hash"]:
        raise ArtifactError(f"{path}: the {what} changed since the fan-out bundle {source} was written (content hash "
                            f"{got}, recorded {recorded['content_hash']}): rerun stage-retrieval-fanout")


class _Relevance(NamedTuple):
    """What a partial needs of the protocol: rows [qa, qb) of its direction's eligible grades and excluded pairs,
    the whole (queries, gallery) shape, the ids of its query rows, gallery rows [ga, gb) and positive rows."""

    block: sp.csr_matrix
    excluded: sp.csr_matrix | None
    shape: tuple[int, int]
    query_ids: tuple[str, ...]
    gallery_ids: tuple[str, ...]
    positive_rows: np.ndarray
    positive_ids: tuple[str, ...]
    protocol_hash: str


def _from_protocol(spec: Mapping[str, Any], protocol: str | Path, rows: tuple[int, int, int, int]) -> _Relevance:
    prot, protocol_hash = _read_protocol(spec["protocol"], protocol)
    qa, qb, ga, gb = rows
    forward = spec["direction"] == "forward"
    eligible, excluded = direction_inputs(prot.relevance, prot.exclusions, (prot.n_queries, prot.n_gallery),
                                          prot.query_ids, prot.gallery_ids, spec["direction"])
    q_ids, g_ids = (prot.query_ids, prot.gallery_ids) if forward else (prot.gallery_ids, prot.query_ids)
    block = eligible[qa:qb]
    positive_rows = np.unique(block.indices).astype(np.int64)
    return _Relevance(block, None if excluded is None else excluded[qa:qb], eligible.shape, tuple(q_ids[qa:qb]),
                      tuple(g_ids[ga:gb]), positive_rows, tuple(g_ids[i] for i in positive_rows.tolist()),
                      protocol_hash)


def _from_fanout(spec: Mapping[str, Any], recorded: Mapping[str, Any], fanout: Any,
                 rows: tuple[int, int, int, int]) -> _Relevance:
    qa, qb, ga, gb = rows
    q_side, g_side = ("query", "gallery") if spec["direction"] == "forward" else ("gallery", "query")

    def read(side: str, a: int, b: int, picked: Any = None) -> EmbeddingRows:
        entry = recorded["relevance"][side]
        got = read_embedding_rows(entry["path"], a, b, fingerprint=recorded["plan"]["fingerprint"], rows=picked)
        _unchanged(got.path, got.manifest["content_hash"], entry, f"relevance rows by {side}", fanout)
        return got

    by_query = read(q_side, qa, qb)
    block, excluded = split_relevance_rows(by_query.matrix, bool(recorded["exclusions"]), by_query.path)
    positive_rows = np.unique(block.indices).astype(np.int64)
    by_gallery = read(g_side, ga, gb, positive_rows)
    n_queries, n_gallery = (int(v) for v in by_query.manifest["shape"])
    return _Relevance(block, excluded, (n_queries, n_gallery), by_query.row_ids, by_gallery.row_ids, positive_rows,
                      by_gallery.picked_ids, recorded["protocol"]["content_hash"])


def run_score_partial(plan: str | Path, queries: str | Path, gallery: str | Path, protocol: str | Path,
                      output: str | Path, partial: str | None = None) -> None:
    """``vertebrae score-retrieval-partial``: one (direction, query rows, gallery rows) partial of a candidate.

    ``plan`` is the partial's own spec, or the candidate's merge spec with ``partial`` naming the partial's
    fingerprint. Reads only its query rows, its gallery rows and the gallery rows of its queries' positives (by
    index) from the endpoint files (``read_embedding_rows``: each chunk read is verified), plus the protocol."""
    phases = Phases()
    spec = _partial_spec(plan, partial)
    rows = (*spec["query_rows"], *spec["gallery_rows"])
    with phases("read"):
        relevance = _from_protocol(spec, protocol, rows)
    _score_partial(spec, queries, gallery, relevance, output, phases=phases)
    phases.log()


def run_score_fanout_partial(fanout: str | Path, partial: str, output: str | Path) -> None:
    """``vertebrae score-retrieval-fanout-partial`` (the workflow's partial jobs): partial ``partial`` of the merge
    spec in the fan-out bundle ``fanout`` (``stage-retrieval-fanout``'s folder), from the endpoints and relevance
    rows in it, each read by range (the protocol is not read: the merge checks the partial against it); a file
    whose content is not the one the bundle recorded is refused naming the file."""
    phases = Phases()
    with phases("read"):
        _check_complete(fanout)
        _, recorded = read_json_document(Path(fanout) / INPUTS, FANOUT_KIND, fingerprint=None)
        _check_complete(fanout, expected_files(recorded))
        recorded = resolve(fanout, recorded)
        spec = _partial_spec(recorded["plan"]["path"], partial, recorded=recorded, fanout=fanout)
        rows = (*spec["query_rows"], *spec["gallery_rows"])
        relevance = _from_fanout(spec, recorded, fanout, rows)
    _score_partial(spec, recorded["query"]["path"], recorded["gallery"]["path"], relevance, output, recorded, fanout,
                   phases=phases)
    phases.log()


def _check_complete(fanout: str | Path, names: Iterable[str] = (INPUTS,)) -> None:
    """ArtifactError naming the files of the fan-out bundle ``fanout`` that are missing (a staging or an upload to
    object storage cut short: Snakemake counts a folder as present once anything is in it), and the way out."""
    missing = [name for name in names if not (Path(fanout) / name).is_file()]
    if missing:
        raise ArtifactError(f"fan-out bundle {fanout}: incomplete, {', '.join(missing)} missing (its staging or upload "
                            "was cut short): `vertebrae verify --repair` (with `--storage URL` on object storage) "
                            "moves it aside, and the next run stages it again")


def _partial_spec(plan: str | Path, partial: str | None, *, recorded: Mapping[str, Any] | None = None,
                  fanout: Any = None) -> dict[str, Any]:
    if partial is None:
        return load_plan(plan, PARTIAL_STAGE)
    merge_spec = load_plan(plan, MERGE_STAGE)
    if recorded is not None and merge_spec["fingerprint"] != recorded["plan"]["fingerprint"]:
        raise ArtifactError(f"{plan}: merge spec {merge_spec['fingerprint']}, the fan-out bundle {fanout} was "
                            f"written for {recorded['plan']['fingerprint']}")
    return partial_spec_of(merge_spec, partial)


def _score_partial(spec: Mapping[str, Any], queries: str | Path, gallery: str | Path, rel: _Relevance,
                   output: str | Path, recorded: Mapping[str, Any] | None = None, fanout: Any = None, *,
                   phases: Phases) -> None:
    config = RetrievalConfig.from_dict(spec["retrieval"])
    direction = spec["direction"]
    (qa, qb), (ga, gb) = spec["query_rows"], spec["gallery_rows"]
    files = {"query": (queries, spec["query"]["fingerprint"]), "gallery": (gallery, spec["gallery"]["fingerprint"])}
    q_role, g_role = ("query", "gallery") if direction == "forward" else ("gallery", "query")
    (q_path, q_fp), (g_path, g_fp) = files[q_role], files[g_role]
    with phases("read"):
        q_rows = read_embedding_rows(q_path, qa, qb, fingerprint=q_fp)
        g_rows = read_embedding_rows(g_path, ga, gb, fingerprint=g_fp, rows=rel.positive_rows)
    for rows, n, role in ((q_rows, rel.shape[0], q_role), (g_rows, rel.shape[1], g_role)):
        if rows.manifest["shape"][0] != n:
            raise ValidationError(f"endpoint {role!r}: embeddings have {rows.manifest['shape'][0]} rows, the protocol "
                                  f"has {n} ({rows.path})")
    if recorded is not None:
        for rows, role in ((q_rows, q_role), (g_rows, g_role)):
            _unchanged(rows.path, rows.manifest["content_hash"], recorded[role], role, fanout)
    _check_ids(q_rows.row_ids, rel.query_ids, range(qa, qb), q_role, q_rows.path)
    _check_ids(g_rows.row_ids, rel.gallery_ids, range(ga, gb), g_role, g_rows.path)
    _check_ids(g_rows.picked_ids, rel.positive_ids, rel.positive_rows, g_role, g_rows.path)
    positive_ids = dict(zip(rel.positive_rows.tolist(), rel.positive_ids))

    def gallery_id(indices: Any) -> list[str]:  # rows [ga, gb) and the positives' rows
        return [rel.gallery_ids[i - ga] if ga <= i < gb else positive_ids[i] for i in map(int, indices)]

    with phases("kernel"):
        partial = compute_partial(direction, q_rows.matrix, g_rows.matrix, g_rows.picked, rel.positive_rows,
                                  rel.block, rel.excluded, shape=rel.shape, query_rows=(qa, qb),
                                  gallery_rows=(ga, gb), config=config, query_ids=rel.query_ids,
                                  gallery_id=gallery_id, device=spec.get("device", "cpu"))
    normalize = config.similarity == "cosine"
    manifests = {q_role: q_rows.manifest, g_role: g_rows.manifest}
    info = {
        "inputs": {"query": spec["query"]["fingerprint"], "gallery": spec["gallery"]["fingerprint"],
                   "protocol": spec["protocol"]["fingerprint"]},
        "contents": {"query": manifests["query"]["content_hash"], "gallery": manifests["gallery"]["content_hash"],
                     "protocol": rel.protocol_hash},
        "endpoints": {role: _endpoint_meta(manifests[role]) for role in ROLES},
        "compression_metadata": (manifests["query"].get("metadata") or {}).get("compression"),
        "summaries": {q_role: [qa, qb], g_role: [ga, gb]},
        THROUGHPUT_PAYLOAD: [(manifests[role].get("metadata") or {}).get(THROUGHPUT) for role in ("query", "gallery")],
    }
    with phases("summary"):
        extra = {f"summary/{q_role}": collapse_summary(q_rows.matrix, normalize),
                 f"summary/{g_role}": collapse_summary(g_rows.matrix, normalize)}
    info[COSTS_KEY] = {"score_seconds": job_seconds()}  # this partial job's seconds (in no hash): the merge adds them
    with phases("write"):
        replace(partial, info=info, extra=extra).save(output, fingerprint=spec["fingerprint"], recipe=spec["recipe"])


def _load_partials(spec: Mapping[str, Any], paths: Sequence[str | Path]) -> list[FanoutPartial]:
    """Every planned partial, verified and checked against the spec; errors name the file."""
    expected = {ref["fingerprint"]: ref["path"] for ref in spec["partials"]}
    inputs = {"query": spec["query"]["fingerprint"], "gallery": spec["gallery"]["fingerprint"],
              "protocol": spec["protocol"]["fingerprint"]}
    loaded: dict[str, FanoutPartial] = {}
    for path in paths:
        p = FanoutPartial.load(path)
        recipe = p.recipe if isinstance(p.recipe, dict) else {}
        if p.fingerprint in loaded:
            raise ValidationError(f"{path} and {loaded[p.fingerprint].source} are the same partial ({p.fingerprint}): "
                                  "a duplicated partial")
        if p.fingerprint not in expected:
            raise StaleArtifactError(f"artifact {path}: stale or foreign retrieval partial: fingerprint "
                                     f"{p.fingerprint} (of score {recipe.get('score')}) is not one of the "
                                     f"{len(expected)} partials of score {spec['fingerprint']}", str(path))
        if (fingerprint("retrieval-partial", recipe) != p.fingerprint or recipe.get("score") != spec["fingerprint"]
                or recipe.get("direction") != p.direction or recipe.get("query_rows") != list(p.query_rows)
                or recipe.get("gallery_rows") != list(p.gallery_rows)):
            raise StaleArtifactError(f"artifact {path}: its recipe does not describe its rows or this score", str(path))
        if p.info.get("inputs") != inputs:
            raise StaleArtifactError(f"artifact {path}: stale retrieval partial: computed from inputs "
                                     f"{p.info.get('inputs')}, the score needs {inputs}", str(path),
                                     always_move=True)
        loaded[p.fingerprint] = p
    missing = [f"{path} ({fp})" for fp, path in expected.items() if fp not in loaded]
    if missing:
        raise ArtifactError(f"{len(missing)} retrieval partial(s) of score {spec['fingerprint']} not given: "
                            + ", ".join(missing[:10]) + (", ..." if len(missing) > 10 else ""))
    return [loaded[ref["fingerprint"]] for ref in spec["partials"]]


def _check_against_protocol(partials: Sequence[FanoutPartial], prot: RetrievalProtocol) -> None:
    """Each partial's query ids and positives are the protocol's (a partial of another protocol is refused)."""
    directions = {}
    for p in partials:
        if p.direction not in directions:
            directions[p.direction] = direction_inputs(prot.relevance, prot.exclusions, (prot.n_queries, prot.n_gallery),
                                                       prot.query_ids, prot.gallery_ids, p.direction)[0]
        eligible = directions[p.direction]
        ids = prot.query_ids if p.direction == "forward" else prot.gallery_ids
        (qa, qb), block = p.query_rows, directions[p.direction][slice(*p.query_rows)]
        if (p.n_queries, p.n_gallery) != eligible.shape or tuple(ids[qa:qb]) != p.query_ids or not (
                np.array_equal(block.indptr, p.positives.indptr) and np.array_equal(block.indices, p.positives.indices)
                and np.array_equal(block.data, p.positives.grades)):
            raise ValidationError(f"{p.source}: its queries or positives are not the protocol's: a partial of "
                                  "another protocol")


def _degenerate(partials: Sequence[FanoutPartial], endpoints: Mapping[str, Any], config: RetrievalConfig):
    """The collapse findings ``score_retrieval`` records, from the partials' row summaries (queries first)."""
    cosine = config.similarity == "cosine"
    findings = []
    for role, what in (("query", "Query"), ("gallery", "Gallery")):
        seen: dict[tuple[int, int], np.ndarray] = {}
        for p in partials:
            a, b = p.info["summaries"][role]
            seen.setdefault((int(a), int(b)), p.extra[f"summary/{role}"])
        n = endpoints[role]["n_rows"]
        at = 0
        for a, b in sorted(seen):
            if a != at:
                raise ValidationError(f"the partials' summaries of the {role} endpoint do not tile its rows")
            at = b
        if at != n:
            raise ValidationError(f"the partials' summaries of the {role} endpoint do not tile its rows")
        if _collapsed(list(seen.values()), n, endpoints[role]["sparse"], cosine):
            label = f"{what} embeddings" + (" (L2-normalised)" if cosine else "")
            findings.append(detect_collapse(np.broadcast_to(np.zeros((1, 1)), (n, 1)), what=label, normalize=cosine))
    return findings


def run_merge_partials(plan: str | Path, protocol: str | Path, partials: Sequence[str | Path],
                       output: str | Path) -> None:
    """``vertebrae merge-retrieval-partials``: the score artifact of a fanned-out candidate, equal to the one
    ``score-retrieval`` writes. Every partial is verified (schema, fingerprint = a planned one, content hash,
    recipe, inputs, the protocol's queries and positives) and the partials must tile each direction's queries x
    gallery exactly once; a missing, stale, duplicated or mixed partial is refused naming its file. No
    ``partials`` given: the paths the merge spec plans (the workflow's way: 10,000 paths would not fit one shell
    line)."""
    phases = Phases()
    with phases("read"):
        spec = load_plan(plan, MERGE_STAGE)
        if not partials:
            partials = [ref["path"] for ref in spec["partials"]]
        config = RetrievalConfig.from_dict(spec["retrieval"])
        loaded = _load_partials(spec, partials)
        prot, protocol_hash = _read_protocol(spec["protocol"], protocol)
    first = loaded[0]
    for p in loaded:
        if p.info.get("contents", {}).get("protocol") != protocol_hash:
            raise StaleArtifactError(f"artifact {p.source}: stale retrieval partial: computed from another "
                                     f"protocol content than {protocol}", str(p.source), always_move=True)
    _check_against_protocol(loaded, prot)
    for p in loaded[1:]:
        for key in ("contents", "endpoints", "compression_metadata"):
            if p.info.get(key) != first.info.get(key):
                raise StaleArtifactError(f"artifact {p.source}: stale or mixed retrieval partial: its inputs' {key} "
                                         f"differ from those of {first.source}", str(p.source))
    with phases("kernel"):
        score = merge_fanout(loaded, config)
    endpoints = first.info["endpoints"]
    findings = _degenerate([p for p in loaded if p.direction == "forward"], endpoints, config)
    if findings:
        texts = [text for f in findings for text in warn_collapse(f)]
        forward = replace(score.forward, warnings=texts + list(score.forward.warnings),
                          metadata={**score.forward.metadata, "degenerate": [f.to_dict() for f in findings]})
        score = RetrievalScore(forward, score.reverse, score.primary_score)
    payload = {"score": score.to_dict(), "endpoints": {"dim": endpoints["gallery"]["dim"], **endpoints},
               "compression_metadata": first.info.get("compression_metadata"),
               THROUGHPUT_PAYLOAD: first.info.get(THROUGHPUT_PAYLOAD)}  # the embed jobs' records, as score-retrieval
    costs = score_costs(payload[THROUGHPUT_PAYLOAD] or [None], [p.info.get(COSTS_KEY) for p in loaded])
    with phases("write"):
        write_json_artifact(output, "score", payload, fingerprint=spec["fingerprint"], recipe=spec["recipe"],
                            metadata={COSTS_KEY: costs})  # the endpoints' peak; the partials' seconds and its own
    phases.log()


__all__ = ["collapse_summary", "relevance_rows", "run_fanout_inputs", "run_merge_partials",
           "run_score_fanout_partial", "run_score_partial", "split_relevance_rows"]
