"""The source types a declaration's ``type:`` may name, one line each: ``FORMATS`` maps a type to the
:class:`~vertebrae.data.sources.keys.SourceFormat` its module ends with (its keys and defaults, its declaration
checks, its row counter, loader, groups and labels-only readers, its ``files`` recipe).

Adding a format is one module ending in its ``FORMAT = SourceFormat(...)`` and one line here; the public functions
(:mod:`vertebrae.data.sources`, :mod:`vertebrae.data.sources.files`) find it through this table and nothing else.
:func:`parse_decl` checks a declaration against it: messages start with the key path (``where`` + ``.key``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

# ``import ... as``, not ``from vertebrae.data.sources import ...``: the package's __init__ imports this module
import vertebrae.data.sources.csv_table as csv_table
import vertebrae.data.sources.hdf5 as hdf5
import vertebrae.data.sources.hf_dataset as hf_dataset
import vertebrae.data.sources.image_folder as image_folder
import vertebrae.data.sources.manifest as manifest
import vertebrae.data.sources.npy as npy
import vertebrae.data.sources.npz as npz
import vertebrae.data.sources.sklearn_datasets as sklearn_datasets
import vertebrae.data.sources.sparse_npz as sparse_npz
import vertebrae.data.sources.webdataset as webdataset
from vertebrae.core.errors import ConfigError
from vertebrae.data.sources.keys import _PATH_KEYS, _REQUIRED, SourceFormat, _key, _label

#: Every source type, in the order messages list the types that take a key.
FORMATS: dict[str, SourceFormat] = {
    "sklearn": sklearn_datasets.FORMAT,
    "npz": npz.FORMAT,
    "npy": npy.FORMAT,
    "sparse_npz": sparse_npz.FORMAT,
    "hdf5": hdf5.FORMAT,
    "csv": csv_table.FORMAT,
    "manifest": manifest.FORMAT,
    "image_folder": image_folder.FORMAT,
    "hf_dataset": hf_dataset.FORMAT,
    "webdataset": webdataset.FORMAT,
}

#: Source types a declaration may use.
SOURCE_TYPES: tuple[str, ...] = tuple(sorted(FORMATS))

#: The key naming each source type's independence groups (one group per row), for the types that have one.
GROUPS_KEYS: dict[str, str] = {kind: fmt.groups_key for kind, fmt in FORMATS.items() if fmt.groups_key is not None}


def parse_decl(decl: Any, where: str) -> tuple[str, dict[str, Any]]:
    """``(type, options)`` of a source declaration: every key of its type, defaults filled in, values checked.

    ConfigError naming the key for a declaration that is not a mapping, an unknown type, a key its type does not
    take (naming the types that take it), a missing required key, a null or empty value, or a value its type refuses.
    """
    if not isinstance(decl, Mapping):
        raise ConfigError(f"{_label(where)}: a source declaration must be a mapping, got {type(decl).__name__}")
    types = ", ".join(sorted(FORMATS))
    if "type" not in decl:
        raise ConfigError(f"{_key(where, 'type')}: missing; allowed types: {types}")
    kind = decl["type"]
    if not isinstance(kind, str) or kind not in FORMATS:
        raise ConfigError(f"{_key(where, 'type')}: unknown source type {kind!r}; allowed types: {types}")
    fmt = FORMATS[kind]
    spec = fmt.keys
    for key in decl:
        if key != "type" and key not in spec:
            owners = [t for t, other in FORMATS.items() if key in other.keys]
            belongs = f" (a key of source type(s) {', '.join(owners)}, which a {kind!r} source would ignore)" if owners else ""
            raise ConfigError(
                f"{_key(where, str(key))}: unknown key for a {kind!r} source{belongs}; allowed keys: "
                f"{', '.join(['type', *spec])}"
            )
    opts: dict[str, Any] = {}
    for key, default in spec.items():
        value = decl.get(key, None if default is _REQUIRED else default)
        if value is None and default is not None:
            if default is _REQUIRED:
                raise ConfigError(f"{_key(where, key)}: required for a {kind!r} source")
            raise ConfigError(f"{_key(where, key)}: must not be null (default {default!r})")
        if value is not None:
            if key in _PATH_KEYS:
                if isinstance(value, os.PathLike):
                    value = os.fspath(value)
                if not isinstance(value, str) or not value:
                    raise ConfigError(f"{_key(where, key)}: must be a non-empty path string, got {value!r}")
            elif key in fmt.values:
                value = fmt.values[key](value, where)
            elif not isinstance(value, str) or not value:
                raise ConfigError(f"{_key(where, key)}: must be a non-empty string, got {value!r}")
        opts[key] = value
    if fmt.check is not None:
        fmt.check(opts, where)
    return kind, opts


__all__ = ["FORMATS", "GROUPS_KEYS", "SOURCE_TYPES", "SourceFormat", "parse_decl"]
