"""Reports are text (issue 32, item 4): every string from data is escaped for Markdown (``markdown_text``) and for
HTML wherever it is written; no raw HTML, no link, no line break from data. The oracle is an independent CommonMark
renderer (markdown-it-py, with tables and strike-through as GitHub has them) and Python's HTML parser."""

from __future__ import annotations

import html
from html.parser import HTMLParser

import numpy as np
import pytest
from markdown_it import MarkdownIt
from sklearn.datasets import load_iris

from vertebrae import Benchmark, BenchmarkDataset, DatasetIdentity, OverlapScoringConfig
from vertebrae.extractors import PrecomputedExtractor
from vertebrae.reports.html_items import report_items
from vertebrae.reports.markdown import render_markdown
from vertebrae.scoring.paired.rows import RowResamplingConfig
from vertebrae.reports.summary import build_summary, summary_markdown
from vertebrae.reports.text import markdown_plain, markdown_text, terminal_text

HOSTILE = ["<img src=x onerror=alert(1)>", "<script>alert(2)</script>", "[click](javascript:alert(3))",
           "a\n# Heading from data", "![i](http://evil.example/x.png)", "<javascript:alert(4)>", "**bold** _em_ ~~s~~",
           "`code` and a | pipe and \\ backslash", "https://evil.example www.evil.example me@evil.example",
           "x\r\n## two\u2028three\x00four", "&lt;b&gt; an entity", "random_projection16 ndcg@10 p < 0.05"]
RENDER = MarkdownIt("commonmark").enable("table").enable("strikethrough")


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.text = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def _parse(markup: str) -> _Tags:
    parser = _Tags()
    parser.feed(markup)
    return parser


def _flat(text: str) -> str:
    return " ".join("".join(c if c.isprintable() else " " for c in text).split())


@pytest.mark.parametrize("text", HOSTILE)
def test_markdown_text_renders_as_exactly_its_text(text):
    escaped = markdown_text(text)
    assert "\n" not in escaped and "\r" not in escaped
    parsed = _parse(RENDER.render(f"before {escaped} after"))
    assert [tag for tag, _ in parsed.tags] == ["p"], parsed.tags
    assert _flat("".join(parsed.text)) == _flat(f"before {text} after")
    assert markdown_plain(escaped) == "".join(c if c.isprintable() or c == " " else " " for c in text)
    cell = _parse(RENDER.render(f"| a | b |\n|---|---|\n| {escaped} | x |"))  # one cell, whatever it holds
    assert [tag for tag, _ in cell.tags].count("td") == 2


@pytest.fixture(scope="module")
def hostile_report():
    X, y = load_iris(return_X_y=True)
    labels = np.array(HOSTILE[:3])[y]
    dataset = BenchmarkDataset.from_arrays(X, labels, identity=DatasetIdentity.declared("evil\n# Owned <b>x</b>", "1"))
    names = ["raw\n## Pwned <i>x</i>", "<img src=y onerror=alert(5)>"]
    # iris's 3 classes: the comparison resamples rows; 20 subsamples (the least), not the default 200
    return Benchmark(dataset, [PrecomputedExtractor(names[0]), PrecomputedExtractor(names[1])],
                     scoring_config=OverlapScoringConfig(k=3), row_resampling=RowResamplingConfig(resamples=20), seed=0,
                     name="iris").run(), names


def test_report_md_and_its_html_pages_hold_data_only_as_text(hostile_report):
    result, names = hostile_report
    markdown = render_markdown(result)
    rendered = _parse(RENDER.render(markdown))
    # the only links: the report's own three figures (its "Figures" section), none from data
    links = [dict(attrs) for tag, attrs in rendered.tags if tag == "a"]
    assert links == [{"href": f"{n}.png"} for n in ("ranking", "detail", "comparison")], links
    tags = {tag for tag, _ in rendered.tags}
    assert tags <= {"h1", "h2", "p", "table", "thead", "tbody", "tr", "th", "td", "strong", "code", "ul", "li", "a"}, tags
    assert [tag for tag, _ in rendered.tags].count("h1") == 1
    assert {"img", "script", "b", "i"}.isdisjoint(tags) and all(not attrs for t, attrs in rendered.tags if t != "a")
    text = _flat("".join(rendered.text))
    for value in [*HOSTILE[:3], *names, "evil # Owned <b>x</b>"]:
        assert _flat(value) in text, value
    for page in report_items(markdown, benchmark="iris").values():
        parsed = _parse(page)
        assert {"img", "script", "a", "b", "i"}.isdisjoint(tag for tag, _ in parsed.tags)
        assert all(not attrs or tag in ("td", "ul", "p", "div", "meta") for tag, attrs in parsed.tags), parsed.tags
    shown = _flat(html.unescape("".join(_parse("".join(report_items(markdown, benchmark="iris").values())).text)))
    for value in [*HOSTILE[:3], *names]:
        assert _flat(value) in shown, value


def test_the_summary_escapes_candidate_names(hostile_report):
    result, names = hostile_report
    summary = build_summary([("results/reports/iris/report.json", result.to_dict())])
    rendered = _parse(RENDER.render(summary_markdown(summary)))
    assert {"img", "script", "a", "b", "i"}.isdisjoint(tag for tag, _ in rendered.tags)
    assert [tag for tag, _ in rendered.tags].count("h2") == 2


@pytest.mark.parametrize("text,shown", [
    ("evil\x1b[2J\x1b]0;title\x07", "evil\\x1b[2J\\x1b]0;title\\x07"),  # clear screen, set title, bell
    ("a\rb\tc\nd", "a\\rb\\tc\\nd"), ("\x9b31m\x85", "\\x9b31m\\x85"),  # C1: 8-bit CSI, NEL
    ("abc\u202edef\u2028", "abc\\u202edef\\u2028"), ("tag\U000e0041", "tag\\U000e0041"),  # bidi, separator, tag
    ("caf\u00e9 \u4e2d <b> \\ ok", "caf\u00e9 \u4e2d <b> \\ ok"),  # printable text stays as it is
])
def test_terminal_text_writes_every_unprintable_character_as_its_escape(text, shown):
    assert terminal_text(text) == shown and terminal_text(text).isprintable()
    assert terminal_text("one\ntwo\x1b", lines=True) == "one\ntwo\\x1b"


def test_markdown_text_writes_no_c1_control_or_direction_override():
    text = "a\x9b31m b\x85c \u202eevil\u202c d\u2066e\u2069 f\u200fg"
    escaped = markdown_text(text)
    rendered = "".join(_parse(RENDER.render(escaped)).text)
    assert not any(0x80 <= ord(c) <= 0x9f or c in "\u202e\u202c\u2066\u2069\u200f" for c in escaped + rendered)
    assert "\\u202eevil\\u202c" in rendered and "\\u200fg" in rendered  # a direction mark is shown, not obeyed
