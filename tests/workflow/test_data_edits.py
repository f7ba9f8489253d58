"""Data edits rerun what depends on them (issue 18, problem 3): datasets without an identity are tracked by the
digests of their files, so editing a file in place makes Snakemake rerun exactly the jobs below it.

Before: every dataset declared its identity by name, data files were inputs of no rule, and after deleting a
qrels line or overwriting the .npz features with noise, ``snakemake -n`` said "Nothing to be done".

What is under test is the plan Snakemake makes after an edit, so the finished run is stood in for by the
workflow's own outputs made up to date with ``snakemake --touch`` (a real run of this config takes minutes on a
busy machine; jobs recompute the same identities as the plan, see tests/data/sources/test_files.py).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest

from vertebrae.core.errors import ConfigError
from vertebrae.planning import plan
from workflow_support import job_counts, snakemake, write_config

LABELLED_ONLY = {"embed_shard", "merge_embeddings", "write_protocol", "score"}
RETRIEVAL_ONLY = {"embed_retrieval_shard", "merge_retrieval_embeddings", "write_retrieval_relevance", "score_retrieval"}


def _planned(workdir) -> dict[str, int]:
    return job_counts(snakemake(workdir, "-n", "--quiet", "rules").stdout)


def _stand_in_for_a_finished_run(workdir) -> None:
    """Every output the workflow plans, present and up to date (``--touch`` orders their times along the DAG)."""
    summary = snakemake(workdir, "--summary").stdout.splitlines()
    assert summary[0].startswith("output_file"), summary[:3]
    for line in summary[1:]:
        if line.strip():
            path = workdir / line.split("\t")[0]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
    snakemake(workdir, "--touch")


def _write_data(workdir) -> None:
    rng = np.random.default_rng(18)
    (workdir / "data").mkdir()
    labels = np.array(["a", "b", "c"] * 10)
    features = rng.normal(size=(30, 5))
    features[:, :3] += 3.0 * np.eye(3)[np.arange(30) % 3]  # separable classes
    np.savez(workdir / "data/feat.npz", embeddings=features, labels=labels)
    gallery = rng.normal(size=(20, 4))
    queries = gallery[:8] + 0.1 * rng.normal(size=(8, 4))
    np.savez(workdir / "data/pair.npz", queries=queries, gallery=gallery,
             query_ids=np.array([f"q{i}" for i in range(8)]), gallery_ids=np.array([f"g{i}" for i in range(20)]))
    lines = [f"q{i}\tg{i}\t2\n" for i in range(8)] + [f"q{i}\tg{i + 8}\t1\n" for i in range(8)]
    (workdir / "data/qrels.tsv").write_text("".join(lines), encoding="utf-8")
    for path in (workdir / "data").iterdir():  # written a minute ago: past the digest cache's racy window
        os.utime(path, (time.time() - 60, time.time() - 60))


def test_editing_a_data_file_reruns_exactly_its_benchmark(tmp_path):
    _write_data(tmp_path)
    config = {
        "embedding": {"shards": 1, "batch_size": 64},
        "benchmarks": {"feat": {
            "dataset": {"source": {"type": "npz", "path": "data/feat.npz"}},  # no identity: tracked by its file
            "extractors": {"raw": {"type": "precomputed"}},
            "stability": {"enabled": False}, "separatix": {"enabled": False},
        }},
        "retrieval": {"pairs": {
            "dataset": {"source": {"type": "npz_pair", "path": "data/pair.npz", "relevance_path": "data/qrels.tsv"}},
            "extractors": {"raw": {"type": "precomputed"}},
        }},
    }
    write_config(tmp_path, config)
    _stand_in_for_a_finished_run(tmp_path)
    assert _planned(tmp_path) == {}  # up to date
    cache = json.loads((tmp_path / "results/.vertebrae/digests.json").read_text(encoding="utf-8"))
    assert {Path(p).name for p in cache["files"]} == {"feat.npz", "pair.npz", "qrels.tsv"}  # hashed once, then known

    # delete a qrels line: the retrieval dataset's identity holds the relevance file, so its protocol, score and
    # report rerun; the endpoints are keyed by their own rows (issue 27), so nothing is re-embedded; nothing labelled
    qrels = tmp_path / "data/qrels.tsv"
    qrels.write_text("".join(qrels.read_text(encoding="utf-8").splitlines(keepends=True)[:-1]), encoding="utf-8")
    after_qrels = _planned(tmp_path)
    assert set(after_qrels) & (RETRIEVAL_ONLY | LABELLED_ONLY) == {"write_retrieval_relevance", "score_retrieval"}, \
        after_qrels
    assert after_qrels["report"] == 1 and after_qrels["write_retrieval_relevance"] == 1

    # then overwrite the features with noise of the same shape (same size on disk): the labelled benchmark's jobs
    # join the plan, and the retrieval ones stay as they were
    features = dict(np.load(tmp_path / "data/feat.npz"))
    features["embeddings"] = np.random.default_rng(0).normal(size=features["embeddings"].shape)
    np.savez(tmp_path / "data/feat.npz", **features)
    after_both = _planned(tmp_path)
    assert LABELLED_ONLY <= set(after_both), after_both
    assert {rule: n for rule, n in after_both.items() if rule in RETRIEVAL_ONLY} == \
        {rule: n for rule, n in after_qrels.items() if rule in RETRIEVAL_ONLY}
    assert after_both["report"] == 2 and after_both["write_protocol"] == 1


def test_the_plan_takes_file_and_content_identities_for_retrieval_and_refuses_an_untracked_sklearn_source(tmp_path):
    _write_data(tmp_path)
    dataset = {"source": {"type": "npz_pair", "path": "data/pair.npz", "relevance_path": "data/qrels.tsv"}}
    for identity, prefix in ((None, "files:v1:"), ({"kind": "content"}, "content:")):
        decl = dataset if identity is None else {**dataset, "identity": identity}
        p = plan({"retrieval": {"pairs": {"dataset": decl, "extractors": {"raw": {"type": "precomputed"}}}}},
                 base_dir=tmp_path)
        (fp,) = p.fingerprints("retrieval-protocol")
        assert p.spec(fp)["recipe"]["dataset"].startswith(prefix)
    sklearn = {"benchmarks": {"iris": {"dataset": {"source": {"type": "sklearn", "name": "iris"}},
                                       "extractors": {"raw": {"type": "precomputed"}}}}}
    with pytest.raises(ConfigError, match=r"benchmarks\.iris\.dataset: 'identity' is a required property"):
        plan(sklearn, base_dir=tmp_path)
    split = {"retrieval": {"s": {"dataset": {"source": {"type": "label_split", "source": {"type": "sklearn", "name": "iris"}}},
                                 "extractors": {"raw": {"type": "precomputed"}}}}}
    with pytest.raises(ConfigError, match=r"retrieval\.s\.dataset: 'identity' is a required property"):
        plan(split, base_dir=tmp_path)
