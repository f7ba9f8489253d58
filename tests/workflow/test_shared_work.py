"""A research campaign in one folder (issue 44): configs that share candidates never undo each other's work. Config
A and config B plan some of the same jobs (the same data and candidates under other benchmark and candidate names,
a retrieval benchmark of the same name with one more candidate): running A, B, A (and then B) runs the shared work once; a run after the other
config's starts at most the report side of its own benchmarks, asserted by the rules Snakemake ran."""

from __future__ import annotations

import re

import yaml

from workflow_support import snakemake

IDENTITY = {"kind": "declared", "revision": "1"}
WINE = {"source": {"type": "sklearn", "name": "wine"}, "identity": {**IDENTITY, "name": "wine"}}
SEARCH = {"source": {"type": "label_split", "source": {"type": "sklearn", "name": "iris"}, "query_every": 5},
          "identity": {**IDENTITY, "name": "iris-search"}}


def _pca(n: int) -> dict:
    return {"type": "sklearn", "steps": [{"estimator": "sklearn.decomposition.PCA", "params": {"n_components": n}}]}


# wine's 3 classes make each score job resample rows (one OverlapIndex fit per subsample): 20, the least, not 200
ROWS = {"resamples": 20}
A = {"benchmarks": {"wine": {"dataset": WINE, "extractors": {"raw": {"type": "precomputed"}, "pca": _pca(4)},
                             "row_resampling": ROWS}},
     "retrieval": {"search": {"dataset": SEARCH, "shards": 1, "extractors": {"raw": {"type": "precomputed"}}}}}
# B: A's wine candidates and one more under another benchmark name, both renamed (only there: a config naming them
# as A does too would plan A's jobs under A's names); A's retrieval benchmark with one more candidate
B = {"benchmarks": {"wine_again": {"dataset": WINE, "extractors": {"features": {"type": "precomputed"},
                                                                    "pca4": _pca(4), "pca8": _pca(8)},
                                  "row_resampling": ROWS}},
     "retrieval": {"search": {"dataset": SEARCH, "shards": 1, "extractors": {"raw": {"type": "precomputed"},
                                                                             "pca2": _pca(2)}}}}
# the jobs that write a benchmark's report and the pages over all of them: a config's own, rewritten when the
# other config wrote the same benchmark's report with other candidates
REPORT_SIDE = {"report", "compare", "figures", "report_tables", "report_page", "leaderboard_page", "results_index",
               "summary", "all"}


def _ran(workdir, config: str) -> dict[str, int]:
    """Rule -> jobs of a real ``snakemake --configfile CONFIG`` run (its own log, as a user reads it)."""
    proc = snakemake(workdir, "--configfile", config)
    counts: dict[str, int] = {}
    for rule in re.findall(r"^(?:local)?rule (\w+):$", proc.stderr + proc.stdout, flags=re.MULTILINE):
        counts[rule] = counts.get(rule, 0) + 1
    return counts


def test_configs_a_b_a_b_share_their_work(tmp_path):
    for name, config in (("a.yaml", A), ("b.yaml", B)):
        (tmp_path / name).write_text(yaml.safe_dump(config), encoding="utf-8")
    first_a, first_b = _ran(tmp_path, "a.yaml"), _ran(tmp_path, "b.yaml")
    assert first_a["embed_shard"] == 2 and first_a["embed_retrieval_shard"] == 2
    # B embeds and fits only what A did not: pca8 (wine) and pca2 (its fit, both retrieval sides)
    assert first_b["embed_shard"] == 1 and first_b["embed_retrieval_shard"] == 2 and first_b["fit_extractor"] == 2
    again_a = _ran(tmp_path, "a.yaml")
    assert set(again_a) <= REPORT_SIDE, again_a  # nothing planned, fitted, embedded or scored again
    assert again_a["report"] == 1  # the retrieval report, which B rewrote with its own candidates
    again_b = _ran(tmp_path, "b.yaml")
    assert set(again_b) <= REPORT_SIDE and again_b["report"] == 1, again_b  # wine_again's report stands
    assert _ran(tmp_path, "b.yaml") == {}  # and B once more: nothing at all
