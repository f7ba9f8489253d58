"""Retrieval endpoints as the data is held (issue 27), through `vertebrae run` on one config with no identity
declared: text queries from a Hugging Face dataset or a manifest against an image gallery held as an image folder
or as WebDataset shards without labels, relevance by ``same_label`` or from a qrels file; the reports hold the
numbers (metrics and similarity summaries) of the same data given as a manifest pair, and an unchanged rerun plans
no job. (A Hugging Face image gallery: tests/data/declared/test_sides.py, in process.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from format_fixtures import tiny_images, write_captions, write_image_folder, write_manifest, write_tar_shards
from workflow_support import write_config, written_report

pytest.importorskip("datasets")
TESTS = Path(__file__).resolve().parents[1]
WDS = "data/shards/train-{000000..000002}.tar"


def _vertebrae(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=f"{TESTS}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    return subprocess.run([str(Path(sys.executable).parent / "vertebrae"), *args], cwd=workdir, env=env,
                          capture_output=True, text=True)


def _bench(source: dict) -> dict:
    return {"dataset": {"source": source}, "query_branch": "text", "gallery_branch": "image",
            "extractors": {"pixels": {"type": "callable", "cache_identity": "pixels-v1",
                                      "branches": {"image": "format_fixtures:image_features",
                                                   "text": "format_fixtures:prompt_features"}}}}


def write_data(root: Path) -> dict:
    rows = sorted(tiny_images(12), key=lambda r: (r[1], r[0]))  # the image folder's order: class, then file
    data = root / "data"
    write_manifest(data / "images.csv", rows, data / "flat", ids="key")
    write_image_folder(data / "folder", rows)
    write_tar_shards(data / "shards", rows, per_shard=5, label="none")
    write_captions(data, rows)
    past = os.stat(root).st_mtime - 60  # a user's files are older than the digest cache's racy window
    for file in data.rglob("*"):
        os.utime(file, (past, past))
    captions_hf = {"type": "hf_dataset", "path": "data/captions", "text_column": "caption", "id_column": "id"}
    captions_csv = {"type": "manifest", "path": "data/captions.csv", "text_column": "caption", "id_column": "id"}
    return {"embedding": {"shards": 1, "batch_size": 4}, "retrieval": {
        "manifest": _bench({"type": "manifest_pair", "relevance_path": "data/qrels.tsv",
                            "queries": {k: v for k, v in captions_csv.items() if k != "type"},
                            "gallery": {"path": "data/images.csv", "image_column": "image", "id_column": "id"}}),
        "folder": _bench({"type": "source_pair", "queries": captions_hf, "relevance": "same_label",
                          "gallery": {"type": "image_folder", "path": "data/folder"}}),
        "wds": _bench({"type": "source_pair", "queries": captions_csv, "relevance_path": "data/qrels.tsv",
                       "gallery": {"type": "webdataset", "path": WDS, "image_key": "png"}}),
    }}


def test_retrieval_endpoints_as_held_give_the_manifest_numbers(tmp_path):
    config = write_data(tmp_path)
    path = write_config(tmp_path, config)
    proc = _vertebrae(tmp_path, "run", str(path), "--cores", "2")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    scores = {}
    for name in config["retrieval"]:
        forward = written_report(tmp_path, name)["candidate_results"][0]["score"]["forward"]
        scores[name] = {key: forward[key] for key in ("metrics", "summaries", "n_gallery", "n_positive_pairs")}
    assert scores["folder"] == scores["manifest"] == scores["wds"]
    assert scores["manifest"]["metrics"]["ndcg@10"] == 1.0  # each caption meets its class's dominant channel
    digests = (tmp_path / "results" / ".vertebrae" / "digests.json").read_text()
    for name in ("data/folder/red/img002.png", "data/shards/train-000002.tar",
                 "data/captions/data-00000-of-00001.arrow"):
        assert str((tmp_path / name).resolve()) in digests
    again = _vertebrae(tmp_path, "run", str(path), "--cores", "2", "--dry-run")
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr


def test_a_qrels_edit_plans_no_new_embedding_and_validate_checks_the_ids(tmp_path):
    """The plan (no Snakemake): editing the relevance file of a source pair keeps every embedding fingerprint and
    moves the protocol's; a qrels id absent from the gallery is refused by validate's check, naming the file."""
    from vertebrae.core.errors import ValidationError
    from vertebrae.planning import plan
    from vertebrae.planning.retrieval import check_retrieval_sources

    config = write_data(tmp_path)
    config["retrieval"] = {"wds": config["retrieval"]["wds"]}

    def stages():
        specs = plan(config, base_dir=tmp_path).specs.values()
        return ({s["fingerprint"] for s in specs if s["stage"] == "embed"},
                {s["fingerprint"] for s in specs if s["stage"] == "retrieval-protocol"})

    embeds, protocols = stages()
    qrels = tmp_path / "data" / "qrels.tsv"
    lines = qrels.read_text().splitlines(keepends=True)
    qrels.write_text("".join(lines[:-1]))
    past = os.stat(tmp_path).st_mtime - 60
    os.utime(qrels, (past, past))  # as old as the other files: the digest cache must notice the edit by size
    after_embeds, after_protocols = stages()
    assert after_embeds == embeds and len(embeds) == 2
    assert after_protocols.isdisjoint(protocols)
    qrels.write_text("".join(lines) + "q-red\timg999\t1\n")
    with pytest.raises(ValidationError, match=r"qrels\.tsv.*img999"):
        check_retrieval_sources(config, base_dir=tmp_path)
