"""vertebrae.data.sources.registry: FORMATS lists every source type once, agrees with the config schema, refuses
an unknown type or a key of another type as it always has, and is the only place a type is listed: a format
registered there alone is counted, loaded, grouped and identified through the public functions."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from vertebrae.core.errors import ConfigError
from vertebrae.core.file_digests import FileDigests
from vertebrae.data.sources import (
    GROUPS_KEYS,
    SKLEARN_DATASETS,
    SOURCE_TYPES,
    SourceData,
    load_source,
    source_groups,
    source_labels_only,
    source_row_count,
)
from vertebrae.data.sources import registry
from vertebrae.data.sources.files import UNTRACKED_SOURCES, source_files_recipe
from vertebrae.data.sources.keys import _REQUIRED, SourceFormat, _check_rows, _resolve

ROOT = Path(__file__).resolve().parents[3]
SOURCES = ROOT / "vertebrae" / "data" / "sources"
WHERE = "benchmarks.demo.dataset.source"
TYPES = "csv, hdf5, hf_dataset, image_folder, manifest, npy, npz, sklearn, sparse_npz, webdataset"


def _schema_source() -> dict:
    schema = yaml.safe_load((ROOT / "workflow" / "schemas" / "config.schema.yaml").read_text(encoding="utf-8"))
    return schema["$defs"]["source"]


def test_the_schema_enum_lists_exactly_the_registered_types():
    assert _schema_source()["properties"]["type"]["enum"] == list(registry.FORMATS)
    assert SOURCE_TYPES == tuple(sorted(registry.FORMATS))


def test_the_schema_lists_exactly_the_registered_keys_with_their_defaults():
    """The schema lists the source keys of every type together (not per type): their union is the registry's, and
    a default a description states is every registering type's default."""
    properties = _schema_source()["properties"]
    registered = {key for fmt in registry.FORMATS.values() for key in fmt.keys}
    assert set(properties) == registered | {"type"}
    assert set(properties["name"]["enum"]) == set(SKLEARN_DATASETS)
    for key, prop in properties.items():
        stated = re.search(r"Default: (.+)\.$", prop.get("description", "").strip())
        if stated is None:
            continue
        default = None if stated.group(1) == "null" else stated.group(1)
        for kind, fmt in registry.FORMATS.items():
            if key in fmt.keys:
                assert fmt.keys[key] == default, (kind, key)


def test_groups_keys_and_untracked_types_come_from_the_formats():
    assert GROUPS_KEYS == {"npz": "groups_key", "npy": "groups_path", "sparse_npz": "groups_path",
                           "hdf5": "groups_dataset", "csv": "groups_column", "manifest": "groups_column",
                           "hf_dataset": "groups_column"}
    assert UNTRACKED_SOURCES == ("sklearn",)
    for kind, key in GROUPS_KEYS.items():
        assert registry.FORMATS[kind].keys[key] is None  # groups are optional everywhere


@pytest.mark.parametrize(("decl", "message"), [
    ({"type": "parquet", "path": "x"}, f"{WHERE}.type: unknown source type 'parquet'; allowed types: {TYPES}"),
    ({"path": "x"}, f"{WHERE}.type: missing; allowed types: {TYPES}"),
    ({"type": "npy", "path": "x.npy", "labels_path": "y.txt", "features_key": "e"},
     f"{WHERE}.features_key: unknown key for a 'npy' source (a key of source type(s) npz, which a 'npy' source would "
     "ignore); allowed keys: type, path, labels_path, ids_path, groups_path"),
    ({"type": "npz", "path": "x.npz", "label_column": "y"},
     f"{WHERE}.label_column: unknown key for a 'npz' source (a key of source type(s) csv, manifest, hf_dataset, which "
     "a 'npz' source would ignore); allowed keys: type, path, features_key, labels_key, ids_key, groups_key"),
    ({"type": "sklearn", "name": "iris", "foo": 1},
     f"{WHERE}.foo: unknown key for a 'sklearn' source; allowed keys: type, name"),
    ({"type": "csv", "path": "t.csv", "label_dtype": "float"},
     f"{WHERE}.label_dtype: must be 'str' or 'int', got 'float'"),
    ({"type": "hf_dataset", "path": "d", "text_column": "t", "groups_column": "t"},
     f"{WHERE}.groups_column: 't' is also the label, id or input column; groups need a column of their own"),
])
def test_declarations_are_refused_with_their_messages(decl, message, tmp_path):
    with pytest.raises(ConfigError) as info:
        source_row_count(decl, base_dir=tmp_path, where=WHERE)
    assert str(info.value) == message


