"""The cross-benchmark summary: a candidates x benchmarks table of primary scores, as CSV, Markdown and JSON.

``build_summary`` takes ``(path, report document)`` pairs (labelled, retrieval or zero-shot report.json, already
verified by the caller: ``vertebrae.stages.summary_job``) and returns a ``Summary``: one column per benchmark in
the order given, named with its protocol and primary metric; one row per candidate name, in order of first
appearance (each benchmark's candidates in declaration order). A cell holds the candidate's primary score and its
rank in that benchmark, or rank None where the benchmark does not rank it (a collapsed or degenerate embedding, a
metric without a valid aggregate): *unranked*. A candidate absent from a benchmark has no cell (blank in CSV and
Markdown, null in JSON). Candidates are matched across benchmarks by name.

The JSON form is ``{"schema": SUMMARY_SCHEMA, "benchmarks": [{"name", "protocol", "primary_metric", "report",
"candidates", "ranked"}], "candidates": [{"name", "scores": {benchmark: {"score", "rank", "ranked"} | null}}]}``,
plus ``"software"`` (``vertebrae.core.provenance.software()``: the version that wrote it) where the summary job
stamped it (``with_software``; Markdown: a last "Written by" line). ``Summary.from_dict`` reads it back strictly
and ``check_summary`` verifies a written summary.json (it must serialise back to itself).
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from vertebrae.core.errors import ArtifactError, CorruptArtifactError, ValidationError
from vertebrae.core.out_folder import RESULTS, normal_out
from vertebrae.core.provenance import software_line
from vertebrae.reports.schemas import LABELLED_SCHEMA, RETRIEVAL_SCHEMA, ZERO_SHOT_SCHEMA
from vertebrae.reports.text import markdown_text

SUMMARY_SCHEMA = "vertebrae.summary/v1"
PROTOCOLS = {LABELLED_SCHEMA: "labelled", RETRIEVAL_SCHEMA: "retrieval", ZERO_SHOT_SCHEMA: "zero-shot"}


def summary_paths(out: str = RESULTS) -> dict[str, str]:
    """The workflow's summary files under its out folder ``out`` (relative to its working directory)."""
    return {key: f"{normal_out(out)}/summary/summary.{suffix}" for key, suffix in (("csv", "csv"), ("markdown", "md"),
                                                                                   ("json", "json"))}


SUMMARY_PATHS = summary_paths()  # under the default out folder, results/


def summary_inputs(final_outputs: Sequence[str]) -> list[str]:
    """The ``report.json`` targets among the workflow's final outputs: the summary job's inputs."""
    return [p for p in final_outputs if Path(p).name == "report.json" and Path(p).parent.parent.name == "reports"]


def report_markdowns(final_outputs: Sequence[str]) -> list[str]:
    """The ``report.md`` targets among the workflow's final outputs (the leaderboard page links them: declared, so
    that a job without the working folder, on object storage, receives them)."""
    return [p for p in final_outputs if Path(p).name == "report.md" and Path(p).parent.parent.name == "reports"]


def summary_targets(final_outputs: Sequence[str], out: str = RESULTS) -> list[str]:
    """The summary files (under the out folder ``out``) when the workflow has any report, else none."""
    return list(summary_paths(out).values()) if summary_inputs(final_outputs) else []


@dataclass(frozen=True)
class Column:
    """One benchmark: its name, protocol, primary metric, report path and candidate counts."""

    name: str
    protocol: str
    primary_metric: str
    report: str
    candidates: int
    ranked: int

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "protocol": self.protocol, "primary_metric": self.primary_metric,
                "report": self.report, "candidates": self.candidates, "ranked": self.ranked}


@dataclass(frozen=True)
class Cell:
    """A candidate's primary score in one benchmark and its rank there (None: unranked)."""

    score: float | None
    rank: int | None

    def to_dict(self) -> dict[str, Any]:
        return {"score": self.score, "rank": self.rank, "ranked": self.rank is not None}


