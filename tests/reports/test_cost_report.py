"""What a candidate costs, in every report: ``metadata["cost"]`` per candidate (measured in process by the Python
API, from the Snakemake benchmark records in the workflow; unknown never zero), and report.md's "Quality vs cost"
section with its Pareto front and the cheapest candidate statistically tied with the leader."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from sklearn.datasets import load_iris

from vertebrae import Benchmark, BenchmarkDataset, DatasetIdentity, OverlapScoringConfig
from vertebrae.extractors.callable import CallableExtractor
from vertebrae.reports.cost_report import cost_lines
from vertebrae.reports.costs import COST_FIELDS, stored_cost
from vertebrae.reports.html_items import report_items
from vertebrae.reports.markdown import render_markdown
from vertebrae.scoring.paired.rows import RowResamplingConfig
from vertebrae.stages.verify import check_report


def _wide(rows):  # the same geometry in 64 float32 dimensions (60 of them zero): the same scores, 16x the bytes
    rows = np.asarray(rows, dtype=np.float32)
    return np.hstack([rows, np.zeros((len(rows), 60), dtype=np.float32)])


@pytest.fixture(scope="module")
def tied():
    """Two candidates of equal quality: ``wide`` (declared first, so the leader) and ``narrow``, 16x cheaper to
    store."""
    X, y = load_iris(return_X_y=True)
    dataset = BenchmarkDataset.from_arrays(X, y, identity=DatasetIdentity.declared("iris", "1"))
    candidates = [CallableExtractor("wide", _wide, cache_identity="wide"),
                  CallableExtractor("narrow", lambda r: np.asarray(r, dtype=np.float32), cache_identity="narrow")]
    # iris's 3 classes: the comparison resamples rows; 20 subsamples (the least), not the default 200
    return Benchmark(dataset, candidates, scoring_config=OverlapScoringConfig(k=5), row_resampling=RowResamplingConfig(resamples=20), seed=0,
                     name="iris").run()


def test_an_in_process_report_carries_measured_costs(tied, tmp_path):
    costs = {c.name: c.metadata["cost"] for c in tied.extractor_results}
    assert set(costs["wide"]) == {*COST_FIELDS, "source"}
    assert (costs["wide"]["dim"], costs["wide"]["bytes_per_vector"]) == (64, 256)
    assert (costs["narrow"]["dim"], costs["narrow"]["bytes_per_vector"]) == (4, 16)
    for cost in costs.values():
        assert cost["source"] == "measured in process"
        assert cost["embed_seconds_per_1k_rows"] > 0 and cost["score_seconds"] > 0
        assert cost["peak_memory_mb"] is None or cost["peak_memory_mb"] > 0
    tied.save_json(tmp_path / "report.json")  # the costs survive verification (content hash, round trip)
    document = check_report(tmp_path / "report.json")
    assert stored_cost(document["extractor_results"][1]).bytes_per_vector == 16


def test_the_cheaper_tied_candidate_is_found(tied):
    assert [r.name for r in tied.ranked_results()] == ["wide", "narrow"]  # equal scores: declaration order
    verdicts = {r["name"]: r["verdict"] for r in tied.comparison.versus_leader()}
    assert verdicts == {"narrow": "indistinguishable"}
    text = "\n".join(cost_lines(tied))
    # one line, by the deterministic cost unless the report asks for throughput, naming the cost it used
    assert "- cheapest candidate statistically tied with the leader (by size: bytes per vector, then dim): narrow " \
           "(16 bytes per vector, dim 4; leader wide: 256 bytes per vector, dim 64)" in text
    assert text.count("cheapest candidate") == 1
    # the Markdown report and its HTML comparison page carry the table and the line
    markdown = render_markdown(tied)
    assert "## Quality vs cost" in markdown and "(by size: bytes per vector, then dim): narrow" in markdown
    page = report_items(markdown, benchmark="iris")["comparison"]
    assert "Quality vs cost" in page and "(by size: bytes per vector, then dim): narrow" in page


def test_no_records_means_unknown_not_zero(tied, tmp_path):
    """The workflow's report job without records (or with a deleted benchmarks/ folder): times unknown."""
    again = tied.with_costs(tmp_path / "benchmarks")
    for candidate in again.extractor_results:
        cost = candidate.metadata["cost"]
        assert cost["source"] == "none"
        assert cost["embed_seconds_per_1k_rows"] is None and cost["peak_memory_mb"] is None
        assert cost["dim"] in (4, 64)
    assert all(c.metadata["cost"]["embed_status"] == "unknown" for c in again.extractor_results)
    text = "\n".join(cost_lines(replace(again, metadata={**again.metadata, "costs": {"cheapest_tied_by": "throughput"}})))
    assert "(by throughput: steady-state embedding seconds per 1,000 rows): unknown; cost unknown for wide, narrow" \
        in text
    assert "| narrow |" in text and "| unknown |" in text and "| 0 |" not in text


