"""Datasets without a declared identity are identified by the digests of every file their source reads, for every
protocol: editing any such file (arrays, labels, groups, a manifest, an image it names, a qrels file) changes the
key; the same bytes under another name do not; what the plan computes is what the jobs compute."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from vertebrae.core.errors import ConfigError
from vertebrae.core.file_digests import FileDigests
from vertebrae.data.declared.labelled import dataset_identity, declared_identity_key, load_declared_dataset
from vertebrae.data.declared.retrieval import load_retrieval_source, retrieval_identity, retrieval_identity_key
from vertebrae.data.sources.files import source_files_recipe
from vertebrae.data.zero_shot import build_zero_shot_dataset

W = "benchmarks.b.dataset"


def _key(decl, base):
    return dataset_identity(decl, base_dir=base, where=W).key()


@pytest.fixture
def npz_dir(tmp_path):
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "feat.npz", embeddings=rng.normal(size=(12, 3)), labels=np.array(["a", "b", "c"] * 4),
             alt=rng.normal(size=(12, 3)), sites=np.array([0, 1] * 6))
    return tmp_path


def test_a_labelled_npz_is_identified_by_its_bytes(npz_dir, tmp_path_factory):
    decl = {"source": {"type": "npz", "path": "feat.npz"}}
    key = _key(decl, npz_dir)
    assert key.startswith("files:v1:")
    assert _key(decl, npz_dir) == key  # stable
    # what the jobs see (the loaded dataset) is what the plan keyed
    assert load_declared_dataset(decl, base_dir=npz_dir, where=W).identity_key() == key
    assert declared_identity_key(decl, base_dir=npz_dir, where=W) == key
    # the same bytes elsewhere, under another name: the same data
    other = tmp_path_factory.mktemp("moved")
    shutil.copy(npz_dir / "feat.npz", other / "renamed.npz")
    assert _key({"source": {"type": "npz", "path": "renamed.npz"}}, other) == key
    # another array of the same file is other data
    assert _key({"source": {"type": "npz", "path": "feat.npz", "features_key": "alt"}}, npz_dir) != key
    # an edit in place
    data = dict(np.load(npz_dir / "feat.npz"))
    data["embeddings"][0, 0] += 1.0
    np.savez(npz_dir / "feat.npz", **data)
    assert _key(decl, npz_dir) != key


def test_groups_fold_in_as_for_declared_identities(npz_dir):
    decl = {"source": {"type": "npz", "path": "feat.npz", "groups_key": "sites"}}
    key = declared_identity_key(decl, base_dir=npz_dir, where=W)
    assert key.startswith("files:v1:") and "|groups:" in key
    assert load_declared_dataset(decl, base_dir=npz_dir, where=W).identity_key() == key


def test_every_file_of_an_npy_source_counts(tmp_path):
    np.save(tmp_path / "x.npy", np.arange(12.0).reshape(4, 3))
    for name, text in (("labels.txt", "a\nb\na\nb\n"), ("ids.txt", "r0\nr1\nr2\nr3\n"), ("groups.txt", "g\ng\nh\nh\n")):
        (tmp_path / name).write_text(text)
    decl = {"source": {"type": "npy", "path": "x.npy", "labels_path": "labels.txt", "ids_path": "ids.txt",
                       "groups_path": "groups.txt"}}
    keys = {_key(decl, tmp_path)}
    for name, text in (("labels.txt", "a\nb\nb\nb\n"), ("ids.txt", "r0\nr1\nr2\nr9\n"), ("groups.txt", "g\nh\nh\nh\n")):
        (tmp_path / name).write_text(text)
        keys.add(_key(decl, tmp_path))
    assert len(keys) == 4


def test_an_image_manifest_counts_each_image_it_names(tmp_path):
    (tmp_path / "img").mkdir()
    for i in range(3):
        (tmp_path / "img" / f"{i}.png").write_bytes(bytes([i]) * 10)
    (tmp_path / "m.csv").write_text("path,label\nimg/0.png,a\nimg/1.png,b\nimg/2.png,a\n")
    decl = {"source": {"type": "manifest", "path": "m.csv", "image_column": "path"}}
    key = _key(decl, tmp_path)
    (tmp_path / "img" / "1.png").write_bytes(b"another picture")
    assert _key(decl, tmp_path) != key


def test_a_text_manifest_edit_changes_the_key(tmp_path):
    (tmp_path / "t.csv").write_text("text,label\nhello,a\nworld,b\n")
    decl = {"source": {"type": "manifest", "path": "t.csv", "text_column": "text"}}
    key = _key(decl, tmp_path)
    (tmp_path / "t.csv").write_text("text,label\nhello,a\nworld!,b\n")
    assert _key(decl, tmp_path) != key


def test_a_declared_identity_is_kept_and_files_are_not_read(npz_dir):
    decl = {"source": {"type": "npz", "path": "feat.npz"}, "identity": {"kind": "declared", "name": "f", "revision": 1}}
    assert _key(decl, npz_dir) == "declared:f@1"
    assert not (npz_dir / ".vertebrae").exists()  # no digest computed, no cache written


def test_a_sklearn_source_must_declare_its_identity(tmp_path):
    with pytest.raises(ConfigError, match=r"benchmarks\.b\.dataset\.source.*declare the dataset's identity"):
        _key({"source": {"type": "sklearn", "name": "iris"}}, tmp_path)


def test_a_missing_file_is_refused_naming_the_key(tmp_path):
    with pytest.raises(ConfigError, match=r"benchmarks\.b\.dataset\.source\.path: file not found"):
        _key({"source": {"type": "npz", "path": "nope.npz"}}, tmp_path)


def test_the_recipe_holds_options_and_digests_not_names(npz_dir):
    recipe = source_files_recipe({"type": "npz", "path": "feat.npz"}, base_dir=npz_dir, where=W, digests=FileDigests(None))
    assert recipe["type"] == "npz" and recipe["features_key"] == "embeddings"
    assert set(recipe["path"]) == {"sha256"}
    assert "feat.npz" not in str(recipe)


# -- retrieval ------------------------------------------------------------------------------------------------


@pytest.fixture
def pair_dir(tmp_path):
    rng = np.random.default_rng(1)
    np.savez(tmp_path / "pair.npz", queries=rng.normal(size=(3, 2)), gallery=rng.normal(size=(5, 2)),
             query_ids=np.array(["q0", "q1", "q2"]), gallery_ids=np.array([f"g{i}" for i in range(5)]))
    (tmp_path / "qrels.tsv").write_text("q0\tg0\t1\nq1\tg1\t1\nq2\tg2\t1\nq2\tg3\t1\n")
    return tmp_path


def _retrieval_key(dataset, base):
    return retrieval_identity_key(dataset, base_dir=base, where="retrieval.r.dataset")


def test_a_retrieval_pair_is_identified_by_its_arrays_and_its_qrels(pair_dir):
    dataset = {"source": {"type": "npz_pair", "path": "pair.npz", "relevance_path": "qrels.tsv"}}
    key = _retrieval_key(dataset, pair_dir)
    assert key.startswith("files:v1:")
    # the relevance job rebuilds the dataset with the same identity
    data = load_retrieval_source(dataset["source"], base_dir=pair_dir, where="retrieval.r.dataset.source")
    identity = retrieval_identity(dataset, base_dir=pair_dir, where="retrieval.r.dataset")
    assert data.to_dataset(identity).identity_key() == key
    (pair_dir / "qrels.tsv").write_text("q0\tg0\t1\nq1\tg1\t1\nq2\tg2\t1\n")  # a line deleted
    assert _retrieval_key(dataset, pair_dir) != key


def test_a_label_split_is_identified_by_its_source_files_and_its_split(npz_dir):
    source = {"type": "npz", "path": "feat.npz"}
    keys = {_retrieval_key({"source": {"type": "label_split", "source": source, "query_every": every}}, npz_dir)
            for every in (3, 4)}
    keys.add(_retrieval_key({"source": {"type": "label_split", "source": source, "grade": "label_and_mean"}}, npz_dir))
    assert len(keys) == 3 and all(k.startswith("files:v1:") for k in keys)
    with pytest.raises(ConfigError, match=r"retrieval\.r\.dataset\.source\.source"):
        _retrieval_key({"source": {"type": "label_split", "source": {"type": "sklearn", "name": "iris"}}}, npz_dir)


def test_a_manifest_pair_counts_its_manifests_images_and_qrels(tmp_path):
    (tmp_path / "img").mkdir()
    for i in range(2):
        (tmp_path / "img" / f"{i}.png").write_bytes(bytes([i]) * 8)
    (tmp_path / "q.csv").write_text("id,text\nq0,a cat\nq1,a dog\n")
    (tmp_path / "g.csv").write_text("id,path\ng0,img/0.png\ng1,img/1.png\n")
    (tmp_path / "qrels.tsv").write_text("q0\tg0\nq1\tg1\n")
    dataset = {"source": {"type": "manifest_pair", "relevance_path": "qrels.tsv",
                          "queries": {"path": "q.csv", "text_column": "text", "id_column": "id"},
                          "gallery": {"path": "g.csv", "image_column": "path", "id_column": "id"}}}
    keys = [_retrieval_key(dataset, tmp_path)]
    (tmp_path / "img" / "0.png").write_bytes(b"edited")
    keys.append(_retrieval_key(dataset, tmp_path))
    (tmp_path / "q.csv").write_text("id,text\nq0,a cat\nq1,a puppy\n")
    keys.append(_retrieval_key(dataset, tmp_path))
    (tmp_path / "qrels.tsv").write_text("q0\tg0\nq1\tg1\t2\n")
    keys.append(_retrieval_key(dataset, tmp_path))
    assert len(set(keys)) == 4


def test_a_retrieval_content_identity_is_resolved_by_loading(pair_dir):
    dataset = {"source": {"type": "npz_pair", "path": "pair.npz", "relevance_path": "qrels.tsv"},
               "identity": {"kind": "content"}}
    key = _retrieval_key(dataset, pair_dir)
    assert key.startswith("content:")
    (pair_dir / "qrels.tsv").write_text("q0\tg0\t1\nq1\tg1\t1\nq2\tg2\t1\n")
    assert _retrieval_key(dataset, pair_dir) != key


# -- zero-shot ------------------------------------------------------------------------------------------------


def test_a_zero_shot_dataset_is_identified_by_its_files(npz_dir):
    decl = {"source": {"type": "npz", "path": "feat.npz"}}
    prompts = {"prompts": [{"label": c, "texts": [f"a {c}"]} for c in "abc"]}
    zs = build_zero_shot_dataset(decl, prompts, base_dir=npz_dir, where="zero_shot.z")
    assert zs.identity_key() == _key(decl, npz_dir) and zs.identity_key().startswith("files:v1:")
    np.savez(npz_dir / "feat.npz", embeddings=np.ones((12, 3)), labels=np.array(["a", "b", "c"] * 4))
    assert build_zero_shot_dataset(decl, prompts, base_dir=npz_dir, where="zero_shot.z").identity_key() != zs.identity_key()
