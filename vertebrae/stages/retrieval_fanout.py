"""Exact retrieval split into (query shard x gallery shard) partial scores and one merge: the job specs the DAG
planner adds (``fanout_specs``), the partial object and its artifact (``FanoutPartial``), and the in-process API
for users who schedule the shards themselves (``score_retrieval_partial``, ``merge_retrieval_partials``).

One partial covers the queries ``query_rows`` of one direction against its gallery rows ``gallery_rows``: the
exact counts of the scorer's kernel (``score_query_block`` over the configured blocks, merged), the direct scores of
its queries' positives and the ids of their nearest negatives. Its size is O(queries x positives), never
O(queries x gallery). Merging adds the counts (``merge_partials``) and finalizes each direction, so the result is
the one ``RetrievalScorer`` gives on the whole endpoints, bit for bit, whatever the split: ranks, ties (the
conventions' order across shard edges: gallery row, or gallery id looked up through the job's ``gallery_id``),
nearest negatives and margins are decided by direct float64 scores (``kernel``).

In the reverse direction (bidirectional scoring) the gallery endpoint plays the queries: a reverse partial's
``query_rows`` index the gallery endpoint and its ``gallery_rows`` the query endpoint.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from vertebrae.core.arrays import as_matrix, paired_matrices
from vertebrae.core.artifacts import atomic_write
from vertebrae.core.errors import ArtifactError, ConfigError, CorruptArtifactError, StaleArtifactError, ValidationError
from vertebrae.core.fingerprint import SCHEMAS, canonical_json, fingerprint, sha256_hex, to_json_value
from vertebrae.scoring.retrieval import (PositivePairs, RetrievalConfig, RetrievalPartial, RetrievalScore, admit,
                                         eligible_relevance, exclusion_matrix, finalize, merge_partials,
                                         positive_scores, prepare_endpoint, relevance_matrix)
from vertebrae.scoring.retrieval.conventions import tie_order
from vertebrae.scoring.retrieval.device import block_product, resolve_device
from vertebrae.scoring.retrieval.fused import use_fused
from vertebrae.scoring.retrieval.inputs import _IndexKeys, _row_id_keys, check_representable
from vertebrae.scoring.retrieval.kernel import _Workspace, score_query_block
from vertebrae.scoring.retrieval.scorer import blas_threads, map_blocks

PARTIAL_STAGE, MERGE_STAGE = "score-retrieval-partial", "merge-retrieval-partials"
DIRECTIONS = ("forward", "reverse")
_WHAT = {"forward": ("Query embeddings", "Gallery embeddings"), "reverse": ("Gallery embeddings", "Query embeddings")}


# ------------------------------------------------------------------------------------------------ job specs


def split_bounds(n_rows: int, shards: Any, key: str, what: str) -> list[list[int]]:
    """``shards`` contiguous row ranges of ``n_rows`` rows, as equal as possible (sizes differ by at most one);
    a ConfigError naming ``key`` when ``shards`` is not a positive integer or exceeds the rows."""
    if isinstance(shards, bool) or not isinstance(shards, int) or shards < 1:
        raise ConfigError(f"{key} must be a positive integer, got {shards!r}")
    if shards > n_rows:
        raise ConfigError(f"{key}: {shards} shards for {n_rows} {what} row(s); at most {n_rows}")
    return [[n_rows * i // shards, n_rows * (i + 1) // shards] for i in range(shards)]


def fanout_specs(score_spec: Mapping[str, Any], *, query_shards: int, gallery_shards: int, n_queries: int,
                 n_gallery: int, partial_path: Callable[[str], str], where: str = "scoring"
                 ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The partial specs and the merge spec that replace one planned ``score-retrieval`` spec.

    Partial (one per direction x query shard x gallery shard): ``{"stage": "score-retrieval-partial",
    "fingerprint": fingerprint("retrieval-partial", recipe), "recipe": {"score", "direction", "query_rows",
    "gallery_rows"}, "query", "gallery", "protocol", "retrieval", "direction", "query_rows", "gallery_rows"}``.
    A reverse partial covers the same (query shard, gallery shard) block transposed: its ``query_rows`` are a
    gallery shard, its ``gallery_rows`` a query shard. Merge: the score spec with ``stage`` =
    "merge-retrieval-partials" and ``partials`` = ``[{"fingerprint", "path": partial_path(fp)}]`` in
    (direction, query range, gallery range) order: same fingerprint and recipe as the score (the split does not
    change a bit of it). ``where`` prefixes the config keys named in errors (``scoring.query_shards``).
    """
    q_bounds = split_bounds(int(n_queries), query_shards, f"{where}.query_shards", "query")
    g_bounds = split_bounds(int(n_gallery), gallery_shards, f"{where}.gallery_shards", "gallery")
    score_fp = score_spec["fingerprint"]
    common = {"query": score_spec["query"], "gallery": score_spec["gallery"], "protocol": score_spec["protocol"],
              "retrieval": score_spec["retrieval"]}
    directions = [("forward", q_bounds, g_bounds)]
    if score_spec["retrieval"].get("bidirectional"):
        directions.append(("reverse", g_bounds, q_bounds))
    partials, refs = [], []
    for direction, rows_a, rows_b in directions:
        for qr in rows_a:
            for gr in rows_b:
                recipe = {"score": score_fp, "direction": direction, "query_rows": qr, "gallery_rows": gr}
                fp = fingerprint("retrieval-partial", recipe)
                partials.append({"stage": PARTIAL_STAGE, "fingerprint": fp, "recipe": recipe, **common,
                                 "direction": direction, "query_rows": qr, "gallery_rows": gr})
                refs.append({"fingerprint": fp, "path": partial_path(fp)})
    fanout = {"query_shards": query_shards, "gallery_shards": gallery_shards, "n_queries": int(n_queries),
              "n_gallery": int(n_gallery), "where": where}
    return partials, {**score_spec, "stage": MERGE_STAGE, "partials": refs, "fanout": fanout}


