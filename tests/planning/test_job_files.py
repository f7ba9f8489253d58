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


def test_a_retrieval_partial_declares_what_it_reads_and_not_the_protocol(tmp_path, monkeypatch):
    """A fanned-out partial reads the fan-out inputs artifact, the merge spec's plan, both endpoints by range and
    the relevance rows by side (stages.retrieval_fanout_jobs.run_score_fanout_partial); the protocol is the
    merge's to check, so it is no input of the 10,000 partial jobs."""
    from small_workflow import small_config
    from vertebrae.planning import plan

    monkeypatch.chdir(tmp_path)
    planned = plan(small_config(tmp_path), base_dir=tmp_path)
    (merge_fp,) = set(planned.fanouts.values())
    merge = planned.specs[merge_fp]
    inputs = planned.fanout_partial_inputs(merge_fp)
    assert sorted(inputs) == ["fanout", "gallery", "gallery_rows", "plan", "queries", "query_rows"]
    assert {inputs["queries"], inputs["gallery"]} == {merge["query"]["path"], merge["gallery"]["path"]}
    assert merge["protocol"]["path"] not in inputs.values()
