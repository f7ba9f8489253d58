"""HDF5 datasets whose rows live in another file (issue 48, problem 3).

A file is named by the SHA-256 of its own bytes, so a dataset that reads rows from another file (a virtual dataset,
an external link, raw data in external files) would let an edit of that other file go unnoticed: no rerun, verify
clean, a stale ranking. Both readers of HDF5 (the ``hdf5`` data source and a precomputed extractor's embedding file)
refuse such a dataset, at plan time (the row count ``vertebrae validate`` runs) and at load, naming the file, the
dataset and what to do.
"""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest

from vertebrae.core.errors import ValidationError
from vertebrae.data.sources import load_source, source_row_count
from vertebrae.data.sources.embedding_files import EmbeddingFile
from vertebrae.extractors.registry import build_extractor
from vertebrae.planning import plan

WHERE = "benchmarks.demo.dataset.source"
N, D = 6, 3
LABELS = np.array([0, 1, 0, 1, 2, 2])
IDS = np.array([f"r{i}" for i in range(N)], dtype=h5py.string_dtype())


def _features() -> np.ndarray:
    return np.random.default_rng(3).normal(size=(N, D))


def _write_other(folder: Path) -> Path:
    """``other.h5``: the file the indirect datasets read from."""
    with h5py.File(folder / "other.h5", "w") as fh:
        fh["emb"] = _features()
        fh["labels"] = LABELS
        fh["ids"] = IDS
        fh.create_group("grp")["labels"] = LABELS
    return folder / "other.h5"


def _virtual(fh: h5py.File, name: str, source: str, data: np.ndarray) -> None:
    layout = h5py.VirtualLayout(shape=data.shape, dtype=data.dtype)
    layout[:] = h5py.VirtualSource("other.h5", source, shape=data.shape, dtype=data.dtype)
    fh.create_virtual_dataset(name, layout)


def _write_main(folder: Path, indirect: str, how: str) -> Path:
    """``main.h5`` with ``embeddings``, ``labels``, ``ids`` and ``groups``; the ``indirect`` one of them reads from
    other.h5 (``how``: virtual or link), every other one is stored in the file."""
    _write_other(folder)
    data = {"embeddings": (_features(), "emb"), "labels": (LABELS, "labels"), "ids": (IDS, "ids"),
            "groups": (LABELS, "labels")}
    with h5py.File(folder / "main.h5", "w") as fh:
        for name, (values, source) in data.items():
            if name != indirect:
                fh[name] = values
            elif how == "virtual":
                _virtual(fh, name, source, np.asarray(values) if name != "ids" else np.asarray(IDS))
            else:
                fh[name] = h5py.ExternalLink("other.h5", source)
    return folder / "main.h5"


DECL = {"type": "hdf5", "path": "main.h5", "ids_dataset": "ids", "groups_dataset": "groups"}
ROLE_KEY = {"embeddings": "features_dataset", "labels": "labels_dataset", "ids": "ids_dataset",
            "groups": "groups_dataset"}


def _count(base: Path) -> int:
    return source_row_count(DECL, base_dir=base, where=WHERE)


def _load(base: Path):
    return load_source(DECL, base_dir=base, where=WHERE)


def test_a_plain_file_still_reads(tmp_path):
    _write_main(tmp_path, indirect="none", how="virtual")
    assert _count(tmp_path) == N
    data = _load(tmp_path)
    np.testing.assert_array_equal(data.features, _features())


@pytest.mark.parametrize("role", ["embeddings", "labels", "ids", "groups"])
@pytest.mark.parametrize("read", [_count, _load], ids=["count", "load"])
def test_data_source_refuses_a_virtual_dataset(tmp_path, role, read):
    _write_main(tmp_path, indirect=role, how="virtual")
    with pytest.raises(ValidationError) as info:
        read(tmp_path)
    msg = str(info.value)
    assert f"{WHERE}.{ROLE_KEY[role]}" in msg
    assert str(tmp_path / "main.h5") in msg and f"{role!r}" in msg
    assert "virtual dataset" in msg and "other.h5" in msg and "copy" in msg


@pytest.mark.parametrize("role", ["embeddings", "labels", "ids", "groups"])
@pytest.mark.parametrize("read", [_count, _load], ids=["count", "load"])
def test_data_source_refuses_an_external_link(tmp_path, role, read):
    _write_main(tmp_path, indirect=role, how="link")
    with pytest.raises(ValidationError) as info:
        read(tmp_path)
    msg = str(info.value)
    assert f"{WHERE}.{ROLE_KEY[role]}" in msg
    assert str(tmp_path / "main.h5") in msg and f"{role!r}" in msg
    assert "external link" in msg and "other.h5" in msg and "copy" in msg


def test_an_external_link_on_the_way_to_the_dataset_is_refused(tmp_path):
    _write_other(tmp_path)
    with h5py.File(tmp_path / "main.h5", "w") as fh:
        fh["embeddings"] = _features()
        fh["meta"] = h5py.ExternalLink("other.h5", "grp")  # meta/labels is other.h5's grp/labels
    decl = {"type": "hdf5", "path": "main.h5", "labels_dataset": "meta/labels"}
    with pytest.raises(ValidationError) as info:
        source_row_count(decl, base_dir=tmp_path, where=WHERE)
    msg = str(info.value)
    assert "'meta/labels'" in msg and "'meta'" in msg and "external link" in msg and "other.h5" in msg


