"""`snakemake --report report.html` after the default run, checked as a person reads it.

Each benchmark is a category holding its three figures and four table pages (ranking, detail, comparison,
warnings), each with the caption of its kind. The report is a JavaScript application, so the last test opens it in
headless Chromium (Debian's ``chromium``), clicks through every benchmark as a reader would, and asserts on what
renders: the tables with the candidates' names, a caption per kind, no mailto link. It is skipped where Chromium is
not installed, unless VERTEBRAE_REQUIRE_CHROMIUM=1 (as in .ci/run, which installs it) makes that a failure.
Chromium is driven over its DevTools pipe (``--remote-debugging-pipe``), with nothing beyond the standard library.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from workflow_support import snakemake

from vertebrae.reports.html_items import ITEMS

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
REQUIRE_CHROMIUM = os.environ.get("VERTEBRAE_REQUIRE_CHROMIUM") == "1"
OUTPUTS = [("ranking", "figure"), ("detail", "figure"), ("comparison", "figure"),
           *((item, "table") for item in ITEMS)]
CAPTIONS = {("ranking", "figure"): "Ranking figure", ("detail", "figure"): "Detail figure",
            ("comparison", "figure"): "Comparison figure", ("ranking", "table"): "Ranking table",
            ("detail", "table"): "Detail tables", ("comparison", "table"): "Comparison table",
            ("warnings", "table"): "flagged in benchmark"}
DETAIL_HEADINGS = {"labelled": ("Per-class scores", "Per-label scores", "Regression diagnostics"),
                   "retrieval": ("Similarity diagnostics (forward)",),
                   "zero_shot": ("Per-class recall",)}


@pytest.fixture(scope="module")
def html_report(default_run, tmp_path_factory) -> Path:
    """A private copy of the default run with its report.html (built once for this module)."""
    target = tmp_path_factory.mktemp("html-report") / "run"
    shutil.copytree(default_run, target, symlinks=True)
    snakemake(target, "--report", "report.html")
    return target


def _reports(workdir: Path) -> dict[str, dict]:
    return {p.parent.name: json.loads(p.read_text(encoding="utf-8"))
            for p in sorted((workdir / "results" / "reports").glob("*/report.json"))}


def _protocol(report: dict) -> str:
    schema = report["schema"]
    return "retrieval" if "retrieval" in schema else "zero_shot" if "zero" in schema else "labelled"


def _candidates(report: dict) -> list[str]:
    return [c["name"] for c in report["candidates"]] if isinstance(report.get("candidates"), list) else []


def test_html_report_bundles_every_reports_figures_and_tables(html_report):
    reports = _reports(html_report)
    assert reports
    html = (html_report / "report.html").read_text(encoding="utf-8", errors="replace")
    assert len(html) > 50_000
    for name in reports:
        folder = html_report / "results" / "reports" / name
        for item, form in OUTPUTS:
            path = folder / f"{item}.{'png' if form == 'figure' else 'html'}"
            assert path.is_file(), path
            assert f"results/reports/{name}/{path.name}" in html, (name, path.name)
        ranking = (folder / "ranking.html").read_text(encoding="utf-8")
        assert "<table>" in ranking and all(candidate in ranking for candidate in _candidates(reports[name]))
    for caption in CAPTIONS.values():
        assert caption in html, caption
    assert "mailto:" not in html  # "NDCG@10" in a caption is text, not an e-mail address


class Chromium:
    """Headless Chromium driven over the DevTools protocol on a pipe (fds 3 and 4 of the child, NUL-framed JSON)."""

    def __init__(self, binary: str, *, width: int = 1500, height: int = 1000) -> None:
        self.profile = tempfile.mkdtemp(prefix="vertebrae-chromium-")
        to_child, self._to_child = os.pipe()
        self._from_child, from_child = os.pipe()
        # the child's ends, first moved above 9 so that neither is fd 3 or 4, then put on fds 3 (read) and 4 (write)
        # by the shell that execs Chromium
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (to_child, from_child)]
        for fd in (to_child, from_child):
            os.close(fd)
        onto_3_and_4 = f'exec "$@" 3<&{high[0]} 4>&{high[1]} {high[0]}<&- {high[1]}>&-'
        self.proc = subprocess.Popen(
            ["bash", "-c", onto_3_and_4, "bash", binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--remote-debugging-pipe", f"--user-data-dir={self.profile}", f"--window-size={width},{height}",
             "about:blank"],
            pass_fds=tuple(high), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for fd in high:
            os.close(fd)
        self._buffer, self._id, self.session, self.events = b"", 0, None, []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.call("Page.enable")
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)

    def call(self, method: str, timeout: float = 60, **params):
        self._id += 1
        message = {"id": self._id, "method": method, "params": params}
        if self.session is not None and not method.startswith(("Target.", "Browser.")):
            message["sessionId"] = self.session
        os.write(self._to_child, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            while b"\0" not in self._buffer:
                ready, _, _ = select.select([self._from_child], [], [], max(0.0, deadline - time.monotonic()))
                if not ready:
                    raise TimeoutError(f"chromium did not answer {method} within {timeout} s")
                chunk = os.read(self._from_child, 1 << 20)
                if not chunk:
                    raise RuntimeError(f"chromium closed its DevTools pipe during {method}")
                self._buffer += chunk
            raw, _, self._buffer = self._buffer.partition(b"\0")
            reply = json.loads(raw)
            if "method" in reply:  # an event (console messages, exceptions, log entries): kept for the tests
                self.events.append(reply)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]

    def eval(self, expression: str, context: int | None = None):
        params = {"expression": expression, "returnByValue": True, "awaitPromise": True}
        if context is not None:
            params["contextId"] = context
        result = self.call("Runtime.evaluate", **params)
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression[:80]}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, *, timeout: float = 30, context: int | None = None):
        deadline = time.monotonic() + timeout
        while True:
            value = self.eval(expression, context)
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"not shown within {timeout} s: {expression}")
            time.sleep(0.1)

    def frame_context(self) -> int:
        """An execution context inside the page's (only) frame: the content a table item shows."""
        tree = self.call("Page.getFrameTree")["frameTree"]
        children = tree.get("childFrames") or []
        assert len(children) == 1, f"expected one content frame, got {len(children)}"
        return self.call("Page.createIsolatedWorld", frameId=children[0]["frame"]["id"])["executionContextId"]

    def screenshot(self, path: Path) -> None:
        path.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"]))

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout=10)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


