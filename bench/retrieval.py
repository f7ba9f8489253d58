"""Retrieval-scoring performance harness (not a test): vertebrae vs the bare matmul floor vs faiss + pytrec_eval.

Run: ``python bench/retrieval.py`` (default 10,000 queries x 100,000 gallery x 256 dims, 5 positives per query;
a few minutes) or a smoke run ``python bench/retrieval.py --queries 1000 --gallery 10000 --dim 64``.
It prints the machine (core count, numpy's BLAS line, the thread pools), a table of component / seconds /
ratio to the floor, a cross-check of the metrics both pipelines report, and ends with the line
``floor_ratio=X.XX baseline_ratio=Y.YY``.

What is timed, in one process on the same data:

* **vertebrae**: ``RetrievalScorer(RetrievalConfig(ks=(1, 5, 10, 100), primary_metric="ndcg@10")).score(Q, G,
  relevance_csr)`` on the raw float32 embeddings; vertebrae does its own work end to end (validation, float64
  conversion, cosine normalisation, positives, every block, merge, all metrics and diagnostics).
* **floor**: the bare block products vertebrae's kernel starts from: for every query block x gallery block
  (vertebrae's block sizes) ``Q[qs:qe] @ G[gs:ge].T`` with numpy, in the dtype vertebrae's block products use
  (its scan dtype, read from ``prepare_endpoint(...).scan``: float32 here; rows normalised outside the
  timer), nothing else, timed in two schedules on the same T cores: one T-threaded BLAS call per block, and
  vertebrae's own (T threads, each multiplying its query blocks with single-threaded BLAS). The floor is the
  faster of the two (on a loaded machine multi-threaded BLAS can lose much more than the workers do), so
  vertebrae's scheduling earns it nothing. ``floor_ratio = vertebrae / floor``. The same products in the
  other precision are printed for information only.
* **baseline**: the usual exact pipeline: copy + ``faiss.normalize_L2`` the float32 inputs, exact top-100
  search with ``faiss.IndexFlatIP``, convert the hits to a pytrec_eval run dict, and evaluate it with
  ``pytrec_eval.RelevanceEvaluator`` (ndcg_cut, P, recall, success at ks 1/5/10/100, map, recip_rank), then
  average over queries. The qrels dict is the baseline's native input, built outside the timer (as the CSR
  is for vertebrae). Qrels carry relevance ``2^grade - 1`` so trec_eval's linear-gain nDCG equals vertebrae's
  exponential-gain nDCG (P/recall/success/map count any relevance >= 1 as relevant, unchanged).
  ``baseline_ratio = vertebrae / baseline``.

Threads: every component runs inside ``threadpoolctl.threadpool_limits(limits=T)`` (T = ``--threads``,
default: the cores this process may use, ``len(os.sched_getaffinity(0))``), which caps every loaded BLAS
(numpy's OpenBLAS, faiss's bundled OpenBLAS) and OpenMP runtime (faiss's libgomp) alike, and faiss gets
``faiss.omp_set_num_threads(T)`` too. So each component uses T cores: the floor as one T-threaded BLAS call
per block; vertebrae as T worker threads (``RetrievalScorer.workers``: one per BLAS thread it finds), each
scoring its own query blocks with single-threaded BLAS, so one thread's post-processing overlaps another's
product; faiss as T OpenMP threads (pytrec_eval and the run-dict conversion are single-threaded). The table
prints each component's thread count and its process CPU seconds beside the wall seconds: CPU time shows
the work done whatever the machine's load (also printed), wall time what the ratios use.

Data: seeded random float32 embeddings; every query gets ``--positives`` distinct gallery items with integer
grades 1-3 and is built as a grade-weighted mix of its positives plus Gaussian noise, so ranks are spread (some
positives land in the top 10, some beyond 100). Continuous random values leave no exact score ties: the harness
checks that vertebrae found none among the positives and counts float32 ties inside faiss's top-100 lists.

Each timed component is preceded by an untimed warm-up on a tiny problem (thread pools, imports, first-touch);
with ``--repeat N`` each is timed N times and the best time is reported.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vertebrae.scoring.retrieval import RetrievalConfig, RetrievalScorer, prepare_endpoint  # noqa: E402
from vertebrae.scoring.retrieval.fused import use_fused  # noqa: E402

KS = (1, 5, 10, 100)
TOP_K = max(KS)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--gallery", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--positives", type=int, default=5, help="positives per query (grades 1-3)")
    parser.add_argument("--noise", type=float, default=1.5, help="query noise scale (higher = harder retrieval)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--query-block-size", type=int, default=None, help="default: RetrievalConfig's")
    parser.add_argument("--gallery-block-size", type=int, default=None, help="default: RetrievalConfig's")
    parser.add_argument("--repeat", type=int, default=1, help="time each component N times, report the best")
    args = parser.parse_args(argv)
    if args.positives < 1 or args.positives > args.gallery:
        parser.error("--positives must be in [1, --gallery]")
    if args.gallery < TOP_K:
        parser.error(f"--gallery must be at least {TOP_K} (top-{TOP_K} search)")
    return args


# --------------------------------------------------------------------------------------------------
# Data


def make_data(nq: int, ng: int, d: int, n_pos: int, noise: float, seed: int):
    """Float32 queries/gallery and the grades as (n_queries x n_gallery) CSR."""
    rng = np.random.default_rng(seed)
    G = rng.standard_normal((ng, d), dtype=np.float32)
    G /= np.linalg.norm(G, axis=1, keepdims=True)
    # distinct positives per query: the top-n_pos of random keys (argpartition per row would be O(nq ng))
    cols = np.empty((nq, n_pos), dtype=np.int64)
    for i in range(nq):
        cols[i] = rng.choice(ng, size=n_pos, replace=False)
    cols.sort(axis=1)
    grades = rng.integers(1, 4, size=(nq, n_pos))
    weights = (grades / 3.0) * rng.uniform(0.3, 1.0, size=(nq, n_pos))
    Q = np.einsum("qp,qpd->qd", weights.astype(np.float32), G[cols])
    Q += (noise / np.sqrt(d)) * rng.standard_normal((nq, d), dtype=np.float32)
    # vary the query norms so that vertebrae's own cosine normalisation is doing real work
    Q *= rng.uniform(0.5, 2.0, size=(nq, 1)).astype(np.float32)
    G *= rng.uniform(0.5, 2.0, size=(ng, 1)).astype(np.float32)
    indptr = np.arange(0, nq * n_pos + 1, n_pos)
    relevance = sp.csr_matrix((grades.ravel().astype(np.float64), cols.ravel(), indptr), shape=(nq, ng))
    return np.ascontiguousarray(Q), np.ascontiguousarray(G), relevance


def qrels_dict(relevance: sp.csr_matrix) -> dict[str, dict[str, int]]:
    """pytrec_eval qrels with relevance 2^grade - 1 (exponential gain through trec_eval's linear gain)."""
    out = {}
    for i in range(relevance.shape[0]):
        a, b = relevance.indptr[i], relevance.indptr[i + 1]
        out[str(i)] = {str(int(c)): int(2 ** int(g) - 1) for c, g in zip(relevance.indices[a:b], relevance.data[a:b])}
    return out


# --------------------------------------------------------------------------------------------------
# Components


def run_vertebrae(Q, G, relevance, config, kernel="auto"):
    return RetrievalScorer(config, kernel=kernel).score(Q, G, relevance)


def scan_dtype(Q, G, config) -> type:
    """The dtype vertebrae's block products read (its prepared endpoints' ``scan`` rows); float64 if unknown."""
    try:
        return max((prepare_endpoint(M[:64], config.similarity, what=what).scan.dtype
                    for M, what in ((Q, "Query embeddings"), (G, "Gallery embeddings"))),
                   key=lambda dt: dt.itemsize).type
    except (AttributeError, TypeError):
        return np.float64


def run_floor(Qn, Gn, qbs: int, gbs: int) -> float:
    """The bare block products; returns a checksum so nothing can be optimised away."""
    nq = Qn.shape[0]
    return sum(_floor_rows(Qn, Gn, qs, qbs, gbs) for qs in range(0, nq, qbs))


def _floor_rows(Qn, Gn, qs: int, qbs: int, gbs: int) -> float:
    Qb = Qn[qs:qs + qbs]
    return sum(float((Qb @ Gn[gs:gs + gbs].T)[0, 0]) for gs in range(0, Gn.shape[0], gbs))


def run_floor_workers(Qn, Gn, qbs: int, gbs: int, workers: int) -> float:
    """The same block products scheduled as vertebrae schedules its own: query blocks spread over
    ``workers`` threads, each with single-threaded BLAS."""
    from concurrent.futures import ThreadPoolExecutor

    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"), ThreadPoolExecutor(max_workers=workers) as pool:
        return sum(pool.map(lambda qs: _floor_rows(Qn, Gn, qs, qbs, gbs), range(0, Qn.shape[0], qbs)))


PYTREC_MEASURES = {
    "ndcg_cut." + ",".join(map(str, KS)),
    "P." + ",".join(map(str, KS)),
    "recall." + ",".join(map(str, KS)),
    "success." + ",".join(map(str, KS)),
    "map",
    "recip_rank",
}


def run_baseline(Q, G, qrels, k: int, timings: dict[str, float]):
    """faiss exact top-k + pytrec_eval; per-step times go into ``timings``; returns (means, D, I)."""
    import faiss
    import pytrec_eval

    t0 = time.perf_counter()
    Qn = Q.copy()
    Gn = G.copy()
    faiss.normalize_L2(Qn)
    faiss.normalize_L2(Gn)
    index = faiss.IndexFlatIP(Gn.shape[1])
    index.add(Gn)
    D, I = index.search(Qn, k)
    t1 = time.perf_counter()
    run = {}
    for i in range(I.shape[0]):
        run[str(i)] = dict(zip(map(str, I[i].tolist()), D[i].tolist()))
    t2 = time.perf_counter()
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, PYTREC_MEASURES)
    per_query = evaluator.evaluate(run)
    names = next(iter(per_query.values())).keys()
    means = {name: float(np.mean([q[name] for q in per_query.values()])) for name in names}
    t3 = time.perf_counter()
    timings["faiss normalize + IndexFlatIP top-k"] = t1 - t0
    timings["run dict (faiss hits -> pytrec)"] = t2 - t1
    timings["pytrec_eval evaluate + mean"] = t3 - t2
    return means, D, I


