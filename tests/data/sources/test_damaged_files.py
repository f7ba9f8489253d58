"""Damaged data files (issue 48): a truncated or corrupt ``.npz`` (a zip archive underneath) used to surface as
zipfile's ``BadZipFile`` traceback without the file's name; every reader of one (the npz, sparse_npz and npz_pair
sources, a precomputed embedding file) now refuses it with one message naming the file (and the member)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse

from vertebrae.core.errors import ValidationError
from vertebrae.data.declared.retrieval import load_retrieval_source
from vertebrae.data.sources import load_source, source_row_count
from vertebrae.extractors.registry import build_extractor

WHERE = "benchmarks.t.dataset.source"


def _archive(path: Path) -> bytes:
    rng = np.random.default_rng(0)
    np.savez(path, embeddings=rng.normal(size=(60, 4)).astype(np.float32), labels=np.repeat([0, 1, 2], 20))
    return path.read_bytes()


def truncated(tmp_path: Path, name: str = "trunc.npz") -> Path:
    data = _archive(tmp_path / "whole.npz")
    (tmp_path / name).write_bytes(data[: len(data) // 2])
    return tmp_path / name


def corrupt_member(tmp_path: Path) -> Path:
    """Whole archive (its directory intact), with bytes of the embeddings member's data overwritten: Bad CRC-32."""
    data = bytearray(_archive(tmp_path / "whole.npz"))
    start = data.index(b"\x93NUMPY") + 200  # inside the float data, past the .npy header
    data[start:start + 16] = b"\xff" * 16
    (tmp_path / "crc.npz").write_bytes(bytes(data))
    return tmp_path / "crc.npz"


@pytest.mark.parametrize("read", ["count", "load"])
def test_a_truncated_npz_source_is_refused_naming_the_file(tmp_path, read):
    path = truncated(tmp_path)
    call = source_row_count if read == "count" else load_source
    with pytest.raises(ValidationError) as info:
        call({"type": "npz", "path": "trunc.npz"}, base_dir=tmp_path, where=WHERE)
    assert str(info.value) == (f"{path} is not a readable .npz archive (truncated or corrupt?): File is not a zip "
                               "file")


def test_a_corrupt_npz_member_is_refused_naming_the_file_and_member(tmp_path):
    path = corrupt_member(tmp_path)
    for call in (source_row_count, load_source):
        with pytest.raises(ValidationError) as info:
            call({"type": "npz", "path": "crc.npz"}, base_dir=tmp_path, where=WHERE)
        assert str(info.value).startswith(f"{path}['embeddings'] is not a readable .npy array (truncated or corrupt?): "
                                          "Bad CRC-32 for file 'embeddings.npy'"), str(info.value)


def test_a_truncated_sparse_npz_is_refused_naming_the_file(tmp_path):
    scipy.sparse.save_npz(tmp_path / "whole.npz", scipy.sparse.random(20, 5, density=0.5, format="csr", random_state=0))
    data = (tmp_path / "whole.npz").read_bytes()
    (tmp_path / "sparse.npz").write_bytes(data[: len(data) // 2])
    (tmp_path / "labels.txt").write_text("a\n" * 20, encoding="utf-8")
    with pytest.raises(ValidationError, match=r"sparse\.npz is not a readable \.npz archive \(truncated or corrupt\?\)"):
        source_row_count({"type": "sparse_npz", "path": "sparse.npz", "labels_path": "labels.txt"}, base_dir=tmp_path,
                         where=WHERE)


def test_a_truncated_npz_pair_is_refused_naming_the_file(tmp_path):
    path = truncated(tmp_path, "pair.npz")
    (tmp_path / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n", encoding="utf-8")
    decl = {"type": "npz_pair", "path": "pair.npz", "relevance_path": "qrels.tsv"}
    with pytest.raises(ValidationError) as info:
        load_retrieval_source(decl, base_dir=tmp_path, where="retrieval.s.dataset.source")
    assert str(info.value) == (f"{path} is not a readable .npz archive (truncated or corrupt?): File is not a zip "
                               "file")


@pytest.mark.parametrize("damage", [truncated, corrupt_member])
def test_a_damaged_precomputed_npz_file_is_refused_naming_the_file(tmp_path, damage):
    path = damage(tmp_path)
    with pytest.raises(ValidationError, match=r"is not a readable .*\(truncated or corrupt\?\)") as info:
        build_extractor("p", {"type": "precomputed", "path": str(path), "key": "embeddings"},
                        where="benchmarks.t.extractors.p")
    assert str(info.value).startswith(str(path))


def test_validate_prints_one_line_for_a_truncated_npz(tmp_path, monkeypatch, capsys):
    import yaml

    from vertebrae.cli import main

    truncated(tmp_path)
    config = {"benchmarks": {"t": {"dataset": {"source": {"type": "npz", "path": "trunc.npz"},
                                               "identity": {"kind": "content"}},
                                   "extractors": {"raw": {"type": "precomputed"}}}}}
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["validate", "cfg.yaml"]) == 2
    err = capsys.readouterr().err
    # the path as the config gives it (relative to the current directory)
    assert err == "vertebrae: error: trunc.npz is not a readable .npz archive (truncated or corrupt?): File is not a zip file\n"