# Clicks as a reader: the menu entry with this text, the eye (view) and information buttons of a result row.
CLICK_MENU = """(() => {{ const link = [...document.querySelectorAll('nav a')]
  .find(a => a.textContent.trim() === {name}); if (!link) return false; link.click(); return true; }})()"""
ROWS = """[...document.querySelectorAll('nav table tbody tr')].map(tr => [...tr.querySelectorAll('td')]
  .map(td => td.textContent.trim()))"""
CLICK_ROW_BUTTON = """(() => {{ const row = [...document.querySelectorAll('nav table tbody tr')]
  .find(tr => {{ const t = [...tr.querySelectorAll('td')].map(td => td.textContent.trim());
                return t.includes({item}) && t.includes({form}); }});
  if (!row) return false; row.querySelectorAll('td:last-child a')[{index}].click(); return true; }})()"""


@pytest.mark.skipif(CHROMIUM is None and not REQUIRE_CHROMIUM,
                    reason="Chromium is not installed (Debian: apt-get install chromium; .ci/run installs it)")
def test_a_reader_sees_tables_captions_and_no_mailto_links_in_chromium(html_report):
    assert CHROMIUM is not None, "VERTEBRAE_REQUIRE_CHROMIUM=1 but no chromium on PATH"
    reports = _reports(html_report)
    shots = Path(os.environ.get("VERTEBRAE_SCREENSHOTS") or html_report / "screenshots")
    shots.mkdir(parents=True, exist_ok=True)
    browser = Chromium(CHROMIUM)
    try:
        browser.call("Page.navigate", url=(html_report / "report.html").resolve().as_uri())
        browser.wait_for("document.querySelectorAll('nav a').length > 3")
        menu = browser.eval("[...document.querySelectorAll('nav a')].map(a => a.textContent.trim())")
        assert set(reports) <= set(menu), menu
        assert "Other" not in menu, menu  # every output is in its benchmark's category
        for name, report in reports.items():
            # back to the menu through the "Results" breadcrumb (after the first benchmark), then this benchmark
            if not browser.eval(CLICK_MENU.format(name=json.dumps(name))):
                assert browser.eval(CLICK_MENU.format(name=json.dumps("Results")))
                browser.wait_for(f"[...document.querySelectorAll('nav a')].some(a => a.textContent.trim() === "
                                 f"{json.dumps(name)})")
                assert browser.eval(CLICK_MENU.format(name=json.dumps(name)))
            browser.wait_for("document.querySelectorAll('nav table tbody tr').length > 0")
            if name == next(iter(reports)):
                browser.screenshot(shots / f"{name}-category.png")
            rows = browser.eval(ROWS)
            assert sorted((r[1], r[2]) for r in rows) == sorted(OUTPUTS), (name, rows)
            assert all(r[0] == name for r in rows), rows
            captions = {}
            for item, form in OUTPUTS:
                # the information button: the caption of this output, as the reader sees it in the side bar
                assert browser.eval(CLICK_ROW_BUTTON.format(item=json.dumps(item), form=json.dumps(form), index=1))
                captions[item, form] = browser.wait_for(
                    f"(() => {{ const t = document.querySelector('nav').innerText;"
                    f" return t.includes({json.dumps(CAPTIONS[item, form])}) ? t : ''; }})()")
                assert name in captions[item, form]
                assert not browser.eval("document.querySelectorAll('a[href^=\"mailto:\"]').length")
                assert browser.eval(CLICK_MENU.format(name=json.dumps(name)))  # back: the breadcrumb
                browser.wait_for("document.querySelectorAll('nav table tbody tr').length > 0")
                if form == "figure":
                    continue
                # the eye button: the table page, in the report's content frame
                assert browser.eval(CLICK_ROW_BUTTON.format(item=json.dumps(item), form=json.dumps(form), index=0))
                browser.wait_for("document.querySelector('iframe') !== null")
                time.sleep(0.3)
                frame = browser.frame_context()
                text = browser.wait_for("document.readyState === 'complete' && document.body.innerText", context=frame)
                tables = browser.eval("document.querySelectorAll('table').length", context=frame)
                assert not browser.eval("document.querySelectorAll('a').length", context=frame)  # no links at all
                if item in ("ranking", "detail"):
                    assert tables >= 1, (name, item, text[:500])
                    for candidate in _candidates(report):
                        assert candidate in text, (name, item, candidate)
                if item == "detail":
                    assert any(h in text for h in DETAIL_HEADINGS[_protocol(report)]), (name, text[:500])
                if item == "comparison":
                    assert "Is the leader really ahead?" in text
                    assert tables >= 1 or "No paired comparison" in text or "without a paired" in text, text[:500]
                if item == "warnings":
                    assert text.count("Warnings") >= 1 and ("None." in text or browser.eval(
                        "document.querySelectorAll('ul.warnings li').length", context=frame))
                browser.screenshot(shots / f"{name}-{item}-table.png")
            assert len(set(captions.values())) == len(OUTPUTS), f"{name}: two kinds share a caption"
    finally:
        browser.close()


