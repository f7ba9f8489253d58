"""The leaderboard over hand-made reports: the long table, the wide table, reports of one name shown apart, the
standings across benchmarks (hand-worked mean ranks and head to head), the quality-vs-cost table, the Pareto front
and the cheapest candidate tied with the leader (a deliberately cheaper tied candidate is found)."""

from __future__ import annotations

from dataclasses import replace

import csv
import html
import io
import re
from html.parser import HTMLParser

import numpy as np
import pytest

from vertebrae.reports.across import across
from vertebrae.reports.costs import Cost, stored_size
from vertebrae.reports.leaderboard import (
    COLUMNS,
    cheapest_tied,
    cheapest_tied_line,
    leaderboard_rows,
    paired_verdicts,
    pareto_front,
    wide_table,
)
from vertebrae.reports.leaderboard_render import leaderboard_csv, leaderboard_html, leaderboard_markdown, pareto_svg
from vertebrae.reports.schemas import LABELLED_SCHEMA, RETRIEVAL_SCHEMA
from vertebrae.scoring.paired import ComparisonConfig


def comparison(scores: dict[str, float], verdicts: dict[tuple[str, str], str]) -> dict:
    """A valid comparison document: ``verdicts[(a, b)]`` for a before b in candidate order."""
    names = list(scores)
    pairs = [{"a": a, "b": b, "delta": scores[a] - scores[b], "ci_low": -1.0, "ci_high": 1.0, "test": "randomization",
              "p_value": 0.5, "p_adjusted": 0.5, "min_p_value": 0.01, "verdict": verdicts[(a, b)]}
             for i, a in enumerate(names) for b in names[i + 1:]]
    leader = max(names, key=lambda n: (scores[n], -names.index(n)))
    return {"schema": "vertebrae.comparison/v1", "config": ComparisonConfig().to_dict(), "unit": "class",
            "statistic": "mean", "reducer": "mean", "n_units": 3, "n_strata": 1,
            "candidates": [{"name": n, "score": s, "ci_low": s - 0.1, "ci_high": s + 0.1} for n, s in scores.items()],
            "pairs": pairs, "min_p_value": 0.01, "leader": leader, "notes": []}


def candidate(name: str, score: float, dim: int, fp: str, dtype: str = "float32") -> dict:
    return {"name": name, "primary_metric_name": "overlap", "primary_score": score,
            "embedding_metadata": {"dim": dim, "dtype": dtype, "fingerprint": fp, "n_rows": 150, "sparse": False,
                                   "extractor": {"type": "precomputed", "name": name}},
            "metadata": {"score_fingerprint": f"s{fp}"}}


def labelled(name: str, scores: dict[str, float], dims: dict[str, int], verdicts, identity: str = "declared:a@1"):
    ranking = sorted(scores, key=lambda n: -scores[n])
    return {"schema": LABELLED_SCHEMA, "ranking": ranking,
            "metadata": {"benchmark": name, "vertebrae_version": "0.1.0"}, "dataset_summary": {"identity": identity},
            "extractor_results": [candidate(n, s, dims[n], f"{i:016x}") for i, (n, s) in enumerate(scores.items())],
            "comparison": comparison(scores, verdicts)}


# big (dim 64) leads; small (dim 8) is tied with it; mid (dim 32) is behind
FLOWERS = labelled("flowers", {"big": 0.9, "small": 0.88, "mid": 0.5}, {"big": 64, "small": 8, "mid": 32},
                   {("big", "small"): "indistinguishable", ("big", "mid"): "ahead", ("small", "mid"): "ahead"})