def partial_spec_of(merge_spec: Mapping[str, Any], fp: str) -> dict[str, Any]:
    """The partial spec ``fp`` of a merge spec, rebuilt with ``fanout_specs`` from the split the merge spec records
    (so a fanned-out candidate's partial jobs all read the merge job's one plan file); ArtifactError when the merge
    spec has no such partial. A merge spec's ``device`` carries over."""
    score_spec = {key: value for key, value in merge_spec.items() if key not in ("partials", "fanout")}
    split = merge_spec["fanout"]
    paths = {ref["fingerprint"]: ref["path"] for ref in merge_spec["partials"]}
    partials, _ = fanout_specs(score_spec, query_shards=split["query_shards"], gallery_shards=split["gallery_shards"],
                               n_queries=split["n_queries"], n_gallery=split["n_gallery"], where=split["where"],
                               partial_path=paths.get)
    for partial in partials:
        if partial["fingerprint"] == fp and fp in paths:
            return partial if "device" not in merge_spec else {**partial, "device": merge_spec["device"]}
    raise ArtifactError(f"merge spec {merge_spec['fingerprint']}: no partial {fp!r}")


# ----------------------------------------------------------------------------------------- partial object


_ARRAYS = ("positive_indptr", "positive_indices", "outranked", "tied", "negative_score", "negative_index",
           "negative_similarity", "grades", "rank_scores", "similarities")


