"""Fan-out retrieval: Q x G partial scores per direction and their merge equal the single-job score, bit for bit.

In process (``score_retrieval_partial`` / ``merge_retrieval_partials`` against ``RetrievalScorer``) on random data
and on hand-made ties at shard edges, and through the artifact jobs (plan -> embed -> score-retrieval versus
fanout_specs -> score-retrieval-partial x N -> merge-retrieval-partials): the score artifact's payload, fingerprint
and recipe are the same. Bad splits and missing, stale, foreign or duplicated partials are refused by name.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import time
from pathlib import Path

import h5py
import numpy as np
import pytest
import scipy.sparse as sp

from vertebrae.cli import main
from vertebrae.core.artifacts import read_embeddings, write_embeddings, write_json_artifact
from vertebrae.core.errors import ArtifactError, ConfigError, CorruptArtifactError, ValidationError, VertebraeError
from vertebrae.scoring.degenerate import detect_collapse
from vertebrae.scoring.retrieval import RetrievalConfig, RetrievalScorer
from vertebrae.stages.plan import KIND_OF_STAGE, run_plan
from vertebrae.stages.retrieval_fanout import (FanoutPartial, direction_inputs, fanout_specs, merge_retrieval_partials,
                                               partial_spec_of, score_retrieval_partial, split_bounds)
from vertebrae.stages.retrieval_fanout_jobs import (_collapsed, collapse_summary, relevance_rows, run_fanout_inputs,
                                                   run_merge_partials, run_score_fanout_partial, split_relevance_rows)
from vertebrae.planning import plan
from vertebrae.planning.paths import artifact_path

SPLITS = [(1, 1), (1, 3), (2, 2), (3, 5), ("Q", "G")]


def _data(nq=7, ng=11, d=5, seed=0, ties=True):
    rng = np.random.default_rng(seed)
    Q = rng.normal(size=(nq, d)).astype(np.float32)
    G = rng.normal(size=(ng, d)).astype(np.float32)
    rows, cols, grades = [], [], []
    for i in range(nq):
        for j in rng.choice(ng, size=1 + i % 3, replace=False):
            rows.append(i), cols.append(int(j)), grades.append(float(rng.integers(1, 4)))
    for j in range(ng):  # every gallery item is some query's positive (bidirectional)
        rows.append(j % nq), cols.append(j), grades.append(1.0)
    relevance = sp.csr_matrix((grades, (rows, cols)), shape=(nq, ng))
    relevance.sum_duplicates()
    if ties:  # identical gallery rows on both sides of shard edges, one of them a positive, and a query equal to one
        for a, b in ((1, 2), (4, 5), (5, 6), (8, 9)):
            G[b] = G[a]
        Q[0] = G[5]
    exclusions = sp.csr_matrix((np.ones(3), ([0, 1, 2], [5, 2, 3])), shape=(nq, ng))
    return Q, G, relevance, exclusions


def _bounds(n, k):
    return split_bounds(n, n if k in ("Q", "G") else k, "k", "rows")


def _fanout(Q, G, relevance, config, split, exclusions=None, save_dir=None):
    nq, ng = Q.shape[0], G.shape[0]
    q_bounds, g_bounds = _bounds(nq, split[0]), _bounds(ng, split[1])
    parts = []
    for qr in q_bounds:
        for gr in g_bounds:
            parts.append(score_retrieval_partial(Q, G, relevance, query_rows=qr, gallery_rows=gr, config=config,
                                                 exclusions=exclusions))
            if config.bidirectional:
                parts.append(score_retrieval_partial(Q, G, relevance, query_rows=gr, gallery_rows=qr, config=config,
                                                     exclusions=exclusions, direction="reverse"))
    if save_dir is not None:
        paths = []
        for i, p in enumerate(parts):
            p.save(save_dir / f"p{i}.h5")
            paths.append(save_dir / f"p{i}.h5")
        return paths
    return parts


@pytest.mark.parametrize("similarity", ["cosine", "dot", "squared_l2"])
@pytest.mark.parametrize("split", SPLITS)
def test_in_process_fanout_equals_the_scorer_bit_for_bit(similarity, split):
    Q, G, relevance, exclusions = _data()
    config = RetrievalConfig(similarity=similarity, bidirectional=True, ks=(1, 3, 5), primary_metric="ndcg@5",
                             query_block_size=2, gallery_block_size=3)
    expected = RetrievalScorer(config).score(Q, G, relevance, exclusions=exclusions).to_dict()
    got = merge_retrieval_partials(_fanout(Q, G, relevance, config, split, exclusions), config=config).to_dict()
    assert json.dumps(got, sort_keys=True) == json.dumps(expected, sort_keys=True)


@pytest.mark.parametrize("similarity", ["cosine", "squared_l2"])
def test_partials_counted_by_the_fused_kernel_merge_to_the_scorer_bit_for_bit(similarity, monkeypatch):
    """The partial jobs count with the one-pass numba kernel where the one job does (``kernel="auto"`` on enough
    pairs): forced here on a small case with ties at shard edges, exclusions and both directions; the kernel's
    calls are counted (the real kernel runs)."""
    from vertebrae.scoring.retrieval import fused

    calls = []
    real = fused.count_block
    monkeypatch.setattr(fused, "count_block", lambda *args, **kwargs: calls.append(1) or real(*args, **kwargs))
    Q, G, relevance, exclusions = _data(nq=9, ng=23)
    config = RetrievalConfig(similarity=similarity, bidirectional=True, ks=(1, 3, 5), primary_metric="ndcg@5",
                             query_block_size=2, gallery_block_size=3)
    expected = RetrievalScorer(config, kernel="numpy").score(Q, G, relevance, exclusions=exclusions).to_dict()
    parts = []
    for qr in _bounds(9, 2):
        for gr in _bounds(23, 3):
            for rows, direction in (((qr, gr), "forward"), ((gr, qr), "reverse")):
                parts.append(score_retrieval_partial(Q, G, relevance, query_rows=rows[0], gallery_rows=rows[1],
                                                     config=config, exclusions=exclusions, direction=direction,
                                                     kernel="fused"))
    got = merge_retrieval_partials(parts, config=config).to_dict()
    assert json.dumps(got, sort_keys=True) == json.dumps(expected, sort_keys=True)
    assert calls, "the partials did not count with the fused kernel"
    calls.clear()
    score_retrieval_partial(Q, G, relevance, query_rows=(0, 9), gallery_rows=(0, 23), config=config, kernel="numpy")
    assert not calls
    with pytest.raises(ConfigError, match="kernel must be one of"):
        score_retrieval_partial(Q, G, relevance, query_rows=(0, 9), gallery_rows=(0, 23), config=config,
                                kernel="fast")


def test_ties_with_positives_straddling_every_gallery_edge_and_ids():
    """Blocks of identical gallery rows, each cut by a shard edge, holding positives: ranks by gallery row order."""
    rng = np.random.default_rng(3)
    base = rng.normal(size=(4, 3))
    G = np.repeat(base, 6, axis=0)  # rows 6k..6k+5 identical: every split below cuts some run
    Q = base[[0, 1, 2, 3, 0]] + 0.01 * rng.normal(size=(5, 3))
    relevance = sp.csr_matrix(([1, 2, 1, 3, 1, 1], ([0, 0, 1, 2, 3, 4], [3, 5, 7, 12, 23, 0])), shape=(5, 24))
    ids = ([f"q{i}" for i in range(5)], [f"g{j}" for j in range(24)])
    for similarity in ("cosine", "dot", "squared_l2"):
        config = RetrievalConfig(similarity=similarity, ks=(1, 2, 4), primary_metric="ndcg@4", gallery_block_size=2)
        expected = RetrievalScorer(config).score(Q, G, relevance, query_ids=ids[0], gallery_ids=ids[1])
        assert expected.forward.n_queries_with_ties > 0
        for q_shards, g_shards in ((1, 4), (2, 5), (5, 24), (3, 7)):
            parts = [score_retrieval_partial(Q, G, relevance, query_rows=qr, gallery_rows=gr, config=config,
                                             query_ids=ids[0], gallery_ids=ids[1])
                     for qr in split_bounds(5, q_shards, "q", "q") for gr in split_bounds(24, g_shards, "g", "g")]
            assert merge_retrieval_partials(parts, config=config) == expected, (similarity, q_shards, g_shards)


def test_sparse_endpoints_and_saved_partials(tmp_path):
    Q, G, relevance, exclusions = _data(seed=4, ties=False)
    Qs, Gs = sp.csr_matrix(np.where(np.abs(Q) > 0.5, Q, 0)), sp.csr_matrix(np.where(np.abs(G) > 0.5, G, 0))
    config = RetrievalConfig(similarity="dot", bidirectional=True, ks=(1, 3), primary_metric="map")
    expected = RetrievalScorer(config).score(Qs, Gs, relevance, exclusions=exclusions)
    paths = _fanout(Qs, Gs, relevance, config, (2, 3), exclusions, save_dir=tmp_path)
    assert merge_retrieval_partials(paths, config=config) == expected
    loaded = FanoutPartial.load(paths[0])
    assert loaded.source == str(paths[0]) and loaded.query_rows == (0, 3)


def test_the_merge_refuses_missing_duplicated_overlapping_and_mismatched_partials(tmp_path):
    Q, G, relevance, _ = _data(ties=False)
    config = RetrievalConfig(ks=(1, 3), primary_metric="map")
    paths = _fanout(Q, G, relevance, config, (2, 2), save_dir=tmp_path)
    with pytest.raises(ValidationError, match="no partial covers .*gallery.* rows"):
        merge_retrieval_partials(paths[:-1], config=config)
    with pytest.raises(ValidationError, match=rf"{paths[1]}.*cover the same|cover the same.*{paths[1]}"):
        merge_retrieval_partials([*paths, paths[1]], config=config)
    overlap = score_retrieval_partial(Q, G, relevance, query_rows=(0, 3), gallery_rows=(3, 7), config=config)
    with pytest.raises(ValidationError, match="cover the same"):
        merge_retrieval_partials([*paths, overlap], config=config)
    with pytest.raises(ValidationError, match="another retrieval config"):
        merge_retrieval_partials(paths, config=RetrievalConfig(ks=(1, 3), primary_metric="mrr"))
    other = score_retrieval_partial(Q + 1, G, relevance, query_rows=(0, 3), gallery_rows=(0, 5), config=config)
    with pytest.raises(ValidationError, match="disagree on the queries' ids or positives"):
        merge_retrieval_partials([other, *paths[1:]], config=config)
    with pytest.raises(ValidationError, match="differs in .*bidirectional"):
        merge_retrieval_partials(paths, config=RetrievalConfig(ks=(1, 3), primary_metric="map", bidirectional=True))
    with h5py.File(paths[0], "r+") as f:
        f["outranked"][0] += 1
    with pytest.raises(ArtifactError, match=rf"{paths[0]}: content hash mismatch"):
        merge_retrieval_partials(paths, config=config)


def test_partial_arrays_are_queries_times_positives_never_gallery_sized(tmp_path):
    rng = np.random.default_rng(5)
    nq, ng = 4, 400
    Q, G = rng.normal(size=(nq, 8)), rng.normal(size=(ng, 8))
    relevance = sp.csr_matrix((np.ones(nq), (np.arange(nq), [3, 90, 200, 399])), shape=(nq, ng))
    partial = score_retrieval_partial(Q, G, relevance, query_rows=(0, nq), gallery_rows=(0, ng),
                                      config=RetrievalConfig(ks=(1,), primary_metric="map"))
    partial.save(tmp_path / "p.h5")
    with h5py.File(tmp_path / "p.h5", "r") as f:
        sizes = {name: f[name].size for name in f if isinstance(f[name], h5py.Dataset)}
    assert sizes and max(sizes.values()) <= nq + 1, sizes


def test_fanout_specs_shape_fingerprints_and_order():
    score = {"stage": "score-retrieval", "fingerprint": "0123456789abcdef", "recipe": {"x": 1},
             "query": {"fingerprint": "q", "path": "q.h5"}, "gallery": {"fingerprint": "g", "path": "g.h5"},
             "protocol": {"fingerprint": "p", "path": "p.json"}, "retrieval": {"bidirectional": True}}
    partials, merge = fanout_specs(score, query_shards=2, gallery_shards=3, n_queries=5, n_gallery=7,
                                   partial_path=lambda fp: f"results/partials/{fp}.h5")
    assert len(partials) == 12 and len({p["fingerprint"] for p in partials}) == 12
    assert merge["stage"] == "merge-retrieval-partials" and merge["fingerprint"] == score["fingerprint"]
    assert merge["recipe"] == score["recipe"]
    assert [r["fingerprint"] for r in merge["partials"]] == [p["fingerprint"] for p in partials]
    forward = [(p["query_rows"], p["gallery_rows"]) for p in partials if p["direction"] == "forward"]
    assert forward == [([0, 2], [0, 2]), ([0, 2], [2, 4]), ([0, 2], [4, 7]), ([2, 5], [0, 2]), ([2, 5], [2, 4]),
                       ([2, 5], [4, 7])]
    reverse = [(p["query_rows"], p["gallery_rows"]) for p in partials if p["direction"] == "reverse"]
    assert reverse == [([0, 2], [0, 2]), ([0, 2], [2, 5]), ([2, 4], [0, 2]), ([2, 4], [2, 5]), ([4, 7], [0, 2]),
                       ([4, 7], [2, 5])]
    assert KIND_OF_STAGE["score-retrieval-partial"] == "retrieval-partial"
    assert KIND_OF_STAGE["merge-retrieval-partials"] == "score"
    for bad, key in ((0, "query_shards"), (True, "query_shards"), ("2", "query_shards"), (6, "query_shards")):
        with pytest.raises(ConfigError, match=f"scoring.{key}"):
            fanout_specs(score, query_shards=bad, gallery_shards=1, n_queries=5, n_gallery=7, partial_path=str)
    with pytest.raises(ConfigError, match=r"retrieval\.b\.scoring\.gallery_shards: 8 shards for 7 gallery"):
        fanout_specs(score, query_shards=1, gallery_shards=8, n_queries=5, n_gallery=7, partial_path=str,
                     where="retrieval.b.scoring")
    start = time.perf_counter()
    partials, _ = fanout_specs({**score, "retrieval": {"bidirectional": False}}, query_shards=100,
                               gallery_shards=100, n_queries=1_000_000, n_gallery=10_000_000,
                               partial_path=lambda fp: f"results/partials/{fp}.h5")
    assert len(partials) == 10_000 and time.perf_counter() - start < 5.0


@pytest.mark.parametrize("normalize", [False, True])
def test_collapse_summaries_decide_like_detect_collapse(normalize):
    rng = np.random.default_rng(6)
    row = rng.normal(size=4)
    cases = [rng.normal(size=(9, 4)), np.tile(row, (9, 1)), np.outer(rng.uniform(1, 3, 9), row),
             np.zeros((9, 4)), np.tile(row, (9, 1)) + np.eye(9, 4) * 1e-3]
    for matrix in cases + [sp.csr_matrix(m) for m in cases]:
        expected = detect_collapse(matrix, what="x", normalize=normalize) is not None
        for cuts in ([0, 9], [0, 4, 9], [0, 1, 2, 5, 9]):
            summaries = [collapse_summary(matrix[a:b], normalize) for a, b in zip(cuts, cuts[1:])]
            assert _collapsed(summaries, 9, sp.issparse(matrix), normalize) == expected


# ------------------------------------------------------------------------------------------- the artifact jobs


def _config(similarity, bidirectional=True):
    return {
        "embedding": {"shards": 2, "batch_size": 4},
        "retrieval": {"pairs": {
            "dataset": {"source": {"type": "npz_pair", "path": "pair.npz", "relevance_path": "qrels.tsv"},
                        "identity": {"kind": "declared", "name": "pairs", "revision": "1"}, "exclude_same_id": True},
            "extractors": {"raw": {"type": "precomputed"}},
            "compression": {"method": "quantize", "precision": "int8"},
            "retrieval": {"similarity": similarity, "bidirectional": bidirectional, "ks": [1, 3],
                          "primary_metric": "ndcg@3", "query_block_size": 2, "gallery_block_size": 3},
        }},
    }


def _write_data(seed=1, shift=0.0, collapse=False):
    Q, G, relevance, _ = _data(nq=9, ng=12, d=6, seed=seed)
    if collapse:  # one direction: a collapsed endpoint under cosine (recorded as degenerate, not ranked)
        G = np.outer(np.exp2(np.arange(12) % 3), G[0]).astype(np.float32)
    query_ids = [f"x{i}" for i in range(9)]
    gallery_ids = [f"x{j}" if j in (2, 7) else f"g{j}" for j in range(12)]  # x2, x7: excluded same-id pairs
    np.savez("pair.npz", queries=Q + shift, gallery=G, query_ids=np.array(query_ids), gallery_ids=np.array(gallery_ids))
    coo = relevance.tocoo()
    records = {(int(i), int(j)): int(g) for i, j, g in zip(coo.row, coo.col, coo.data)}
    for pair in ((2, 3), (7, 8), (3, 2), (8, 7), (2, 2)):  # (2, 2) is excluded; the others keep every row a positive
        records.setdefault(pair, 1)
    with open("qrels.tsv", "w", encoding="utf-8") as handle:
        handle.write("".join(f"{query_ids[i]}\t{gallery_ids[j]}\t{g}\n" for (i, j), g in sorted(records.items())))


def _cli(*argv):
    assert main([str(a) for a in argv]) == 0, argv


def _embed_and_score(p):
    """Run every job up to the single-job scores; return {score fp: payload}."""
    for fp in p.specs:
        _cli("plan", "--spec", p.spec_json(fp), "--output", p.plan_path(fp))
    for fp in p.fingerprints("embed"):
        side = p.spec(fp)["side"]
        for i, shard in enumerate(p.shard_paths(fp)):
            _cli("embed-retrieval-shard", "--plan-json", p.plan_path(fp), "--side", side, "--shard-index", i,
                 "--output", shard)
        _cli("merge-retrieval-embeddings", "--plan-json", p.plan_path(fp), "--output",
             artifact_path("embedding", fp, protocol="retrieval"), *p.shard_paths(fp))
    for fp in p.fingerprints("retrieval-protocol"):
        _cli("write-retrieval-relevance", "--plan-json", p.plan_path(fp), "--output",
             artifact_path("protocol", fp, protocol="retrieval"))
    for fp in p.fingerprints("compress-retrieval"):
        spec = p.spec(fp)
        _cli("compress-retrieval", "--plan-json", p.plan_path(fp), "--queries", spec["query"]["path"], "--gallery",
             spec["gallery"]["path"], "--query-output", artifact_path("compressed", fp, protocol="retrieval", side="query"),
             "--gallery-output", artifact_path("compressed", fp, protocol="retrieval", side="gallery"))
    scores = {}
    for fp in p.fingerprints("score-retrieval"):
        spec = p.spec(fp)
        out = artifact_path("score", fp, protocol="retrieval")
        _cli("score-retrieval", "--plan-json", p.plan_path(fp), "--queries", spec["query"]["path"], "--gallery",
             spec["gallery"]["path"], "--protocol", spec["protocol"]["path"], "--output", out)
        scores[fp] = json.loads(open(out, encoding="utf-8").read())
    return scores


def _untimed(document: dict) -> dict:
    """A score artifact but for its job's seconds (manifest metadata, in no hash: a merge's are its partials' and its
    own), which must be there; the endpoints' peak memory stays: the same embed jobs' either way."""
    document = json.loads(json.dumps(document))
    costs = document["manifest"]["metadata"]["job_costs"]
    assert costs.pop("score_seconds") > 0 and set(costs) == {"peak_mb"}
    return document


def _run_fanout(spec, split, tag, n=(9, 12)):
    """Plan, run the partial jobs and the merge job of one score spec; return (merge output, partial paths)."""
    partials, merge = fanout_specs(spec, query_shards=n[0] if split[0] == "Q" else split[0],
                                   gallery_shards=n[1] if split[1] == "G" else split[1], n_queries=n[0],
                                   n_gallery=n[1], partial_path=lambda fp: f"results/partials/{tag}/{fp}.h5")
    for s in (*partials, merge):
        run_plan(spec=json.dumps(s), output=f"plans/{tag}/{s['fingerprint']}.json")
    fanout = f"results/fanouts/{tag}/{merge['fingerprint']}"
    _cli("stage-retrieval-fanout", "--plan-json", f"plans/{tag}/{merge['fingerprint']}.json", "--queries",
         spec["query"]["path"], "--gallery", spec["gallery"]["path"], "--protocol", spec["protocol"]["path"],
         "--output", fanout)
    files = ("--queries", spec["query"]["path"], "--gallery", spec["gallery"]["path"], "--protocol",
             spec["protocol"]["path"])
    for i, s in enumerate(partials):  # (the workflow's way) the fan-out bundle, own spec, or merge spec + --partial
        plan_args = [("--fanout", fanout, "--partial", s["fingerprint"]),
                     ("--plan-json", f"plans/{tag}/{s['fingerprint']}.json", *files),
                     ("--plan-json", f"plans/{tag}/{merge['fingerprint']}.json", "--partial", s["fingerprint"],
                      *files)][i % 3]
        _cli("score-retrieval-fanout-partial" if i % 3 == 0 else "score-retrieval-partial", *plan_args,
             "--output", f"results/partials/{tag}/{s['fingerprint']}.h5")
    out = f"results/merged/{tag}/{spec['fingerprint']}.json"
    paths = [r["path"] for r in merge["partials"]]
    _cli("merge-retrieval-partials", "--plan-json", f"plans/{tag}/{merge['fingerprint']}.json", "--protocol",
         spec["protocol"]["path"], "--output", out)  # the partials: the paths the merge spec plans
    return out, paths, f"plans/{tag}/{merge['fingerprint']}.json"


@pytest.mark.parametrize("similarity", ["cosine", "dot", "squared_l2"])
def test_the_fanned_out_jobs_write_the_single_job_score_artifact(tmp_path, monkeypatch, similarity):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("vertebrae.core.artifacts._CHUNK_BYTES", 64)  # endpoint files of many hashed chunks
    _write_data()
    p = plan(_config(similarity))
    scores = _embed_and_score(p)
    assert len(scores) == 2  # raw and its int8 compression
    splits = SPLITS if similarity == "cosine" else [(1, 1), (2, 2), (3, 5)]
    for n, (fp, single) in enumerate(scores.items()):
        for split in splits if n == 0 else [s for s in splits if s != ("Q", "G")]:  # Q x G on one candidate
            out, _, _ = _run_fanout(p.spec(fp), split, f"{fp}-{split[0]}x{split[1]}")
            merged = json.loads(open(out, encoding="utf-8").read())
            assert json.dumps(_untimed(merged), sort_keys=True) == json.dumps(_untimed(single), sort_keys=True), split
    assert any(s["payload"]["compression_metadata"] for s in scores.values())


def test_the_merge_job_refuses_missing_stale_foreign_and_duplicated_partials(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _write_data()
    p = plan(_config("cosine", bidirectional=False))
    _embed_and_score(p)
    raw, compressed = p.fingerprints("score-retrieval")
    out, paths, merge_plan = _run_fanout(p.spec(raw), (2, 2), "raw")
    _, other_paths, _ = _run_fanout(p.spec(compressed), (2, 2), "compressed")
    protocol = p.spec(raw)["protocol"]["path"]

    def merge(*files):
        return main(["merge-retrieval-partials", "--plan-json", merge_plan, "--protocol", protocol, "--output",
                     "x.json", *map(str, files)])

    assert merge(*paths) == 0
    with pytest.raises(VertebraeError, match=rf"{paths[3]} \(") as info:
        run_merge_partials(merge_plan, protocol, paths[:3], "x.json")
    assert "not given" in str(info.value)
    with pytest.raises(VertebraeError, match=rf"{paths[1]} and {paths[1]} are the same partial"):
        run_merge_partials(merge_plan, protocol, [*paths, paths[1]], "x.json")
    with pytest.raises(VertebraeError, match=rf"artifact {other_paths[0]}: stale or foreign retrieval partial"):
        run_merge_partials(merge_plan, protocol, [other_paths[0], *paths[1:]], "x.json")
    # a stale partial: the same rows computed from other inputs (shifted queries, re-planned) at the same path
    _write_data(shift=0.5)
    p2 = plan(_config("cosine", bidirectional=False))
    _embed_and_score(p2)
    _, stale_paths, _ = _run_fanout(p2.spec(p2.fingerprints("score-retrieval")[0]), (2, 2), "stale")
    with pytest.raises(VertebraeError, match=rf"artifact {stale_paths[2]}: stale or mixed .*contents differ"):
        run_merge_partials(merge_plan, protocol, [*paths[:2], stale_paths[2], paths[3]], "x.json")
    with pytest.raises(VertebraeError, match=rf"{tmp_path / 'nope.h5'}: file not found"):
        run_merge_partials(merge_plan, protocol, [*paths[:3], tmp_path / "nope.h5"], "x.json")


@pytest.mark.parametrize("similarity", ["cosine", "dot"])
def test_a_collapsed_endpoint_is_flagged_by_the_merge_as_by_the_single_job(tmp_path, monkeypatch, similarity):
    monkeypatch.chdir(tmp_path)
    _write_data(collapse=True)
    p = plan(_config(similarity, bidirectional=False))
    scores = _embed_and_score(p)
    for fp, single in scores.items():
        out, paths, _ = _run_fanout(p.spec(fp), (3, 5), fp)
        merged = json.loads(open(out, encoding="utf-8").read())
        # its seconds: every partial job's (in its manifest's info) and the merge's own, summed; in one process here,
        # so the merge's own (its process's age) is at least any part's
        parts = [FanoutPartial.load(path).info["job_costs"]["score_seconds"] for path in paths]
        total = merged["manifest"]["metadata"]["job_costs"]["score_seconds"]
        assert len(parts) == 2 * 3 * 5 or len(parts) == 3 * 5
        assert total - sum(parts) >= max(parts) > 0
        assert json.dumps(_untimed(merged), sort_keys=True) == json.dumps(_untimed(single), sort_keys=True)
    flagged = ["degenerate" in s["payload"]["score"]["forward"]["metadata"] for s in scores.values()]
    assert any(flagged) == (similarity == "cosine")  # the raw candidate (its int8 variant differs per row)


def test_a_partial_named_by_the_merge_spec_is_rebuilt_from_it_and_others_are_refused():
    score = {"stage": "score-retrieval", "fingerprint": "f" * 16, "recipe": {"x": 1}, "query": {"fingerprint": "q"},
             "gallery": {"fingerprint": "g"}, "protocol": {"fingerprint": "p"},
             "retrieval": {"bidirectional": True}, "device": "cuda"}
    partials, merge = fanout_specs(score, query_shards=2, gallery_shards=3, n_queries=5, n_gallery=7,
                                   partial_path=lambda fp: f"partials/{fp}.h5")
    for partial in partials:
        assert partial_spec_of(merge, partial["fingerprint"]) == {**partial, "device": "cuda"}
    with pytest.raises(ArtifactError, match="no partial 'abc'"):
        partial_spec_of(merge, "abc")


def test_a_partial_refuses_inputs_changed_since_the_fanout_bundle_was_written(tmp_path, monkeypatch):
    """The workflow's partial jobs read the endpoints and relevance rows of their fan-out bundle; one whose content
    is not what the bundle recorded (same path, same fingerprint) is refused naming the file. A partial does not read
    the protocol: one edited after staging is caught by the merge, which refuses partials of the old content."""
    monkeypatch.chdir(tmp_path)
    _write_data()
    p = plan(_config("cosine", bidirectional=False))
    _embed_and_score(p)
    raw, _ = p.fingerprints("score-retrieval")
    _, paths, merge_plan = _run_fanout(p.spec(raw), (2, 2), "raw")
    partials, merge = fanout_specs(p.spec(raw), query_shards=2, gallery_shards=2, n_queries=9, n_gallery=12,
                                   partial_path=lambda fp: f"results/partials/raw/{fp}.h5")
    fanout = f"results/fanouts/raw/{merge['fingerprint']}"
    recorded = json.loads(open(f"{fanout}/inputs.json", encoding="utf-8").read())["payload"]
    assert recorded["exclusions"] is True  # exclude_same_id: the rows carry excluded pairs
    by_query = f"{fanout}/{recorded['relevance']['query']['path']}"  # a file of the bundle, named relative to it
    original = read_embeddings(by_query, fingerprint=merge["fingerprint"])
    write_embeddings(by_query, original.matrix * 2.0, original.row_ids, fingerprint=merge["fingerprint"],
                     recipe=original.manifest["recipe"])  # valid file, other content
    with pytest.raises(VertebraeError, match=rf"{by_query}: the relevance rows by query changed since "
                                             rf"the fan-out bundle {fanout}"):
        run_score_fanout_partial(fanout, partials[0]["fingerprint"], "x.h5")
    write_embeddings(by_query, original.matrix, original.row_ids, fingerprint=merge["fingerprint"],
                     recipe=original.manifest["recipe"])
    protocol = p.spec(raw)["protocol"]["path"]
    document = json.loads(open(protocol, encoding="utf-8").read())
    payload = document["payload"]
    payload["exclude_same_id"] = not payload["exclude_same_id"]  # an edit of the same protocol (same fingerprint)
    write_json_artifact(protocol + ".edited", "protocol", payload,
                        fingerprint=document["manifest"]["fingerprint"], recipe=document["manifest"]["recipe"])
    os.replace(protocol + ".edited", protocol)
    run_score_fanout_partial(fanout, partials[0]["fingerprint"], paths[0])  # from the rows staged before the edit
    with pytest.raises(VertebraeError, match=rf"artifact {paths[0]}: stale retrieval partial: computed from another "
                                             rf"protocol content than {protocol}"):
        run_merge_partials(merge_plan, protocol, paths, "x.json")


def test_relevance_rows_give_back_each_directions_eligible_and_excluded_rows():
    """A hand-made protocol: grades 1..3, one excluded positive and one excluded non-positive; the staged rows
    (by query, and transposed by gallery item) split back into exactly ``direction_inputs``'s slices."""
    relevance = sp.csr_matrix(np.array([[1.0, 0, 2], [0, 3, 0], [1, 1, 0]]))
    exclusions = sp.csr_matrix(np.array([[0, 1, 0], [0, 0, 0], [1, 0, 0]], dtype=bool))
    ids = ["a", "b", "c"]
    eligible, excluded = direction_inputs(relevance, exclusions, (3, 3), ids, ids, "forward")
    assert eligible.toarray().tolist() == [[1, 0, 2], [0, 3, 0], [0, 1, 0]]
    staged = relevance_rows(eligible, excluded)
    assert staged.toarray().tolist() == [[1, -1, 2], [0, 3, 0], [-1, 1, 0]]
    for direction, matrix in (("forward", staged), ("reverse", staged.T.tocsr())):
        want_eligible, want_excluded = direction_inputs(relevance, exclusions, (3, 3), ids, ids, direction)
        for a, b in ((0, 3), (1, 2), (2, 3)):
            got_eligible, got_excluded = split_relevance_rows(matrix[a:b], True, "rows.h5")
            for got, want in ((got_eligible, want_eligible[a:b]), (got_excluded, want_excluded[a:b])):
                assert got.dtype == want.dtype and got.has_canonical_format
                assert (got.indptr.tolist(), got.indices.tolist(), got.data.tolist()) == \
                       (want.indptr.tolist(), want.indices.tolist(), want.data.tolist())
    assert split_relevance_rows(relevance_rows(eligible, None), False, "rows.h5")[1] is None
    with pytest.raises(CorruptArtifactError, match="rows.h5: relevance rows hold values other than"):
        split_relevance_rows(sp.csr_matrix(np.array([[0.5, -0.5]])), True, "rows.h5")


