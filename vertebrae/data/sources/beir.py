"""BEIR folders: the layout most text-retrieval data ships in, read as it is.

A folder holds ``corpus.jsonl`` (one JSON object a line: ``_id``, ``title``, ``text``), ``queries.jsonl``
(``_id``, ``text``) and ``qrels/<split>.tsv`` (a ``query-id  corpus-id  score`` header line, then one record a
line; see :mod:`vertebrae.data.sources.qrels`). Either JSON Lines file may be gzip-compressed (``corpus.jsonl.gz``).

- The gallery is the corpus in file order; a document's text is its title and text joined as BEIR joins them
  (``title + " " + text``, stripped; the text alone, stripped, when there is no title).
- The queries are those of ``queries.jsonl`` (in file order) that have a record of grade > 0 in the split: a
  query without one has nothing to retrieve. Records of grade 0 are kept (they grade a pair irrelevant).
- Ids are text (a JSON integer ``_id`` is read as its decimal text, as the qrels file writes it).

Refused, naming the file and line: a missing file or split (with the splits there are), a line that is not a JSON
object, a missing or duplicate ``_id``, a text that is not a string, and qrels ids absent from the corpus or the
queries (how many, and some of them with their lines).
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.data.sources.qrels import Qrels, check_qrels_ids, read_qrels

#: Keys of a ``{type: beir}`` source declaration besides ``type``, with their defaults (None: required).
BEIR_KEYS: dict[str, Any] = {"path": None, "split": "test"}
SEPARATOR = " "


@dataclass(frozen=True)
class BeirFiles:
    corpus: Path
    queries: Path
    qrels: Path
    split: str


@dataclass(frozen=True)
class BeirData:
    """The queries (with a positive record in the split) and the corpus, texts and ids in file order, and the
    split's records ``(query_id, corpus_id, grade)``."""

    query_texts: tuple[str, ...]
    query_ids: tuple[str, ...]
    corpus_texts: tuple[str, ...]
    corpus_ids: tuple[str, ...]
    records: tuple[tuple[str, str, float], ...]
    files: BeirFiles


def parse_beir_decl(decl: Mapping[str, Any], where: str) -> tuple[str, str]:
    """``(path, split)`` of a ``{type: beir}`` declaration; ConfigError naming the key."""
    for key in decl:
        if key != "type" and key not in BEIR_KEYS:
            raise ConfigError(f"{where}.{key}: unknown key for a 'beir' source; allowed keys: type, "
                              f"{', '.join(BEIR_KEYS)}")
    path, split = decl.get("path"), decl.get("split", "test")
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str) or not path:
        raise ConfigError(f"{where}.path: required for a 'beir' source: the BEIR folder, got {path!r}")
    if not isinstance(split, str) or not split or "/" in split or split.startswith("."):
        raise ConfigError(f"{where}.split: must be the name of a file qrels/<split>.tsv, got {split!r}")
    return path, split


def _one_of(folder: Path, stem: str, where: str) -> Path:
    found = [folder / name for name in (stem, f"{stem}.gz") if (folder / name).is_file()]
    if not found:
        raise ConfigError(f"{where}: the BEIR folder {folder} has no {stem} (nor {stem}.gz)")
    if len(found) > 1:
        raise ConfigError(f"{where}: the BEIR folder {folder} has both {stem} and {stem}.gz; keep one")
    return found[0]


def beir_files(path: str | Path, split: str = "test", *, base_dir: str | Path = ".", where: str = "beir") -> BeirFiles:
    """The files of a BEIR folder (``path`` relative to ``base_dir``); ConfigError naming ``where`` and the file."""
    folder = Path(path)
    if not folder.is_absolute():
        folder = Path(base_dir) / folder
    if not folder.is_dir():
        raise ConfigError(f"{where}.path: not a folder: {folder}")
    qrels = folder / "qrels" / f"{split}.tsv"
    if not qrels.is_file():
        there = sorted(p.name[:-4] for p in (folder / "qrels").glob("*.tsv")) if (folder / "qrels").is_dir() else []
        raise ConfigError(f"{where}.split: no relevance file {qrels} for split {split!r}; splits there: "
                          f"{', '.join(there) or '(none)'}")
    return BeirFiles(_one_of(folder, "corpus.jsonl", where), _one_of(folder, "queries.jsonl", where), qrels, split)


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    opener = gzip.open if path.suffix == ".gz" else open
    line_no = 0
    try:
        with opener(path, "rb") as handle:
            for line_no, raw in enumerate(handle, start=1):
                if line_no == 1 and raw.startswith(b"\xef\xbb\xbf"):
                    raw = raw[3:]
                try:
                    yield line_no, raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise ValidationError(f"{path}: line {line_no}: not UTF-8 text ({exc.reason})") from None
    except (OSError, EOFError) as exc:  # gzip.BadGzipFile is an OSError
        raise ValidationError(f"{path}: cannot read it after line {line_no}: {exc}") from None