# mid leads; big behind it; small not in this benchmark
LEAVES = labelled("leaves", {"big": 0.4, "mid": 0.7}, {"big": 64, "mid": 32}, {("big", "mid"): "behind"})
SEARCH = {"schema": RETRIEVAL_SCHEMA, "ranking": ["mid", "big"],
          "metadata": {"benchmark": "search", "primary_metric": "ndcg@10"}, "dataset_summary": {"identity": "d:s@1"},
          "candidate_results": [{"name": "big", "primary_score": 0.25, "embedding_metadata": {"dim": 64},
                                 "score": {"forward": {"metrics": {"mrr": 0.5}}}},
                                {"name": "mid", "primary_score": 0.75, "embedding_metadata": {"dim": 32},
                                 "score": {"forward": {"metrics": {"mrr": 0.25}}}}],
          "comparison": None}
REPORTS = [("r/flowers/report.json", FLOWERS), ("r/leaves/report.json", LEAVES), ("r/search/report.json", SEARCH)]
COSTS = {("r/flowers/report.json", "big"): Cost(embed_seconds_per_1k_rows=10.0, dim=64, bytes_per_vector=256),
         ("r/flowers/report.json", "small"): Cost(embed_seconds_per_1k_rows=1.0, dim=8, bytes_per_vector=32),
         ("r/flowers/report.json", "mid"): Cost(embed_seconds_per_1k_rows=0.5, dim=32, bytes_per_vector=128)}


def test_the_long_table_has_one_row_per_candidate_and_benchmark():
    rows = leaderboard_rows(REPORTS, costs=COSTS, written={"r/flowers/report.json": "2026-01-01T00:00:00+00:00"})
    assert [(r.benchmark, r.candidate, r.rank, r.verdict) for r in rows] == [
        ("flowers", "big", 1, "leader"), ("flowers", "small", 2, "tied"), ("flowers", "mid", 3, "behind"),
        ("leaves", "big", 2, "behind"), ("leaves", "mid", 1, "leader"),
        ("search", "big", 2, "n/a"), ("search", "mid", 1, "leader")]
    big = rows[0]
    assert (big.metric, big.value, big.ci_low, big.ci_high) == ("overlap", 0.9, pytest.approx(0.8), 1.0)
    assert big.score_fingerprint == "s0000000000000000" and big.embedding_fingerprints == "0000000000000000"
    assert big.recipe == '{"name":"big","type":"precomputed"}' and big.dataset_identity == "declared:a@1"
    assert (big.embed_seconds_per_1k_rows, big.dim, big.written_at) == (10.0, 64, "2026-01-01T00:00:00+00:00")
    assert rows[3].embed_seconds_per_1k_rows is None and rows[3].dim is None  # no cost given: unknown, not zero
    table = list(csv.DictReader(io.StringIO(leaderboard_csv(rows))))
    assert list(table[0]) == list(COLUMNS) and table[3]["embed_seconds_per_1k_rows"] == "" and table[0]["value"] == "0.9"


def test_the_wide_table_and_another_metric():
    header, table = wide_table(leaderboard_rows(REPORTS))
    assert header[:4] == ["candidate", "flowers score", "flowers rank", "flowers verdict"]
    assert table[1] == ["small", 0.88, 2, "tied", "", "", "", "", "", ""]  # small is in flowers only
    by_mrr = [r for r in leaderboard_rows(REPORTS, metric="mrr") if r.benchmark == "search"]
    assert [(r.candidate, r.metric, r.value, r.rank, r.verdict) for r in by_mrr] == [
        ("big", "mrr", 0.5, 1, "leader"), ("mid", "mrr", 0.25, 2, "n/a")]


