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
