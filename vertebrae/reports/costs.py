"""What a candidate costs: embedding seconds per 1,000 rows, peak memory, output dimension, bytes per vector, scoring
time; ``None`` (unknown, never zero) where nothing records it.

In the workflow the embedding seconds are steady-state throughput measured inside the embed jobs
(``vertebrae.core.throughput``): the median rate of the batches after each shard's first, pooled over the
candidate's endpoints (a zero-shot candidate: its samples), carried from the shard artifacts through the merge (and a
compression) into the score artifact (``embedding_throughput``) and from there into the report. Process start and
model load are recorded apart (``load_seconds``); they are not part of the rate. ``embed_status`` says what the
number is: ``measured`` (with ``embed_batches``, the batches behind the median), ``too few rows to measure`` (fewer
than ``MIN_BATCHES`` batches or ``MIN_ROWS`` rows after the first batches: no number), ``precomputed`` (read from a
file: 0 s, its read time is not an embedding cost) or ``unknown`` (no record: a fanned-out retrieval score, an
artifact written before the records existed). Peak memory and scoring time are the jobs' own measurements,
carried the same way (``vertebrae.core.throughput``; the score artifact's manifest metadata ``job_costs``, which the
report's loader puts in the candidate's metadata): source ``job measurements``.

- peak memory: the largest peak resident memory (MiB, 2**20 bytes: Snakemake's ``max_rss`` unit) that the embed-shard
  jobs, the fit-extractor job and the compress job behind the candidate's endpoints recorded of themselves (zero-shot:
  samples and prompts); unknown unless every one did (an artifact written before they recorded it; a job served by the
  job server: its process's peak is the server's, never recorded);
- scoring seconds: the score job's own wall time (its process's age when it wrote: interpreter start included, as
  Snakemake's ``s``; a served job: from the request); a fanned-out score: every partial job's and the merge's, summed;
  unknown when any part has none.

The report job reads nothing else: no Snakemake record, which no rule declares as its input (a missing record would
rerun the job that writes it). ``vertebrae leaderboard`` (a command, not a job) reading a report.json without costs
(an older one) still takes the times and memory from the jobs' Snakemake ``benchmark:`` records when the
candidate's metadata carries no measurement (``benchmarks/<rule>/<fingerprint>[/shard-i-of-n].tsv`` in the out
folder, or beside ``results/`` in a folder of the old layout: ``vertebrae.core.out_folder``; columns ``s`` and
``max_rss`` in MB): source ``benchmark records``:

- peak memory: the largest ``max_rss`` among the embed-shard jobs (and fit-extractor job) of the candidate's
  endpoints (found by the embedding fingerprints its report records; a compressed labelled variant: its source
  embedding's jobs and its compress job); unknown unless every endpoint has records (a compressed retrieval variant
  names no source embedding in its report: unknown);
- scoring seconds: the ``s`` of its score job (fanned-out retrieval: its partial jobs and their merge, summed; a
  fanned-out labelled score: its merge and the partial jobs its plan names, ``plans/<fingerprint>.json`` of the
  results folder of those records; unknown unless each has a record).

The dimension and the bytes per vector need no records: the dimension of the matrix scored (after compression) and
that many values of its stored dtype (``float32``: 4 bytes); unknown for a sparse matrix (its size varies per row).
In-process results (``Benchmark(...).run()``) have no records: ``measured_cost`` takes the times the run measured
itself (``metadata["timings"]``: ``embed_s`` over every endpoint's rows, model load included, status ``measured in
process``; unknown when an embedding came from the cache; ``embed_peak_mb``, the process's peak resident memory while it embedded, where Linux can reset and read it;
``score_s``).

Every report.json carries a candidate's costs in its ``metadata["cost"]`` (``cost_document``): the cost columns and
``source`` (``job measurements``, ``benchmark records`` (an older report's), ``embed jobs`` (their throughput only),
``measured in process`` or ``none``); a null column is unknown, never zero.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vertebrae.core.records import from_record, one_of
from vertebrae.core.throughput import COSTS_KEY as JOB_COSTS, MEASURED, PAYLOAD_KEY, PRECOMPUTED, STATUSES, UNKNOWN
from vertebrae.core.throughput import summarize

EMBED_RULES = ("fit_extractor", "embed_shard", "embed_retrieval_shard", "embed_zero_shot_samples",
               "embed_zero_shot_prompts")
COMPRESS_RULES = ("compress",)
SCORE_RULES = ("score", "score_retrieval", "score_zero_shot", "score_retrieval_partial", "merge_retrieval_partials")
DTYPE_BYTES = {"float16": 2, "float32": 4, "float64": 8, "int8": 1, "uint8": 1, "int16": 2, "int32": 4, "int64": 8,
               "bool": 1}


CHEAPEST_TIED_BY = ("size", "throughput")
CONFIG_KEY = "costs"


@dataclass(frozen=True)
class CostConfig:
    """How a report weighs cost (the workflow config's ``costs:`` section; a report carries a non-default one in its
    ``metadata["costs"]``).

    - ``cheapest_tied_by``: the cost of the line "cheapest candidate statistically tied with the leader": ``size``
      (default: bytes per vector, then dim, the same on every run) or ``throughput`` (the steady-state embedding
      seconds per 1,000 rows measured in the embed jobs: it varies from run to run and machine to machine).
    """

    cheapest_tied_by: str = "size"

    def __post_init__(self) -> None:
        one_of(self.cheapest_tied_by, CHEAPEST_TIED_BY, "CostConfig", "cheapest_tied_by")

    def to_dict(self) -> dict[str, Any]:
        return {"cheapest_tied_by": self.cheapest_tied_by}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> CostConfig:
        """Strict: an unknown key or value is refused (``ConfigError`` naming it); None: the default."""
        return cls() if data is None else from_record(cls, data)

    @property
    def is_default(self) -> bool:
        return self == CostConfig()


@dataclass(frozen=True)
class Cost:
    """A candidate's cost columns; None is unknown."""

    embed_seconds_per_1k_rows: float | None = None
    peak_memory_mb: float | None = None
    dim: int | None = None
    bytes_per_vector: int | None = None
    score_seconds: float | None = None
    embed_status: str = UNKNOWN
    embed_batches: int | None = None
    load_seconds: float | None = None


