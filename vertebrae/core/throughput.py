"""Steady-state embedding throughput, measured inside the job that embeds (not the job's wall time).

An embed job times every batch it embeds (``BatchClock.batch``: rows and seconds of the extractor call and its output
checks) and records, apart from them, how long the process had been running when the job began
(``process_start_s``: interpreter start and imports) and how long building the extractor took (``load_s``: a model
read eagerly; a model read lazily loads inside the first batch, which is why the first batch of every shard is left
out). The record (``to_metadata``) goes into the shard artifact's manifest metadata under ``KEY``; the merge job
keeps every shard's record (``merged``), the compress job its source's, and the score jobs copy the records of the
endpoints they read into the score payload (``PAYLOAD_KEY``), from where the report's cost is computed.

``summarize`` pools the batches after the first of every shard of every endpoint given and takes the median rate
(rows per second) with the number of batches behind it. Fewer than ``MIN_BATCHES`` batches or ``MIN_ROWS`` rows
measured: ``too few rows to measure``, never a number. A missing record: ``unknown``, never zero. A precomputed
extractor (rows read from a file) embeds nothing: ``precomputed``, which costs 0 s (its read time is not an embedding
cost).

Each job also records what it cost itself, carried the same way: an embed job's (and a fit-extractor or compress
job's) peak resident memory (``peak_mb``: ``getrusage(RUSAGE_SELF).ru_maxrss`` in MiB, 2**20 bytes, the unit of
Snakemake's ``max_rss``), a score job's wall seconds (``score_seconds``: the process's age when its artifact is written,
interpreter start included, as Snakemake's ``s`` counts it). A score artifact's manifest metadata (no content hash
covers it: a fanned-out score's file equals the one job's but for it) carries both under ``COSTS_KEY``
(``score_costs``): the peak over the embed, fit and compress jobs of the endpoints it read, and its own seconds plus
those of the partial jobs a merge read. A job served by ``vertebrae.job_server`` (a fork of a warm process) records
no peak memory (None: its process's peak is the server's), and its seconds count from the fork (the request's start).
A fitted extractor's state carries its fit job's peak (``COSTS_KEY``), which its embed shards copy (``fit_peak_mb``).

Nothing here is part of any fingerprint: the manifest's metadata is not hashed into an artifact's name, and no
embedding artifact's content hash covers it (a score payload's hash covers its copy of the embed records).
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import time
from collections.abc import Iterable, Mapping
from typing import Any

KEY = "throughput"
PAYLOAD_KEY = "embedding_throughput"
MIN_BATCHES = 3
MIN_ROWS = 1000
MEASURED, TOO_FEW, UNKNOWN, PRECOMPUTED = "measured", "too few rows to measure", "unknown", "precomputed"
STATUSES = (MEASURED, TOO_FEW, UNKNOWN, PRECOMPUTED)
COSTS_KEY = "job_costs"  # in a score (or partial) manifest's metadata: {"peak_mb", "score_seconds"}; a fit's {"peak_mb"}
SERVER_MODULE = "vertebrae.job_server"


def process_age_seconds() -> float | None:
    """Seconds since this process started (Linux ``/proc``); None where unknown."""
    try:
        with open("/proc/self/stat", encoding="ascii") as handle:
            fields = handle.read().rpartition(")")[2].split()
        with open("/proc/uptime", encoding="ascii") as handle:
            uptime = float(handle.read().split()[0])
        age = uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None
    return max(0.0, age) if math.isfinite(age) else None


def served() -> bool:
    """Whether this process is a job served by ``vertebrae.job_server`` (a fork of the server, whose ``__main__``
    it is)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return getattr(spec, "name", None) == SERVER_MODULE


def peak_rss_mb() -> float | None:
    """This job's peak resident memory so far in MiB (2**20 bytes, Snakemake's ``max_rss`` unit): ``ru_maxrss``
    (KiB on Linux, bytes on macOS); None where unknown or where the job is served (the peak would be the server's)."""
    if served():
        return None
    try:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    except (ImportError, OSError, ValueError):
        return None
    peak = peak / 2**20 if sys.platform == "darwin" else peak / 1024
    return float(peak) if peak > 0 else None


def job_seconds() -> float | None:
    """This job's wall seconds so far: the age of its process (a served job's: since the fork that serves it)."""
    return process_age_seconds()


class BatchClock:
    """The clock of one embed job: ``loaded()`` once the extractor is built, ``batch(rows, seconds)`` per batch."""

    def __init__(self, *, precomputed: bool = False) -> None:
        self._started = time.perf_counter()
        self.process_start_s = process_age_seconds()
        self.load_s: float | None = None
        self.precomputed = bool(precomputed)
        self.batches: list[tuple[int, float]] = []
        self.fit: dict[str, Any] | None = None  # the fitted extractor's job costs, when the shard loaded one

    def fitted(self, state: Any) -> None:
        """The shard transforms with a fitted extractor: its fit job's costs (the fitted state's ``COSTS_KEY``)."""
        costs = state.get(COSTS_KEY) if isinstance(state, Mapping) else None
        self.fit = {"peak_mb": _number(costs.get("peak_mb")) if isinstance(costs, Mapping) else None}

    def loaded(self) -> None:
        self.load_s = time.perf_counter() - self._started

    def batch(self, rows: int, seconds: float) -> None:
        self.batches.append((int(rows), float(seconds)))

    def to_metadata(self) -> dict[str, Any]:
        out = {"process_start_s": self.process_start_s, "load_s": self.load_s, "precomputed": self.precomputed,
               "batches": [[rows, seconds] for rows, seconds in self.batches], "peak_mb": peak_rss_mb()}
        return out if self.fit is None else {**out, "fit_peak_mb": self.fit["peak_mb"]}


