"""A benchmark's report as HTML pages for ``snakemake --report``: the ranking table, the detail tables, the paired
comparison and the warnings, each a page of its own next to the figures.

The pages are cut from the benchmark's ``report.md`` (``reports.markdown``), so they show exactly its tables and
text, for every protocol:

- **ranking** — the title, the introduction, the ``## Ranking`` table (with its ``Not ranked`` and quality-cohort
  lines) and the closing notes;
- **detail** — every other section before the comparison: per-class or per-label scores, regression diagnostics,
  custom metrics and Separatix (labelled), similarity diagnostics (retrieval), prompts per class and per-class
  recall (zero-shot);
- **comparison** — ``## Is the leader really ahead?`` (or a line saying the report has none) and ``## Quality vs
  cost`` (``reports.cost_report``);
- **warnings** — ``## Warnings``.

Only the Markdown the report renderers write is understood: ``#`` / ``##`` headings, paragraphs, pipe tables
(``\\|`` escapes a pipe in a cell), ``- `` lists, ``**bold**`` and ```code```. Every text is HTML-escaped, so a
candidate or class name is shown as written and nothing in it becomes markup or a link. Each page is a complete
HTML document with its own style sheet (the report shows it in a frame), written atomically.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from vertebrae.core.errors import ArtifactError, ValidationError
from vertebrae.reports.comparison import TITLE as COMPARISON_TITLE
from vertebrae.reports.cost_report import FIGURES_TITLE
from vertebrae.reports.cost_report import TITLE as COST_TITLE
from vertebrae.reports.text import IDENTITY_LINE, html_text, markdown_plain

ITEMS = ("ranking", "detail", "comparison", "warnings")
TITLES = {"ranking": "Ranking", "detail": "Detail", "comparison": COMPARISON_TITLE, "warnings": "Warnings"}

STYLE = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1f2933; background: #fff;
       margin: 1.2em 1.6em; }
h1 { font-size: 1.35em; margin: 0 0 .4em; } h2 { font-size: 1.12em; margin: 1.4em 0 .5em; }
p.benchmark { color: #52606d; margin: 0 0 1em; }
div.table { overflow-x: auto; margin: .5em 0 1em; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #d9e2ec; padding: .25em .6em; text-align: left; vertical-align: top; }
th { background: #f0f4f8; position: sticky; top: 0; }
tr:nth-child(even) td { background: #f8fafc; }
td.num { text-align: right; white-space: nowrap; }
code { background: #f0f4f8; padding: 0 .25em; border-radius: 3px; }
ul.warnings li { margin: .2em 0; }
"""

_NUMBER = re.compile(r"[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?|–|\[[-+0-9., ]+\]")


def item_targets(final_outputs: Sequence[str]) -> list[str]:
    """``results/reports/<name>/<item>.html`` for every report among ``final_outputs`` (the report_tables rule's
    outputs, for ``rule all``)."""
    return [str(Path(p).parent / f"{item}.html") for p in final_outputs if Path(p).name == "report.json"
            for item in ITEMS]


def report_options(item: str, form: str) -> dict[str, Any]:
    """The keywords of Snakemake's ``report()`` for one output of a benchmark (wildcard ``report_name``): its
    benchmark's category, labels (benchmark, item, form) and the caption of its kind
    (``workflow/report/<item>.rst`` for a figure, ``<item>_table.rst`` for a table page), relative to
    ``workflow/rules/``. Seven outputs per benchmark (three figures, four tables), so no label splits them in
    halves and the report shows every one in its list (no figure/table toggle)."""
    if item not in ITEMS or form not in ("figure", "table") or (item, form) == ("warnings", "figure"):
        raise ValidationError(f"no report output {item!r} as a {form!r}")
    caption = f"../report/{item}.rst" if form == "figure" else f"../report/{item}_table.rst"
    return {"caption": caption, "category": "{report_name}",
            "labels": {"benchmark": "{report_name}", "item": item, "form": form}}


