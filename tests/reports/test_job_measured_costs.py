"""A candidate's peak memory and scoring seconds from what its jobs measured of themselves (carried from the embed,
fit and compress records through the score artifact into the report's loader: ``metadata["job_costs"]``), never from
Snakemake's benchmark records, which only ``vertebrae leaderboard`` reads, for a report that carries no cost."""

from __future__ import annotations

from vertebrae.core.throughput import peak_memory
from vertebrae.reports.costs import Cost, candidate_cost, cost_document, cost_source

META = {"dim": 4, "gallery": {"n_rows": 120, "dtype": "float32"}, "gallery_fingerprint": "g" * 16,
        "query": {"n_rows": 80, "dtype": "float32"}, "query_fingerprint": "q" * 16}


def _shard(peak: float | None, **extra) -> dict:
    return {"process_start_s": 1.0, "load_s": 0.5, "precomputed": False, "batches": [[10, 0.1]] * 3, "peak_mb": peak,
            **extra}


def _records(tmp_path) -> None:
    """Snakemake records that disagree with the measurements: a report built from them would show 5,000 MB, 99 s."""
    header = "s\th:m:s\tmax_rss\tmax_vms\n"
    for rule, fp in (("embed_retrieval_shard", "g" * 16), ("embed_retrieval_shard", "q" * 16),
                     ("score_retrieval", "c" * 16)):
        (tmp_path / rule).mkdir(exist_ok=True)
        (tmp_path / rule / f"{fp}.tsv").write_text(f"{header}99\t0:01:39\t5000\t1\n")


def test_the_jobs_measurements_make_the_cost_by_hand(tmp_path):
    # the query: two shards (300, 320 MiB); the gallery: a fitted extractor (its fit job peaked at 900 MiB) then a
    # compression (its job: 450 MiB); the score job carries the largest, 900, and its own 2.5 s
    query = {"shards": [_shard(300.0), _shard(320.0)]}
    gallery = {"shards": [_shard(310.0, fit_peak_mb=900.0)], "compress_peak_mb": 450.0}
    assert peak_memory([query, gallery]) == 900.0
    _records(tmp_path)
    candidate = {"embedding_metadata": META, "metadata": {
        "score_fingerprint": "c" * 16, "embedding_throughput": [query, gallery],
        "job_costs": {"peak_mb": peak_memory([query, gallery]), "score_seconds": 2.5}}}
    cost = candidate_cost(candidate, tmp_path)  # the records are there, and not read
    assert (cost.peak_memory_mb, cost.score_seconds, cost.dim, cost.bytes_per_vector) == (900.0, 2.5, 4, 16)
    assert cost.embed_status == "too few rows to measure"  # 6 batches of 10 rows after the first: no rate
    assert cost_source(candidate, cost) == "job measurements"
    assert cost_document(cost, "job measurements")["source"] == "job measurements"


def test_a_served_job_s_unknown_peak_stays_unknown(tmp_path):
    """A compressed pair whose compress job was served: no peak (the server's would be wrong), never a smaller one;
    its seconds stand."""
    _records(tmp_path)
    served = {"shards": [_shard(300.0)], "compress_peak_mb": None}
    candidate = {"embedding_metadata": META, "metadata": {
        "score_fingerprint": "c" * 16, "job_costs": {"peak_mb": peak_memory([served, served]), "score_seconds": 1.0}}}
    cost = candidate_cost(candidate, tmp_path)
    assert cost.peak_memory_mb is None and cost.score_seconds == 1.0
    assert cost_source(candidate, cost) == "job measurements"
    nothing = {"embedding_metadata": META, "metadata": {"job_costs": {"peak_mb": None, "score_seconds": None}}}
    assert cost_source(nothing, candidate_cost(nothing, tmp_path)) == "none"  # measured nothing: no record read


def test_an_older_candidate_without_measurements_reads_the_records(tmp_path):
    """What ``vertebrae leaderboard`` does for a report.json without costs: the Snakemake records, so named."""
    _records(tmp_path)
    candidate = {"embedding_metadata": META, "metadata": {"score_fingerprint": "c" * 16}}
    cost = candidate_cost(candidate, tmp_path)
    assert (cost.peak_memory_mb, cost.score_seconds) == (5000.0, 99.0)
    assert cost_source(candidate, cost) == "benchmark records"
    assert candidate_cost(candidate, None) == Cost(dim=4, bytes_per_vector=16)
