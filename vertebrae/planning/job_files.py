"""The user's files a job reads besides its artifacts: declared inputs of the job, so that it reads nothing undeclared.

A job spec names the data it reads inside its declarations: the dataset's source (``path``, ``labels_path``,
``ids_path``, ``groups_path``, a retrieval pair's ``relevance_path``..., nested ``source:`` of a split included),
a precomputed extractor's files (``path``, ``ids_path``, per-endpoint ``files``). ``data_files`` lists them as the
config spells them (relative to the working folder, or absolute), so the rules can declare them: a job run where
only its declared inputs are (object storage, a node without the shared disk) gets them.

The rules mark them ``ancient``: their bytes are already in the fingerprints (a data edit is a new fingerprint),
so touching a file reruns nothing. File names enter no fingerprint: they are inputs, never recipe.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import Any

from vertebrae.core.storage import is_url

#: The stages whose job reads the data files its spec declares (and each plan job of a spec that declares any).
DATA_STAGES = frozenset({"embed", "embed-sweep", "fit", "protocol", "retrieval-protocol", "zero-shot-embed",
                         "zero-shot-protocol"})


def _is_path_key(key: str) -> bool:
    return key == "path" or key.endswith("_path")


def _source_files(decl: Any) -> Iterator[str]:
    if not isinstance(decl, Mapping):
        return
    for key, value in decl.items():
        if isinstance(value, str) and value and _is_path_key(key):
            yield value
        elif key == "source" or key.endswith("_source"):
            yield from _source_files(value)


def _extractor_files(decl: Any) -> Iterator[str]:
    if not isinstance(decl, Mapping) or decl.get("type") != "precomputed":
        return
    yield from (value for key, value in decl.items() if isinstance(value, str) and value and _is_path_key(key))
    files = decl.get("files")
    for entry in (files.values() if isinstance(files, Mapping) else ()):
        if isinstance(entry, str) and entry:
            yield entry
        else:
            yield from _extractor_files({**entry, "type": "precomputed"} if isinstance(entry, Mapping) else None)


def data_files(spec: Mapping[str, Any], base_dir: str = ".") -> list[str]:
    """The user's files and folders ``spec`` names (its dataset's source, its precomputed extractor's files), in
    order, without repeats; [] for a spec that names none (a sklearn dataset, a score, a report). A local path that
    does not exist under ``base_dir`` is left out (a glob, a name the source resolves itself: planning has checked
    what it reads); a URL is kept as it is."""
    dataset = spec.get("dataset")
    extractor = spec.get("extractor")
    found = [*_source_files(dataset.get("source") if isinstance(dataset, Mapping) else None),
             *_extractor_files(extractor.get("decl") if isinstance(extractor, Mapping) else None)]
    return [path for path in dict.fromkeys(found) if is_url(path) or os.path.exists(os.path.join(base_dir, path))]


__all__ = ["DATA_STAGES", "data_files"]