_KEEP = 0xF0000  # text from data (``reports.text.markdown_text``) is held in private-use characters while parsing


def _inline(text: str) -> str:
    """Escaped HTML of one line of report Markdown: ``**bold**`` and ```code``` become tags, nothing else does; an
    escaped character or entity from data (``reports.text``) is shown as its character, never as markup."""
    held = re.sub(r"\\[!-/:-@\[-`{-~]|&(?:amp|lt|gt|#64);", lambda m: chr(_KEEP + ord(markdown_plain(m.group(0)))),
                  text)

    def shown(part: str) -> str:
        return "".join(chr(ord(c) - _KEEP) if _KEEP <= ord(c) < _KEEP + 128 else c for c in part)

    out = []
    for i, part in enumerate(re.split(r"`([^`]*)`", held)):
        if i % 2:
            out.append(f"<code>{html_text(shown(part))}</code>")
            continue
        for j, piece in enumerate(re.split(r"\*\*(.+?)\*\*", part)):
            text = html_text(shown(piece))
            out.append(f"<strong>{text}</strong>" if j % 2 else text)
    return "".join(out)


def _cells(line: str) -> list[str]:
    """The cells of a pipe-table line (``\\|`` is a pipe inside a cell)."""
    body = line.strip()[1:-1] if line.strip().endswith("|") else line.strip()[1:]
    return [cell.replace("\x00", "|").strip() for cell in body.replace("\\|", "\x00").split("|")]


def _table(lines: list[str]) -> str:
    header, rows = _cells(lines[0]), [_cells(line) for line in lines[2:]]
    head = "".join(f"<th>{_inline(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f'<td{" class=num" if _NUMBER.fullmatch(c) else ""}>{_inline(c)}</td>'
                                    for c in row) + "</tr>" for row in rows)
    return f'<div class="table"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _blocks(lines: list[str], *, list_class: str = "") -> str:
    """HTML of a run of Markdown lines without ``#`` headings: tables, lists and paragraphs."""
    out, i = [], 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
        elif line.startswith("|"):
            j = i
            while j < len(lines) and lines[j].startswith("|"):
                j += 1
            out.append(_table(lines[i:j]))
            i = j
        elif line.startswith("- "):
            j = i
            while j < len(lines) and lines[j].startswith("- "):
                j += 1
            cls = f' class="{list_class}"' if list_class else ""
            out.append(f"<ul{cls}>" + "".join(f"<li>{_inline(item[2:])}</li>" for item in lines[i:j]) + "</ul>")
            i = j
        else:
            j = i
            while j < len(lines) and lines[j].strip() and not lines[j].startswith(("|", "- ")):
                j += 1
            out.append(f"<p>{_inline(' '.join(lines[i:j]))}</p>")
            i = j
    return "\n".join(out)


def _sections(markdown: str) -> tuple[str, list[str], list[tuple[str, list[str]]]]:
    """(title, the lines before the first ``##``, [(heading, lines)]) of a report's Markdown."""
    title, intro, sections = "", [], []
    for line in markdown.splitlines():
        if line.startswith("## "):
            sections.append((line[3:].strip(), []))
        elif line.startswith("# ") and not title and not sections:
            title = line[2:].strip()
        elif sections:
            sections[-1][1].append(line)
        else:
            intro.append(line)
    return title, intro, sections


def _split_warnings(lines: list[str]) -> tuple[list[str], list[str]]:
    """(the warnings block: the list or ``None.``, the closing notes after it)."""
    start = next((i for i, line in enumerate(lines) if line.strip()), len(lines))
    end = start
    while end < len(lines) and lines[end].strip():
        end += 1
    return lines[start:end], lines[end:]


