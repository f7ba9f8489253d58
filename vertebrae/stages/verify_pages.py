"""The pages and tables of a results tree, for ``vertebrae verify``: each must equal what its verified sources give
now, rendered again in memory by the same code the workflow's jobs write it with.

Every text file the workflow writes from the reports, by where it lies (``results/`` is the workflow's out folder,
``vertebrae.core.out_folder``, whatever its name):

- ``results/reports/<name>/report.md``: the Markdown of the verified report.json beside it (its result class's
  ``markdown()``);
- ``results/reports/<name>/{ranking,detail,comparison,warnings}.html``: that Markdown's items
  (``reports.html_items``);
- ``results/reports/<name>/report.html``: that Markdown's page (``reports.report_page.report_page``), with the
  figures beside it as they are now;
- ``results/summary/summary.{csv,md}``: the rendering of the verified summary.json, itself the summary of the
  reports it names (:func:`check_summary_json`);
- ``results/leaderboard.html``: the leaderboard page of the verified report.json files of ``results/reports/*/``
  (listed as the workflow's plan lists them, ``reports.report_page.report_folders``), as the workflow's
  ``vertebrae leaderboard results --format html --reports ...`` job writes it (the costs the reports carry; no
  Snakemake record is read, as the job reads none), under the page's own "Written by" stamp (which vertebrae wrote it
  is a record, not something the reports give);
- ``results/index.html``: the results index of those reports as they are now (``reports.report_page.index_page``).

The jobs that write the report's HTML pages (``vertebrae report-page``, ``report-tables``) run here: they check
report.md against its report.json first (:func:`check_markdown`), so a hand-edited report.md, newer than the pages
and so rendered again by the next run, is refused (and moved aside for that run to write again) instead of being
copied into them.

A page whose source is missing or does not verify is not compared: the source is reported itself, and moving it
aside moves the pages built from it (:func:`page_consumers`) with it. A leaderboard or a results index whose reports
changed since it was written (a report deleted, added or rebuilt without it) differs too: it is stale, and moved
aside like an edited one, the next run writes it again.
"""

from __future__ import annotations

import html
import os
import re
from pathlib import Path

from vertebrae.core.errors import ArtifactError, CorruptArtifactError, VertebraeError
from vertebrae.core.out_folder import is_out_folder, spelled_out, working_folder
from vertebrae.reports.summary import check_summary
from vertebrae.stages.report_check import check_report, report_classes

ITEMS = ("ranking", "detail", "comparison", "warnings")  # reports.html_items.ITEMS
FIGURES = tuple(f"{figure}.png" for figure in ("ranking", "detail", "comparison"))  # reports.figures.FIGURES
REPORT_TEXTS = ("report.md", *(f"{item}.html" for item in ITEMS), "report.html")  # a report folder's text files
RESULTS_PAGES = ("leaderboard.html", "index.html")  # in results/ itself
TEXTS = frozenset({*REPORT_TEXTS, *RESULTS_PAGES, "summary.csv", "summary.md"})
# the last paragraph of the leaderboard page (vertebrae.core.provenance.software_line, HTML-escaped)
_STAMP = re.compile(r"<p>(Written by vertebrae [\w.+!-]+(?: \(git [0-9a-f]+(?:, uncommitted changes)?\))?\.)</p>\n"
                    r"</body></html>\n\Z")


def _in_report_folder(path: Path) -> bool:
    return path.parent.parent.name == "reports"


def _in_results(path: Path) -> bool:
    return is_out_folder(path.parent)


def report_markdown(folder: Path) -> str:
    """The report.md of the report folder ``folder``: the Markdown of its verified report.json."""
    document = check_report(folder / "report.json")
    return report_classes()[document["schema"]].from_dict(document).markdown()


def _leaderboard(page: Path) -> str | None:
    """``results/leaderboard.html`` as the workflow's job writes it from the reports of ``results/reports/*/`` now;
    None where one of them does not verify (the job skipped it, and it is reported itself)."""
    from vertebrae.reports.across import across
    from vertebrae.reports.leaderboard import leaderboard_rows, paired_verdicts
    from vertebrae.reports.leaderboard_render import leaderboard_html
    from vertebrae.reports.report_page import report_folders
    from vertebrae.stages.leaderboard_job import report_costs, report_links, verified_reports

    results = page.parent
    found, skipped = verified_reports(results, [results / "reports" / name / "report.json"
                                                for name in report_folders(results)])
    if skipped:
        return None
    # the job runs `vertebrae leaderboard OUT` in the working folder: a report's path (which names a benchmark two
    # reports share) is spelled from there (as the run spelled OUT), wherever verify was pointed
    reports = [(os.path.join(spelled_out(results), os.path.relpath(path, results)), document)
               for path, document in found]
    rows = leaderboard_rows(reports, costs=report_costs(reports, None))
    links = report_links(rows, page, working_dir=working_folder(results))
    stamp = _STAMP.search(page.read_text(encoding="utf-8"))
    return leaderboard_html(rows, across(rows, paired_verdicts(reports)), links=links,
                            written_by=None if stamp is None else html.unescape(stamp.group(1)))


def _index(page: Path) -> str | None:
    """``results/index.html`` as the workflow's job writes it from the reports of ``results/reports/*/`` now (listed
    as the plan lists them); None where a report it lists does not verify (the index reads them leniently; the bad one
    is reported itself)."""
    from vertebrae.reports.report_page import index_page, report_folders

    reports = [page.parent / "reports" / name / "report.json" for name in report_folders(page.parent)]
    for report in reports:
        if (report.parent / "report.html").is_file():
            check_report(report)
    return index_page(page.parent, page, reports)