def test_two_reports_of_one_name_are_shown_apart():
    other = labelled("flowers", {"big": 0.1, "small": 0.2}, {"big": 64, "small": 8},
                     {("big", "small"): "behind"}, identity="declared:b@2")
    rows = leaderboard_rows([("a/flowers/report.json", FLOWERS), ("b/flowers/report.json", other)])
    keys = list(dict.fromkeys(r.benchmark for r in rows))
    # each named by its dataset as a person knows it (a declared name@revision), the identity key in the long table
    assert keys == ["flowers [a@1] (a/flowers/report.json)", "flowers [b@2] (b/flowers/report.json)"]
    assert [r.rank for r in rows if r.benchmark == keys[1]] == [2, 1]
    assert {r.dataset_identity for r in rows} == {"declared:a@1", "declared:b@2"}
    # a files identity: the name the config's declaration gave (its source path), never the digest
    files = "files:v1:" + "7" * 64
    named = {**other, "dataset_summary": {"name": "data/flowers.csv", "identity": files}}
    unnamed = {**other, "dataset_summary": {"identity": files}}  # a report written before names: the key
    keys = list(dict.fromkeys(r.benchmark for r in leaderboard_rows([("a/flowers/report.json", named),
                                                                      ("b/flowers/report.json", unnamed)])))
    assert keys == ["flowers [data/flowers.csv] (a/flowers/report.json)", f"flowers [{files}] (b/flowers/report.json)"]


def test_across_benchmarks_mean_rank_interval_and_head_to_head():
    rows = leaderboard_rows(REPORTS)
    standing = across(rows, paired_verdicts(REPORTS), resamples=500)
    by_name = {s.candidate: s for s in standing.standings}
    # big: ranks 1, 2, 2; mid: 3, 1, 1; small: only in flowers (left out of the interval)
    assert by_name["big"].mean_rank == pytest.approx(5 / 3) and by_name["mid"].mean_rank == pytest.approx(5 / 3)
    assert standing.left_out == ("small",) and by_name["small"].ci_low is None
    assert standing.compared == ("flowers", "leaves", "search")
    # the bootstrap interval of a mean of three ranks lies within its smallest and largest rank
    assert 1.0 <= by_name["big"].ci_low <= 5 / 3 <= by_name["big"].ci_high <= 2.0
    assert 1.0 <= by_name["mid"].ci_low < by_name["mid"].ci_high <= 3.0
    # big vs mid: ahead in flowers, behind in leaves, search has no comparison
    assert standing.records[("big", "mid")] == (1, 0, 1) and standing.records[("mid", "big")] == (1, 0, 1)
    assert standing.records[("big", "small")] == (0, 1, 0) and ("small", "mid") in standing.records
    np.testing.assert_allclose([s.mean_rank for s in standing.standings][-1], 2.0)  # small: rank 2 in one benchmark


def test_the_cheapest_tied_candidate_is_found_by_each_cost():
    rows = [r for r in leaderboard_rows(REPORTS, costs=COSTS) if r.benchmark == "flowers"]
    for kind in ("size", "throughput", "bytes_per_vector", "dim"):
        best, unknown = cheapest_tied(rows, kind)
        assert best.candidate == "small" and unknown == []  # mid is cheaper still by throughput, but behind
    assert cheapest_tied_line(rows, "dim") == ("cheapest candidate statistically tied with the leader (by dim): "
                                               "small (dim 8; leader big: dim 64)")
    # the default says which cost it used: the deterministic size, bytes per vector then dim
    assert cheapest_tied_line(rows) == ("cheapest candidate statistically tied with the leader (by size: bytes per "
                                        "vector, then dim): small (32 bytes per vector, dim 8; leader big: 256 bytes "
                                        "per vector, dim 64)")
    assert [r.candidate for r in pareto_front(rows, "throughput")] == ["mid", "small", "big"]
    assert [r.candidate for r in pareto_front(rows, "dim")] == ["small", "big"]  # mid: worse and dearer than small
    unknown = [r for r in leaderboard_rows(REPORTS) if r.benchmark == "flowers"]
    assert cheapest_tied_line(unknown, "throughput").endswith("unknown; cost unknown for big, small")
    few = {key: replace(cost, embed_seconds_per_1k_rows=None, embed_status="too few rows to measure")
           for key, cost in COSTS.items()}
    line = cheapest_tied_line([r for r in leaderboard_rows(REPORTS, costs=few) if r.benchmark == "flowers"],
                              "throughput")
    assert line.endswith("unknown; too few rows to measure for big, small") and "0." not in line
    search = [r for r in leaderboard_rows(REPORTS) if r.benchmark == "search"]
    assert cheapest_tied_line(search, "dim").endswith("n/a (no paired comparison)")