@pytest.mark.parametrize("read", [_count, _load], ids=["count", "load"])
def test_a_soft_link_through_an_external_link_is_refused(tmp_path, read):
    _write_other(tmp_path)
    with h5py.File(tmp_path / "main.h5", "w") as fh:
        fh["labels"] = LABELS
        fh["x"] = h5py.ExternalLink("other.h5", "/")
        fh["embeddings"] = h5py.SoftLink("/x/emb")
    decl = {"type": "hdf5", "path": "main.h5"}
    call = source_row_count if read is _count else load_source
    with pytest.raises(ValidationError, match=r"features_dataset: dataset 'embeddings' of .*main\.h5 is reached "
                                              r"through a link to .*other\.h5"):
        call(decl, base_dir=tmp_path, where=WHERE)


@pytest.mark.parametrize("role", ["embeddings", "labels"])
def test_a_broken_external_link_is_named_not_reported_missing(tmp_path, role):
    with h5py.File(tmp_path / "main.h5", "w") as fh:
        fh["embeddings"] = _features()
        fh["labels"] = LABELS
        del fh[role]
        fh[role] = h5py.ExternalLink("gone.h5", role)  # a broken link to "embeddings" is no labels-only file either
    with pytest.raises(ValidationError) as info:
        source_row_count({"type": "hdf5", "path": "main.h5"}, base_dir=tmp_path, where=WHERE)
    msg = str(info.value)
    assert "external link" in msg and "gone.h5" in msg and f"{role!r}" in msg


def test_a_broken_external_link_in_a_precomputed_file_is_named(tmp_path):
    with h5py.File(tmp_path / "emb.h5", "w") as fh:
        fh["embeddings"] = h5py.ExternalLink("gone.h5", "embeddings")
        fh["labels"] = LABELS  # once passed over for the unreadable link and picked as the matrix
    with pytest.raises(ValidationError, match=r"'embeddings' of .*emb\.h5 is an external link to 'embeddings' in "
                                              r"'gone\.h5'"):
        EmbeddingFile({"path": str(tmp_path / "emb.h5")}, where="x")


def test_raw_data_in_external_files_is_refused(tmp_path):
    raw = tmp_path / "raw.bin"
    _features().tofile(raw)
    with h5py.File(tmp_path / "main.h5", "w") as fh:
        fh.create_dataset("embeddings", shape=(N, D), dtype="f8", external=[(str(raw), 0, h5py.h5f.UNLIMITED)])
        fh["labels"] = LABELS
    with pytest.raises(ValidationError) as info:
        source_row_count({"type": "hdf5", "path": "main.h5"}, base_dir=tmp_path, where=WHERE)
    msg = str(info.value)
    assert "'embeddings'" in msg and "raw.bin" in msg and "external" in msg


# ----------------------------------------------------------------------------------------------------
# a precomputed extractor's embedding file


def _precomputed_file(folder: Path, how: str, member: str) -> Path:
    _write_other(folder)
    with h5py.File(folder / "emb.h5", "w") as fh:
        for name, values, source in (("embeddings", _features(), "emb"), ("ids", IDS, "ids")):
            if name != member:
                fh[name] = values
            elif how == "virtual":
                _virtual(fh, name, source, np.asarray(values))
            else:
                fh[name] = h5py.ExternalLink("other.h5", source)
    return folder / "emb.h5"


@pytest.mark.parametrize("how", ["virtual", "link"])
@pytest.mark.parametrize("member", ["embeddings", "ids"])
@pytest.mark.parametrize("named", [True, False], ids=["named", "default"])
def test_precomputed_file_refuses_an_indirect_dataset(tmp_path, how, member, named):
    path = _precomputed_file(tmp_path, how, member)
    decl = {"type": "precomputed", "path": str(path), "ids": "ids", **({"dataset": "embeddings"} if named else {})}
    with pytest.raises(ValidationError) as info:
        build_extractor("cand", decl, where="benchmarks.b.extractors.cand")
    msg = str(info.value)
    assert msg.startswith(f"benchmarks.b.extractors.cand.{'dataset' if member == 'embeddings' else 'ids'}: ")
    assert str(path) in msg and f"{member!r}" in msg and "other.h5" in msg and "copy" in msg
    assert ("virtual dataset" if how == "virtual" else "external link") in msg


def test_precomputed_plain_file_reads(tmp_path):
    path = _precomputed_file(tmp_path, "none", "none")
    emb = EmbeddingFile({"path": str(path), "ids": "ids"}, where="x")
    assert (emb.member, emb.n_rows, emb.width) == ("embeddings", N, D)


# ----------------------------------------------------------------------------------------------------
# `vertebrae validate` plans: the refusal comes before any job


def test_planning_refuses_a_virtual_source_and_a_virtual_precomputed_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _write_main(tmp_path, indirect="embeddings", how="virtual")
    config = {"benchmarks": {"demo": {"dataset": {"source": {"type": "hdf5", "path": "main.h5"}},
                                      "extractors": {"raw": {"type": "precomputed"}}}}}
    with pytest.raises(ValidationError, match=r"'embeddings' of main\.h5 is an HDF5 virtual dataset"):
        plan(config)
    _write_main(tmp_path, indirect="none", how="virtual")
    _precomputed_file(tmp_path, "virtual", "embeddings")
    config["benchmarks"]["demo"]["extractors"] = {"pre": {"type": "precomputed", "path": "emb.h5", "ids": "ids"}}
    with pytest.raises(ValidationError, match=r"'embeddings' of emb\.h5 is an HDF5 virtual dataset"):
        plan(config)
