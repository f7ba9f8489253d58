"""The name a person knows a declared dataset by, for report headers: never part of a fingerprint.

``dataset_name(decl)``: an identity's own name (``declared`` and ``manifest`` kinds), else what the source reads:
its ``path`` (a file, folder or shard pattern as written in the config), ``sklearn:wine`` / ``hf_dataset:NAME`` for
a named source, the two sides of a pair, the source a ``label_split`` splits. Reports show it in place of the
identity key (``files:v1:737b6...``), which they keep beside it for the fingerprints.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def dataset_name(decl: Mapping[str, Any]) -> str:
    """The display name of a config's ``dataset`` declaration (see the module docstring)."""
    identity = decl.get("identity") or {}
    if identity.get("kind") in ("declared", "manifest") and identity.get("name"):
        return str(identity["name"])
    return source_name(decl["source"])


def source_name(source: Mapping[str, Any]) -> str:
    """What a ``source`` declaration reads, as the config names it."""
    kind = str(source.get("type", "source"))
    if isinstance(source.get("source"), Mapping):  # label_split: the source it splits
        return source_name(source["source"])
    sides = [source[side] for side in ("query", "gallery") if isinstance(source.get(side), Mapping)]
    if sides:  # a source pair: both sides
        return " + ".join(source_name(side) for side in sides)
    if source.get("path"):
        return str(source["path"])
    if source.get("name"):
        return f"{kind}:{source['name']}"
    return kind


__all__ = ["dataset_name", "source_name"]