def test_markdown_and_html_show_the_tables_the_line_and_the_figure():
    rows = leaderboard_rows(REPORTS, costs=COSTS)
    standing = across(rows, paired_verdicts(REPORTS), resamples=200)
    text = leaderboard_markdown(rows, standing, cost="dim")
    assert "## Quality vs cost: flowers" in text and "| small | 0.8800 | 2 | tied | 1.0000 | unknown | 8 | 32 |" in text
    assert "cheapest candidate statistically tied with the leader (by dim): small" in text
    assert "no interval for small (not ranked in every benchmark compared)" in text
    page = leaderboard_html(rows, standing, cost="dim")
    assert "cheapest candidate statistically tied with the leader (by dim): small" in page
    # flowers has costs (a figure); leaves and search have none given here (a line says so)
    assert page.count("<svg") == 1 and page.count("No Pareto figure: no ranked candidate has a known dim") == 2


def test_equal_points_do_not_hide_each_other_and_names_are_escaped():
    tie = labelled("t", {"<b>x</b>": 0.5, "y": 0.5}, {"<b>x</b>": 4, "y": 4}, {("<b>x</b>", "y"): "indistinguishable"})
    rows = leaderboard_rows([("t/report.json", tie)], costs={("t/report.json", "<b>x</b>"): Cost(dim=4),
                                                             ("t/report.json", "y"): Cost(dim=4)})
    svg = pareto_svg(rows, "dim")
    assert "<b>x</b>" not in svg and html.escape("<b>x</b>") in svg
    centres = [tuple(part.split('"')[1] for part in circle.split(" cy=")[:2]) for circle in svg.split("<circle cx=")[1:]]
    assert len(set(centres)) == 2  # the same quality and cost, drawn apart


def test_bytes_per_vector_follow_the_stored_dtype():
    assert stored_size(candidate("a", 0.5, 16, "f", dtype="float32")) == (16, 64)
    assert stored_size(candidate("a", 0.5, 16, "f", dtype="int8")) == (16, 16)
    sparse = candidate("a", 0.5, 16, "f")
    sparse["embedding_metadata"]["sparse"] = True
    assert stored_size(sparse) == (16, None)  # sparse: unknown, not a dense size


def test_endpoints_are_found_in_each_protocol_s_embedding_metadata():
    from vertebrae.reports.costs import embedding_endpoints

    labelled_meta = {"dim": 4, "dtype": "float32", "fingerprint": "a" * 16, "n_rows": 150}
    retrieval_meta = {"dim": 4, "gallery": {"n_rows": 120, "dtype": "float64"}, "gallery_fingerprint": "g" * 16,
                      "query": {"n_rows": 30, "dtype": "float64"}, "query_fingerprint": "q" * 16}
    zero_shot_meta = {"dim": 8, "samples": {"n_rows": 100}, "prompts": {"n_rows": 6}, "sample_fingerprint": "s" * 16,
                      "prompt_fingerprint": "p" * 16, "extractor": {"type": "open_clip"}}
    assert [(e["fingerprint"], e["n_rows"]) for e in embedding_endpoints(labelled_meta)] == [("a" * 16, 150)]
    assert sorted((e["fingerprint"], e["n_rows"]) for e in embedding_endpoints(retrieval_meta)) == [
        ("g" * 16, 120), ("q" * 16, 30)]
    found = embedding_endpoints(zero_shot_meta)
    assert sorted((e["fingerprint"], e["n_rows"]) for e in found) == [("p" * 16, 6), ("s" * 16, 100)]
    assert all(e["extractor"] == {"type": "open_clip"} for e in found)