def read_record(path: Path) -> dict[str, float] | None:
    """The ``s`` and ``max_rss`` of a Snakemake benchmark record (its last repeat); None when unreadable. A
    ``max_rss`` that is missing, ``NA`` or not above 0 is NaN (unmeasured): no process runs in 0 MB, and Snakemake
    writes 0.00 when its only sample of a short job found the job's process already exited."""
    try:
        with open(path, encoding="utf-8", newline="") as handle:
            rows = list(csv.DictReader(handle, delimiter="\t"))
        seconds = float(rows[-1]["s"])
        rss = rows[-1].get("max_rss")
        memory = float(rss) if rss not in (None, "", "NA", "-") else math.nan
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return None
    if not memory > 0:
        memory = math.nan
    return {"s": seconds, "max_rss": memory} if math.isfinite(seconds) else None


def _records(records_dir: Path, rules: tuple[str, ...], fingerprint: str) -> list[dict[str, float]]:
    found = []
    for rule in rules:
        paths = [records_dir / rule / f"{fingerprint}.tsv", *sorted((records_dir / rule / fingerprint).glob("*.tsv"))]
        found += [r for r in (read_record(p) for p in paths if p.is_file()) if r is not None]
    return found


def embedding_endpoints(metadata: Any) -> list[dict[str, Any]]:
    """Every endpoint in a candidate's embedding metadata, each with its ``fingerprint`` and ``n_rows``: a mapping
    holding both (labelled), or a side's mapping named by a sibling ``<side>_fingerprint`` (retrieval: ``query``,
    ``gallery``; zero-shot: ``sample_fingerprint`` names ``samples``, ``prompt_fingerprint`` names ``prompts``)."""
    if not isinstance(metadata, Mapping):
        return []
    if "fingerprint" in metadata and "n_rows" in metadata:
        return [dict(metadata)]
    out = []
    for key, value in metadata.items():
        prefix = key[:-len("_fingerprint")] if key.endswith("_fingerprint") else None
        side = None if prefix is None else metadata.get(prefix, metadata.get(f"{prefix}s"))
        if isinstance(side, Mapping) and "n_rows" in side and isinstance(value, str):
            out.append({**side, "fingerprint": value, "extractor": side.get("extractor", metadata.get("extractor"))})
        elif isinstance(value, Mapping) and not ("n_rows" in value and any(
                isinstance(metadata.get(f"{name}_fingerprint"), str) for name in (key, key.rstrip("s")))):
            out += embedding_endpoints(value)
    return out


_endpoints = embedding_endpoints


