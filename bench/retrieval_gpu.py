"""GPU similarity-path harness (not a test): the cuda block products equal NumPy's, and what they cost beside torch.mm.

Run where a GPU is lent: ``python bench/retrieval_gpu.py`` (about a minute or two on an H200, most of it making
data and the NumPy reference). It prints the machine, the equality checks, a table of component / seconds /
ratio to the floor, and ends with the line ``gpu_equal=True gpu_ratio_to_mm_floor=X.XX``.

(a) **Equality**: 2,000 queries x 50,000 gallery x 64 dims (``--eq-*``), 5 graded positives per query, two
    random exclusions per query, 1,000 duplicated gallery rows and a copy of one positive per query beside it
    (exact ties), for each similarity: ``RetrievalScorer(config, device="cuda").score(...).to_dict()`` must equal
    the NumPy path's (``device="cpu"``) document exactly.
(b) **Timing**: 20,000 queries x 1,000,000 gallery x 256 dims (``--queries``, ``--gallery``, ``--dim``), cosine,
    ks (1, 5, 10, 100), default block sizes (512 x 10,000). ``gpu``: ``RetrievalScorer(config,
    device="cuda").score(Q, G, relevance)`` end to end (validation, normalisation, upload, every block's product
    on the device, its counting passes on the CPU workers, merge, metrics). ``floor``: the same block loop doing
    only ``torch.mm(Q[qs:qe], G[gs:ge].T)`` on the device (float32, TF32 off; normalised rows already on the
    device, outside the timer), no counting, synchronised at the end. ``gpu_ratio_to_mm_floor = gpu / floor``.
    ``--cpu-too`` also times the NumPy path on the same data (information).

Without a GPU, (a) runs on a small problem (300 x 5,000 x 32) with ``device="torch:cpu"`` and the last line is
``gpu_equal=skipped(no cuda) torch_cpu_equal=True``. ``--device torch:cpu`` runs (a) and (b) with torch on the
CPU at the sizes given (a smoke test of this script; its ratio is not the GPU's).
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
from vertebrae.scoring.retrieval.device import _ieee_float32, resolve_device  # noqa: E402

KS = (1, 5, 10, 100)
SIMILARITIES = ("cosine", "dot", "squared_l2")
MAX_DENSE_BYTES = 64_000_000_000  # the timing problem's float64-equivalent endpoints are ~2 GB; the machine has RAM


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="auto", help="auto (cuda if torch sees a GPU), cuda, cuda:N, torch:cpu")
    parser.add_argument("--queries", type=int, default=20_000)
    parser.add_argument("--gallery", type=int, default=1_000_000)
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--eq-queries", type=int, default=2_000)
    parser.add_argument("--eq-gallery", type=int, default=50_000)
    parser.add_argument("--eq-dim", type=int, default=64)
    parser.add_argument("--positives", type=int, default=5, help="positives per query (grades 1-3)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None, help="scorer worker threads (default: the BLAS's)")
    parser.add_argument("--repeat", type=int, default=1, help="time each component N times, report the best")
    parser.add_argument("--cpu-too", action="store_true", help="also time the NumPy path on the timing problem")
    args = parser.parse_args(argv)
    if not 1 <= args.positives <= min(args.gallery, args.eq_gallery) // 4:
        parser.error("--positives must be in [1, gallery / 4]")
    return args


# --------------------------------------------------------------------------------------------------
# Data


def make_data(nq: int, ng: int, d: int, n_pos: int, seed: int, ties: bool = False):
    """Float32 queries/gallery (queries near a grade-weighted mix of their positives), grades as CSR, and two
    random exclusions per query; with ``ties``, duplicated gallery rows and a copy of a positive beside it."""
    rng = np.random.default_rng(seed)
    G = rng.standard_normal((ng, d), dtype=np.float32)
    cols = rng.integers(0, ng, (nq, n_pos))
    while True:  # distinct positives per row (redraw the rare rows with a repeat)
        cols.sort(axis=1)
        repeated = np.flatnonzero((cols[:, 1:] == cols[:, :-1]).any(axis=1))
        if not repeated.size:
            break
        cols[repeated] = rng.integers(0, ng, (repeated.size, n_pos))
    if ties:
        dup = min(1_000, ng // 4)
        G[ng - dup:] = G[:dup]  # duplicated rows: exact ties between gallery items
        beside = (cols[:, 0] + 1) % ng
        G[beside] = G[cols[:, 0]]  # a negative (mostly) tying exactly with a positive
    grades = rng.integers(1, 4, size=(nq, n_pos))
    weights = ((grades / 3.0) * rng.uniform(0.3, 1.0, size=(nq, n_pos))).astype(np.float32)
    Q = np.einsum("qp,qpd->qd", weights, G[cols])
    Q += (1.5 / np.sqrt(d)) * rng.standard_normal((nq, d), dtype=np.float32)
    indptr = np.arange(0, nq * n_pos + 1, n_pos)
    relevance = sp.csr_matrix((grades.ravel().astype(np.float64), cols.ravel(), indptr), shape=(nq, ng))
    excluded = np.sort(rng.integers(0, ng, (nq, 2)), axis=1)
    excluded[:, 1] = np.where(excluded[:, 1] == excluded[:, 0], (excluded[:, 0] + 1) % ng, excluded[:, 1])
    exclusions = sp.csr_matrix((np.ones(2 * nq, dtype=bool), excluded.ravel(), np.arange(0, 2 * nq + 1, 2)),
                               shape=(nq, ng))
    return np.ascontiguousarray(Q), np.ascontiguousarray(G), relevance, exclusions


# --------------------------------------------------------------------------------------------------
# Components


def check_equal(device: str, nq: int, ng: int, d: int, args) -> tuple[bool, list[str]]:
    Q, G, relevance, exclusions = make_data(nq, ng, d, args.positives, args.seed + 1, ties=True)
    lines, equal = [], True
    for similarity in SIMILARITIES:
        config = RetrievalConfig(similarity=similarity, ks=KS, primary_metric="ndcg@10",
                                 max_dense_bytes=MAX_DENSE_BYTES)
        t0 = time.perf_counter()
        expected = RetrievalScorer(config, threads=args.threads).score(Q, G, relevance, exclusions=exclusions)
        t1 = time.perf_counter()
        got = RetrievalScorer(config, threads=args.threads, device=device).score(Q, G, relevance,
                                                                                  exclusions=exclusions)
        t2 = time.perf_counter()
        same = got.to_dict() == expected.to_dict()
        equal &= same
        lines.append(f"  {similarity:<10} equal={same}  numpy {t1 - t0:7.2f}s  {device} {t2 - t1:7.2f}s  "
                     f"ndcg@10={expected.primary_score:.6f}  queries with ties={expected.forward.n_queries_with_ties}")
    return equal, lines


def run_floor(torch, Qd, Gd, qbs: int, gbs: int, cuda: bool) -> float:
    """The bare block products on the device (float32, TF32 off); returns a checksum."""
    acc = torch.zeros((), dtype=Qd.dtype, device=Qd.device)
    with _ieee_float32(torch):
        for qs in range(0, Qd.shape[0], qbs):
            Qb = Qd[qs:qs + qbs]
            for gs in range(0, Gd.shape[0], gbs):
                acc += torch.mm(Qb, Gd[gs:gs + gbs].t())[0, 0]
        if cuda:
            torch.cuda.synchronize()
    return float(acc)


def time_floor(torch, Q, G, device: str, qbs: int, gbs: int, repeat: int) -> tuple[float, float]:
    """(wall, CPU seconds) of ``run_floor`` on the normalised float32 rows, put on the device outside the timer."""
    target = torch.device("cpu" if device == "torch:cpu" else device)
    cuda = target.type == "cuda"
    Qd = torch.from_numpy(np.asarray(prepare_endpoint(Q, "cosine", what="q").scan)).to(target)
    Gd = torch.from_numpy(np.asarray(prepare_endpoint(G, "cosine", what="g").scan)).to(target)
    run_floor(torch, Qd[:qbs], Gd[:gbs], qbs, gbs, cuda)  # warm-up
    t, c, _ = best_of(repeat, lambda: run_floor(torch, Qd, Gd, qbs, gbs, cuda))
    return t, c  # the device rows are freed on return


def best_of(repeat: int, fn, sync=None):
    """(best wall seconds, the process CPU seconds of that run, the last result) over ``repeat`` runs."""
    best, cpu, out = float("inf"), float("nan"), None
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        if sync is not None:
            sync()
        t, c = time.perf_counter() - t0, time.process_time() - c0
        if t < best:
            best, cpu = t, c
    return best, cpu, out


def machine_lines(torch, device: str) -> list[str]:
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            model = next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), model)
    except OSError:
        pass
    lines = [f"machine: {model}, usable cores={len(os.sched_getaffinity(0))}, numpy {np.__version__}, "
             f"torch {torch.__version__} (CUDA {torch.version.cuda}), torch threads={torch.get_num_threads()}"]
    if device.startswith("cuda"):
        props = torch.cuda.get_device_properties(torch.device(device))
        lines.append(f"device: {props.name}, {props.total_memory / 2**30:.0f} GiB, {props.multi_processor_count} SMs")
    return lines


# --------------------------------------------------------------------------------------------------


def main(argv=None) -> int:
    args = parse_args(argv)
    device = resolve_device(args.device)
    if device == "cpu":  # no GPU: the torch path on the CPU, small equality check only
        equal, lines = check_equal("torch:cpu", 300, 5_000, 32, args)
        print("no CUDA GPU visible: equality of device='torch:cpu' with the NumPy path, 300 x 5,000 x 32")
        for line in lines:
            print(line)
        print(f"gpu_equal=skipped(no cuda) torch_cpu_equal={equal}")
        return 0 if equal else 1

    import torch

    cuda = device.startswith("cuda")
    for line in machine_lines(torch, device):
        print(line)
    # warm-up (untimed): CUDA context, cuBLAS handles, thread pools
    wq, wg, wrel, _ = make_data(64, 2_000, args.dim, args.positives, args.seed + 2)
    RetrievalScorer(RetrievalConfig(ks=KS), device=device).score(wq, wg, wrel)

    print(f"(a) equality, {args.eq_queries:,} queries x {args.eq_gallery:,} gallery x {args.eq_dim} dims, "
          f"exclusions and exact ties, device={device} vs NumPy:")
    equal, lines = check_equal(device, args.eq_queries, args.eq_gallery, args.eq_dim, args)
    for line in lines:
        print(line)

    t0 = time.perf_counter()
    Q, G, relevance, _ = make_data(args.queries, args.gallery, args.dim, args.positives, args.seed)
    config = RetrievalConfig(ks=KS, primary_metric="ndcg@10", max_dense_bytes=MAX_DENSE_BYTES)
    qbs, gbs = config.query_block_size, config.gallery_block_size
    setup = time.perf_counter() - t0
    print(f"(b) timing, {args.queries:,} queries x {args.gallery:,} gallery x {args.dim} dims, cosine, "
          f"{args.positives} positives/query, ks={KS}, blocks {qbs} x {gbs}, repeat={args.repeat}, "
          f"data setup {setup:.1f}s")
    sync = torch.cuda.synchronize if cuda else None
    t_floor, c_floor = time_floor(torch, Q, G, device, qbs, gbs, args.repeat)
    if cuda:
        torch.cuda.empty_cache()
    scorer = RetrievalScorer(config, threads=args.threads, device=device)
    t_gpu, c_gpu, result = best_of(args.repeat, lambda: scorer.score(Q, G, relevance), sync)
    rows = [(f"floor: torch.mm per block on {device} (float32, TF32 off)", t_floor, c_floor),
            (f"RetrievalScorer.score(device={device!r}), {scorer.workers(Q, G)} workers", t_gpu, c_gpu)]
    if args.cpu_too:
        t_cpu, c_cpu, cpu_result = best_of(args.repeat, lambda: RetrievalScorer(config, threads=args.threads)
                                           .score(Q, G, relevance))
        rows.append(("info: RetrievalScorer.score(device='cpu') (NumPy)", t_cpu, c_cpu))
        same = cpu_result.to_dict() == result.to_dict()
        equal &= same
        print(f"  timing problem: {device} document equals NumPy's: {same}")
    width = max(len(name) for name, *_ in rows)
    print(f"{'component':<{width}} {'seconds':>9} {'x floor':>8} {'cpu s':>8}")
    for name, t, c in rows:
        print(f"{name:<{width}} {t:>9.3f} {t / t_floor:>8.2f} {c:>8.2f}")
    print(f"ndcg@10={result.primary_score:.6f}, queries with exact ties among positives: "
          f"{result.forward.n_queries_with_ties}")
    if cuda:
        print(f"gpu_equal={equal} gpu_ratio_to_mm_floor={t_gpu / t_floor:.2f}")
    else:
        print(f"gpu_equal=skipped(no cuda) torch_cpu_equal={equal} torch_cpu_ratio_to_mm_floor={t_gpu / t_floor:.2f}")
    return 0 if equal else 1


if __name__ == "__main__":
    raise SystemExit(main())
