"""Precomputed embedding files as candidates: npy / npz / HDF5 / Parquet, aligned to the dataset by row id, named by
content (issue 18, item 4)."""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import warnings

import h5py
import jsonschema
import numpy as np
import pytest

from vertebrae.core.arrays import encode_row_ids
from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.core.fingerprint import fingerprint
from vertebrae.data.sources.embedding_files import file_sha256
from vertebrae.extractors.precomputed import (
    PrecomputedExtractor,
    PrecomputedFileExtractor,
)
from vertebrae.extractors.registry import build_extractor
from vertebrae.stages.common import embed_endpoint, embed_rows, embedding_recipe
from vertebrae.planning.config import config_schema

N, D = 12, 4
IDS = [f"row-{i:02d}" for i in range(N)]
KEYS = encode_row_ids(IDS, N, what="t")
RNG = np.random.default_rng(0)
MATRIX = RNG.normal(size=(N, D)).astype(np.float32)
ORDER = RNG.permutation(N)  # the files store the rows shuffled: alignment must use the ids
HOOK = "offset" in inspect.signature(embed_rows).parameters  # the stages pass row ids (issue 18, lead's change)


def write_all(folder):
    """The same embeddings in every format, rows shuffled, ids alongside."""
    folder.mkdir(parents=True, exist_ok=True)
    shuffled, ids = MATRIX[ORDER], np.array(IDS)[ORDER]
    np.save(folder / "a.npy", shuffled)
    (folder / "a_ids.txt").write_text("".join(f"{v}\n" for v in ids))
    np.savez(folder / "b.npz", vectors=shuffled, names=ids)
    with h5py.File(folder / "c.h5", "w") as handle:
        handle["emb/vectors"] = shuffled
        handle["emb/ids"] = ids.astype("S")
    np.save(folder / "plain.npy", MATRIX)  # no ids: the dataset's rows in order
    return {
        "npy": {"path": str(folder / "a.npy"), "ids_path": str(folder / "a_ids.txt")},
        "npz": {"path": str(folder / "b.npz"), "key": "vectors", "ids": "names"},
        "hdf5": {"path": str(folder / "c.h5"), "dataset": "emb/vectors", "ids": "emb/ids"},
    }


def build(decl, name="cand"):
    return build_extractor(name, {"type": "precomputed", **decl}, where=f"benchmarks.b.extractors.{name}")


@pytest.mark.parametrize("fmt", ["npy", "npz", "hdf5", "parquet"])
def test_every_format_is_aligned_by_row_id(tmp_path, fmt):
    decls = write_all(tmp_path)
    if fmt == "parquet":
        pa = pytest.importorskip("pyarrow")
        import pyarrow.parquet as pq

        pq.write_table(pa.table({"id": np.array(IDS)[ORDER], "embedding": list(MATRIX[ORDER])}), tmp_path / "d.parquet")
        decls["parquet"] = {"path": str(tmp_path / "d.parquet"), "column": "embedding", "ids": "id"}
    extractor = build(decls[fmt])
    assert isinstance(extractor, PrecomputedFileExtractor) and extractor.branches == ()
    wanted = [5, 0, 11, 3]
    out = extractor.transform(MATRIX[wanted], row_ids=[KEYS[i] for i in wanted], rows=(0, 4))
    np.testing.assert_array_equal(out, MATRIX[wanted])
    extractor.check_rows(KEYS, endpoint="samples")
    recipe = extractor.recipe()
    assert recipe["type"] == "precomputed" and recipe["file"]["format"] == fmt
    assert str(tmp_path) not in repr(recipe)  # content, never the path


def test_plain_precomputed_keeps_its_meaning():
    extractor = build({})
    assert type(extractor) is PrecomputedExtractor and extractor.recipe() == {"type": "precomputed"}


def test_file_without_ids_is_read_by_position_and_counted(tmp_path):
    write_all(tmp_path)
    extractor = build({"path": str(tmp_path / "plain.npy")})
    np.testing.assert_array_equal(extractor.transform(MATRIX[4:8], row_ids=KEYS[4:8], rows=(4, 8)), MATRIX[4:8])
    extractor.check_rows(KEYS, endpoint="samples")
    with pytest.raises(ValidationError, match=r"plain\.npy.*declares no row ids.*12 rows, the endpoint 13"):
        extractor.check_rows(KEYS + ("x",), endpoint="samples")
    with pytest.raises(ValidationError, match=r"plain\.npy.*has 12 rows.*up to 12"):
        extractor.transform(np.zeros((2, 1)), row_ids=None, rows=(11, 13))


def test_missing_and_extra_ids_are_named_with_the_file(tmp_path):
    decls = write_all(tmp_path)
    extractor = build(decls["npz"])
    dataset = KEYS[:10] + encode_row_ids(["new-1", "new-2"], 2, what="t")
    with pytest.raises(ValidationError) as err:
        extractor.check_rows(dataset, endpoint="samples")
    text = str(err.value)
    assert "b.npz" in text and "'new-1'" in text and "'new-2'" in text  # missing from the file
    assert "'row-10'" in text and "'row-11'" in text  # in the file, not in the dataset
    assert "benchmarks.b.extractors.cand" in text
    with pytest.raises(ValidationError, match=r"missing from .*b\.npz.*'new-1'"):
        extractor.transform(np.zeros((1, 1)), row_ids=[dataset[-2]], rows=(10, 11))