def report_items(markdown: str, *, benchmark: str) -> dict[str, str]:
    """{item: the HTML page body} for :data:`ITEMS`, cut from a report's Markdown (see the module docstring)."""
    title, intro, sections = _sections(markdown)
    if not any(heading == "Ranking" for heading, _ in sections):
        raise ArtifactError(f"report of benchmark {benchmark!r}: its Markdown has no '## Ranking' section")
    parts: dict[str, list[str]] = {item: [] for item in ITEMS}
    notes: list[str] = []
    identity = [line for line in intro if line.startswith(IDENTITY_LINE)]
    intro = [line for line in intro if not line.startswith(IDENTITY_LINE)]
    parts["ranking"].append(f"<h1>{_inline(title or benchmark)}</h1>" + _blocks(intro) + "".join(
        f"<details><summary>Dataset identity</summary><p>{_inline(line[len(IDENTITY_LINE):])}</p></details>"
        for line in identity))
    for heading, lines in sections:
        if heading == "Ranking":
            parts["ranking"].append(f"<h2>Ranking</h2>{_blocks(lines)}")
        elif heading in (COMPARISON_TITLE, COST_TITLE):
            parts["comparison"].append(f"<h2>{_inline(heading)}</h2>{_blocks(lines)}")
        elif heading == FIGURES_TITLE:
            continue  # the report shows the figures themselves, beside these pages
        elif heading == "Warnings":
            warned, notes = _split_warnings(lines)
            parts["warnings"].append(f"<h2>Warnings</h2>{_blocks(warned, list_class='warnings')}")
        else:
            parts["detail"].append(f"<h2>{_inline(heading)}</h2>{_blocks(lines)}")
    if notes:
        parts["ranking"].append(_blocks(notes))
    if not parts["detail"]:
        parts["detail"].append("<h2>Detail</h2><p>This report has no per-class or diagnostic tables.</p>")
    if not parts["comparison"]:
        parts["comparison"].append(f"<h2>{html.escape(COMPARISON_TITLE)}</h2>"
                                   "<p>This report was written without a paired comparison.</p>")
    if not parts["warnings"]:
        parts["warnings"].append("<h2>Warnings</h2><p>None.</p>")
    return {item: "\n".join(chunks) for item, chunks in parts.items()}


def page(body: str, *, benchmark: str, item: str) -> str:
    """A complete HTML document around one item's ``body``."""
    heading = "" if item == "ranking" else f'<p class="benchmark">Benchmark <strong>{html.escape(benchmark)}</strong></p>'
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(benchmark)}: {html.escape(TITLES[item])}</title><style>{STYLE}</style></head>\n"
            f"<body>{heading}\n{body}\n</body></html>\n")


def write_report_items(markdown_path: str | Path, outputs: Mapping[str, str | Path], *, benchmark: str | None = None) -> None:
    """Write :func:`report_items` of the report Markdown at ``markdown_path`` to ``outputs`` ({item: path}, any of
    :data:`ITEMS`), each atomically; the benchmark is the report folder's name unless given."""
    from vertebrae.core.artifacts import atomic_write

    unknown = sorted(set(outputs) - set(ITEMS))
    if unknown:
        raise ValidationError(f"unknown report item(s) {unknown}; known: {list(ITEMS)}")
    try:
        markdown = Path(markdown_path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ArtifactError(f"report {markdown_path}: cannot be read: {exc}") from None
    name = benchmark or Path(markdown_path).parent.name
    bodies = report_items(markdown, benchmark=name)
    for item, path in outputs.items():
        with atomic_write(path) as tmp:
            Path(tmp).write_text(page(bodies[item], benchmark=name, item=item), encoding="utf-8")


def run_report_tables(markdown_path: str | Path, ranking_path: str | Path, detail_path: str | Path,
                      comparison_path: str | Path, warnings_path: str | Path) -> None:
    """``vertebrae report-tables``: a report's Markdown as the four HTML pages of ``snakemake --report``."""
    write_report_items(markdown_path, {"ranking": ranking_path, "detail": detail_path,
                                       "comparison": comparison_path, "warnings": warnings_path})