@dataclass(frozen=True)
class Summary:
    """Benchmarks (columns), candidate names (rows) and the cells by (candidate, benchmark)."""

    benchmarks: tuple[Column, ...]
    candidates: tuple[str, ...]
    cells: Mapping[tuple[str, str], Cell]
    software: Mapping[str, Any] | None = None  # which vertebrae wrote it (the summary job stamps it)

    def with_software(self, software: Mapping[str, Any]) -> Summary:
        """This summary stamped with ``software`` (``vertebrae.core.provenance.software()``)."""
        return replace(self, software=dict(software))

    def cell(self, candidate: str, benchmark: str) -> Cell | None:
        return self.cells.get((candidate, benchmark))

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SUMMARY_SCHEMA,
            "benchmarks": [column.to_dict() for column in self.benchmarks],
            "candidates": [{"name": name, "scores": {
                column.name: None if self.cell(name, column.name) is None else self.cell(name, column.name).to_dict()
                for column in self.benchmarks}} for name in self.candidates],
        } | ({} if self.software is None else {"software": dict(self.software)})

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Summary:
        """Read a summary document back; ValidationError names what is malformed."""
        if not isinstance(data, Mapping) or data.get("schema") != SUMMARY_SCHEMA:
            schema = data.get("schema") if isinstance(data, Mapping) else None
            raise ValidationError(f"unknown summary schema {schema!r}, expected {SUMMARY_SCHEMA!r}")
        try:
            columns = tuple(Column(**item) for item in data["benchmarks"])
            names = tuple(item["name"] for item in data["candidates"])
            cells = {(item["name"], bench): Cell(value["score"], value["rank"])
                     for item in data["candidates"] for bench, value in item["scores"].items() if value is not None}
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValidationError(f"malformed summary ({type(exc).__name__}: {exc})") from None
        software = data.get("software")
        if software is not None and not (isinstance(software, Mapping) and isinstance(software.get("vertebrae"), str)):
            raise ValidationError(f"malformed summary: 'software' must name the vertebrae version, got {software!r}")
        return cls(columns, names, cells, software=software)