def best_of(repeat: int, fn):
    """(best wall seconds, the process CPU seconds of that run, the last result) over ``repeat`` runs."""
    best, cpu, out = float("inf"), float("nan"), None
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        t, c = time.perf_counter() - t0, time.process_time() - c0
        if t < best:
            best, cpu = t, c
    return best, cpu, out


# --------------------------------------------------------------------------------------------------
# Reporting


def machine_lines(threads: int) -> list[str]:
    from threadpoolctl import threadpool_info

    blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            model = next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), model)
    except OSError:
        pass
    lines = [
        f"machine: {model}, os.cpu_count()={os.cpu_count()}, "
        f"usable cores={len(os.sched_getaffinity(0))}, threads used={threads}",
        f"numpy {np.__version__} BLAS: {blas.get('name')} {blas.get('version')} "
        f"({blas.get('openblas configuration', '').strip()})",
    ]
    for pool in threadpool_info():
        lines.append(f"  pool {pool['internal_api']:<8} {pool.get('version') or '':<14} "
                     f"arch={pool.get('architecture', '-'):<8} threads={pool['num_threads']}  "
                     f"{Path(pool['filepath']).name}")
    return lines


def cross_check(vert: dict[str, float], base: dict[str, float]) -> list[str]:
    pairs = []
    for k in KS:
        pairs += [(f"ndcg@{k}", f"ndcg_cut_{k}"), (f"precision@{k}", f"P_{k}"), (f"recall@{k}", f"recall_{k}"),
                  (f"hit_rate@{k}", f"success_{k}")]
    lines = [f"{'metric':<14} {'vertebrae':>10} {'pytrec_eval':>12} {'|diff|':>10}"]
    worst = 0.0
    for v, b in pairs:
        diff = abs(vert[v] - base[b])
        worst = max(worst, diff)
        lines.append(f"{v:<14} {vert[v]:>10.6f} {base[b]:>12.6f} {diff:>10.2e}")
    for v, b in (("map", "map"), ("mrr", "recip_rank")):
        lines.append(f"{v:<14} {vert[v]:>10.6f} {base[b]:>12.6f} {abs(vert[v] - base[b]):>10.2e}  "
                     f"(baseline sees only the top-{TOP_K}: positives below it count 0)")
    lines.append(f"max |diff| over cutoff metrics: {worst:.2e}")
    return lines


