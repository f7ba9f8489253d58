"""vertebrae.planning.job_files: the user's files a job spec names, which the rules declare as inputs."""

from __future__ import annotations

from vertebrae.planning.job_files import data_files


def test_a_specs_data_files_are_its_sources_and_precomputed_files(tmp_path):
    for name in ("rows.npz", "qrels.tsv", "q.npz", "g.npy", "g_ids.txt"):
        (tmp_path / name).write_bytes(b"x")
    spec = {"dataset": {"source": {"type": "label_split", "source": {"type": "npz", "path": "rows.npz"},
                                   "relevance_path": "qrels.tsv", "name": "not-a-path"}},
            "extractor": {"decl": {"type": "precomputed", "files": {
                "query": {"path": "q.npz", "key": "embeddings"}, "gallery": "g.npy"}, "ids_path": "g_ids.txt"}}}
    assert data_files(spec, str(tmp_path)) == ["rows.npz", "qrels.tsv", "g_ids.txt", "q.npz", "g.npy"]
    # a model's own files are no data; a path that names no file (a glob) is left to its source
    assert data_files({"dataset": {"source": {"type": "webdataset", "path": "shards/*.tar"}},
                       "extractor": {"decl": {"type": "hf_text", "model_path": "rows.npz"}}}, str(tmp_path)) == []
    assert data_files({"stage": "score", "embedding": {"path": "results/x.h5"}}, str(tmp_path)) == []


def test_a_retrieval_partial_declares_one_input_its_fanout_bundle_and_not_the_protocol(tmp_path, monkeypatch):
    """A fanned-out partial reads only files of its candidate's fan-out bundle (the merge spec, both endpoints by
    range, the relevance rows by side: stages.fanout_bundle, run_score_fanout_partial), so the bundle folder is its
    one input, by pattern; the staging job reads the endpoints and the protocol (the protocol is the merge's to
    check, so it is no input of the 10,000 partial jobs)."""
    from small_workflow import small_config
    from vertebrae.planning import plan
    from vertebrae.planning.paths import artifact_path

    monkeypatch.chdir(tmp_path)
    planned = plan(small_config(tmp_path), base_dir=tmp_path)
    (merge_fp,) = set(planned.fanouts.values())
    merge = planned.specs[merge_fp]
    bundle = artifact_path("fanout", merge_fp, protocol="retrieval")
    assert bundle == f"results/retrieval/fanouts/{merge_fp}"
    for ref in merge["partials"]:
        assert planned.inputs(ref["fingerprint"]) == {"fanout": bundle}
    staging = planned.inputs(merge_fp, fanout=True)
    assert {staging["queries"], staging["gallery"], staging["protocol"]} == {
        merge["query"]["path"], merge["gallery"]["path"], merge["protocol"]["path"]}