def test_a_refused_foreign_partial_moves_aside_where_its_path_names_another(tmp_path, monkeypatch, capsys):
    """Issue 32, item 2: another candidate's partial copied over one of ours is refused and moved aside (with what
    was built from it), so a plain rerun rebuilds it; the same partial given from its own path is refused, not moved."""
    monkeypatch.chdir(tmp_path)
    _write_data()
    p = plan(_config("cosine", bidirectional=False))
    _embed_and_score(p)
    raw, compressed = p.fingerprints("score-retrieval")
    _, paths, merge_plan = _run_fanout(p.spec(raw), (2, 2), "raw")
    _, other_paths, _ = _run_fanout(p.spec(compressed), (2, 2), "compressed")
    protocol = p.spec(raw)["protocol"]["path"]

    def merge(*files):
        return main(["merge-retrieval-partials", "--plan-json", merge_plan, "--protocol", protocol, "--output",
                     "x.json", *map(str, files)])

    assert merge(other_paths[0], *paths[1:]) == 2  # a valid partial at its own path, given to the wrong merge
    assert os.path.exists(other_paths[0]) and "moved it aside" not in capsys.readouterr().err
    shutil.copyfile(other_paths[0], paths[0])  # a foreign partial where one of ours belongs
    assert merge(*paths) == 2
    err = capsys.readouterr().err
    assert f"artifact {paths[0]}: stale or foreign retrieval partial" in err and "moved it aside to" in err
    assert not os.path.exists(paths[0]) and glob.glob(glob.escape(str(paths[0])) + ".corrupt-*")
    assert all(os.path.exists(path) for path in [*paths[1:], *other_paths])