def test_memory_and_score_seconds_come_from_every_endpoint_s_records(tmp_path):
    from vertebrae.reports.costs import candidate_cost

    header = "s\th:m:s\tmax_rss\tmax_vms\n"
    for rule, fp, shard, seconds, rss in (("embed_retrieval_shard", "g" * 16, "shard-0-of-2", 3.0, 100.0),
                                          ("embed_retrieval_shard", "g" * 16, "shard-1-of-2", 5.0, 300.0),
                                          ("embed_retrieval_shard", "q" * 16, "shard-0-of-1", 2.0, 200.0)):
        (tmp_path / rule / fp).mkdir(parents=True, exist_ok=True)
        (tmp_path / rule / fp / f"{shard}.tsv").write_text(f"{header}{seconds}\t0:00:0{int(seconds)}\t{rss}\t1\n")
    (tmp_path / "score_retrieval").mkdir()
    (tmp_path / "score_retrieval" / f"{'c' * 16}.tsv").write_text(f"{header}1.5\t0:00:01\t50\t1\n")
    meta = {"dim": 4, "gallery": {"n_rows": 120, "dtype": "float32"}, "gallery_fingerprint": "g" * 16,
            "query": {"n_rows": 80, "dtype": "float32"}, "query_fingerprint": "q" * 16}
    cost = candidate_cost({"embedding_metadata": meta, "metadata": {"score_fingerprint": "c" * 16}}, tmp_path)
    # the largest max_rss; the score job's seconds; the whole-job times are no embedding cost (no throughput: unknown)
    assert cost == Cost(embed_seconds_per_1k_rows=None, peak_memory_mb=300.0, dim=4, bytes_per_vector=16,
                        score_seconds=1.5, embed_status="unknown")
    (tmp_path / "embed_retrieval_shard" / ("q" * 16) / "shard-0-of-1.tsv").unlink()
    partial = candidate_cost({"embedding_metadata": meta, "metadata": {}}, tmp_path)
    assert (partial.embed_seconds_per_1k_rows, partial.peak_memory_mb, partial.score_seconds) == (None, None, None)
    assert candidate_cost({"embedding_metadata": meta}, None).embed_seconds_per_1k_rows is None


def test_the_html_page_links_each_benchmark_s_report_files(tmp_path):
    from vertebrae.stages.leaderboard_job import report_links

    folder = tmp_path / "results/reports/flowers"
    folder.mkdir(parents=True)
    for name in ("report.json", "report.md", "ranking.html"):
        (folder / name).write_text("x")
    rows = leaderboard_rows([(str(folder / "report.json"), FLOWERS)])
    links = report_links(rows, tmp_path / "results/index.html")
    assert links == {"flowers": [("ranking", "reports/flowers/ranking.html"), ("report.md", "reports/flowers/report.md"),
                                 ("report.json", "reports/flowers/report.json")]}
    page = leaderboard_html(rows, across(rows, {}, resamples=100), links=links)
    assert '<li>flowers: <a href="reports/flowers/ranking.html">ranking</a>' in page


# ----------------------------------------------------------------------------------------------------
# issue 48, problem 6: every string from data reaches the Markdown page as text. Oracle: an independent CommonMark
# renderer (markdown-it-py, tables on, as tests/reports/test_text.py uses) and Python's HTML parser.

HOSTILE = "my-iris <img src=x onerror=alert(1)>\n# owned [click](javascript:alert(2))"  # tests/workflow/test_tamper.py
EVIL_BENCH = "flowers <script>alert(3)</script> | pipe\n## heading"
EVIL_CANDIDATES = ("<b>big</b> [x](javascript:alert(4))", "small | cell\n# h1", "**mid** ![i](http://e.x/i.png)")
EVIL_METRIC = "m <img src=y onerror=alert(5)> | z\n# metric [m](javascript:alert(6))"  # the reports' primary metric
EVIL_OPTION = "--metric <img src=z onerror=alert(7)> | [o](javascript:alert(8))\n# opt"  # vertebrae leaderboard --metric


