"""One page per benchmark (``results/reports/<name>/report.html``) and the results index (``results/index.html``).

A benchmark's page is cut from its ``report.md`` (so it says exactly what the Markdown says, every text escaped as
in ``reports.html_items``), in the order a reader needs it:

- links: the results index, the leaderboard, report.md and report.json;
- the title and introduction; the ranking with at most :data:`MAX_COLUMNS` columns (rank, candidate, primary metric
  and score first), the other columns in a "More ranking columns" table below it, and the ranking's notes;
- the figures inline (ranking, comparison, detail: the PNGs beside the page, each with its alt text), a line naming
  any figure that is missing;
- the paired comparison ("Is the leader really ahead?") and "Quality vs cost" (``reports.cost_report``);
- the warnings; then every detail section (per-class scores, diagnostics, metrics ...).

The index lists every benchmark page under ``results/reports/`` (whichever config wrote it), with its protocol, its
leader and the primary metric from its report.json, and links the leaderboard (``vertebrae leaderboard``). Given the
report.json files to list (``--reports``: the workflow's job, whose plan lists them with :func:`report_folders`), it
reads exactly those and the pages beside them, nothing else of the folder.
Both pages are static HTML with an inline style sheet: no script, nothing fetched but the figures.
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from vertebrae.core.artifacts import atomic_write
from vertebrae.core.errors import ArtifactError
from vertebrae.reports.comparison import TITLE as COMPARISON_TITLE
from vertebrae.reports.cost_report import FIGURES_TITLE
from vertebrae.reports.cost_report import TITLE as COST_TITLE
from vertebrae.reports.html_items import STYLE, _blocks, _cells, _inline, _sections, _split_warnings, _table
from vertebrae.reports.summary import PROTOCOLS, _primary_metric

MAX_COLUMNS = 8
FIGURES = (("ranking", "Ranking: every candidate's primary score with its interval"),
           ("comparison", "Comparison: every pair's difference and verdict"),
           ("detail", "Detail: per class, per label or per query diagnostics"))
PAGE_STYLE = STYLE + """
nav.links { margin: 0 0 1em; font-size: .95em; } nav.links a { margin-right: 1em; }
figure { margin: .5em 0 1.2em; } figure img { max-width: 100%; height: auto; border: 1px solid #d9e2ec; }
figcaption { color: #52606d; font-size: .92em; }
details { margin: .4em 0 1em; } summary { cursor: pointer; color: #334e68; }
p.missing { color: #9b2c2c; }
"""


def _split_table(lines: list[str], limit: int = MAX_COLUMNS) -> tuple[list[str], list[str]]:
    """A Markdown pipe table cut in two: its first ``limit`` columns, and the candidate column (the second) with the
    rest (empty when there is no rest)."""
    rows = [_cells(line) for line in lines]
    if not rows or len(rows[0]) <= limit:
        return lines, []

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    key = 1 if len(rows[0]) > 1 else 0
    first = [line(r[:limit]) if i != 1 else "|" + "---|" * limit for i, r in enumerate(rows)]
    rest_width = len(rows[0]) - limit + 1
    rest = [line([r[key], *r[limit:]]) if i != 1 else "|" + "---|" * rest_width for i, r in enumerate(rows)]
    return first, rest


def _ranking(lines: list[str]) -> str:
    """The ranking section: its table at most MAX_COLUMNS wide, the other columns in a second table."""
    start = next((i for i, line in enumerate(lines) if line.startswith("|")), None)
    if start is None:
        return f"<h2>Ranking</h2>{_blocks(lines)}"
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    first, rest = _split_table(lines[start:end])
    out = [f"<h2>Ranking</h2>{_blocks(lines[:start])}", f'<div id="ranking">{_table(first)}</div>']
    if rest:
        out.append(f"<h3>More ranking columns</h3>{_table(rest)}")
    out.append(_blocks(lines[end:]))
    return "\n".join(out)


def _figures(folder: Path | None) -> str:
    out, missing = ["<h2>Figures</h2>"], []
    for name, caption in FIGURES:
        if folder is not None and not (folder / f"{name}.png").is_file():
            missing.append(f"{name}.png")
            continue
        out.append(f'<figure><img src="{name}.png" alt="{html.escape(caption)}" loading="eager">'
                   f"<figcaption>{html.escape(caption)}</figcaption></figure>")
    if missing:
        out.append(f'<p class="missing">Not drawn yet: {html.escape(", ".join(missing))} (the workflow\'s figures '
                   "job, or <code>vertebrae figures</code>, draws them).</p>")
    return "\n".join(out)


def _links(pairs: Sequence[tuple[str, str]]) -> str:
    return '<nav class="links">' + "".join(f'<a href="{html.escape(href)}">{html.escape(label)}</a>'
                                           for label, href in pairs) + "</nav>"


def report_page(markdown: str, *, benchmark: str, folder: str | Path | None = None) -> str:
    """The HTML page of one benchmark from its report.md text; ``folder`` (where the page and its figures lie)
    names the figures not drawn yet."""
    title, intro, sections = _sections(markdown)
    if not any(heading == "Ranking" for heading, _ in sections):
        raise ArtifactError(f"report of benchmark {benchmark!r}: its Markdown has no '## Ranking' section")
    by = {"ranking": [], "comparison": [], "warnings": [], "detail": []}
    notes: list[str] = []
    for heading, lines in sections:
        if heading == "Ranking":
            by["ranking"].append(_ranking(lines))
        elif heading in (COMPARISON_TITLE, COST_TITLE):
            by["comparison"].append(f"<h2>{_inline(heading)}</h2>{_blocks(lines)}")
        elif heading == "Warnings":
            warned, notes = _split_warnings(lines)
            by["warnings"].append(f"<h2>Warnings</h2>{_blocks(warned, list_class='warnings')}")
        elif heading != FIGURES_TITLE:
            by["detail"].append(f"<h2>{_inline(heading)}</h2>{_blocks(lines)}")
    if not any(COMPARISON_TITLE in chunk for chunk in by["comparison"]):
        by["comparison"].insert(0, f"<h2>{html.escape(COMPARISON_TITLE)}</h2>"
                                   "<p>This report was written without a paired comparison.</p>")
    if not by["warnings"]:
        by["warnings"].append("<h2>Warnings</h2><p>None.</p>")
    links = _links([("All results", "../../index.html"), ("Leaderboard", "../../leaderboard.html"),
                    ("report.md", "report.md"), ("report.json", "report.json")])
    body = [links, f"<h1>{_inline(title or benchmark)}</h1>", _blocks(intro), *by["ranking"], _blocks(notes),
            _figures(None if folder is None else Path(folder)), *by["comparison"], *by["warnings"], *by["detail"]]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(benchmark)}: vertebrae report</title><style>{PAGE_STYLE}</style></head>\n"
            "<body>\n" + "\n".join(b for b in body if b) + "\n</body></html>\n")


def write_report_page(markdown_path: str | Path, output: str | Path) -> None:
    """``vertebrae report-page``: the page of the report.md at ``markdown_path``, written atomically to ``output``
    (the figures are looked for beside it)."""
    try:
        markdown = Path(markdown_path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ArtifactError(f"report {markdown_path}: cannot be read: {exc}") from None
    page = report_page(markdown, benchmark=Path(markdown_path).parent.name, folder=Path(output).parent)
    with atomic_write(output) as tmp:
        Path(tmp).write_text(page, encoding="utf-8")


def _summary(report_json: Path) -> tuple[str, str, str]:
    """(protocol, primary metric, leader) of a report.json, read leniently (the index links, it does not verify)."""
    try:
        document = json.loads(report_json.read_text(encoding="utf-8"))
        protocol = PROTOCOLS[document["schema"]]
        ranking = document.get("ranking") or []
        candidates = document["extractor_results" if protocol == "labelled" else "candidate_results"]
        return protocol, _primary_metric(document, candidates, protocol), str(ranking[0]) if ranking else "–"
    except (OSError, ValueError, AttributeError, TypeError, KeyError):
        return "unreadable report.json", "–", "–"


#: the files of a report folder that the pages over the out folder read or link (the leaderboard links them all, the
#: index lists report.html with what report.json says): the declared inputs of their workflow jobs
REPORT_FOLDER_FILES = ("report.json", "report.md", "report.html", "ranking.html", "detail.html", "comparison.html",
                       "warnings.html")


def report_folders(results_dir: str | Path) -> dict[str, list[str]]:
    """Per report folder ``results_dir/reports/<name>/`` that holds a report.json (by name), its files among
    :data:`REPORT_FOLDER_FILES`: the reports the pages over the out folder are made from, whichever config wrote them.
    One listing of ``reports/`` and one of each folder in it, never a walk of the whole out folder (it can hold
    10,000s of files): the workflow's plan calls it at every parse, ``vertebrae verify`` re-derives the pages from it."""
    try:
        folders = sorted((e.name, e.path) for e in os.scandir(Path(results_dir) / "reports") if e.is_dir())
    except OSError:
        return {}
    listed = []
    for name, path in folders:
        try:
            listed.extend(f"{name}/{e.name}" for e in os.scandir(path) if e.is_file())
        except OSError:
            continue
    return report_folders_listed(listed)


def report_folders_listed(names: Iterable[str]) -> dict[str, list[str]]:
    """:func:`report_folders` from a listing of the files under ``reports/`` (``<name>/<file>``, as relative object
    names: a run on object storage lists the bucket's): the same folders (not hidden, holding a report.json) with the
    same files; a name deeper than ``<name>/<file>`` is no file of a report folder."""
    by: dict[str, set[str]] = {}
    for listed in names:
        folder, _, file = listed.partition("/")
        if folder and file and "/" not in file and not folder.startswith("."):
            by.setdefault(folder, set()).add(file)
    return {name: [file for file in REPORT_FOLDER_FILES if file in files]
            for name, files in sorted(by.items()) if "report.json" in files}


def index_page(results_dir: str | Path, output: str | Path | None = None,
               reports: Sequence[str | Path] | None = None) -> str:
    """The results index: every ``reports/<name>/report.html`` under ``results_dir`` and the leaderboard; with
    ``reports`` (report.json paths), the page beside each of them instead (where there is one)."""
    results = Path(results_dir)
    base = Path(output).resolve().parent if output is not None else results.resolve()
    rows = []
    pages = (sorted((results / "reports").glob("*/report.html")) if reports is None
             else [p for p in (path.parent / "report.html" for path in sorted(map(Path, reports))) if p.is_file()])
    for page in pages:
        protocol, metric, leader = _summary(page.parent / "report.json")
        href = Path(os.path.relpath(page.resolve(), base)).as_posix()
        rows.append(f'<tr><td><a href="{html.escape(href)}">{html.escape(page.parent.name)}</a></td>'
                    f"<td>{html.escape(protocol)}</td><td>{html.escape(metric)}</td><td>{html.escape(leader)}</td></tr>")
    table = ("<div class=\"table\"><table><thead><tr><th>benchmark</th><th>protocol</th><th>primary metric</th>"
             f"<th>leader</th></tr></thead><tbody>{''.join(rows)}</tbody></table></div>" if rows
             else "<p>No benchmark report yet: run the workflow.</p>")
    leaderboard = Path(os.path.relpath((results / "leaderboard.html").resolve(), base)).as_posix()
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>vertebrae results</title>"
            f"<style>{PAGE_STYLE}</style></head>\n<body>\n<h1>vertebrae results</h1>\n"
            f"<p>{len(rows)} benchmark(s). Every candidate across them, with mean ranks and costs: "
            f'<a href="{html.escape(leaderboard)}">the leaderboard</a>.</p>\n<h2>Benchmarks</h2>\n{table}\n'
            "</body></html>\n")


def write_index(results_dir: str | Path, output: str | Path, reports: Sequence[str | Path] | None = None) -> None:
    """``vertebrae results-index``: :func:`index_page` written atomically to ``output``; a results folder that
    does not exist is refused, naming it."""
    if not Path(results_dir).is_dir():
        raise ArtifactError(f"results folder {results_dir}: not a folder (missing input)")
    with atomic_write(output) as tmp:
        Path(tmp).write_text(index_page(results_dir, output, reports), encoding="utf-8")


__all__ = ["MAX_COLUMNS", "REPORT_FOLDER_FILES", "index_page", "report_folders", "report_folders_listed", "report_page",
           "write_index", "write_report_page"]
