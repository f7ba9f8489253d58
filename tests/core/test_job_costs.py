"""What each job records of its own cost (``vertebrae.core.throughput``): an embed, fit or compress job's peak resident
memory (MiB, Snakemake's ``max_rss`` unit), a score job's wall seconds; unknown (None), never a wrong number, for a
job served by the job server (a fork: its peak is the server's)."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

from vertebrae.core import throughput
from vertebrae.core.throughput import (BatchClock, carried, part_seconds, peak_memory, peak_rss_mb, score_costs,
                                       served)


def _vm_hwm_mib() -> float:
    with open("/proc/self/status", encoding="ascii") as handle:
        return next(int(line.split()[1]) / 1024 for line in handle if line.startswith("VmHWM:"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc: Linux")
def test_the_peak_is_this_process_s_in_mib():
    block = np.ones((64, 2**20 // 8 * 4))  # 256 MiB touched: the peak grows by at least that much
    peak = peak_rss_mb()
    assert peak is not None and peak >= 256 and block.sum() > 0
    # ru_maxrss is the largest resident set ever, VmHWM the same since the last reset: one unit, MiB (2**20 bytes)
    assert peak == pytest.approx(_vm_hwm_mib(), rel=0.05) or peak > _vm_hwm_mib()


def test_a_served_job_records_no_peak(monkeypatch):
    assert not served()
    main = types.ModuleType("__main__")
    main.__spec__ = types.SimpleNamespace(name="vertebrae.job_server")  # what a fork of `python -m vertebrae.job_server` sees
    monkeypatch.setitem(sys.modules, "__main__", main)
    assert served() and peak_rss_mb() is None
    clock = BatchClock()
    assert clock.to_metadata()["peak_mb"] is None  # unknown, never the server's number
    assert carried({"throughput": {"shards": [{"peak_mb": 100.0}]}})["throughput"]["compress_peak_mb"] is None
    costs = score_costs([{"shards": [{"peak_mb": 100.0}]}])
    assert costs["peak_mb"] == 100.0 and costs["score_seconds"] is not None  # seconds: since the fork, the request's start


def test_an_embed_shard_records_its_peak_and_its_fit_s():
    clock = BatchClock()
    record = clock.to_metadata()
    assert record["peak_mb"] > 0 and "fit_peak_mb" not in record
    clock.fitted({"format": "skops", "data": "", "job_costs": {"peak_mb": 512.5}})
    assert clock.to_metadata()["fit_peak_mb"] == 512.5
    clock.fitted({"format": "skops", "data": ""})  # a fitted state written before the costs: unknown
    assert clock.to_metadata()["fit_peak_mb"] is None


def test_peak_memory_by_hand():
    shard = lambda mb, **extra: {"batches": [], "peak_mb": mb, **extra}  # noqa: E731
    query = {"shards": [shard(300.0), shard(320.0)]}
    gallery = {"shards": [shard(310.0, fit_peak_mb=900.0), shard(305.0, fit_peak_mb=900.0)]}
    assert peak_memory([query]) == 320.0
    assert peak_memory([query, gallery]) == 900.0  # the fit job of the gallery's extractor
    compressed = {"shards": query["shards"], "compress_peak_mb": 1000.0}
    assert peak_memory([compressed]) == 1000.0
    # unknown, never a part: an endpoint without a record, a shard without a peak, a served compress job
    assert peak_memory([query, None]) is None
    assert peak_memory([{"shards": [shard(300.0), {"batches": []}]}]) is None
    assert peak_memory([{**compressed, "compress_peak_mb": None}]) is None
    assert peak_memory([]) is None
    assert peak_memory([{"shards": [shard(0.0)]}]) is None  # no process runs in 0 MiB


def test_a_compression_carries_its_source_s_shards_and_its_own_peak():
    source = {"throughput": {"shards": [{"batches": [[10, 0.1]], "peak_mb": 200.0}]}}
    record = carried(source)["throughput"]
    assert record["shards"] == source["throughput"]["shards"] and record["compress_peak_mb"] > 0
    assert carried({}) == {}


def test_a_merge_s_seconds_are_its_own_and_its_parts(monkeypatch):
    monkeypatch.setattr(throughput, "process_age_seconds", lambda: 2.0)
    assert score_costs([None]) == {"peak_mb": None, "score_seconds": 2.0}
    parts = [{"score_seconds": 1.5}, {"score_seconds": 0.25}, {"score_seconds": 3.0}]
    assert part_seconds(parts) == 4.75
    assert score_costs([None], parts)["score_seconds"] == 6.75  # 1.5 + 0.25 + 3 + the merge's own 2
    assert score_costs([None], [*parts, None])["score_seconds"] is None  # a part without a record: unknown, never a sum
    assert score_costs([None], [{"score_seconds": -1.0}])["score_seconds"] is None