# -- the pages a reader opens first: results/index.html, each benchmark's report.html, the leaderboard ------------

PAGE_STATE = """(() => ({
  ready: document.readyState,
  images: [...document.images].map(i => ({src: i.getAttribute('src'), ok: i.complete && i.naturalWidth > 0})),
  tables: document.querySelectorAll('table').length,
  headings: [...document.querySelectorAll('h2')].map(h => h.textContent.trim()),
  links: [...document.querySelectorAll('a')].map(a => a.getAttribute('href')),
  ranking: (t => t ? t.rows[0].cells.length : null)(document.querySelector('#ranking table')),
  text: document.body.innerText,
  pageWidth: document.documentElement.scrollWidth,
  viewWidth: document.documentElement.clientWidth,
}))()"""


def _errors(events: list[dict]) -> list[str]:
    """Console errors, uncaught exceptions and error log entries (a resource that failed to load is one)."""
    out = []
    for event in events:
        method, params = event.get("method"), event.get("params") or {}
        if method == "Runtime.exceptionThrown":
            out.append(json.dumps(params.get("exceptionDetails"))[:300])
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            out.append(json.dumps(params.get("args"))[:300])
        elif method == "Log.entryAdded" and (params.get("entry") or {}).get("level") == "error":
            out.append(json.dumps(params["entry"])[:300])
    return out


