"""``vertebrae leaderboard [RESULTS_DIR]``: every verified report.json under RESULTS_DIR (whichever config wrote it)
as one leaderboard (``vertebrae.reports.leaderboard``), with costs from the Snakemake benchmark records in it
(``RESULTS_DIR/benchmarks``; a folder of the old layout: ``benchmarks/`` beside it, ``core.out_folder.records_of``).

Each report.json found (recursively, sorted by path) is verified (``vertebrae.stages.report_check.check_report``);
one that is corrupt, edited or unreadable is skipped with a line on stderr naming it and why (never half-read, and
never moved: ``vertebrae verify --repair`` does that). Given ``--reports`` (report.json paths: the workflow's job, whose
plan lists the out folder's report folders, ``vertebrae.reports.report_page.report_folders``), it reads exactly those
and the files its page links beside them, nothing else under RESULTS_DIR, and no benchmark record: an old report.json
that carries no cost shows its costs as unknown there. ``--format csv`` and ``parquet`` give the long tidy table,
``md`` and ``html`` the page, ``json`` both the table and the standings; ``--output`` writes a file (required for Parquet), else the text goes to stdout.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from vertebrae.core.artifacts import atomic_write
from vertebrae.core.provenance import software, software_line
from vertebrae.core.errors import ConfigError, VertebraeError
from vertebrae.core.out_folder import records_of
from vertebrae.reports.across import across
from vertebrae.reports.costs import candidate_cost, stored_cost
from vertebrae.reports.leaderboard import COST_KINDS, DEFAULT_COST, leaderboard_rows, metric_names, paired_verdicts
from vertebrae.reports.leaderboard_render import (
    leaderboard_csv,
    leaderboard_frame,
    leaderboard_html,
    leaderboard_json,
    leaderboard_markdown,
)
from vertebrae.reports.summary import PROTOCOLS
from vertebrae.reports.text import terminal_text
from vertebrae.stages.report_check import check_report

FORMATS = ("md", "csv", "html", "json", "parquet")


def verified_reports(results_dir: str | Path, paths: Sequence[str | Path] | None = None
                     ) -> tuple[list[tuple[str, dict]], list[str]]:
    """``(path, document)`` of every verified report.json under ``results_dir`` (of ``paths`` where given: exactly
    those), and one line per skipped file."""
    reports, skipped = [], []
    found = Path(results_dir).rglob("report.json") if paths is None else map(Path, paths)
    for path in sorted(set(found)):
        try:
            reports.append((str(path), check_report(path)))
        except (VertebraeError, OSError) as exc:
            skipped.append(f"skipped {path}: {exc}")
    return reports, skipped


def build(results_dir: str | Path = "results", *, metric: str | None = None, records_dir: str | Path | None = None,
          reports: Sequence[str | Path] | None = None):
    """The long table's rows, the standings across benchmarks and the skip lines of ``results_dir`` (of the report.json
    files ``reports`` where given: then no benchmark record is read unless ``records_dir`` names a folder)."""
    if not Path(results_dir).is_dir():
        raise ConfigError(f"results folder {results_dir} not found")
    given = reports
    reports, skipped = verified_reports(results_dir, given)
    records = Path(records_dir) if records_dir is not None else None if given is not None else records_of(results_dir)
    written = {path: datetime.fromtimestamp(Path(path).stat().st_mtime, timezone.utc).isoformat(timespec="seconds")
               for path, _ in reports}
    rows = leaderboard_rows(reports, metric=metric, costs=report_costs(reports, records), written=written)
    if metric is not None and rows and all(row.value is None for row in rows):
        names = metric_names(reports)
        if metric not in names:  # a typo would leave every candidate unranked
            raise ConfigError(f"--metric {metric!r}: no report under {results_dir} holds that metric; the metrics "
                              f"present: {', '.join(names) or 'none'}")
    return rows, across(rows, paired_verdicts(reports)), skipped


def report_costs(reports: list[tuple[str, dict]], records: Path | None) -> dict[tuple[str, str], object]:
    """Per (report path, candidate name): the cost the report carries (report.json since issue 30), else the one
    the Snakemake benchmark records in ``records`` give (None: none read, that cost is unknown)."""
    costs = {}
    for path, document in reports:
        key = "extractor_results" if PROTOCOLS[document["schema"]] == "labelled" else "candidate_results"
        for candidate in document[key]:
            costs[(path, str(candidate["name"]))] = stored_cost(candidate) or candidate_cost(candidate, records)
    return costs


# every file named here is in REPORT_FOLDER_FILES (vertebrae.reports.report_page): the workflow declares those
REPORT_FILES = (("page", "report.html"), ("ranking", "ranking.html"), ("details", "detail.html"), ("comparison", "comparison.html"),
                ("warnings", "warnings.html"), ("report.md", "report.md"), ("report.json", "report.json"))


def report_links(rows, output: str | Path | None, *, working_dir: str | Path = ".") -> dict[str, list[tuple[str, str]]]:
    """Per benchmark, ``(label, href)`` of the report files beside its report.json, relative to the page's folder
    (``output``'s, else the current directory); ``working_dir``: the folder the rows' report paths are spelled
    from."""
    base = Path(output).resolve().parent if output is not None else Path.cwd()
    links: dict[str, list[tuple[str, str]]] = {}
    for row in rows:
        if row.benchmark in links:
            continue
        folder = (Path(working_dir) / row.report).resolve().parent
        links[row.benchmark] = [(label, Path(os.path.relpath(folder / name, base)).as_posix())
                                for label, name in REPORT_FILES if (folder / name).is_file()]
    return links


def run_leaderboard(results_dir: str | Path = "results", metric: str | None = None, format: str = "md",
                    output: str | Path | None = None, cost: str = DEFAULT_COST,
                    records_dir: str | Path | None = None, reports: Sequence[str | Path] | None = None) -> int:
    if format not in FORMATS:
        raise ConfigError(f"--format {format!r}: expected one of {FORMATS}")
    if cost not in COST_KINDS:
        raise ConfigError(f"--cost {cost!r}: expected one of {COST_KINDS}")
    if format == "parquet" and output is None:
        raise ConfigError("--format parquet needs --output FILE")
    if output is not None and Path(output).is_dir():
        raise ConfigError(f"--output {output}: is a folder; name the file to write (e.g. {Path(output) / 'leaderboard'}"
                          f".{format})")
    rows, standings, skipped = build(results_dir, metric=metric, records_dir=records_dir, reports=reports)
    for line in skipped:
        print(f"vertebrae leaderboard: {terminal_text(line)}", file=sys.stderr)
    if format == "parquet":
        with _writing(output) as tmp:
            leaderboard_frame(rows).to_parquet(tmp, index=False)
        return 0
    stamp = software_line(software())  # Markdown and HTML say which vertebrae wrote them, as reports do
    text = {"md": lambda: leaderboard_markdown(rows, standings, cost=cost, written_by=stamp),
            "csv": lambda: leaderboard_csv(rows),
            "json": lambda: leaderboard_json(rows, standings),
            "html": lambda: leaderboard_html(rows, standings, cost=cost, links=report_links(rows, output),
                                             written_by=stamp)}[format]()
    if output is None:  # a terminal gets no control character from data (a csv field is written as it was)
        sys.stdout.write(terminal_text(text, lines=True) if sys.stdout.isatty() else text)
    else:
        with _writing(output) as tmp:
            Path(tmp).write_text(text, encoding="utf-8")
    return 0


@contextmanager
def _writing(output: str | Path) -> Iterator[str]:
    """``atomic_write(output)``; a path that cannot be written (its folder a file, no permission, a read-only file
    system) is refused naming it."""
    try:
        with atomic_write(output) as tmp:
            yield tmp
    except OSError as exc:
        blocking = next((p for p in Path(output).absolute().parents if p.exists() and not p.is_dir()), None)
        why = f"{blocking} is a file, not a folder" if blocking is not None else exc.strerror or exc
        raise ConfigError(f"--output {output}: cannot write it: {why}") from None


__all__ = ["FORMATS", "build", "report_costs", "report_links", "run_leaderboard", "verified_reports"]
