"""Relevance files (qrels): tab-separated ``query_id  gallery_id  [grade]`` records, read strictly.

- An optional header line is allowed as the first record line when it names its columns (``query-id
  corpus-id score`` as BEIR writes it, or ``query_id gallery_id grade`` and similar, :data:`HEADER_NAMES`); any other
  line whose grade is not a number is refused naming the file and line.
- The text is UTF-8, a leading byte-order mark is dropped; a line that does not decode is refused naming the file
  and line (never a traceback without the file).
- A grade is a plain decimal number (``2``, ``1.5``, ``-0``, ``3e0``): Python's ``float`` would also read ``1_0``
  as 10, ``nan`` and ``inf``; those are refused.
- A pair graded twice is refused naming both lines; blank lines and ``#`` comments are skipped.

``Qrels`` keeps each record's line so later checks (ids absent from the corpus or queries) name lines too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vertebrae.core.errors import ValidationError

_GRADE = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
#: Column names a qrels header line may use (compared in lower case), per column.
HEADER_NAMES = (
    frozenset({"query-id", "query_id", "queryid", "qid", "query"}),
    frozenset({"corpus-id", "corpus_id", "corpusid", "doc-id", "doc_id", "docid", "gallery-id", "gallery_id",
               "gallery", "document", "pid"}),
    frozenset({"score", "grade", "relevance", "rel", "label"}),
)
_SHOWN = 5


@dataclass(frozen=True)
class Qrels:
    """The records of one qrels file, ``(query_id, gallery_id, grade)`` in file order, and each one's line."""

    path: Path
    records: tuple[tuple[str, str, float], ...]
    lines: tuple[int, ...]
    header: bool

    def query_ids(self) -> set[str]:
        return {q for q, _, _ in self.records}

    def positive_query_ids(self) -> set[str]:
        return {q for q, _, grade in self.records if grade > 0}


def parse_grade(text: str, path: Path, line_no: int) -> float:
    """A grade field as a float: a plain decimal number only (``1_0``, ``nan``, ``inf``, ``0x1`` refused)."""
    if _GRADE.fullmatch(text) is None:
        raise ValidationError(f"{path}: line {line_no}: grade {text!r} is not a number")
    return float(text)


def _is_header(fields: Sequence[str]) -> bool:
    return len(fields) in (2, 3) and all(f.strip().lower() in names for f, names in zip(fields, HEADER_NAMES))


def _decoded_lines(path: Path) -> Iterable[tuple[int, str]]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ValidationError(f"{path}: cannot read the relevance file: {exc}") from None
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    for line_no, raw in enumerate(data.splitlines(), start=1):
        try:
            yield line_no, raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValidationError(f"{path}: line {line_no}: not UTF-8 text ({exc.reason} at byte {exc.start}); "
                                  "save the relevance file as UTF-8") from None


def read_qrels(path: str | Path) -> Qrels:
    """The records of the qrels file ``path`` (see the module docstring); ValidationError naming file and line."""
    path = Path(path)
    records: list[tuple[str, str, float]] = []
    lines: list[int] = []
    seen: dict[tuple[str, str], int] = {}
    header = False
    first = True
    for line_no, text in _decoded_lines(path):
        if not text.strip() or text.startswith("#"):
            continue
        fields = text.rstrip("\r\n").split("\t")
        if first and _is_header(fields):
            header, first = True, False
            continue
        first = False
        if len(fields) not in (2, 3):
            raise ValidationError(f"{path}: line {line_no}: expected 'query_id<TAB>gallery_id[<TAB>grade]', got "
                                  f"{fields[:6]!r}")
        query, gallery = fields[0], fields[1]
        for value, side in ((query, "query"), (gallery, "gallery")):
            if not value or value != value.strip():
                raise ValidationError(f"{path}: line {line_no}: {side} id {value!r} is empty or has surrounding spaces")
        grade = parse_grade(fields[2].strip(), path, line_no) if len(fields) == 3 else 1.0
        if grade < 0:
            raise ValidationError(f"{path}: line {line_no}: grade {fields[2]!r} is negative; grades must be >= 0")
        if (query, gallery) in seen:
            raise ValidationError(f"{path}: lines {seen[(query, gallery)]} and {line_no} both grade the pair "
                                  f"(query {query!r}, gallery {gallery!r})")
        seen[(query, gallery)] = line_no
        records.append((query, gallery, grade))
        lines.append(line_no)
    return Qrels(path, tuple(records), tuple(lines), header)


def check_qrels_ids(qrels: Qrels, known: Any, *, side: str, where: str,
                    records: Sequence[tuple[Any, Any, float]] | None = None) -> None:
    """Refuse records whose ``side`` id (``"query"`` or ``"gallery"``) is not in ``known`` (a set or mapping),
    saying how many and showing some (id and line); ``where`` names what holds the known ids (a file).
    ``records``: the records with typed ids (``typed_qrels``), by default the file's own."""
    column = 0 if side == "query" else 1
    records = qrels.records if records is None else records
    missing = [(record[column], line) for record, line in zip(records, qrels.lines) if record[column] not in known]
    if not missing:
        return
    ids = sorted({rid for rid, _ in missing})
    shown = ", ".join(f"{rid!r} (line {line})" for rid, line in missing[:_SHOWN])
    more = f", ... ({len(missing) - _SHOWN} more)" if len(missing) > _SHOWN else ""
    raise ValidationError(f"{qrels.path}: {len(missing)} record(s) name {len(ids)} {side} id(s) absent from {where}: "
                          f"{shown}{more}")


def typed_qrels(qrels: Qrels, query_ids: Sequence[Any], gallery_ids: Sequence[Any]) -> list[tuple[Any, Any, float]]:
    """The records with ids typed like the dataset's: a qrels file holds text, so where a side's ids are all
    integers (an ``.npz`` of integer ids) each record's id of that side is read as an integer; a record id that is
    not one is refused naming its line. Other sides keep their text ids."""
    def integer_side(ids: Sequence[Any]) -> bool:
        return len(ids) > 0 and all(isinstance(v, int) and not isinstance(v, bool) for v in ids)

    as_int = (integer_side(query_ids), integer_side(gallery_ids))
    out = []
    for (query, gallery, grade), line in zip(qrels.records, qrels.lines):
        pair = []
        for value, convert, side in ((query, as_int[0], "query"), (gallery, as_int[1], "gallery")):
            if convert:
                if re.fullmatch(r"[+-]?[0-9]+", value) is None:
                    raise ValidationError(f"{qrels.path}: line {line}: {side} id {value!r} is not an integer, but the "
                                          f"dataset's {side} ids are integers")
                value = int(value)
            pair.append(value)
        out.append((pair[0], pair[1], grade))
    return out


__all__ = ["HEADER_NAMES", "Qrels", "check_qrels_ids", "parse_grade", "read_qrels", "typed_qrels"]
