"""Retrieval endpoints read as the data is held (``source_pair``, ``RetrievalDataset.from_sources``): Hugging Face
text queries against an image folder, WebDataset shards or a Hugging Face image gallery, relevance from a qrels file
or ``same_label``; the same numbers as the same rows given as a manifest pair; a relevance edit keeps each side's
endpoint key; bad declarations named by their key."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from format_fixtures import (
    image_features, prompt_features, tiny_images, write_captions, write_hf_dataset, write_image_folder, write_manifest,
    write_tar_shards,
)
from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.core.identity import DatasetIdentity
from vertebrae.data.retrieval import RetrievalDataset
from vertebrae.data.declared.retrieval import load_retrieval_source, retrieval_row_counts
from vertebrae.extractors.callable import CallableRetrievalExtractor
from vertebrae.protocols.retrieval import RetrievalBenchmark

pytest.importorskip("datasets")
WDS = "shards/train-{000000..000002}.tar"
CAPTIONS = {"type": "hf_dataset", "path": "captions", "text_column": "caption", "id_column": "id"}


@pytest.fixture(scope="module")
def held(tmp_path_factory):
    root = tmp_path_factory.mktemp("held")
    rows = sorted(tiny_images(9), key=lambda r: (r[1], r[0]))
    write_image_folder(root / "folder", rows)
    write_hf_dataset(root / "hf", rows)
    write_tar_shards(root / "shards", rows, per_shard=4, label="none")
    write_manifest(root / "images.csv", rows, root / "flat", ids="key")
    write_captions(root, rows)
    return root


def test_held_galleries_give_the_manifest_pair_numbers(held, monkeypatch):
    monkeypatch.chdir(held)
    manifest = load_retrieval_source({"type": "manifest_pair", "relevance_path": "qrels.tsv",
                                      "queries": {"path": "captions.csv", "text_column": "caption", "id_column": "id"},
                                      "gallery": {"path": "images.csv", "image_column": "image", "id_column": "id"}},
                                     base_dir=held, where="m").to_dataset(DatasetIdentity.declared("manifest-pair", "1"))
    folder = RetrievalDataset.from_sources(CAPTIONS, {"type": "image_folder", "path": "folder"}, relevance="same_label")
    wds = RetrievalDataset.from_sources({**CAPTIONS, "label_column": None},
                                        {"type": "webdataset", "path": WDS, "image_key": "png"},
                                        relevance_path="qrels.tsv")
    hf = RetrievalDataset.from_sources(CAPTIONS, {"type": "hf_dataset", "path": "hf", "split": "train",
                                                  "image_column": "image", "id_column": "id"}, relevance="same_label")
    assert folder.gallery_ids[:2] == ("blue/img000.png", "blue/img003.png")
    assert wds.gallery_ids == hf.gallery_ids == manifest.gallery_ids
    for dataset in (folder, wds, hf):
        assert dataset.query_modality == "text" and dataset.gallery_modality == "image"
        assert np.array_equal(dataset.relevance.toarray(), manifest.relevance.toarray())
    numbers = [_scores(d) for d in (manifest, folder, wds, hf)]
    assert all(n == numbers[0] for n in numbers[1:])
    assert numbers[0]["metrics"]["ndcg@10"] == 1.0


def _scores(dataset):
    extractor = CallableRetrievalExtractor("pixels", query_fn=prompt_features, gallery_fn=image_features,
                                           cache_identity="pixels-v1")
    result = RetrievalBenchmark(dataset, [extractor]).run()
    forward = result.candidates[0].score.forward
    return {"metrics": dict(forward.metrics), "summaries": forward.summaries}


def test_a_relevance_edit_keeps_each_sides_endpoint_key(held, tmp_path, monkeypatch):
    for name in ("captions", "shards", "qrels.tsv"):
        (shutil.copytree if (held / name).is_dir() else shutil.copy)(held / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    gallery = {"type": "webdataset", "path": WDS, "image_key": "png"}
    before = RetrievalDataset.from_sources(CAPTIONS, gallery, relevance_path="qrels.tsv")
    by_label = RetrievalDataset.from_sources(CAPTIONS, gallery | {"label_key": None}, relevance_path="qrels.tsv")
    lines = (tmp_path / "qrels.tsv").read_text().splitlines(keepends=True)
    (tmp_path / "qrels.tsv").write_text("".join(lines[1:]))
    after = RetrievalDataset.from_sources(CAPTIONS, gallery, relevance_path="qrels.tsv")
    assert after.identity_key() != before.identity_key()
    assert after.endpoint_keys == before.endpoint_keys == by_label.endpoint_keys
    assert after.relevance.nnz == before.relevance.nnz - 1


def test_row_counts_and_refusals_name_the_key(held):
    decl = {"type": "source_pair", "queries": CAPTIONS, "relevance": "same_label",
            "gallery": {"type": "image_folder", "path": "folder"}}
    assert retrieval_row_counts(decl, base_dir=held, where="r") == (3, 9)
    cases = [
        ({**decl, "relevance_path": "qrels.tsv"}, "r: give exactly one of relevance_path"),
        ({**decl, "relevance": "same_class"}, "r.relevance: must be one of ('same_label',)"),
        ({**decl, "gallery": {"type": "npz", "path": "x.npz"}}, "r.gallery.type: a retrieval side is one of"),
        ({**decl, "queries": {**CAPTIONS, "groups_column": "id"}}, "r.queries.groups_column: retrieval does not use"),
        ({**decl, "relevance": None, "relevance_path": "qrels.tsv",
          "gallery": {"type": "webdataset", "path": WDS, "label_key": "txt"}}, "r.gallery.label_key: relevance comes"),
        ({**decl, "queries": {**CAPTIONS, "label_column": "caption2"}}, "r.queries.label_column: column 'caption2'"),
    ]
    for bad, message in cases:
        with pytest.raises(ConfigError) as caught:
            load_retrieval_source(bad, base_dir=held, where="r")
        assert message in str(caught.value)
    # same_label reads the labels: shards without a label member are refused naming the shard and the sample
    with pytest.raises(ValidationError, match=r"train-000000.tar, sample 'img000': no label member \(img000.cls\)"):
        load_retrieval_source({**decl, "gallery": {"type": "webdataset", "path": WDS, "image_key": "png"}},
                              base_dir=held, where="r")
