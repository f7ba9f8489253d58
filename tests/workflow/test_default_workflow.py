"""The Snakemake workflow, run for real, against the in-process Benchmark for the same config."""

from __future__ import annotations

import json
import subprocess
import sys


from vertebrae.results import BenchmarkResult
from vertebrae.planning import benchmarks_from_config, plan, retrieval_benchmarks_from_config, zero_shot_benchmarks_from_config

from workflow_support import comparable, REPO, job_counts, snakemake, write_config, written_report

EXPECTED_JOBS = {
    # digits: 1 protocol + 2 fit + 3 embed + 3 compress + 6 score + 1 report job specs;
    # diabetes: 1 protocol + 2 fit + 3 embed + 3 score + 1 report
    # digits_search (retrieval): 1 protocol + 1 fit + 4 embed + 2 compress + 4 score + 1 report
    # topics_labelled: 1 protocol + 1 embed + 1 score + 1 report
    # topics_search (retrieval): 1 protocol + 2 embed + 1 score + 1 report
    # + 1 compare spec per report (6), under plans/ whatever the protocol
    # (digits_search's 8 partial-score jobs read their candidate's merge spec from its fan-out bundle: no plan
    # file of their own)
    "plan": 54,
    "compare": 6,  # the paired comparison of each report's candidates
    "fit_extractor": 5,
    "embed_shard": 10,  # digits: 3 extractors x 2 shards; diabetes: 3 x 1; topics_labelled: 1 x 1
    "merge_embeddings": 7,
    "compress": 3,
    "write_protocol": 3,
    "score": 10,  # digits: 3 raw + 3 compressed variants; diabetes: 3; topics_labelled: 1
    "report": 6,  # one report rule for every protocol: 3 labelled + 2 retrieval + 1 zero-shot
    "embed_retrieval_shard": 6,  # digits_search: 2 extractors x 2 sides x 1 shard; topics_search: 1 x 2 x 1
    "merge_retrieval_embeddings": 6,
    "write_retrieval_relevance": 2,
    "compress_retrieval": 2,
    "score_retrieval": 1,  # topics_search; digits_search's 4 candidates (2 raw + 2 compressed) are fanned out:
    "stage_retrieval_fanout": 4,  # per fanned-out candidate: the partial jobs' one input
    "score_retrieval_partial": 8,  # 4 candidates x 2 gallery halves (scoring.gallery_shards: 2)
    "merge_retrieval_partials": 4,  # one merge per candidate, writing the score one job would have written
    "figures": 6,  # ranking + detail figure per report (6 reports)
    "report_tables": 6,  # the HTML report's table pages per report
    "report_page": 6,  # results/reports/<name>/report.html, one page per report
    "leaderboard_page": 1,  # results/leaderboard.html
    "results_index": 1,  # results/index.html, linking every page and the leaderboard
    # topics (zero-shot): 1 protocol + 1 prompt embed + 1 compress + 2 score + 1 report; its samples share
    # topics_labelled's minilm embedding job (same rows, same branch-less encoder)
    "plan_zero_shot": 6,
    "embed_zero_shot_prompts": 1,
    "merge_zero_shot": 1,  # the prompts' merge (one rule merges either side)
    "write_zero_shot_protocol": 1,
    "compress_zero_shot": 1,
    "score_zero_shot": 2,  # raw + PCA-32 variant
    "summary": 1,  # the cross-benchmark summary of every report
    "all": 1,
}
ZERO_SHOT_PROMPT_JOBS = {"plan_zero_shot": 5, "plan": 1, "embed_zero_shot_prompts": 1, "merge_zero_shot": 1,
                         "write_zero_shot_protocol": 1, "score_zero_shot": 2, "compare": 1, "report": 1, "figures": 1,
                         "report_tables": 1, "report_page": 1, "leaderboard_page": 1, "results_index": 1,
                         "summary": 1, "all": 1}