def _number(value: Any, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValidationError(f"{what}: primary_score {value!r} is not a number")
    return float(value)


def _primary_metric(document: Mapping[str, Any], candidates: Sequence[Mapping[str, Any]], protocol: str) -> str:
    """The benchmark's primary metric: the report's (retrieval) or its candidates' (labelled, zero-shot)."""
    key = {"labelled": "primary_metric_name", "zero-shot": "primary_metric"}.get(protocol)
    names = [] if key is None else list(dict.fromkeys(str(c[key]) for c in candidates if c.get(key)))
    if not names and document["metadata"].get("primary_metric"):
        names = [str(document["metadata"]["primary_metric"])]
    return "/".join(names) or "primary score"


def _column(path: str, document: Mapping[str, Any]) -> tuple[Column, dict[str, Cell]]:
    if not isinstance(document, Mapping) or document.get("schema") not in PROTOCOLS:
        schema = document.get("schema") if isinstance(document, Mapping) else None
        raise ValidationError(f"report {path}: unknown report schema {schema!r}; expected one of {sorted(PROTOCOLS)}")
    protocol = PROTOCOLS[document["schema"]]
    try:
        candidates = document["extractor_results" if protocol == "labelled" else "candidate_results"]
        name = document["metadata"].get("benchmark") or Path(path).parent.name
        names = [str(c["name"]) for c in candidates]
        ranking = [str(n) for n in document["ranking"]]
        metric = _primary_metric(document, candidates, protocol)
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValidationError(f"report {path}: malformed {protocol} report ({type(exc).__name__}: {exc})") from None
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValidationError(f"report {path}: candidate name(s) {twice} appear more than once")
    unknown = [n for n in ranking if n not in names]
    if unknown or len(set(ranking)) != len(ranking):
        raise ValidationError(f"report {path}: its ranking {ranking} names unknown or repeated candidates {unknown}")
    ranks = {n: i for i, n in enumerate(ranking, start=1)}
    cells = {str(c["name"]): Cell(_number(c.get("primary_score"), f"report {path}, candidate {c['name']!r}"),
                                  ranks.get(str(c["name"]))) for c in candidates}
    return Column(str(name), protocol, metric, str(path), len(names), len(ranking)), cells


def build_summary(reports: Sequence[tuple[str | Path, Mapping[str, Any]]]) -> Summary:
    """The summary of ``(path, report document)`` pairs, benchmarks in the order given; ValidationError when two
    reports are of one benchmark or a report is malformed (naming its path)."""
    columns: list[Column] = []
    cells: dict[tuple[str, str], Cell] = {}
    candidates: dict[str, None] = {}
    seen: dict[str, str] = {}
    for path, document in reports:
        column, by_name = _column(str(path), document)
        if column.name in seen:
            raise ValidationError(f"reports {seen[column.name]} and {path} are both of benchmark {column.name!r}")
        seen[column.name] = str(path)
        columns.append(column)
        for name, cell in by_name.items():
            candidates.setdefault(name, None)
            cells[(name, column.name)] = cell
    return Summary(tuple(columns), tuple(candidates), cells)


def _score_text(score: float | None) -> str:
    return "n/a" if score is None or not math.isfinite(score) else f"{score:.4f}"


def summary_csv(summary: Summary) -> str:
    """One row per candidate: per benchmark a score column ``<benchmark> (<metric>)`` (full precision) and a rank
    column ``<benchmark> rank`` (a number or ``unranked``); both empty where the candidate is not in it."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["candidate", *(h for c in summary.benchmarks for h in (f"{c.name} ({c.primary_metric})",
                                                                             f"{c.name} rank"))])
    for name in summary.candidates:
        row = [name]
        for column in summary.benchmarks:
            cell = summary.cell(name, column.name)
            if cell is None:
                row += ["", ""]
            else:
                row += ["" if cell.score is None else repr(cell.score), "unranked" if cell.rank is None else cell.rank]
        writer.writerow(row)
    return out.getvalue()


def _md(text: str) -> str:
    return markdown_text(text)


def summary_markdown(summary: Summary) -> str:
    """The benchmarks (protocol, primary metric, counts, leader, report) and the candidates x benchmarks table:
    ``score (#rank)``, ``score (unranked)``, or an empty cell."""
    lines = ["# vertebrae summary", "",
             f"{len(summary.candidates)} candidate(s) in {len(summary.benchmarks)} benchmark(s). Each cell is the "
             "candidate's primary score in that benchmark with its rank there (#1 is best); *unranked*: the "
             "benchmark does not rank it (a collapsed or degenerate embedding, or a primary metric without a valid "
             "aggregate; see its report); an empty cell: the candidate is not in that benchmark. Scores of different "
             "benchmarks are different metrics on different data: compare ranks across benchmarks, not scores.", "",
             "## Benchmarks", "",
             "| benchmark | protocol | primary metric | candidates | ranked | best | report |",
             "|---|---|---|---|---|---|---|"]
    for column in summary.benchmarks:
        best = [name for name in summary.candidates if (summary.cell(name, column.name) or Cell(None, None)).rank == 1]
        lines.append(f"| {_md(column.name)} | {column.protocol} | {_md(column.primary_metric)} | {column.candidates} | "
                     f"{column.ranked} | {_md(best[0]) if best else '–'} | {_md(column.report)} |")
    lines += ["", "## Primary scores", "",
              "| candidate | " + " | ".join(f"{_md(c.name)} ({_md(c.primary_metric)})" for c in summary.benchmarks) + " |",
              "|---|" + "---|" * len(summary.benchmarks)]
    for name in summary.candidates:
        texts = []
        for column in summary.benchmarks:
            cell = summary.cell(name, column.name)
            texts.append("" if cell is None else f"{_score_text(cell.score)} "
                         + ("(unranked)" if cell.rank is None else f"(#{cell.rank})"))
        lines.append(f"| {_md(name)} | " + " | ".join(texts) + " |")
    if summary.software is not None:
        lines += ["", _md(software_line(dict(summary.software)))]
    return "\n".join(lines) + "\n"


def check_summary(path: str | Path) -> Summary:
    """A written summary.json read back: valid JSON of the summary schema that serialises back to itself; raises
    CorruptArtifactError naming the path."""
    path = str(path)
    try:
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
        summary = Summary.from_dict(document)
    except FileNotFoundError:
        raise ArtifactError(f"summary {path}: file not found") from None
    except (OSError, ValueError) as exc:
        raise CorruptArtifactError(f"summary {path}: {exc}", path) from None
    if summary.to_dict() != document:
        raise CorruptArtifactError(f"summary {path}: edited or inconsistent (it does not serialise back to itself)",
                                   path)
    return summary


__all__ = ["Cell", "Column", "PROTOCOLS", "SUMMARY_PATHS", "SUMMARY_SCHEMA", "Summary", "build_summary", "report_markdowns",
           "check_summary", "summary_csv", "summary_inputs", "summary_markdown", "summary_paths", "summary_targets"]
