"""The workflow on a user's own precomputed embeddings (npz with string ids, sparse npz), as the README shows."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.datasets import load_digits

from vertebrae.planning import benchmarks_from_config
from workflow_support import comparable, job_counts, snakemake, write_config, written_report



def test_own_embeddings_dense_and_sparse_match_in_process(tmp_path):
    X, y = load_digits(return_X_y=True)
    X, y = X[:600].astype(np.float32), y[:600]
    ids = np.array([f"img-{i:04d}" for i in range(len(y))])
    (tmp_path / "data").mkdir()
    np.savez(tmp_path / "data/emb.npz", embeddings=X, labels=np.array([f"digit-{v}" for v in y]), image_ids=ids)
    sp.save_npz(tmp_path / "data/sparse.npz", sp.csr_matrix(X))
    (tmp_path / "data/labels.txt").write_text("".join(f"{v}\n" for v in y))
    config = {
        "seed": 3,
        "embedding": {"shards": 3, "batch_size": 64},
        "benchmarks": {
            "dense": {
                "dataset": {
                    "source": {"type": "npz", "path": "data/emb.npz", "ids_key": "image_ids"},
                    "identity": {"kind": "declared", "name": "digits-600-f32", "revision": "1"},
                },
                "extractors": {
                    "raw": {"type": "precomputed"},
                    "pca8": {"type": "sklearn", "steps": [{"estimator": "sklearn.decomposition.PCA", "params": {"n_components": 8}}]},
                },
                "scoring": {"k": 6},
            },
            "sparse": {
                "dataset": {
                    "source": {"type": "sparse_npz", "path": "data/sparse.npz", "labels_path": "data/labels.txt"},
                    "identity": {"kind": "content"},
                },
                "extractors": {"raw": {"type": "precomputed"}},
                "shards": 2,
            },
        },
    }
    write_config(tmp_path, config)
    counts = job_counts(snakemake(tmp_path, "-n", "--quiet", "rules").stdout)
    assert counts["embed_shard"] == 3 + 3 + 2 and counts["report"] == 2
    snakemake(tmp_path)
    in_process = benchmarks_from_config(config, base_dir=tmp_path)
    written = {name: written_report(tmp_path, name) for name in ("dense", "sparse")}
    for name, report in written.items():
        assert comparable(report) == comparable(in_process[name].run().to_dict())
    dense, sparse = written["dense"], written["sparse"]
    assert dense["dataset_summary"]["labels"]["digit-3"] == "digit-3"
    assert dense["extractor_results"][0]["embedding_metadata"]["dtype"] == "float32"
    assert sparse["extractor_results"][0]["overlap"]["metadata"]["input_sparse"] is True
    assert sparse["dataset_summary"]["identity"].startswith("content:")