@dataclass(frozen=True, eq=False)
class FanoutPartial:
    """One direction's partial score of queries ``query_rows`` against gallery rows ``gallery_rows``.

    ``partial``: the kernel's counts (``RetrievalPartial``); ``positives``: its queries' positives (global gallery
    rows) with grades and direct scores; ``query_ids``; ``negative_ids``: the id of each query's nearest negative
    ("" when none in these rows); ``n_queries`` / ``n_gallery``: the direction's endpoint sizes; ``metadata``:
    what the scorer records (dimensions, sparsity); ``config``: the RetrievalConfig as a dict; ``info`` and
    ``extra``: JSON and arrays a job adds (inputs, endpoint summaries). ``save`` / ``load``: an HDF5 artifact
    whose manifest (schema ``SCHEMAS["retrieval-partial"]``) holds a content hash over every array.
    """

    direction: str
    partial: RetrievalPartial
    positives: PositivePairs
    query_ids: tuple[str, ...]
    negative_ids: tuple[str, ...]
    n_queries: int
    n_gallery: int
    metadata: dict[str, Any]
    config: dict[str, Any]
    info: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, np.ndarray] = field(default_factory=dict)
    source: str | None = None
    fingerprint: str | None = None
    recipe: Any = None

    @property
    def query_rows(self) -> tuple[int, int]:
        return self.partial.query_start, self.partial.query_stop

    @property
    def gallery_rows(self) -> tuple[int, int]:
        (a, b), = self.partial.gallery_ranges or ((0, 0),)
        return a, b

    @property
    def name(self) -> str:
        return self.source or (f"{self.direction} partial of queries [{self.query_rows[0]}, {self.query_rows[1]}) x "
                               f"gallery [{self.gallery_rows[0]}, {self.gallery_rows[1]})")

    def _arrays(self) -> dict[str, np.ndarray]:
        p, pos = self.partial, self.positives
        arrays = {name: getattr(p, name) for name in _ARRAYS[:7]}
        arrays.update(grades=pos.grades, rank_scores=pos.rank_scores, similarities=pos.similarities)
        arrays.update({f"extra/{k}": np.ascontiguousarray(v) for k, v in self.extra.items()})
        return arrays

    def own_recipe(self) -> dict[str, Any]:
        """The recipe an API partial is saved under when none is given: what it covers and how it was scored."""
        return {"direction": self.direction, "query_rows": list(self.query_rows),
                "gallery_rows": list(self.gallery_rows), "n_queries": self.n_queries, "n_gallery": self.n_gallery,
                "retrieval": self.config}

    def save(self, path: str | os.PathLike, *, fingerprint: str | None = None, recipe: Any = None) -> dict:
        """Write the partial atomically as an HDF5 artifact; return its manifest."""
        import h5py

        recipe = self.recipe if recipe is None else recipe
        recipe = self.own_recipe() if recipe is None else recipe
        fp = fingerprint or self.fingerprint or _fingerprint("retrieval-partial", recipe)
        arrays = self._arrays()
        manifest = to_json_value({
            "schema": SCHEMAS["retrieval-partial"], "kind": "retrieval-partial", "fingerprint": fp, "recipe": recipe,
            "content_hash": _content_hash(arrays, self.query_ids, self.negative_ids),
            "direction": self.direction, "query_rows": list(self.query_rows), "gallery_rows": list(self.gallery_rows),
            "n_queries": self.n_queries, "n_gallery": self.n_gallery, "metadata": self.metadata,
            "config": self.config, "info": self.info,
        })
        text = canonical_json(manifest)
        with atomic_write(path) as tmp, h5py.File(tmp, "w", libver="latest") as f:
            for name, array in arrays.items():
                f.create_dataset(name, data=array)
            for name, ids in (("query_ids", self.query_ids), ("negative_ids", self.negative_ids)):
                encoded = [i.encode("utf-8") for i in ids]
                f.create_dataset(name, data=np.array(encoded, dtype=f"S{max([1, *map(len, encoded)])}"))
            f.attrs["manifest"] = text
            f.attrs["manifest_sha256"] = sha256_hex(text)
        return manifest

    @classmethod
    def load(cls, path: str | os.PathLike, *, fingerprint: str | None = None) -> FanoutPartial:
        """Read and verify a partial artifact (schema, manifest hash, fingerprint when given, content hash)."""
        path = os.fspath(path)
        manifest, arrays, ids = _read_partial_file(path)
        if fingerprint is not None and manifest.get("fingerprint") != fingerprint:
            raise StaleArtifactError(f"artifact {path}: stale partial: fingerprint {manifest.get('fingerprint')}, "
                                     f"expected {fingerprint}", path)
        if _content_hash(arrays, *ids) != manifest.get("content_hash"):
            raise CorruptArtifactError(f"artifact {path}: content hash mismatch", path)
        try:
            (qa, qb), (ga, gb) = manifest["query_rows"], manifest["gallery_rows"]
            partial = RetrievalPartial(qa, qb, ((ga, gb),), *(arrays[n] for n in _ARRAYS[:7]))
            positives = PositivePairs(arrays["positive_indptr"], arrays["positive_indices"], arrays["grades"],
                                      arrays["rank_scores"], arrays["similarities"])
            if len(ids[0]) != qb - qa or len(ids[1]) != qb - qa or manifest["direction"] not in DIRECTIONS:
                raise ValidationError("ids or direction do not fit the query rows")
            return cls(manifest["direction"], partial, positives, ids[0], ids[1], int(manifest["n_queries"]),
                       int(manifest["n_gallery"]), dict(manifest["metadata"]), dict(manifest["config"]),
                       dict(manifest.get("info") or {}),
                       {k[6:]: v for k, v in arrays.items() if k.startswith("extra/")}, path,
                       manifest["fingerprint"], manifest.get("recipe"))
        except (KeyError, TypeError, ValueError) as exc:
            raise CorruptArtifactError(f"artifact {path}: malformed retrieval partial ({exc})", path) from None