def merged(shards: Iterable[Any]) -> dict[str, Any] | None:
    """One endpoint's record from its shards' records, in shard order; None when any shard has none."""
    shards = list(shards)
    if not shards or any(not isinstance(s, Mapping) for s in shards):
        return None
    out = []
    for shard in shards:
        out += list(shard["shards"]) if "shards" in shard else [dict(shard)]
    return {"shards": out}


def carried(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The throughput record of an artifact's metadata, to carry into an artifact made from it (a compression), with
    this (compress) job's peak memory (``compress_peak_mb``)."""
    shards = _shards(metadata.get(KEY))
    return {} if shards is None else {KEY: {"shards": shards, "compress_peak_mb": peak_rss_mb()}}


def peak_memory(records: Iterable[Any]) -> float | None:
    """The peak memory (MiB) of the jobs behind the endpoints whose records are given: the largest ``peak_mb`` of
    their embed shards, and the fit and compress jobs' where a record names one; None (unknown) when any endpoint
    has no record or any of those jobs recorded none (an older artifact, a served job)."""
    peaks: list[float | None] = []
    records = list(records)
    for record in records:
        shards = _shards(record)
        if not shards:
            return None
        peaks += [_number(s.get("peak_mb")) for s in shards]
        peaks += [_number(s.get("fit_peak_mb")) for s in shards if "fit_peak_mb" in s]
        if "compress_peak_mb" in record:
            peaks.append(_number(record.get("compress_peak_mb")))
    if not records or any(p is None or p <= 0 for p in peaks):
        return None
    return max(peaks)


def part_seconds(parts: Iterable[Any]) -> float | None:
    """The summed ``score_seconds`` of partial jobs' costs (``COSTS_KEY`` of each); None when any part has none."""
    seconds = [_number(p.get("score_seconds")) if isinstance(p, Mapping) else None for p in parts]
    return None if any(s is None for s in seconds) else sum(seconds)


def score_costs(records: Iterable[Any], parts: Iterable[Any] | None = None) -> dict[str, Any]:
    """A score job's ``COSTS_KEY``: the endpoints' ``peak_memory`` and this job's ``job_seconds`` (a merge: plus
    its ``parts``' seconds; unknown when any part's is)."""
    seconds = job_seconds()
    if parts is not None and seconds is not None:
        done = part_seconds(parts)
        seconds = None if done is None else seconds + done
    return {"peak_mb": peak_memory(records), "score_seconds": seconds}


def costs_of(manifest: Any) -> Any:
    """The ``COSTS_KEY`` of an artifact's manifest metadata (None where it has none)."""
    metadata = manifest.get("metadata") if isinstance(manifest, Mapping) else None
    return metadata.get(COSTS_KEY) if isinstance(metadata, Mapping) else None


def _shards(record: Any) -> list[Mapping[str, Any]] | None:
    if not isinstance(record, Mapping):
        return None
    shards = record.get("shards", [record])
    return list(shards) if isinstance(shards, list) and all(isinstance(s, Mapping) for s in shards) else None


def _batches(shard: Mapping[str, Any]) -> list[tuple[int, float]]:
    out = []
    for item in shard.get("batches") or []:
        try:
            rows, seconds = int(item[0]), float(item[1])
        except (TypeError, ValueError, IndexError):
            continue
        out.append((rows, seconds))
    return out


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return None
    return float(value)


def summarize(records: Iterable[Any]) -> dict[str, Any]:
    """The steady-state cost of the endpoints whose records are given (an endpoint's record, or None: unknown):
    ``status`` (``STATUSES``), ``seconds_per_1k_rows`` (None unless measured or precomputed), ``rows_per_second``
    (the median over the pooled batches after each shard's first), ``batches`` and ``rows`` (what the median is of),
    ``load_s`` and ``process_start_s`` (summed over the shards; None where a shard lacks them)."""
    endpoints = [_shards(r) for r in records]
    out: dict[str, Any] = {"status": UNKNOWN, "seconds_per_1k_rows": None, "rows_per_second": None, "batches": 0,
                           "rows": 0, "load_s": None, "process_start_s": None}
    if not endpoints or any(e is None or not e for e in endpoints):
        return out
    shards = [s for e in endpoints for s in e]
    for key in ("load_s", "process_start_s"):
        values = [_number(s.get(key)) for s in shards]
        out[key] = None if any(v is None for v in values) else sum(values)
    embedded = [s for s in shards if not s.get("precomputed")]
    if not embedded:
        return {**out, "status": PRECOMPUTED, "seconds_per_1k_rows": 0.0}
    total = sum(rows for s in shards for rows, _ in _batches(s))
    embedded_rows = sum(rows for s in embedded for rows, _ in _batches(s))
    steady = [(rows, seconds) for s in embedded for rows, seconds in _batches(s)[1:] if rows > 0]
    out.update(batches=len(steady), rows=sum(rows for rows, _ in steady))
    if len(steady) < MIN_BATCHES or out["rows"] < MIN_ROWS or any(seconds <= 0 for _, seconds in steady):
        return {**out, "status": TOO_FEW}
    rate = statistics.median(rows / seconds for rows, seconds in steady)
    return {**out, "status": MEASURED, "rows_per_second": rate,
            "seconds_per_1k_rows": 1000.0 * embedded_rows / rate / total}


__all__ = ["COSTS_KEY", "KEY", "MEASURED", "MIN_BATCHES", "MIN_ROWS", "PAYLOAD_KEY", "PRECOMPUTED", "STATUSES",
           "TOO_FEW", "UNKNOWN", "BatchClock", "carried", "costs_of", "job_seconds", "merged", "part_seconds", "peak_memory",
           "peak_rss_mb", "process_age_seconds", "score_costs", "served", "summarize"]