def test_called_without_row_ids_is_refused(tmp_path):
    extractor = build(write_all(tmp_path)["npz"])
    with pytest.raises(ValidationError, match="without the batch's row ids"):
        extractor.transform(MATRIX[:2])


def test_declaration_errors_name_the_key(tmp_path):
    decls = write_all(tmp_path)
    cases = [
        ({"path": str(tmp_path / "nope.npz")}, r"\.path: file not found"),
        ({"path": str(tmp_path / "b.npz"), "key": "missing"}, r"\.key: key 'missing' not found.*'vectors'"),
        ({"path": str(tmp_path / "b.npz")}, r"\.key: .*holds 2 keys besides the ids"),
        ({"path": str(tmp_path / "a.npy"), "ids": "x"}, r"\.ids: an \.npy file holds one array"),
        ({"path": str(tmp_path / "a.npy"), "dataset": "x"}, r"\.dataset: applies to hdf5 files, not npy"),
        ({"path": str(tmp_path / "c.h5"), "dataset": "emb/vectors", "ids": "emb/nope"}, r"\.ids: dataset 'emb/nope'"),
        ({**decls["npz"], "files": {"query": decls["npy"]}}, r"either path .* or files"),
        ({"key": "vectors"}, r"\.path: required"),
        ({"path": str(tmp_path / "a_ids.txt")}, r"\.format: cannot tell"),
    ]
    for decl, pattern in cases:
        with pytest.raises(ConfigError, match=pattern):
            build(decl)


def test_duplicate_ids_in_a_file_are_refused(tmp_path):
    np.savez(tmp_path / "dup.npz", embeddings=MATRIX[:3], ids=np.array(["a", "b", "a"]))
    extractor = build({"path": str(tmp_path / "dup.npz"), "ids": "ids"})
    with pytest.raises(ValidationError, match=r"dup\.npz.*duplicate row id 'a'"):
        extractor.check_rows(encode_row_ids(["a", "b", "c"], 3, what="t"), endpoint="samples")


def test_recipe_follows_content_not_path(tmp_path):
    decls = write_all(tmp_path)
    (tmp_path / "copy").mkdir()
    os.link(tmp_path / "b.npz", tmp_path / "copy" / "b.npz")
    same = build({**decls["npz"], "path": str(tmp_path / "copy" / "b.npz")})
    first = build(decls["npz"])
    assert same.recipe() == first.recipe()
    fp = fingerprint("embedding", embedding_recipe("declared:x@1", "samples", first))
    shuffled = MATRIX[ORDER].copy()
    shuffled[0, 0] += 1
    np.savez(tmp_path / "b2.npz", vectors=shuffled, names=np.array(IDS)[ORDER])
    os.replace(tmp_path / "b2.npz", tmp_path / "b.npz")
    edited = build(decls["npz"])
    assert fingerprint("embedding", embedding_recipe("declared:x@1", "samples", edited)) != fp
    other_key = build({**decls["npz"], "path": str(tmp_path / "copy" / "b.npz"), "ids": "names"})
    assert fingerprint("embedding", embedding_recipe("declared:x@1", "samples", other_key)) == fp  # the old bytes


def test_a_large_files_digest_is_kept_by_the_planner_only(tmp_path, monkeypatch):
    """A large file's digest is kept in the run's digests.json while a config is planned, and a new planning reads it
    there; a job (no planning under way) hashes the file and reads no cache, a lying entry there changes nothing.
    Nothing is kept elsewhere (the home folder held such digests before; tests/data/test_embedding_file_digests.py
    runs the jobs)."""
    from vertebrae.core import file_digests
    from vertebrae.core.file_digests import CACHE_FILE, CACHE_SCHEMA
    from vertebrae.core.out_folder import writing_to

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(file_digests, "LARGE_BYTES", 16)
    monkeypatch.setattr(file_digests, "_MEMO", {})
    path = tmp_path / "big.bin"
    path.write_bytes(b"x" * 100)
    os.utime(path, (1e9, 1e9))  # long settled: past the cache's racy window
    with writing_to("results"):
        digest = file_sha256(path)
    cache = tmp_path / "results" / CACHE_FILE
    entries = json.loads(cache.read_text(encoding="utf-8"))["files"]
    assert entries[str(path.resolve())]["sha256"] == digest == hashlib.sha256(b"x" * 100).hexdigest()
    monkeypatch.setattr(file_digests, "_MEMO", {})  # a new process: the digest comes from the planner's cache

    def no_hashing(path):
        raise AssertionError("hashed again")

    monkeypatch.setattr(file_digests, "sha256_file", no_hashing)
    with writing_to("results"):
        assert file_sha256(path) == digest
    monkeypatch.undo()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(file_digests, "LARGE_BYTES", 16)
    monkeypatch.setattr(file_digests, "_MEMO", {})
    entries[str(path.resolve())]["sha256"] = "0" * 64
    cache.write_text(json.dumps({"schema": CACHE_SCHEMA, "files": entries}), encoding="utf-8")
    assert file_sha256(path) == digest  # a job: hashed, the lying cache unread
    path.write_bytes(b"y" * 101)  # a change (size and mtime) is hashed anew
    assert file_sha256(path) != digest