def _fingerprint(kind: str, recipe: Any) -> str:
    return fingerprint(kind, recipe)


def _content_hash(arrays: Mapping[str, np.ndarray], query_ids: Sequence[str], negative_ids: Sequence[str]) -> str:
    """SHA-256 over a header (each array's name, dtype and shape), every array's little-endian bytes in name
    order, then the query ids and negative ids as canonical JSON."""
    import hashlib

    h = hashlib.sha256()
    names = sorted(arrays)
    header = {name: [np.dtype(arrays[name].dtype).newbyteorder("<").str, list(arrays[name].shape)] for name in names}
    h.update(canonical_json(header).encode("utf-8") + b"\n")
    for name in names:
        a = arrays[name]
        h.update(np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<")).data)
    h.update(canonical_json([list(query_ids), list(negative_ids)]).encode("utf-8"))
    return h.hexdigest()


def _read_partial_file(path: str) -> tuple[dict, dict[str, np.ndarray], tuple[tuple[str, ...], tuple[str, ...]]]:
    """(manifest, arrays, (query ids, negative ids)) of a partial file; schema and manifest hash checked."""
    import h5py

    if not os.path.isfile(path):
        raise ArtifactError(f"artifact {path}: file not found (a missing retrieval partial)")
    try:
        with h5py.File(path, "r") as f:
            text = f.attrs.get("manifest")
            if not isinstance(text, (str, bytes)):
                raise CorruptArtifactError(f"artifact {path}: no manifest", path)
            text = text.decode("utf-8") if isinstance(text, bytes) else str(text)
            expected = f.attrs.get("manifest_sha256")
            expected = expected.decode() if isinstance(expected, bytes) else expected
            if sha256_hex(text) != expected:
                raise CorruptArtifactError(f"artifact {path}: manifest hash mismatch", path)
            manifest = json.loads(text)
            schema = manifest.get("schema") if isinstance(manifest, dict) else None
            if schema != SCHEMAS["retrieval-partial"]:
                raise ArtifactError(f"artifact {path}: schema {schema!r}, expected {SCHEMAS['retrieval-partial']!r} "
                                    "(not a retrieval partial)")
            arrays: dict[str, np.ndarray] = {}
            f.visititems(lambda name, node: arrays.__setitem__(name, node[()]) if isinstance(node, h5py.Dataset)
                         and name not in ("query_ids", "negative_ids") else None)
            ids = tuple(tuple(r.decode("utf-8") for r in f[name][()].tolist()) for name in ("query_ids", "negative_ids"))
    except ArtifactError:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure reading these bytes: the file is corrupt
        raise CorruptArtifactError(f"artifact {path}: not a readable retrieval partial ({type(exc).__name__}: "
                                   f"{exc})", path) from exc
    missing = [n for n in _ARRAYS if n not in arrays]
    if missing:
        raise CorruptArtifactError(f"artifact {path}: retrieval partial lacks {missing}", path)
    return manifest, arrays, ids  # type: ignore[return-value]


# ----------------------------------------------------------------------------------------------- scoring


def direction_inputs(relevance: Any, exclusions: Any, shape: tuple[int, int], query_ids: Sequence[str],
                     gallery_ids: Sequence[str], direction: str) -> tuple[sp.csr_matrix, sp.csr_matrix | None]:
    """(eligible grades, excluded pairs) of one direction, derived exactly as ``RetrievalScorer.score`` does
    (every query, and for the reverse every gallery item, needs an eligible positive)."""
    grades = relevance_matrix(relevance, shape, query_ids=query_ids, gallery_ids=gallery_ids)
    excluded = exclusion_matrix(exclusions, shape)
    eligible = eligible_relevance(grades, excluded, query_ids=query_ids, what="query")
    if direction == "forward":
        return eligible, excluded
    reverse = eligible_relevance(eligible.T.tocsr(), None, query_ids=gallery_ids, what="gallery item")
    return reverse, None if excluded is None else excluded.T.tocsr()


def compute_partial(direction: str, Q_rows: Any, G_rows: Any, P_rows: Any, positive_rows: np.ndarray,
                    block: sp.csr_matrix, excluded_block: sp.csr_matrix | None, *, shape: Sequence[int],
                    query_rows: Sequence[int], gallery_rows: Sequence[int], config: RetrievalConfig,
                    query_ids: Sequence[str], gallery_id: Callable[[np.ndarray], list[str]],
                    workers: int | None = None, device: str = "cpu", kernel: str = "auto") -> FanoutPartial:
    """One partial from the rows it needs: ``Q_rows`` (the direction's queries ``query_rows``), ``G_rows`` (its
    gallery rows ``gallery_rows``), ``P_rows`` (the gallery rows ``positive_rows``, ascending, that hold the
    queries' positives); ``block`` / ``excluded_block``: rows ``query_rows`` of the direction's eligible grades
    and excluded pairs (``direction_inputs``), whose whole ``shape`` is (queries, gallery); ``gallery_id(indices)``:
    gallery row ids of ``gallery_rows`` and ``positive_rows``, for messages and nearest negatives; ``device``:
    where the block products run (``device.resolve_device``; the same counts on every device); ``kernel``: how
    score blocks are counted, decided on the partial's (query, gallery) pairs as the one score job decides on
    its own (``fused.use_fused``; the same counts either way)."""
    if direction not in DIRECTIONS:
        raise ValidationError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    (qa, qb), (ga, gb) = (int(v) for v in query_rows), (int(v) for v in gallery_rows)
    n_queries, n_gallery = (int(v) for v in shape)
    if block.shape != (qb - qa, n_gallery) or (excluded_block is not None and excluded_block.shape != block.shape):
        raise ValidationError(f"the eligible rows have shape {block.shape}, expected {(qb - qa, n_gallery)}")
    what = _WHAT[direction]
    Q, G = paired_matrices(Q_rows, G_rows, what=what, need="a retrieval partial needs query and gallery rows")
    P = as_matrix(P_rows, what=what[1])
    if P.shape[1] != Q.shape[1]:
        raise ValidationError(f"{what[1]} of the positives have {P.shape[1]} dimensions, {what[0]} {Q.shape[1]}")
    admit(config, Q, G)
    positive_rows = np.asarray(positive_rows, dtype=np.int64)
    if not np.array_equal(np.unique(block.indices), positive_rows):
        raise ValidationError("positive_rows must be the ascending gallery rows of the queries' eligible positives")
    threads = workers or blas_threads()
    sim = config.similarity
    Qp = prepare_endpoint(Q, sim, what=what[0], row_ids=list(query_ids), workers=threads)
    Gp = prepare_endpoint(G, sim, what=what[1], row_ids=gallery_id(np.arange(ga, gb)), workers=threads)
    Pp = prepare_endpoint(P, sim, what=what[1], row_ids=gallery_id(positive_rows), workers=threads)
    check_representable(sim, [Qp], [Gp, Pp], what)
    local = sp.csr_matrix((block.data, np.searchsorted(positive_rows, block.indices), block.indptr),
                          shape=(qb - qa, positive_rows.size))
    found = positive_scores(Qp, Pp, local, config=config, workers=threads)
    positives = PositivePairs(found.indptr, positive_rows[found.indices], found.grades, found.rank_scores,
                              found.similarities)
    b, s = qb - qa, gb - ga

    shards = [(gs, Gp[gs:min(gs + config.gallery_block_size, s)]) for gs in range(0, s, config.gallery_block_size)]
    product = block_product(resolve_device(device), (Qp.scan, Gp.scan))
    fused = use_fused(kernel, b * s)
    local = threading.local()  # one workspace per worker thread, reused by all its blocks
    # equal scores: ids looked up for tied pairs only, among the rows gallery_id knows
    ties = tie_order(config.conventions, gallery_id, rows=np.union1d(np.arange(ga, gb), positive_rows))

    def query_block(qs: int) -> RetrievalPartial:
        qe = min(qs + config.query_block_size, b)
        workspace = getattr(local, "workspace", None) or _Workspace(product, fused)
        local.workspace = workspace
        return score_query_block(Qp[qs:qe], Gp, shards, query_offset=qa + qs, gallery_offset=ga,
                                 positives=positives.rows(qs, qe),
                                 exclusions=None if excluded_block is None else excluded_block[qs:qe],
                                 config=config, workspace=workspace, ties=ties)

    merged = merge_partials(map_blocks(query_block, range(0, b, config.query_block_size), threads))
    has = merged.negative_index >= 0
    names = iter(gallery_id(merged.negative_index[has]))
    negative_ids = tuple(next(names) if h else "" for h in has.tolist())
    meta = {"n_dimensions": int(Q.shape[1]), "query_sparse": bool(sp.issparse(Q)),
            "gallery_sparse": bool(sp.issparse(G))}
    return FanoutPartial(direction, merged, positives, tuple(query_ids), negative_ids, int(n_queries), int(n_gallery),
                         meta, config.to_dict())


# ------------------------------------------------------------------------------------------------- merge


class _NegativeKeys(_IndexKeys):
    """Gallery row keys for ``finalize``: the recorded ids of the nearest negatives, ``@int:i`` elsewhere (only
    nearest negatives are looked up), without holding one id per gallery row."""

    def __init__(self, n: int, known: Mapping[int, str]) -> None:
        super().__init__(n)
        self._known = dict(known)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return self._known.get(int(i) % len(self), super().__getitem__(i)) if len(self) else super().__getitem__(i)


def _tiles(ranges: Sequence[tuple[int, int, str]], n: int, what: str) -> None:
    """The (start, stop, name) ranges cover [0, n) exactly once; errors name the partials."""
    ranges = sorted(ranges)
    at, last = 0, None
    for a, b, name in ranges:
        if a < at:
            raise ValidationError(f"{name} and {last} cover the same {what} rows [{a}, {min(b, at)}): a duplicated "
                                  "or overlapping partial")
        if a > at:
            raise ValidationError(f"no partial covers {what} rows [{at}, {a}) (missing partial before {name})")
        at, last = b, name
    if at != n:
        raise ValidationError(f"no partial covers {what} rows [{at}, {n}) (a missing partial)")


def merge_direction(partials: Sequence[FanoutPartial], config: RetrievalConfig, direction: str):
    """The ``RetrievalResult`` of one direction from its partials (checked to tile queries x gallery)."""
    if not partials:
        raise ValidationError(f"no {direction} partial given: every partial of the direction is missing")
    first = partials[0]
    for p in partials:
        for attr in ("n_queries", "n_gallery", "metadata"):
            if getattr(p, attr) != getattr(first, attr):
                raise ValidationError(f"{p.name} and {first.name} disagree on {attr} ({getattr(p, attr)!r} vs "
                                      f"{getattr(first, attr)!r}): partials of different inputs")
    nq, ng = first.n_queries, first.n_gallery
    groups: dict[tuple[int, int], list[FanoutPartial]] = {}
    for p in partials:
        groups.setdefault(p.query_rows, []).append(p)
    _tiles([(a, b, g[0].name) for (a, b), g in groups.items()], nq, f"{direction} query")
    for (a, b), group in groups.items():
        _tiles([(*p.gallery_rows, p.name) for p in group], ng, f"{direction} gallery rows of queries [{a}, {b}): gallery")
        ref = group[0]
        for p in group[1:]:
            same = p.query_ids == ref.query_ids and all(
                np.array_equal(getattr(p.positives, n), getattr(ref.positives, n))
                for n in ("indptr", "indices", "grades", "rank_scores", "similarities"))
            if not same:
                raise ValidationError(f"{p.name} and {ref.name} disagree on the queries' ids or positives: partials "
                                      "computed from different embeddings or protocols")
    heads = [groups[key][0] for key in sorted(groups)]
    offsets = np.cumsum([0] + [h.positives.n_pairs for h in heads])
    positives = PositivePairs(
        np.concatenate([[0]] + [h.positives.indptr[1:] + o for h, o in zip(heads, offsets)]),
        *(np.concatenate([getattr(h.positives, n) for h in heads])
          for n in ("indices", "grades", "rank_scores", "similarities")))
    known: dict[int, str] = {}
    for p in partials:
        for index, key in zip(p.partial.negative_index.tolist(), p.negative_ids):
            if index >= 0 and known.setdefault(index, key) != key:
                raise ValidationError(f"{p.name}: gallery row {index} is {key!r} here and {known[index]!r} in another "
                                      "partial: partials of different inputs")
    merged = merge_partials([p.partial for p in partials])
    query_ids = tuple(k for h in heads for k in h.query_ids)
    return finalize(merged, positives, config, n_gallery=ng, query_ids=query_ids,
                    gallery_ids=_NegativeKeys(ng, known), direction=direction, metadata=first.metadata)


def merge_fanout(partials: Sequence[FanoutPartial], config: RetrievalConfig) -> RetrievalScore:
    """Both directions' results and the primary score from verified partials (see ``merge_retrieval_partials``)."""
    wanted = ("forward", "reverse") if config.bidirectional else ("forward",)
    by_direction: dict[str, list[FanoutPartial]] = {d: [] for d in wanted}
    expected = config.to_dict()
    for p in partials:
        if not isinstance(p, FanoutPartial):
            raise ValidationError(f"merge_retrieval_partials takes FanoutPartial objects, got {type(p).__name__}")
        if p.config != expected:
            diff = sorted(k for k in {*p.config, *expected} if p.config.get(k) != expected.get(k))
            raise ValidationError(f"{p.name} was scored under another retrieval config (differs in {diff})")
        if p.direction not in by_direction:
            raise ValidationError(f"{p.name} is a {p.direction} partial; the config scores {list(wanted)}")
        by_direction[p.direction].append(p)
    forward = merge_direction(by_direction["forward"], config, "forward")
    reverse = merge_direction(by_direction["reverse"], config, "reverse") if config.bidirectional else None
    primary = forward.score if reverse is None else (forward.score + reverse.score) / 2.0
    return RetrievalScore(forward, reverse, primary)


# ---------------------------------------------------------------------------------------- in-process API


def _rows(matrix: Any, index: Any) -> Any:
    """Rows of an in-memory or lazily read matrix (numpy, memmap, h5py dataset, scipy sparse)."""
    if sp.issparse(matrix):
        return sp.csr_matrix(matrix)[index]
    return matrix[index]


def score_retrieval_partial(queries: Any, gallery: Any, relevance: Any, *, query_rows: Sequence[int],
                            gallery_rows: Sequence[int], config: RetrievalConfig | None = None,
                            query_ids: Sequence[str] | None = None, gallery_ids: Sequence[str] | None = None,
                            exclusions: Any = None, direction: str = "forward", device: str = "cpu",
                            kernel: str = "auto") -> FanoutPartial:
    """The partial score of rows ``query_rows`` x ``gallery_rows`` (``[start, stop)``), for a user who runs the
    shards on their own scheduler and merges them with ``merge_retrieval_partials``.

    Takes the *whole* endpoints, relevance and exclusions as ``RetrievalScorer.score`` does, and slices them: only
    the partial's query rows, its gallery rows and the gallery rows of its queries' positives are read, so a
    lazily read matrix (``np.memmap``, an ``h5py`` dataset) costs only those rows. ``direction="reverse"``
    (bidirectional configs need both): the gallery plays the queries, so ``query_rows`` index the gallery and
    ``gallery_rows`` the queries. ``save(path)`` / ``FanoutPartial.load(path)`` move it between processes.
    ``kernel``: ``"auto"``, ``"fused"`` or ``"numpy"``, as ``RetrievalScorer`` takes it (the same partial).
    """
    config = RetrievalConfig() if config is None else config
    if not isinstance(config, RetrievalConfig):
        raise ValidationError(f"config must be a RetrievalConfig, got {type(config).__name__}")
    if direction not in DIRECTIONS:
        raise ValidationError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    nq, ng = int(queries.shape[0]), int(gallery.shape[0])
    qkeys = _row_id_keys(query_ids, nq, "Query embeddings")
    gkeys = _row_id_keys(gallery_ids, ng, "Gallery embeddings")
    eligible, excluded = direction_inputs(relevance, exclusions, (nq, ng), qkeys, gkeys, direction)
    Q, G, q_keys, g_keys = (queries, gallery, qkeys, gkeys) if direction == "forward" else (gallery, queries, gkeys, qkeys)
    (qa, qb), (ga, gb) = (_range(query_rows, len(q_keys), "query_rows"), _range(gallery_rows, len(g_keys), "gallery_rows"))
    positive_rows = np.unique(eligible[qa:qb].indices).astype(np.int64)
    return compute_partial(direction, _rows(Q, slice(qa, qb)), _rows(G, slice(ga, gb)), _rows(G, positive_rows),
                           positive_rows, eligible[qa:qb], None if excluded is None else excluded[qa:qb],
                           shape=eligible.shape, query_rows=(qa, qb), gallery_rows=(ga, gb),
                           config=config, query_ids=[q_keys[i] for i in range(qa, qb)],
                           gallery_id=lambda idx: [g_keys[int(i)] for i in idx], device=device, kernel=kernel)


def _range(rows: Sequence[int], n: int, name: str) -> tuple[int, int]:
    try:
        a, b = (int(v) for v in rows)
    except (TypeError, ValueError):
        raise ValidationError(f"{name} must be [start, stop), got {rows!r}") from None
    if not 0 <= a < b <= n:
        raise ValidationError(f"{name} [{a}, {b}) must be a non-empty range inside [0, {n})")
    return a, b


def merge_retrieval_partials(partials: Sequence[FanoutPartial], *, config: RetrievalConfig | None = None
                             ) -> RetrievalScore:
    """Merge partials (objects, or paths of saved ones) into the ``RetrievalScore`` that
    ``RetrievalScorer(config).score(...)`` returns on the whole endpoints. They must tile every direction's
    queries x gallery exactly once; a missing, duplicated or overlapping partial, or one scored under another
    config or other inputs, is refused by name."""
    config = RetrievalConfig() if config is None else config
    loaded = [FanoutPartial.load(p) if isinstance(p, (str, os.PathLike)) else p for p in partials]
    return merge_fanout(loaded, config)


__all__ = ["FanoutPartial", "MERGE_STAGE", "PARTIAL_STAGE", "compute_partial", "direction_inputs", "fanout_specs",
           "partial_spec_of",
           "merge_direction", "merge_fanout", "merge_retrieval_partials", "score_retrieval_partial", "split_bounds"]