def test_workflow_scores_equal_in_process_benchmark(default_run, default_config):
    in_process = benchmarks_from_config(default_config, base_dir=default_run)
    for name in ("digits", "diabetes"):
        written = json.loads((default_run / f"results/reports/{name}/report.json").read_text())
        assert comparable(written) == comparable(in_process[name].run().to_dict())
        assert written["ranking"] == [r.name for r in BenchmarkResult.from_dict(written).ranked_results()]
    # and the check is not vacuous: real, distinct scores, with stability, Separatix and compressed variants
    digits = json.loads((default_run / "results/reports/digits/report.json").read_text())
    scores = [r["primary_score"] for r in digits["extractor_results"]]
    assert len(scores) == 6 and len(set(scores)) == 6 and all(0.5 < s <= 1.0 for s in scores)
    assert [r["name"] for r in digits["extractor_results"]][:2] == ["pixels", "pixels[pca_8]"]
    assert all(r["stability"]["repeats"] == 3 for r in digits["extractor_results"])
    assert all(r["separatix"]["ran"] for r in digits["extractor_results"])
    search = json.loads((default_run / "results/reports/digits_search/report.json").read_text())
    expected = retrieval_benchmarks_from_config(default_config, base_dir=default_run)["digits_search"].run().to_dict()
    assert comparable(search) == comparable(expected)
    assert [c["name"] for c in search["candidate_results"]] == ["pixels", "pixels[pca_8]", "pca16", "pca16[pca_8]"]
    assert all(0.3 < c["primary_score"] <= 1 for c in search["candidate_results"])
    topics = json.loads((default_run / "results/reports/topics/report.json").read_text())
    expected = zero_shot_benchmarks_from_config(default_config, base_dir=default_run)["topics"].run().to_dict()
    assert comparable(topics) == comparable(expected)
    assert [c["name"] for c in topics["candidate_results"]] == ["minilm", "minilm[pca_32]"]
    assert all(c["zero_shot"]["metrics"]["accuracy"] > 0.6 for c in topics["candidate_results"])  # chance: 1/8
    diabetes = json.loads((default_run / "results/reports/diabetes/report.json").read_text())
    assert diabetes["dataset_summary"]["target_type"] == "regression"
    assert all(0.05 < r["primary_score"] < 1 and r["overlap"]["loss_ratio"] is not None for r in diabetes["extractor_results"])


def test_markdown_report_ranks_every_extractor(default_run):
    for name in ("digits", "diabetes"):
        markdown = (default_run / f"results/reports/{name}/report.md").read_text()
        report = json.loads((default_run / f"results/reports/{name}/report.json").read_text())
        positions = [markdown.index(f"| {rank} | {c} |") for rank, c in enumerate(report["ranking"], start=1)]
        assert positions == sorted(positions) and len(positions) == len(report["extractor_results"])


def test_second_run_has_nothing_to_do(workdir_copy):
    proc = snakemake(workdir_copy, "-n")  # a copy: the shared run is read by other tests (workers) meanwhile
    assert "Nothing to be done" in proc.stdout + proc.stderr


def test_dry_run_lists_expected_jobs_per_rule(tmp_path, default_config):
    write_config(tmp_path, default_config)
    assert job_counts(snakemake(tmp_path, "-n", "--quiet", "rules").stdout) == EXPECTED_JOBS


def test_shard_files_are_named_by_fingerprint_and_capped(default_run, default_config):
    workflow_plan = plan(default_config, base_dir=default_run)
    counts = []
    for fp in workflow_plan.fingerprints("embed"):
        n = len(workflow_plan.spec(fp)["shards"])
        counts.append(n)
        folder = "results/retrieval/embeddings" if workflow_plan.spec(fp).get("protocol") == "retrieval" else "results/embeddings"
        assert workflow_plan.shard_paths(fp) == [f"{folder}/{fp}/shard-{i}-of-{n}.h5" for i in range(n)]
        assert all((default_run / p).exists() for p in workflow_plan.shard_paths(fp))
    # one shard each: diabetes 3, topics 1 (labelled and zero-shot share it), retrieval 6 endpoints; digits 3 in 2
    assert sorted(counts) == [1] * 10 + [2] * 3