def expected_text(path: Path) -> str | None:
    """What a text file of a results tree must hold (see the module's docstring); None for another file. Raises
    ArtifactError (or another VertebraeError) where its source is missing or bad."""
    folder = path.parent
    if _in_report_folder(path) and path.name in REPORT_TEXTS:
        markdown = report_markdown(folder)
        if path.name == "report.md":
            return markdown
        if path.name == "report.html":
            from vertebrae.reports.report_page import report_page

            return report_page(markdown, benchmark=folder.name, folder=folder)
        from vertebrae.reports.html_items import page, report_items

        return page(report_items(markdown, benchmark=folder.name)[path.stem], benchmark=folder.name, item=path.stem)
    if path.name in ("summary.csv", "summary.md") and folder.name == "summary":
        from vertebrae.reports.summary import summary_csv, summary_markdown

        check_summary_json(folder / "summary.json")
        summary = check_summary(folder / "summary.json")
        return (summary_csv if path.suffix == ".csv" else summary_markdown)(summary)
    if path.name == "leaderboard.html" and _in_results(path):
        return _leaderboard(path)
    if path.name == "index.html" and _in_results(path):
        return _index(path)
    return None


def check_summary_json(path: Path) -> None:
    """summary.json reads back (``check_summary``) and is the summary of the reports it names, where those verify
    (a bad report is reported itself), with its own ``software`` stamp (a record of the writer, not derived from
    the reports); CorruptArtifactError if it is not."""
    from vertebrae.reports.summary import build_summary

    summary = check_summary(path)
    root = path.parent.parent  # <out>/summary/summary.json; the reports it names: <out>/reports/<name>/report.json
    try:
        rebuilt = build_summary([(c.report, check_report(root / "reports" / Path(c.report).parent.name / "report.json"))
                                 for c in summary.benchmarks])
        if summary.software is not None:
            rebuilt = rebuilt.with_software(summary.software)
    except (OSError, ArtifactError, VertebraeError):
        return
    if rebuilt.to_dict() != summary.to_dict():
        raise CorruptArtifactError(f"summary {path}: edited: it is not the summary of the reports it names", str(path))


def check_text(path: Path) -> None:
    """A text file equals what its verified sources give (:func:`expected_text`); CorruptArtifactError if not (or if
    it is not UTF-8 text)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CorruptArtifactError(f"{path}: unreadable ({exc})", str(path)) from None
    try:
        expected = expected_text(path)
    except (OSError, ArtifactError, VertebraeError):
        expected = None  # its source is missing or bad, and reported itself: rebuilding the source rewrites this
    if expected is not None and text != expected:
        raise CorruptArtifactError(f"{path}: edited or stale: it differs from what its verified sources give now",
                                   str(path))


def check_markdown(markdown_path: str | Path) -> None:
    """The page jobs' check of their input: a report's report.md must be the Markdown of the verified report.json
    beside it. CorruptArtifactError naming report.md if it is not (the CLI then moves it aside with the pages built
    from it, and the next run writes it again); the report.json's own error if that does not verify."""
    path = Path(markdown_path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ArtifactError(f"report {path}: file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CorruptArtifactError(f"report {path}: unreadable ({exc})", str(path)) from None
    if text != report_markdown(path.parent):
        raise CorruptArtifactError(f"report {path}: edited: it is not the Markdown of {path.parent / 'report.json'}",
                                   str(path))


def write_report_page(markdown_path: str | Path, output: str | Path) -> None:
    """``vertebrae report-page``: :func:`check_markdown`, then the page (``reports.report_page.write_report_page``)."""
    from vertebrae.reports.report_page import write_report_page as write

    check_markdown(markdown_path)
    write(markdown_path, output)


def run_report_tables(markdown_path: str | Path, ranking_path: str | Path, detail_path: str | Path,
                      comparison_path: str | Path, warnings_path: str | Path) -> None:
    """``vertebrae report-tables``: :func:`check_markdown`, then the four HTML tables
    (``reports.html_items.run_report_tables``)."""
    from vertebrae.reports.html_items import run_report_tables as run

    check_markdown(markdown_path)
    run(markdown_path, ranking_path, detail_path, comparison_path, warnings_path)


def page_consumers(path: Path) -> list[Path]:
    """The pages the workflow builds from ``path`` (directly; missing ones too): a report's Markdown, items, figures
    and page from its report.json, the items and the page from report.md, the page from a figure, and the leaderboard
    (which links a report's files) and the results index (which links the pages and the leaderboard) from all of
    them."""
    folder = path.parent
    if _in_results(path) and path.name == "leaderboard.html":
        return [folder / "index.html"]
    if not _in_report_folder(path):
        return []
    results = folder.parent.parent
    tail = [results / "leaderboard.html", results / "index.html"]
    if path.name == "report.json":
        return [folder / name for name in ("report.md", *FIGURES, *REPORT_TEXTS[1:])] + tail
    if path.name == "report.md":
        return [folder / name for name in REPORT_TEXTS[1:]] + tail
    if path.name in FIGURES:
        return [folder / "report.html", *tail]
    if path.name in REPORT_TEXTS:
        return tail
    return []


__all__ = ["FIGURES", "ITEMS", "REPORT_TEXTS", "RESULTS_PAGES", "TEXTS", "check_markdown", "check_summary_json",
           "check_text", "expected_text", "page_consumers", "report_markdown", "run_report_tables",
           "write_report_page"]
