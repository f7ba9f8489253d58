"""Each labelled metric its own job (issue 29, item 3): with ``fanout: true``, adding ``few_shot`` to a finished
benchmark plans only its job, the merge and what follows (a dry run; the real run, whose merged scores equal the one
score job's, is tests/workflow/test_builtin_metrics.py)."""

from __future__ import annotations

import copy
import re

from workflow_support import job_counts, snakemake, write_config

CONFIG = {
    "seed": 0,
    "embedding": {"shards": 1, "batch_size": 2048},
    "benchmarks": {
        "digits": {
            "dataset": {"source": {"type": "sklearn", "name": "digits"},
                        "identity": {"kind": "declared", "name": "sklearn-digits", "revision": "1"}},
            "extractors": {"pca8": {"type": "sklearn", "steps": [
                {"estimator": "sklearn.decomposition.PCA", "params": {"n_components": 8}}]}},
            "scoring": {"k": 2},
            "fanout": True,
            "stability": {"enabled": True, "repeats": 2},
            "separatix": {"enabled": True, "max_samples": 200, "budget": "fast"},
            "metrics": [
                {"type": "knn", "k": 10},
                {"type": "linear_probe", "Cs": [0.1], "folds": 2, "inner_folds": 2, "max_iter": 100},
                {"type": "clustering", "n_init": 1, "repeats": 2},
            ],
            "primary_metric": "knn",
            "comparison": {"resamples": 200},
        },
    },
}
FEW_SHOT = {"type": "few_shot", "shots": [1, 5], "episodes": 5}


def _stand_in_for_a_finished_run(workdir) -> None:
    """Every output the workflow plans, present and up to date (as in test_data_edits)."""
    summary = snakemake(workdir, "--summary").stdout.splitlines()
    for line in summary[1:]:
        if line.strip():
            path = workdir / line.split("\t")[0]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
    snakemake(workdir, "--touch")


def test_adding_few_shot_plans_only_its_job_and_what_follows(tmp_path):
    write_config(tmp_path, CONFIG)
    _stand_in_for_a_finished_run(tmp_path)
    assert job_counts(snakemake(tmp_path, "-n", "--quiet", "rules").stdout) == {}
    config = copy.deepcopy(CONFIG)
    config["benchmarks"]["digits"]["metrics"].append(FEW_SHOT)
    write_config(tmp_path, config)
    counts = job_counts(snakemake(tmp_path, "-n", "--quiet", "rules").stdout)
    # plans: the new partial's, the merge's (its spec lists one more partial), the report's and the compare's
    assert counts.pop("plan") == 4, counts
    assert counts.pop("score_labelled_partial") == 1 and counts.pop("merge_labelled_partials") == 1, counts
    assert set(counts) <= {"compare", "report", "figures", "report_tables", "report_page", "summary",
                           "leaderboard_page", "results_index", "all"}, counts
    assert {"report", "compare", "summary"} <= set(counts), counts


def test_fanout_auto_splits_a_benchmark_that_declares_metrics_and_keeps_one_job_otherwise(tmp_path):
    """``fanout`` defaults to auto: part by part when a metric besides OverlapIndex is declared (adding one then reruns
    only its job), one score job a candidate otherwise; the score's fingerprint is the same either way."""
    from vertebrae.planning import plan

    def stages(config):
        planned = plan(config, base_dir=tmp_path)
        scores = {fp for fp, spec in planned.specs.items() if spec["stage"] in ("score", "merge-labelled-partials")}
        return sorted(spec["stage"] for spec in planned.specs.values()), scores

    auto = copy.deepcopy(CONFIG)
    del auto["benchmarks"]["digits"]["fanout"]
    auto_stages, auto_scores = stages(auto)
    assert (auto_stages, auto_scores) == stages(CONFIG)  # auto with metrics = true
    assert "score" not in auto_stages and auto_stages.count("score-labelled-partial") == 1 + 2 + 1 + 5 + 2  # OI, repeats, Sx, kNN by fold, 2 metrics
    one_job = copy.deepcopy(CONFIG)
    one_job["benchmarks"]["digits"]["fanout"] = False
    one_stages, one_scores = stages(one_job)
    assert one_stages.count("score") == 1 and "score-labelled-partial" not in one_stages and one_scores == auto_scores
    bare = copy.deepcopy(auto)
    bare["benchmarks"]["digits"].update(metrics=[], primary_metric="overlap")
    bare_stages, _ = stages(bare)
    assert bare_stages.count("score") == 1 and "score-labelled-partial" not in bare_stages


def test_the_longest_parts_start_first(tmp_path):
    """knn (each of its folds) and linear_probe part jobs ask for priority 2, clustering (and few_shot) 1: Snakemake
    starts the longest ready parts first, so a long part does not end the fan-out alone; OverlapIndex, stability
    and Separatix keep the default 0."""
    from vertebrae.planning import plan

    write_config(tmp_path, CONFIG)
    dry = snakemake(tmp_path, "-n").stdout
    jobs = [block for block in dry.split("\n\n") if "rule score_labelled_partial:" in block]
    planned = plan(CONFIG, base_dir=tmp_path)
    names: dict[str, set[int]] = {}
    for block in jobs:
        fp = re.search(r"output: results/partials/([0-9a-f]{16})\.json", block).group(1)
        recipe = planned.spec(fp)["recipe"]
        priority = re.search(r"priority: (\d+)", block)
        names.setdefault(recipe.get("name") or recipe["part"] + str(recipe.get("repeat", "")), set()).add(
            int(priority.group(1)) if priority else 0)
    assert names == {"overlap": {0}, "stability0": {0}, "stability1": {0}, "separatix": {0}, "knn": {2},
                     "linear_probe": {2}, "clustering": {1}}, names
    assert len(jobs) == 4 + 5 + 2  # OverlapIndex, 2 repeats, Separatix; kNN's 5 folds; the probe, clustering