def main(argv=None) -> int:
    args = parse_args(argv)
    import faiss
    from threadpoolctl import threadpool_limits

    defaults = RetrievalConfig()
    qbs = args.query_block_size or defaults.query_block_size
    gbs = args.gallery_block_size or defaults.gallery_block_size
    config = RetrievalConfig(ks=KS, primary_metric="ndcg@10", query_block_size=qbs, gallery_block_size=gbs)
    T = args.threads

    t0 = time.perf_counter()
    Q, G, relevance = make_data(args.queries, args.gallery, args.dim, args.positives, args.noise, args.seed)
    qrels = qrels_dict(relevance)
    # floor inputs: normalised rows (outside the timer) in vertebrae's scan dtype, and the other one for info
    Qn = Q.astype(np.float64)
    Qn /= np.linalg.norm(Qn, axis=1, keepdims=True)
    Gn = G.astype(np.float64)
    Gn /= np.linalg.norm(Gn, axis=1, keepdims=True)
    floor_dtype = scan_dtype(Q, G, config)
    info_dtype = np.float64 if floor_dtype == np.float32 else np.float32
    Qf, Gf = Qn.astype(floor_dtype), Gn.astype(floor_dtype)
    Qi, Gi = Qn.astype(info_dtype), Gn.astype(info_dtype)
    del Qn, Gn
    setup = time.perf_counter() - t0

    print(f"retrieval bench: {args.queries:,} queries x {args.gallery:,} gallery x {args.dim} dims, "
          f"{args.positives} positives/query (grades 1-3), ks={KS}, blocks {qbs} x {gbs}, repeat={args.repeat}, "
          f"data setup {setup:.1f}s")
    load_before = os.getloadavg()[0]
    with threadpool_limits(limits=T):
        faiss.omp_set_num_threads(T)
        for line in machine_lines(T):
            print(line)

        # warm-ups (untimed): thread pools, lazy imports, first calls; the warm-up scores with the kernel the
        # timed run will use ("auto" picks by size), and its first call (numba import + compiled-code load, or a
        # compile on a fresh installation) is timed apart
        kernel = "fused" if use_fused("auto", args.queries * args.gallery) else "numpy"
        wq, wg, wrel = make_data(64, 1_000, args.dim, min(args.positives, 5), args.noise, args.seed + 1)
        t_first = time.perf_counter()
        run_vertebrae(wq, wg, wrel, config, kernel)
        t_first = time.perf_counter() - t_first
        print(f"vertebrae kernel: {kernel}; its first call (tiny problem, imports and compiled code): {t_first:.2f}s")
        run_floor(wq.astype(floor_dtype), wg.astype(floor_dtype), qbs, gbs)
        run_baseline(wq, wg, qrels_dict(wrel), TOP_K, {})

        workers = RetrievalScorer(config).workers(Q, G)
        run_floor_workers(wq.astype(floor_dtype), wg.astype(floor_dtype), qbs, gbs, workers)
        t_blas, c_blas, _ = best_of(args.repeat, lambda: run_floor(Qf, Gf, qbs, gbs))
        t_work, c_work, _ = best_of(args.repeat, lambda: run_floor_workers(Qf, Gf, qbs, gbs, workers))
        t_floor, c_floor = min((t_blas, c_blas), (t_work, c_work))
        t_info, c_info, _ = best_of(args.repeat, lambda: run_floor(Qi, Gi, qbs, gbs))
        t_vert, c_vert, result = best_of(args.repeat, lambda: run_vertebrae(Q, G, relevance, config))
        t_base, c_base, base_steps = float("inf"), float("nan"), {}
        for _ in range(args.repeat):
            steps: dict[str, float] = {}
            t, c = time.perf_counter(), time.process_time()
            base_means, D, _ = run_baseline(Q, G, qrels, TOP_K, steps)
            t, c = time.perf_counter() - t, time.process_time() - c
            if t < t_base:
                t_base, c_base, base_steps = t, c, steps

    forward = result.forward
    float32_ties = int(np.count_nonzero(D[:, 1:] == D[:, :-1]))
    blas = f"{T}-thread BLAS"
    rows = [(f"floor: {np.dtype(floor_dtype).name} block matmul (numpy @), the faster of", "", t_floor, c_floor),
            ("  floor schedule: one BLAS call per block", blas, t_blas, c_blas),
            ("  floor schedule: query blocks over workers", f"{workers} x 1-thread BLAS", t_work, c_work),
            ("vertebrae RetrievalScorer.score", f"{workers} x 1-thread BLAS", t_vert, c_vert),
            ("baseline: faiss + pytrec_eval", f"{T} OpenMP", t_base, c_base)]
    rows += [(f"  baseline step: {name}", "", t, float("nan")) for name, t in base_steps.items()]
    rows += [(f"  info: {np.dtype(info_dtype).name} block matmul (same blocks)", blas, t_info, c_info)]
    width = max(len(name) for name, *_ in rows)
    print()
    print(f"{'component':<{width}} {'threads':>20} {'seconds':>9} {'x floor':>8} {'cpu s':>8}")
    for name, threads, t, c in rows:
        print(f"{name:<{width}} {threads:>20} {t:>9.3f} {t / t_floor:>8.2f} {c:>8.2f}")
    print(f"load average (1 min) before / after timing: {load_before:.2f} / {os.getloadavg()[0]:.2f}")
    print()
    for line in cross_check(forward.metrics, base_means):
        print(line)
    print(f"vertebrae: primary ndcg@10={result.primary_score:.6f}, queries with exact ties among positives: "
          f"{forward.n_queries_with_ties}; faiss top-{TOP_K} adjacent float32 ties: {float32_ties}")
    if forward.n_queries_with_ties:
        print("WARNING: the data produced exact score ties; timings are still valid, the cross-check may differ")
    print(f"floor_ratio={t_vert / t_floor:.2f} baseline_ratio={t_vert / t_base:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