def test_one_file_per_branch_for_retrieval_sides(tmp_path):
    from vertebrae.stages.retrieval import retrieval_branch

    decls = write_all(tmp_path)
    extractor = build({"files": {"query": decls["npz"], "gallery": str(tmp_path / "plain.npy")}})
    assert extractor.branches == ("query", "gallery")
    assert [retrieval_branch(extractor, side) for side in ("query", "gallery")] == ["query", "gallery"]
    np.testing.assert_array_equal(extractor.transform(MATRIX[:2], branch="query", row_ids=[KEYS[7], KEYS[1]]),
                                  MATRIX[[7, 1]])
    np.testing.assert_array_equal(extractor.transform(MATRIX[:2], branch="gallery", row_ids=KEYS[2:4], rows=(2, 4)),
                                  MATRIX[2:4])
    with pytest.raises(ValidationError, match="one file per branch"):
        extractor.transform(MATRIX[:2], branch=None, row_ids=KEYS[:2])
    assert set(extractor.recipe()["files"]) == {"query", "gallery"}


def test_schema_accepts_the_declarations(tmp_path):
    schema = config_schema()
    validator = jsonschema.Draft202012Validator({"$ref": "#/$defs/extractor", "$defs": schema["$defs"]})
    good = [
        {"type": "precomputed", "path": "a.npz", "key": "emb", "ids": "ids"},
        {"type": "precomputed", "path": "a.h5", "dataset": "emb", "ids_path": "ids.txt", "format": "hdf5"},
        {"type": "precomputed", "path": "a.parquet", "column": "emb", "ids": "id"},
        {"type": "precomputed", "files": {"query": "q.npy", "gallery": {"path": "g.npz", "key": "e", "ids": "i"}}},
        {"type": "hf_text", "model": "m", "prefix": "query: ", "prefixes": {"query": "query: ", "gallery": "passage: "}},
    ]
    for decl in good:
        assert not list(validator.iter_errors(decl)), decl
    assert list(validator.iter_errors({"type": "precomputed", "files": {"query": {"path": "q", "oops": 1}}}))


@pytest.mark.skipif(not HOOK, reason="needs the stages to pass row ids to reads_rows extractors (issue 18, lead)")
def test_embed_endpoint_aligns_shards_and_checks_the_endpoint(tmp_path):
    decls = write_all(tmp_path)
    for decl in (decls["npz"], decls["hdf5"], {"path": str(tmp_path / "plain.npy")}):
        extractor = build(decl)
        block = embed_endpoint(extractor, MATRIX * 0, KEYS, shards=3, batch_size=2, endpoint="samples")
        np.testing.assert_array_equal(block.matrix, MATRIX)
    with pytest.raises(ValidationError, match="row-11"):
        embed_endpoint(build(decls["npz"]), MATRIX[:11], KEYS[:11], shards=1, batch_size=4, endpoint="samples")


def test_no_warning_while_building(tmp_path):
    decls = write_all(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        build(decls["hdf5"]).recipe()


@pytest.mark.skipif(not HOOK, reason="needs the stages to pass row ids to reads_rows extractors (issue 18, lead)")
def test_zero_shot_reads_a_samples_file_and_a_prompts_file(tmp_path):
    from vertebrae.planning.zero_shot import zero_shot_benchmarks_from_config

    labels = np.array(["cat", "dog", "owl"])[np.arange(30) % 3]
    ids = np.array([f"s{i}" for i in range(30)])
    centres = np.eye(3, 6)
    np.savez(tmp_path / "data.npz", embeddings=np.zeros((30, 1)), labels=labels, ids=ids)
    np.savez(tmp_path / "samples.npz", embeddings=(centres[np.arange(30) % 3] + 0.1 * RNG.normal(size=(30, 6)))[::-1],
             ids=ids[::-1])
    np.save(tmp_path / "prompts.npy", np.repeat(centres, 2, axis=0))  # 3 classes x 2 templates, protocol order
    config = {"zero_shot": {"z": {
        "dataset": {"source": {"type": "npz", "path": str(tmp_path / "data.npz"), "ids_key": "ids"},
                    "identity": {"kind": "declared", "name": "toy", "revision": "1"}},
        "templates": ["a {label}", "the {label}"], "template_ids": ["a", "the"],
        "sample_branch": "samples", "text_branch": "prompts",
        "extractors": {"mine": {"type": "precomputed", "files": {"samples": {"path": str(tmp_path / "samples.npz"),
                                                                             "ids": "ids"},
                                                                 "prompts": str(tmp_path / "prompts.npy")}}},
    }}}
    result = zero_shot_benchmarks_from_config(config)["z"].run().to_dict()
    assert result["candidate_results"][0]["zero_shot"]["metrics"]["accuracy"] == 1.0  # aligned by id and position
