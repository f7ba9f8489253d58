"""The torch block-product path (``device=``) gives the NumPy path's score documents exactly.

Block products only filter (``kernel``), so the torch path (float32 on the device, TF32 off) must reproduce
``RetrievalScore.to_dict()`` bit for bit; CI runs it on the CPU as ``device="torch:cpu"``. Each comparison also
checks that torch really computed the blocks it was meant to (``_Spy``), so a silent fallback to NumPy cannot
pass for equality.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

torch = pytest.importorskip("torch")

import vertebrae.scoring.retrieval.device as device_module  # noqa: E402
import vertebrae.scoring.retrieval.scorer as scorer  # noqa: E402
from vertebrae.core.errors import ConfigError  # noqa: E402
from vertebrae.scoring.retrieval import (  # noqa: E402
    RetrievalConfig,
    RetrievalScorer,
    positive_scores,
    prepare_endpoint,
    relevance_matrix,
    score_shard,
)
from vertebrae.scoring.retrieval.device import TorchProduct, resolve_device  # noqa: E402

SIMILARITIES = ("cosine", "dot", "squared_l2")
BLOCKS = ((512, 10_000), (7, 37), (1, 9), (16, 2))


class _Spy:
    """Counts the blocks the torch product computed and those it left to NumPy."""

    def __init__(self, monkeypatch, **attributes):
        self.torch_blocks = self.numpy_blocks = 0
        self.products: list[TorchProduct] = []
        original = TorchProduct.__call__
        spy = self

        def counted(product, *args, **kwargs):
            out = original(product, *args, **kwargs)
            if out is None:
                spy.numpy_blocks += 1
            else:
                spy.torch_blocks += 1
            return out

        def make(device, endpoints=()):
            if device == "cpu":
                return None
            product = TorchProduct(device, endpoints)
            for name, value in attributes.items():
                setattr(product, name, value)
            spy.products.append(product)
            return product

        monkeypatch.setattr(TorchProduct, "__call__", counted)
        monkeypatch.setattr(scorer, "block_product", make)


def _problem(rng, nq, ng, d, n_pos=3, integer=False, exclusion_rate=0.05):
    if integer:  # few distinct values: exact ties everywhere
        Q = rng.integers(-2, 3, (nq, d)).astype(float)
        G = rng.integers(-2, 3, (ng, d)).astype(float)
        Q[np.abs(Q).sum(axis=1) == 0, 0] = 1.0
        G[np.abs(G).sum(axis=1) == 0, 0] = 1.0
    else:
        Q = rng.standard_normal((nq, d))
        G = rng.standard_normal((ng, d))
    rel = np.zeros((nq, ng))
    for i in range(nq):
        rel[i, rng.choice(ng, size=n_pos, replace=False)] = rng.integers(1, 4, size=n_pos)  # graded
    excl = rng.random((nq, ng)) < exclusion_rate
    excl[rel > 0] &= rng.random(int((rel > 0).sum())) < 0.2  # some excluded positives too
    for i in range(nq):
        if not ((rel[i] > 0) & ~excl[i]).any():
            excl[i, np.flatnonzero(rel[i])[0]] = False
    for j in range(ng):  # every gallery item needs a reverse positive (bidirectional)
        if not ((rel[:, j] > 0) & ~excl[:, j]).any():
            i = rng.integers(nq)
            rel[i, j], excl[i, j] = 1.0, False
    return Q, G, rel, excl


def _both(Q, G, rel, excl=None, *, threads=1, **config):
    config.setdefault("ks", (1, 3, 10))
    config.setdefault("primary_metric", "map")
    cfg = RetrievalConfig(**config)
    numpy_doc = RetrievalScorer(cfg, threads=threads).score(Q, G, rel, exclusions=excl).to_dict()
    torch_doc = RetrievalScorer(cfg, threads=threads, device="torch:cpu").score(Q, G, rel, exclusions=excl).to_dict()
    return numpy_doc, torch_doc


@pytest.mark.parametrize("similarity", SIMILARITIES)
def test_torch_path_equals_numpy_on_random_data(monkeypatch, similarity):
    spy = _Spy(monkeypatch)
    rng = np.random.default_rng(["cosine", "dot", "squared_l2"].index(similarity))
    Q, G, rel, excl = _problem(rng, 30, 120, 24)
    for qbs, gbs in BLOCKS:
        for bidirectional in (False, True):
            a, b = _both(Q, G, rel, excl, similarity=similarity, bidirectional=bidirectional,
                         query_block_size=qbs, gallery_block_size=gbs)
            assert a == b, (qbs, gbs, bidirectional)
            assert a["reverse"] is not None if bidirectional else a["reverse"] is None
    assert spy.torch_blocks > 0 and spy.numpy_blocks == 0


@pytest.mark.parametrize("similarity", SIMILARITIES)
def test_torch_path_equals_numpy_on_ties(monkeypatch, similarity):
    # integer rows: many exact ties; duplicated gallery rows tie with each other and with positives
    spy = _Spy(monkeypatch)
    rng = np.random.default_rng(7)
    for trial in range(4):
        Q, G, rel, excl = _problem(rng, 13, 60, 3, n_pos=4, integer=trial % 2 == 0, exclusion_rate=0.1)
        G[30:] = G[:30]
        positives = np.argwhere(rel > 0)
        for i, j in positives[:10]:  # an extra copy of a positive beside it: ties its score exactly
            G[(j + 1) % 60] = G[j]
        for qbs, gbs in ((128, 10_000), (3, 7), (5, 30)):
            a, b = _both(Q, G, rel, excl, similarity=similarity, bidirectional=True, query_block_size=qbs,
                         gallery_block_size=gbs)
            assert a == b, (trial, qbs, gbs)
        assert a["forward"]["n_queries_with_ties"] > 0
    assert spy.torch_blocks > 0 and spy.numpy_blocks == 0


def test_torch_path_with_worker_threads(monkeypatch):
    spy = _Spy(monkeypatch)
    rng = np.random.default_rng(3)
    Q, G, rel, excl = _problem(rng, 60, 150, 8)
    single = RetrievalScorer(RetrievalConfig(query_block_size=4, gallery_block_size=50)).score(
        Q, G, rel, exclusions=excl).to_dict()
    for similarity in SIMILARITIES:
        a, b = _both(Q, G, rel, excl, threads=4, similarity=similarity, query_block_size=4, gallery_block_size=50)
        assert a == b
    assert single == _both(Q, G, rel, excl, threads=4, query_block_size=4, gallery_block_size=50,
                           ks=(1, 5, 10), primary_metric="ndcg@10")[1]
    assert spy.torch_blocks > 0


@pytest.mark.parametrize("similarity", ["dot", "squared_l2"])
def test_float64_rows_beyond_the_float32_range(monkeypatch, similarity):
    # a row norm above 1e18 makes that endpoint scan float64 rows; the other may stay float32 (mixed product)
    spy = _Spy(monkeypatch)
    rng = np.random.default_rng(11)
    Q, G, rel, excl = _problem(rng, 17, 90, 6)
    G[:, :] *= 1e10
    G[5] *= 1e12  # norm ~ 1e22
    for q in (Q, Q * 1e15, Q.astype(np.float32)):
        for qbs, gbs in ((128, 10_000), (4, 17)):
            a, b = _both(q, G, rel, excl, similarity=similarity, bidirectional=True, query_block_size=qbs,
                         gallery_block_size=gbs)
            assert a == b
    assert spy.torch_blocks > 0 and spy.numpy_blocks == 0


def test_float32_inputs_and_read_only_arrays(monkeypatch):
    spy = _Spy(monkeypatch)
    rng = np.random.default_rng(5)
    Q, G, rel, excl = _problem(rng, 20, 70, 9)
    Q32, G32 = Q.astype(np.float32), G.astype(np.float32)
    Q32.setflags(write=False)
    G32.setflags(write=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch.from_numpy would warn about a read-only array
        for similarity in SIMILARITIES:
            a, b = _both(Q32, G32, rel, excl, similarity=similarity, gallery_block_size=20)
            assert a == b
    assert spy.torch_blocks > 0


def test_sparse_endpoints_stay_on_numpy(monkeypatch):
    # the torch path leaves sparse blocks to scipy's product (TorchProduct answers None): the same document
    spy = _Spy(monkeypatch)
    rng = np.random.default_rng(4)
    Q, G, rel, excl = _problem(rng, 15, 80, 12)
    Q[rng.random(Q.shape) < 0.6] = 0.0
    G[rng.random(G.shape) < 0.6] = 0.0
    Q[:, 0] += 0.1
    G[:, 0] += 0.1
    for similarity in SIMILARITIES:
        for q, g in ((sp.csr_matrix(Q), G), (Q, sp.csr_matrix(G))):
            a, b = _both(q, g, rel, excl, similarity=similarity, gallery_block_size=13)
            assert a == b
    assert spy.numpy_blocks > 0 and spy.torch_blocks == 0


def test_flush_to_zero_risks_stay_on_numpy(monkeypatch):
    # subnormal float32 inputs, or rows so small that flushed products could exceed the tolerance's margin,
    # are multiplied by NumPy; ordinary rows of the same problem still go to torch
    spy = _Spy(monkeypatch)
    rng = np.random.default_rng(6)
    Q, G, rel, excl = _problem(rng, 12, 40, 5)
    Q32, G32 = Q.astype(np.float32), G.astype(np.float32)
    G32[3, 1] = np.float32(1e-40)  # subnormal
    a, b = _both(Q32, G32, rel, excl, similarity="dot", gallery_block_size=10)
    assert a == b
    assert spy.numpy_blocks == 1 and spy.torch_blocks == 3  # only the shard holding row 3
    spy.numpy_blocks = spy.torch_blocks = 0
    tiny = Q * 1e-30  # |q| |g| ~ 1e-29 < 2^-90
    for similarity in ("dot", "squared_l2"):
        a, b = _both(tiny, G * 1e-16, rel, excl, similarity=similarity, gallery_block_size=10)
        assert a == b
    assert spy.numpy_blocks == 8 and spy.torch_blocks == 0


def test_score_shard_device(monkeypatch):
    rng = np.random.default_rng(12)
    Q, G, rel, excl = _problem(rng, 10, 50, 4, integer=True)
    for similarity in SIMILARITIES:
        config = RetrievalConfig(similarity=similarity)
        Qp, Gp = prepare_endpoint(Q, similarity, what="q"), prepare_endpoint(G, similarity, what="g")
        positives = positive_scores(Qp, Gp, relevance_matrix(rel, rel.shape), config=config)
        for qs, gs in ((0, 0), (3, 20)):
            args = dict(query_offset=qs, gallery_offset=gs, positives=positives, exclusions=sp.csr_matrix(excl),
                        config=config)
            expected = score_shard(Qp[qs:qs + 5], Gp[gs:gs + 25], **args)
            got = score_shard(Qp[qs:qs + 5], Gp[gs:gs + 25], device="torch:cpu", **args)
            assert got.to_dict() == expected.to_dict()
    with pytest.raises(ConfigError, match="device"):
        score_shard(Qp[:5], Gp[:25], query_offset=0, gallery_offset=0, positives=positives, config=config,
                    device="gpu")


def test_endpoints_move_to_the_device_once(monkeypatch):
    # the CUDA branch (resident endpoints, product on the device, copy back into the workspace), run on the CPU
    uploads = []
    original = TorchProduct._upload

    def counted(product, array):
        uploads.append(array.shape)
        return original(product, array)

    monkeypatch.setattr(TorchProduct, "_upload", counted)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (1 << 40, 1 << 40))
    spy = _Spy(monkeypatch, _cuda=True)
    rng = np.random.default_rng(8)
    Q, G, rel, excl = _problem(rng, 30, 120, 7)
    for similarity in SIMILARITIES:
        uploads.clear()
        a, b = _both(Q, G, rel, excl, similarity=similarity, bidirectional=True, query_block_size=4,
                     gallery_block_size=25)
        assert a == b
        assert sorted(uploads) == [(30, 7), (120, 7)]  # each endpoint once, for both directions and all blocks
    # an endpoint larger than half the free device memory travels block by block instead
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (1000, 1 << 40))
    uploads.clear()
    a, b = _both(Q, G, rel, excl, query_block_size=4, gallery_block_size=25)
    assert a == b
    assert len(uploads) == 2 * 8 * 5  # query block and gallery shard of every unit
    assert spy.torch_blocks > 0 and spy.numpy_blocks == 0


def test_product_matches_numpy_block_within_float32_rounding():
    rng = np.random.default_rng(1)
    Qp = prepare_endpoint(rng.standard_normal((9, 33)), "squared_l2", what="q")
    Gp = prepare_endpoint(rng.standard_normal((21, 33)), "squared_l2", what="g")

    class Workspace:
        def get(self, name, shape, dtype):
            return np.empty(shape, dtype)

    order = rng.permutation(9)
    S = TorchProduct("torch:cpu", (Qp.scan, Gp.scan))(Qp, Gp, "squared_l2", Workspace(), order)
    expected = (2.0 * Qp.values[order]) @ Gp.values.T - Gp.sq
    assert S.dtype == np.float32 and S.flags.c_contiguous
    np.testing.assert_allclose(S, expected, rtol=0, atol=1e-4)


# --------------------------------------------------------------------------------------------------
# Devices, precision settings, imports


def test_resolve_device():
    assert resolve_device("cpu") == "cpu"
    assert resolve_device("torch:cpu") == "torch:cpu"
    if not torch.cuda.is_available():
        assert resolve_device("auto") == "cpu"
        for name in ("cuda", "cuda:0", "cuda:3"):
            with pytest.raises(ConfigError, match=rf"device='{name}'.*no CUDA GPU"):
                resolve_device(name)
        with pytest.raises(ConfigError, match="device='cuda'"):
            RetrievalScorer(device="cuda")
    else:  # pragma: no cover - a machine with a GPU
        assert resolve_device("auto") == "cuda"
        with pytest.raises(ConfigError, match="cuda:999"):
            resolve_device("cuda:999")
    for bad in ("gpu", "CUDA", "cuda:", "cuda:-1", "torch:cuda", ""):
        with pytest.raises(ConfigError, match="device must be one of"):
            resolve_device(bad)
    with pytest.raises(ConfigError, match="device must be one of"):
        RetrievalScorer(device=None)
    assert RetrievalScorer().device == "cpu"


def test_resolve_device_without_torch(monkeypatch):
    monkeypatch.setattr(device_module, "_torch", lambda: None)
    assert resolve_device("auto") == "cpu"
    assert resolve_device("cpu") == "cpu"
    for name in ("torch:cpu", "cuda"):
        with pytest.raises(ConfigError, match=rf"device='{name}' needs torch"):
            resolve_device(name)


def test_broken_cuda_runtime_is_no_gpu(monkeypatch):
    def broken():
        raise RuntimeError("driver too old")

    monkeypatch.setattr(torch.cuda, "is_available", broken)
    assert resolve_device("auto") == "cpu"
    with pytest.raises(ConfigError, match="no CUDA GPU"):
        resolve_device("cuda")


def _flags():
    return [device_module._get(owner, name) for owner, name, _ in device_module._precision_flags(torch)]


def test_tf32_is_off_during_products_and_restored_after():
    before = _flags()
    torch.set_float32_matmul_precision("high")  # a user who allows TF32
    try:
        allowed = _flags()
        assert allowed != [value for _, _, value in device_module._precision_flags(torch)]
        inside, barrier = [], threading.Barrier(3)

        def product():
            with device_module._ieee_float32(torch):
                barrier.wait()  # all three inside at once
                inside.append(_flags())
                barrier.wait()

        threads = [threading.Thread(target=product) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        ieee = [value for _, _, value in device_module._precision_flags(torch)]
        assert inside == [ieee] * 3
        assert _flags() == allowed
    finally:
        torch.set_float32_matmul_precision("highest")
        for (owner, name, _), value in zip(device_module._precision_flags(torch), before):
            device_module._set(owner, name, value)


def test_device_is_not_part_of_the_config():
    rng = np.random.default_rng(2)
    Q, G, rel, _ = _problem(rng, 5, 20, 3)
    config = RetrievalConfig()
    doc = RetrievalScorer(config, device="torch:cpu").score(Q, G, rel).to_dict()
    assert doc == RetrievalScorer(config).score(Q, G, rel).to_dict()
    assert "device" not in config.to_dict() and doc["config"] == config.to_dict()


def test_importing_retrieval_scoring_does_not_import_torch():
    code = ("import sys, vertebrae.scoring.retrieval, vertebrae.scoring.retrieval.device; "
            "from vertebrae.scoring.retrieval import RetrievalScorer; RetrievalScorer(device='cpu'); "
            "print('torch' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "False"
