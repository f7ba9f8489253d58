"""The report's costs on the default workflow come from what its jobs measured of themselves (carried in the
artifacts), not from Snakemake's benchmark records: with every record deleted, the report jobs rerun and write the
same costs, every one finite (issue 47: the report job reads only its declared inputs)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from workflow_support import snakemake


def _costs(workdir: Path) -> dict[tuple[str, str], dict]:
    out = {}
    for path in sorted((workdir / "results" / "reports").glob("*/report.json")):
        document = json.loads(path.read_text(encoding="utf-8"))
        for candidate in document.get("extractor_results") or document["candidate_results"]:
            out[(path.parent.name, candidate["name"])] = candidate["metadata"]["cost"]
    return out


def test_the_report_s_costs_need_no_benchmark_record(workdir_copy):
    before = _costs(workdir_copy)
    assert len(before) >= 10
    for key, cost in before.items():  # unserved jobs (the default run): every peak and every score time measured
        assert cost["source"] == "job measurements", key
        assert cost["peak_memory_mb"] > 10 and 0 < cost["score_seconds"] < 600, (key, cost)
    records = workdir_copy / "results" / "benchmarks"
    assert (records / "score").is_dir()
    shutil.rmtree(records)
    reports = [str(p.relative_to(workdir_copy)) for p in (workdir_copy / "results" / "reports").glob("*/report.json")]
    snakemake(workdir_copy, "--forcerun", "report", *reports, served=False)
    assert sorted((records / "report").iterdir())  # the report jobs ran (their own records are written afresh)
    assert not (records / "score").exists() and not (records / "embed_shard").exists()
    assert _costs(workdir_copy) == before