# --------------------------------------------------------------------------------------------------------
# a toy format, registered in a copy of FORMATS and nowhere else


def _count_toy(opts, base_dir, where):
    return len(_resolve(opts, "path", base_dir, where).read_text(encoding="utf-8").splitlines())


def _load_toy(opts, base_dir, where, rows):
    lines = _resolve(opts, "path", base_dir, where).read_text(encoding="utf-8").splitlines()
    start, stop = _check_rows(rows, len(lines), where)
    cells = [line.split(opts["sep"]) for line in lines[start:stop]]
    features = np.array([[float(c) for c in cell[1:]] for cell in cells])
    return SourceData(features, [cell[0] for cell in cells], None)


def _check_toy(opts, where):
    if len(opts["sep"]) != 1:
        raise ConfigError(f"{where}.sep: one character, got {opts['sep']!r}")


TOY = SourceFormat(keys={"path": _REQUIRED, "sep": ";"}, count=_count_toy, load=_load_toy, check=_check_toy)


@pytest.fixture
def toy(monkeypatch, tmp_path):
    monkeypatch.setattr(registry, "FORMATS", {**registry.FORMATS, "toy": TOY})
    (tmp_path / "rows.txt").write_text("a;1;2\nb;3;4\nc;5;6\n", encoding="utf-8")
    return {"type": "toy", "path": "rows.txt"}


def test_a_registered_format_is_read_through_the_public_functions(toy, tmp_path):
    assert source_row_count(toy, base_dir=tmp_path, where=WHERE) == 3
    data = load_source(toy, base_dir=tmp_path, where=WHERE, rows=(1, 3))
    assert data.labels == ["b", "c"] and data.features.tolist() == [[3.0, 4.0], [5.0, 6.0]]
    assert source_groups(toy, base_dir=tmp_path, where=WHERE) is None
    assert source_labels_only(toy, base_dir=tmp_path, where=WHERE) is None
    recipe = source_files_recipe(toy, base_dir=tmp_path, where=WHERE, digests=FileDigests(None))
    assert recipe["type"] == "toy" and recipe["sep"] == ";" and set(recipe["path"]) == {"sha256"}


def test_a_registered_format_is_parsed_by_the_registry(toy, tmp_path):
    with pytest.raises(ConfigError, match=r"\.sep: one character, got ';;'"):
        load_source({**toy, "sep": ";;"}, base_dir=tmp_path, where=WHERE)
    with pytest.raises(ConfigError, match=r"\.sep: unknown key for a 'npz' source \(a key of source type\(s\) toy,"):
        source_row_count({"type": "npz", "path": "x.npz", "sep": ","}, base_dir=tmp_path, where=WHERE)
    with pytest.raises(ConfigError, match=r"allowed types: csv, .*sparse_npz, toy, webdataset$"):
        source_row_count({"type": "tyo"}, base_dir=tmp_path, where=WHERE)
    with pytest.raises(ConfigError, match=r"\.path: required for a 'toy' source"):
        source_row_count({"type": "toy"}, base_dir=tmp_path, where=WHERE)


def test_no_other_module_of_sources_lists_the_types():
    """A literal collection of two or more source type names (a dispatch table, a tuple of types) anywhere in
    vertebrae/data/sources/ but the registry is a second place to edit when a format is added."""
    types = set(registry.FORMATS)
    found = []
    for path in sorted(SOURCES.glob("*.py")):
        if path.name == "registry.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            items = node.keys if isinstance(node, ast.Dict) else getattr(node, "elts", None)
            if not isinstance(node, (ast.Dict, ast.Tuple, ast.List, ast.Set)) or not items or len(items) < 2:
                continue
            names = [n.value for n in items if isinstance(n, ast.Constant) and isinstance(n.value, str)]
            if len(names) == len(items) and set(names) <= types:
                found.append(f"{path.name}:{node.lineno}: {names}")
    assert not found, found


def test_the_format_record_keeps_groups_key_and_reader_together():
    with pytest.raises(ValueError, match="come together"):
        SourceFormat(keys={"path": _REQUIRED, "groups_path": None}, count=_count_toy, load=_load_toy,
                     groups_key="groups_path")
    with pytest.raises(ValueError, match="not one of the format's keys"):
        SourceFormat(keys={"path": _REQUIRED}, count=_count_toy, load=_load_toy, groups_key="groups_path",
                     groups=lambda opts, base_dir, where: None)


def test_registering_every_format_imports_no_reading_library():
    code = ("import sys, vertebrae.data.sources.registry\n"
            "print(','.join(m for m in ('h5py', 'scipy', 'sklearn', 'pandas', 'pyarrow', 'datasets', 'braceexpand', "
            "'torch') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