def stored_size(candidate: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """(dimension, bytes per vector) of the matrix a candidate was scored on."""
    meta = candidate.get("embedding_metadata") or {}
    dim = meta.get("dim")
    dim = int(dim) if isinstance(dim, int) and not isinstance(dim, bool) else None
    endpoints = _endpoints(meta)
    dtypes = {str(e.get("dtype")) for e in endpoints} or {str(meta.get("dtype"))}
    if meta.get("dtype") is not None:
        dtypes = {str(meta["dtype"])}
    sparse = any(bool(e.get("sparse")) for e in endpoints) or bool(meta.get("sparse"))
    compressed = candidate.get("compression_metadata") or {}
    if isinstance(compressed, Mapping) and compressed.get("dtype"):
        dtypes = {str(compressed["dtype"])}
    if dim is None or sparse or len(dtypes) != 1 or next(iter(dtypes)) not in DTYPE_BYTES:
        return dim, None
    return dim, dim * DTYPE_BYTES[next(iter(dtypes))]


def throughput_cost(candidate: Mapping[str, Any]) -> dict[str, Any]:
    """The steady-state embedding cost of a candidate from the throughput records its ``metadata`` carries
    (``embedding_throughput``: one per endpoint): ``Cost`` keyword arguments."""
    records = (candidate.get("metadata") or {}).get(PAYLOAD_KEY)
    summary = summarize(records if isinstance(records, list) else [None])
    return {"embed_seconds_per_1k_rows": summary["seconds_per_1k_rows"], "embed_status": summary["status"],
            "embed_batches": summary["batches"] if summary["status"] != UNKNOWN else None,
            "load_seconds": summary["load_s"]}


def job_measurements(candidate: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """What the candidate's jobs measured of themselves (``metadata["job_costs"]``: ``peak_mb``, ``score_seconds``),
    None when its metadata carries nothing (a report.json, an artifact written before the jobs measured)."""
    carried = (candidate.get("metadata") or {}).get(JOB_COSTS)
    return carried if isinstance(carried, Mapping) else None


def candidate_cost(candidate: Mapping[str, Any], records_dir: str | Path | None = None) -> Cost:
    """The cost columns of one candidate of a report (its ``embedding_metadata`` and ``metadata``): the embedding
    throughput, peak memory and scoring seconds its metadata carries (``job_measurements``); a candidate carrying no
    measurement: the memory and scoring time of the benchmark records under ``records_dir`` (None: none read)."""
    dim, size = stored_size(candidate)
    embedding = throughput_cost(candidate)
    measured = job_measurements(candidate)
    if measured is not None:
        return Cost(peak_memory_mb=_finite(measured.get("peak_mb")) or None, dim=dim, bytes_per_vector=size,
                    score_seconds=_finite(measured.get("score_seconds")), **embedding)
    if records_dir is None or not Path(records_dir).is_dir():
        return Cost(dim=dim, bytes_per_vector=size, **embedding)
    records_dir = Path(records_dir)
    embed: list[dict[str, float]] = []
    complete = True
    for endpoint in _endpoints(candidate.get("embedding_metadata") or {}):
        found = _records(records_dir, EMBED_RULES, str(endpoint["fingerprint"]))
        source = endpoint.get("source_fingerprint")
        if not found and isinstance(source, str):  # a compressed variant: its source's embedding and the compression
            compressed = _records(records_dir, COMPRESS_RULES, str(endpoint["fingerprint"]))
            found = _records(records_dir, EMBED_RULES, source) + compressed if compressed else []
        complete = complete and bool(found)
        embed += found
    memory = [r["max_rss"] for r in embed if math.isfinite(r["max_rss"])]
    score_fp = (candidate.get("metadata") or {}).get("score_fingerprint")
    scored = _score_records(records_dir, str(score_fp)) if score_fp else []
    return Cost(peak_memory_mb=max(memory) if memory and complete else None, dim=dim, bytes_per_vector=size,
                score_seconds=sum(r["s"] for r in scored) if scored else None, **embedding)


def _score_records(records_dir: Path, score_fp: str) -> list[dict[str, float]]:
    """The records of the jobs that wrote score ``score_fp``; [] where one is missing (unknown, never a part)."""
    merged = _records(records_dir, ("merge_labelled_partials",), score_fp)
    if not merged:
        return _records(records_dir, SCORE_RULES, score_fp)
    from vertebrae.core.artifacts import read_json_artifact
    from vertebrae.core.errors import VertebraeError
    from vertebrae.core.out_folder import results_of

    try:  # a labelled partial serves every score that declares its part: its record is kept under its own name
        spec = read_json_artifact(results_of(records_dir) / "plans" / f"{score_fp}.json", "plan",
                                  fingerprint=None)
        parts = [str(ref["fingerprint"]) for ref in spec["partials"]]
    except (VertebraeError, OSError, KeyError, TypeError):
        return []
    found = [_records(records_dir, ("score_labelled_partial",), fp) for fp in parts]
    return merged + [r for records in found for r in records] if all(found) else []


COST_KEY = "cost"
COST_FIELDS = ("embed_seconds_per_1k_rows", "peak_memory_mb", "dim", "bytes_per_vector", "score_seconds",
               "embed_status", "embed_batches", "load_seconds")
EMBED_STATUSES = (*STATUSES, "measured in process")
SOURCES = ("job measurements", "benchmark records", "embed jobs", "measured in process", "none")


def cost_source(candidate: Mapping[str, Any], cost: Cost) -> str:
    """Where ``candidate_cost`` found ``cost``: the jobs' measurements, Snakemake's records, the embed jobs'
    throughput alone, or nothing."""
    if cost.peak_memory_mb is not None or cost.score_seconds is not None:
        return "job measurements" if job_measurements(candidate) is not None else "benchmark records"
    return "none" if cost.embed_status == UNKNOWN else "embed jobs"


def cost_document(cost: Cost, source: str) -> dict[str, Any]:
    """The ``metadata["cost"]`` a report carries for a candidate (None: unknown)."""
    if source not in SOURCES:
        raise ValueError(f"cost source {source!r}: expected one of {SOURCES}")
    return {**{name: getattr(cost, name) for name in COST_FIELDS}, "source": source}


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return None
    return float(value)


def stored_cost(candidate: Mapping[str, Any]) -> Cost | None:
    """The cost a report.json carries for a candidate (``metadata["cost"]``); None when it carries none."""
    document = (candidate.get("metadata") or {}).get(COST_KEY)
    if not isinstance(document, Mapping):
        return None
    values: dict[str, Any] = {name: _finite(document.get(name)) for name in COST_FIELDS if name != "embed_status"}
    for name in ("dim", "bytes_per_vector", "embed_batches"):
        values[name] = None if values[name] is None else int(values[name])
    status = document.get("embed_status")
    if status not in EMBED_STATUSES:  # a report written before the status existed: its number is a whole-job time
        status = UNKNOWN if values["embed_seconds_per_1k_rows"] is None else "measured in process"
    if status not in (MEASURED, PRECOMPUTED, "measured in process"):
        values["embed_seconds_per_1k_rows"] = None  # too few rows, unknown: never a number
    return Cost(**values, embed_status=status)


def _cache_hit(status: Any) -> bool:
    if isinstance(status, Mapping):
        return any(_cache_hit(v) for v in status.values())
    return str(status) == "hit"


def measured_cost(candidate: Mapping[str, Any]) -> Cost:
    """The cost of a candidate of an in-process run, from the times it measured (``metadata["timings"]``): embedding
    seconds per 1,000 rows over every endpoint (unknown when any embedding was read from the cache), the peak
    resident memory while it embedded, the scoring seconds."""
    dim, size = stored_size(candidate)
    meta = candidate.get("embedding_metadata") or {}
    timings = (candidate.get("metadata") or {}).get("timings") or {}
    rows = sum(int(e.get("n_rows") or 0) for e in _endpoints(meta)) or int(meta.get("n_rows") or 0)
    embed = _finite(timings.get("embed_s"))
    seconds = embed / rows * 1000 if embed is not None and rows and not _cache_hit(meta.get("cache_status")) else None
    memory = _finite(timings.get("embed_peak_mb")) if not _cache_hit(meta.get("cache_status")) else None
    return Cost(embed_seconds_per_1k_rows=seconds, peak_memory_mb=memory, dim=dim, bytes_per_vector=size,
                score_seconds=_finite(timings.get("score_s")),
                embed_status=UNKNOWN if seconds is None else "measured in process")


def embed_cost_text(cost: Cost, digits: str = ".4g") -> str:
    """The embedding cost as a reader sees it: the number, ``too few rows to measure``, or ``unknown``."""
    if cost.embed_status == "too few rows to measure":
        return cost.embed_status
    if cost.embed_seconds_per_1k_rows is None:
        return "unknown"
    return format(cost.embed_seconds_per_1k_rows, digits)


def reset_peak_memory() -> bool:
    """Reset this process's peak resident memory (Linux: ``/proc/self/clear_refs``); False where it cannot."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


def peak_memory_mb() -> float | None:
    """This process's peak resident memory since the last reset, in MB (Linux ``VmHWM``); None where unknown."""
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


__all__ = ["CHEAPEST_TIED_BY", "CONFIG_KEY", "COST_FIELDS", "COST_KEY", "Cost", "CostConfig", "DTYPE_BYTES", "EMBED_RULES", "EMBED_STATUSES", "SCORE_RULES", "SOURCES",
           "candidate_cost", "cost_document", "cost_source", "job_measurements", "embed_cost_text", "embedding_endpoints", "throughput_cost",
           "measured_cost", "peak_memory_mb", "read_record", "reset_peak_memory", "stored_cost", "stored_size"]