def test_scoring_change_reruns_only_scores_and_report(workdir_copy, default_config):
    changed = json.loads(json.dumps(default_config))
    changed["benchmarks"]["digits"]["scoring"]["k"] = 20
    write_config(workdir_copy, changed)
    counts = job_counts(snakemake(workdir_copy, "-n", "--quiet", "rules").stdout)
    assert counts == {"plan": 8, "score": 6, "compare": 1, "report": 1, "figures": 1, "report_tables": 1,
                      "report_page": 1, "leaderboard_page": 1, "results_index": 1, "summary": 1, "all": 1}


def test_extractor_change_reruns_only_that_extractor(workdir_copy, default_config):
    changed = json.loads(json.dumps(default_config))
    changed["benchmarks"]["digits"]["extractors"]["pca16"]["steps"][1]["params"]["n_components"] = 8
    write_config(workdir_copy, changed)
    counts = job_counts(snakemake(workdir_copy, "-n", "--quiet", "rules").stdout)
    assert counts == {"plan": 7, "fit_extractor": 1, "embed_shard": 2, "merge_embeddings": 1, "compress": 1, "score": 2,
                      "compare": 1, "report": 1, "figures": 1, "report_tables": 1, "report_page": 1,
                      "leaderboard_page": 1, "results_index": 1, "summary": 1, "all": 1}


def test_prompt_edit_reruns_only_prompt_side_jobs(workdir_copy, default_config):
    changed = json.loads(json.dumps(default_config))
    changed["zero_shot"]["topics"]["templates"][1] = "this text is mainly about {label}"
    write_config(workdir_copy, changed)
    counts = job_counts(snakemake(workdir_copy, "-n", "--quiet", "rules").stdout)
    assert counts == ZERO_SHOT_PROMPT_JOBS  # no sample embedding, merge or compression fit


def test_comparison_settings_rerun_only_comparisons_and_reports(workdir_copy, default_config):
    changed = json.loads(json.dumps(default_config))
    changed["comparison"] = {"resamples": 2000, "adjustment": "bonferroni"}  # every benchmark
    write_config(workdir_copy, changed)
    counts = job_counts(snakemake(workdir_copy, "-n", "--quiet", "rules").stdout)
    assert counts == {"plan": 6, "compare": 6, "report": 6, "figures": 6, "report_tables": 6, "report_page": 6,
                      "leaderboard_page": 1, "results_index": 1, "summary": 1, "all": 1}  # no score
    changed = json.loads(json.dumps(default_config))
    changed["retrieval"]["digits_search"]["comparison"] = {"confidence_level": 0.9}  # one benchmark
    write_config(workdir_copy, changed)
    counts = job_counts(snakemake(workdir_copy, "-n", "--quiet", "rules").stdout)
    assert counts == {"plan": 1, "compare": 1, "report": 1, "figures": 1, "report_tables": 1, "report_page": 1,
                      "leaderboard_page": 1, "results_index": 1, "summary": 1, "all": 1}
    snakemake(workdir_copy)
    report = written_report(workdir_copy, "digits_search")
    assert report["comparison"]["config"]["confidence_level"] == 0.9
    assert written_report(workdir_copy, "digits")["comparison"]["config"]["confidence_level"] == 0.95


def test_lint_is_clean():
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--lint"], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Congratulations, your workflow is in a good condition!" in proc.stdout + proc.stderr


def test_unknown_config_key_is_a_vertebrae_error_naming_it(tmp_path, default_config):
    bad = json.loads(json.dumps(default_config))
    bad["benchmarks"]["digits"]["scoring"]["kk"] = 3
    write_config(tmp_path, bad)
    proc = snakemake(tmp_path, "-n", check=False)
    assert proc.returncode != 0
    output = proc.stdout + proc.stderr
    # our one line (the Snakefile ends the run with it: no exception name, no stack trace after it)
    assert "vertebrae: error: " in output and "benchmarks.digits.scoring" in output and "'kk'" in output
    assert "Traceback" not in output