def _text(record: Mapping[str, Any], key: str, path: Path, line_no: int, *, required: bool) -> str | None:
    value = record.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise ValidationError(f"{path}: line {line_no}: {key!r} must be a string, got {value!r}"[:300])
    return value


def read_jsonl(path: Path, *, title: bool) -> tuple[list[str], list[str], dict[str, int]]:
    """Ids, texts and each id's line of a BEIR JSON Lines file (``title``: join titles as BEIR does)."""
    ids: list[str] = []
    texts: list[str] = []
    first: dict[str, int] = {}
    for line_no, line in _lines(path):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValidationError(f"{path}: line {line_no}: not JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(record, dict):
            raise ValidationError(f"{path}: line {line_no}: expected a JSON object, got {type(record).__name__}")
        rid = record.get("_id")
        if isinstance(rid, int) and not isinstance(rid, bool):
            rid = str(rid)
        if not isinstance(rid, str) or not rid:
            raise ValidationError(f"{path}: line {line_no}: '_id' must be a non-empty string, got {rid!r}"[:300])
        if rid in first:
            raise ValidationError(f"{path}: line {line_no}: duplicate _id {rid!r} (first at line {first[rid]})")
        first[rid] = line_no
        text = _text(record, "text", path, line_no, required=True)
        heading = _text(record, "title", path, line_no, required=False) if title else None
        ids.append(rid)
        texts.append((text if heading is None else heading + SEPARATOR + text).strip())
    if not ids:
        raise ValidationError(f"{path}: holds no record")
    return ids, texts, first


def read_beir(files: BeirFiles) -> BeirData:
    """Read and check a BEIR folder's split (see the module docstring)."""
    qrels: Qrels = read_qrels(files.qrels)
    if not qrels.records:
        raise ValidationError(f"{files.qrels}: holds no relevance record")
    corpus_ids, corpus_texts, corpus_lines = read_jsonl(files.corpus, title=True)
    query_ids, query_texts, query_lines = read_jsonl(files.queries, title=False)
    check_qrels_ids(qrels, query_lines, side="query", where=str(files.queries))
    check_qrels_ids(qrels, corpus_lines, side="gallery", where=str(files.corpus))
    wanted = qrels.positive_query_ids()
    if not wanted:
        raise ValidationError(f"{files.qrels}: no record has a grade > 0: no query has anything to retrieve")
    keep = [i for i, rid in enumerate(query_ids) if rid in wanted]
    return BeirData(tuple(query_texts[i] for i in keep), tuple(query_ids[i] for i in keep), tuple(corpus_texts),
                    tuple(corpus_ids), tuple(r for r in qrels.records if r[0] in wanted), files)


def beir_files_recipe(files: BeirFiles, digests: Any) -> dict[str, Any]:
    """The ``files`` identity recipe of a BEIR split: the split and the SHA-256 of each file (``digests``: a
    ``FileDigests``), the same in process and in the workflow."""
    return {"type": "beir", "split": files.split, "corpus": {"sha256": digests.digest(files.corpus)},
            "queries": {"sha256": digests.digest(files.queries)}, "relevance": {"sha256": digests.digest(files.qrels)}}


def beir_endpoint_recipes(files: BeirFiles, data: BeirData, digests: Any) -> dict[str, dict[str, Any]]:
    """What each endpoint's rows are made of: the corpus file (gallery); the queries file and which of its queries
    the split keeps (queries). Not the grades: a relevance edit that keeps the split's queries re-embeds nothing."""
    from vertebrae.core.fingerprint import canonical_json, sha256_hex

    return {"gallery": {"type": "beir", "corpus": {"sha256": digests.digest(files.corpus)}},
            "query": {"type": "beir", "queries": {"sha256": digests.digest(files.queries)},
                      "ids": sha256_hex(canonical_json(list(data.query_ids)))}}


_CACHE: dict[tuple, BeirData] = {}


def load_beir(path: str | Path, split: str = "test", *, base_dir: str | Path = ".", where: str = "beir") -> BeirData:
    """``read_beir`` of the folder, remembered in this process while its files keep their size and mtime (planning
    reads row counts and ids more than once)."""
    files = beir_files(path, split, base_dir=base_dir, where=where)
    key = tuple((str(p.resolve()), p.stat().st_size, p.stat().st_mtime_ns) for p in (files.corpus, files.queries, files.qrels))
    if key not in _CACHE:
        _CACHE.clear()
        _CACHE[key] = read_beir(files)
    return _CACHE[key]


__all__ = ["BEIR_KEYS", "BeirData", "BeirFiles", "beir_endpoint_recipes", "beir_files", "beir_files_recipe", "load_beir", "parse_beir_decl", "read_beir", "read_jsonl"]