def _hostile_reports() -> list[tuple[str, dict]]:
    big, small, mid = EVIL_CANDIDATES
    verdicts = {(big, small): "indistinguishable", (big, mid): "ahead", (small, mid): "ahead"}
    one = labelled(EVIL_BENCH, {big: 0.9, small: 0.88, mid: 0.5}, {big: 64, small: 8, mid: 32}, verdicts,
                   identity=f"declared:{HOSTILE}@1")
    two = labelled(EVIL_BENCH, {big: 0.4, mid: 0.7}, {big: 64, mid: 32}, {(big, mid): "behind"},
                   identity=f"declared:{HOSTILE} <i>two</i>@2")
    for document in (one, two):
        for c in document["extractor_results"]:
            c["primary_metric_name"] = EVIL_METRIC
    return [("a/r/report.json", one), ("b/r/report.json", two)]


class _Page(HTMLParser):
    """Tags, text and, per table, the cells of each row of a rendered page."""

    def __init__(self):
        super().__init__()
        self.tags, self.text, self.tables = [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append(0)
        elif tag in ("td", "th"):
            self.tables[-1][-1] += 1

    def handle_data(self, data):
        self.text.append(data)


def _flat(text: str) -> str:
    return " ".join("".join(c if c.isprintable() else " " for c in text).split())


@pytest.mark.parametrize("metric", [None, EVIL_OPTION], ids=["primary", "--metric"])
def test_markdown_shows_hostile_names_and_metrics_as_text(metric):
    from markdown_it import MarkdownIt

    reports = _hostile_reports()
    costs = {(path, c["name"]): Cost(dim=c["embedding_metadata"]["dim"]) for path, doc in reports
             for c in doc["extractor_results"]}
    rows = leaderboard_rows(reports, metric=metric, costs=costs)
    assert {r.metric for r in rows} == {metric or EVIL_METRIC}
    text = leaderboard_markdown(rows, across(rows, paired_verdicts(reports), resamples=100), cost="dim",
                                written_by="written by vertebrae <b>0</b>")
    page = _Page()
    page.feed(MarkdownIt("commonmark").enable("table").render(text))
    # only the page's own structure: one title, one heading per table, tables and paragraphs; no link, image, script
    assert set(page.tags) <= {"h1", "h2", "p", "table", "thead", "tbody", "tr", "th", "td"}, set(page.tags)
    keys = [f"{EVIL_BENCH} [{HOSTILE}@1] (a/r/report.json)",
            f"{EVIL_BENCH} [{HOSTILE} <i>two</i>@2] (b/r/report.json)"]
    assert page.tags.count("h1") == 1 and page.tags.count("h2") == 3 + len(keys)
    # no cell split or line ended by data: every table has its rows (a header and one per line), each with the
    # header's cells (markdown-it pads a short row and drops a long one's extra cells, so count the source too)
    assert [len(t) for t in page.tables] == [1 + 3, 1 + 3, 1 + 6, 1 + 3, 1 + 2]
    assert [t[0] for t in page.tables] == [1 + 3 * len(keys), 4, 5, 4 + 5 + 1, 4 + 5 + 1]
    for section in text.split("\n## ")[1:]:
        cells = [len(re.split(r"(?<!\\)\|", line)) for line in section.splitlines() if line.startswith("|")]
        assert len(set(cells)) == 1, section
    shown = _flat(" ".join(page.text))
    for name in (*keys, *EVIL_CANDIDATES, metric or EVIL_METRIC, "written by vertebrae <b>0</b>"):
        assert _flat(name) in shown, name
    assert "<img" not in text and "<script" not in text and "](javascript:" not in text
    assert [line for line in text.splitlines() if line.startswith("#")][0] == "# vertebrae leaderboard"
    assert all(line.startswith("## ") for line in text.splitlines()[1:] if line.startswith("#"))