def test_the_fanout_bundle_holds_what_a_partial_reads_whole_or_not_at_all(tmp_path, monkeypatch):
    """stage-retrieval-fanout writes one folder (the partial jobs' one input): the merge spec, the endpoints (hard
    links: no bytes copied) and the relevance rows, each recorded in inputs.json; verify checks each file against
    that record, and a bad file moves the whole folder aside. A staging that fails leaves no folder."""
    from vertebrae.stages.verify import quarantine, verify

    monkeypatch.chdir(tmp_path)
    _write_data()
    p = plan(_config("cosine", bidirectional=False))
    _embed_and_score(p)
    raw, _ = p.fingerprints("score-retrieval")
    spec = p.spec(raw)
    partials, merge = fanout_specs(spec, query_shards=2, gallery_shards=2, n_queries=9, n_gallery=12,
                                   partial_path=lambda fp: f"results/partials/raw/{fp}.h5")
    _run_fanout(spec, (2, 2), "raw")
    bundle = tmp_path / "results" / "fanouts" / "raw" / merge["fingerprint"]
    assert sorted(f.name for f in bundle.iterdir()) == sorted(
        ["inputs.json", f"{merge['fingerprint']}.json", "query.h5", "gallery.h5", "rows.query.h5", "rows.gallery.h5"])
    assert os.path.samefile(bundle / "query.h5", spec["query"]["path"])
    assert os.path.samefile(bundle / "gallery.h5", spec["gallery"]["path"])
    assert not [f for f in bundle.parent.iterdir() if f.name.startswith(".")]  # no temporary folder left
    import vertebrae.stages.verify as verify_module

    read = []
    real_read = verify_module.read_embeddings
    monkeypatch.setattr(verify_module, "read_embeddings", lambda path, **kw: read.append(Path(path)) or real_read(
        path, **kw))
    assert verify("results") == []
    # the linked endpoints are the endpoints' bytes, verified once (under one of their two names), every other
    # embedding file once
    inodes = [(p.stat().st_dev, p.stat().st_ino) for p in read]
    assert len(inodes) == len(set(inodes)) and bundle / "rows.query.h5" in [p.resolve() for p in read]
    for role in ("query", "gallery"):
        assert len({bundle / f"{role}.h5", (tmp_path / spec[role]["path"]).resolve()} & {p.resolve() for p in read}) == 1
    # a bundle cut short (a staging or an upload to object storage: Snakemake counts a folder with anything in it as
    # present): a partial names what is missing and the way out, whichever file it is
    for name in ("rows.gallery.h5", "inputs.json"):
        os.rename(bundle / name, tmp_path / name)
        with pytest.raises(VertebraeError, match=rf"fan-out bundle {bundle.relative_to(tmp_path)}: incomplete, {name} "
                                                 r"missing .*vertebrae verify --repair"):
            run_score_fanout_partial(bundle.relative_to(tmp_path), partials[0]["fingerprint"], "x.h5")
        os.rename(tmp_path / name, bundle / name)
    # another candidate's endpoint in its place: a valid file, not the one recorded
    os.unlink(bundle / "gallery.h5")
    shutil.copyfile(p.spec(p.fingerprints("score-retrieval")[1])["gallery"]["path"], bundle / "gallery.h5")
    (problem,) = verify("results")
    assert Path(problem[0]).resolve() == bundle / "gallery.h5" and "stale" in problem[1] and "inputs.json records" in problem[1]
    moved = quarantine(bundle / "gallery.h5")
    assert Path(moved[0][0]) == bundle and not bundle.exists()  # the folder as one: Snakemake restages it
    # a staging that fails halfway (its relevance rows written, then another candidate's query endpoint refused)
    # leaves no bundle, not even a partial one
    other = p.spec(p.fingerprints("score-retrieval")[1])
    with pytest.raises(VertebraeError, match=rf"{other['query']['path']}: stale: fingerprint .* the merge spec's "
                                             r"query endpoint is"):
        run_fanout_inputs(f"plans/raw/{merge['fingerprint']}.json", other["query"]["path"], spec["gallery"]["path"],
                          spec["protocol"]["path"], bundle)
    assert not bundle.exists() and not [f for f in bundle.parent.iterdir() if f.name.startswith(".")]