def test_the_workflow_writes_one_page_per_benchmark_and_the_index(default_run):
    results = default_run / "results"
    names = sorted(_reports(default_run))
    index = (results / "index.html").read_text(encoding="utf-8")
    assert "leaderboard.html" in index and (results / "leaderboard.html").is_file()
    for name in names:
        assert f'href="reports/{name}/report.html"' in index, name
        page = (results / "reports" / name / "report.html").read_text(encoding="utf-8")
        for figure in ("ranking", "comparison", "detail"):
            assert f'<img src="{figure}.png"' in page and (results / "reports" / name / f"{figure}.png").is_file()
        assert "Quality vs cost" in page and "cheapest candidate statistically tied with the leader" in page
        assert "primary_metric" not in page.split("Quality vs cost")[0], name  # one header vocabulary
        markdown = (results / "reports" / name / "report.md").read_text(encoding="utf-8")
        assert "(ranking.png)" in markdown and "(comparison.png)" in markdown and "(detail.png)" in markdown
        document = json.loads((results / "reports" / name / "report.json").read_text(encoding="utf-8"))
        key = "extractor_results" if "extractor_results" in document else "candidate_results"
        for candidate in document[key]:  # every candidate's cost, from what its jobs measured of themselves
            cost = candidate["metadata"]["cost"]
            assert cost["source"] == "job measurements", (name, candidate["name"], cost)
            assert cost["dim"] > 0 and cost["bytes_per_vector"] > 0 and cost["score_seconds"] > 0
            # the embedding cost: steady-state throughput measured in the embed jobs; a number only when measured
            status, seconds = cost["embed_status"], cost["embed_seconds_per_1k_rows"]
            assert status in ("measured", "too few rows to measure", "precomputed"), (name, candidate["name"], status)
            assert {"measured": seconds is not None and seconds > 0, "precomputed": seconds == 0.0,
                    "too few rows to measure": seconds is None}[status], (name, candidate["name"], cost)
            assert cost["peak_memory_mb"] > 0, (name, candidate["name"])  # a compressed pair's too (unserved jobs)


@pytest.mark.skipif(CHROMIUM is None and not REQUIRE_CHROMIUM,
                    reason="Chromium is not installed (Debian: apt-get install chromium; .ci/run installs it)")
def test_every_page_loads_in_chromium_without_errors_and_with_every_image(default_run):
    assert CHROMIUM is not None, "VERTEBRAE_REQUIRE_CHROMIUM=1 but no chromium on PATH"
    results = default_run / "results"
    pages = [results / "index.html", results / "leaderboard.html",
             *(results / "reports" / name / "report.html" for name in sorted(_reports(default_run)))]
    shots = Path(os.environ.get("VERTEBRAE_SCREENSHOTS") or default_run.parent / "page-screenshots")
    shots.mkdir(parents=True, exist_ok=True)
    browser = Chromium(CHROMIUM)
    try:
        for method in ("Runtime.enable", "Log.enable"):
            browser.call(method)
        for path in pages:
            browser.events.clear()
            browser.call("Page.navigate", url=path.resolve().as_uri())
            browser.wait_for("document.readyState === 'complete' && [...document.images].every(i => i.complete)")
            state = browser.eval(PAGE_STATE)
            assert not _errors(browser.events), (path, _errors(browser.events))
            assert state["tables"] >= 1, (path, state["text"][:300])
            assert all(image["ok"] for image in state["images"]), (path, state["images"])
            if path.name == "report.html":
                assert len(state["images"]) == 3, (path, state["images"])
                assert 2 <= state["ranking"] <= 8, (path, state["ranking"])  # the ranking: at most 8 columns
                assert {"Ranking", "Figures", "Is the leader really ahead?", "Quality vs cost", "Warnings"} <= \
                    set(state["headings"]), (path, state["headings"])
            if path.name in ("index.html", "leaderboard.html"):  # every benchmark's page, the last one written too
                for name in _reports(default_run):
                    assert f"reports/{name}/report.html" in state["links"], (path, name, state["links"])
            browser.screenshot(shots / f"{path.parent.name}-{path.stem}.png")
        # on a narrow screen a wide table scrolls inside its box: the leaderboard page itself never gets wider
        browser.call("Emulation.setDeviceMetricsOverride", width=420, height=900, deviceScaleFactor=1, mobile=False)
        browser.call("Page.navigate", url=(results / "leaderboard.html").resolve().as_uri())
        browser.wait_for("document.readyState === 'complete'")
        state = browser.eval(PAGE_STATE)
        assert state["pageWidth"] <= state["viewWidth"], (state["pageWidth"], state["viewWidth"])
    finally:
        browser.close()