def test_costs_from_benchmark_records(tied, tmp_path):
    """A workflow report: the embed jobs' records (``max_rss``) per embedding fingerprint, the score job's; the
    records' whole-job seconds (process start and model load included) are no embedding cost."""
    records = tmp_path / "benchmarks"
    for candidate in tied.extractor_results:
        fp = candidate.embedding_metadata["fingerprint"]
        shards = records / "embed_shard" / fp
        shards.mkdir(parents=True)
        for i, seconds in enumerate((0.5, 1.0)):
            (shards / f"shard-{i}-of-2.tsv").write_text(f"s\tmax_rss\n{seconds}\t{100 + i}\n", encoding="utf-8")
    again = tied.with_costs(records)
    cost = again.extractor_results[0].metadata["cost"]
    assert cost["source"] == "benchmark records"
    assert cost["embed_seconds_per_1k_rows"] is None and cost["embed_status"] == "unknown"  # no throughput record
    assert cost["peak_memory_mb"] == 101 and cost["score_seconds"] is None  # no score record: unknown


def test_a_record_measured_at_zero_memory_is_unmeasured_not_zero(tmp_path):
    """Snakemake writes max_rss 0.00 when its one sample of a short job found the process gone: unknown, so a peak is
    the largest memory measured, and no peak at all when none was."""
    from vertebrae.reports.costs import candidate_cost

    records = tmp_path / "benchmarks" / "embed_shard" / "e"
    records.mkdir(parents=True)
    candidate = {"embedding_metadata": {"fingerprint": "e", "n_rows": 100, "dim": 4, "dtype": "float32"}}
    (records / "shard-0-of-2.tsv").write_text("s\tmax_rss\n1.0\t0.00\n", encoding="utf-8")
    (records / "shard-1-of-2.tsv").write_text("s\tmax_rss\n1.0\t0.00\n", encoding="utf-8")
    cost = candidate_cost(candidate, tmp_path / "benchmarks")
    assert cost.peak_memory_mb is None
    (records / "shard-1-of-2.tsv").write_text("s\tmax_rss\n1.0\t42.5\n", encoding="utf-8")
    assert candidate_cost(candidate, tmp_path / "benchmarks").peak_memory_mb == 42.5


def test_a_compressed_variant_costs_its_source_embedding_and_its_compression(tmp_path):
    from vertebrae.reports.costs import candidate_cost

    records = tmp_path / "benchmarks"
    (records / "embed_shard" / "s").mkdir(parents=True)
    (records / "embed_shard" / "s" / "shard-0-of-1.tsv").write_text("s\tmax_rss\n2.0\t50\n", encoding="utf-8")
    candidate = {"embedding_metadata": {"fingerprint": "c", "source_fingerprint": "s", "n_rows": 1000, "dim": 8,
                                        "dtype": "float32"}}
    assert candidate_cost(candidate, records).peak_memory_mb is None  # no record of its compression
    (records / "compress").mkdir()
    (records / "compress" / "c.tsv").write_text("s\tmax_rss\n0.5\t80\n", encoding="utf-8")
    cost = candidate_cost(candidate, records)
    assert (cost.peak_memory_mb, cost.bytes_per_vector) == (80, 32)
