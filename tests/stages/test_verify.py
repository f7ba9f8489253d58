"""Reports are verified like artifacts before they are drawn; a corrupt report moves aside (``vertebrae figures``)."""

from __future__ import annotations

import json
import os

import pytest
from sklearn.datasets import load_iris

from vertebrae import Benchmark, BenchmarkDataset, DatasetIdentity, OverlapScoringConfig
from vertebrae.cli import main
from vertebrae.core.errors import CorruptArtifactError
from vertebrae.extractors import PrecomputedExtractor, SklearnExtractor
from vertebrae.scoring.paired.rows import RowResamplingConfig
from vertebrae.results.base import with_content_hash
from vertebrae.stages.verify import check_report, verify


@pytest.fixture(scope="module")
def iris_report() -> dict:
    from sklearn.decomposition import PCA

    X, y = load_iris(return_X_y=True)
    dataset = BenchmarkDataset.from_arrays(X, y, identity=DatasetIdentity.declared("iris", "1"))
    # iris's 3 classes: the comparison resamples rows; 20 subsamples (the least), not the default 200
    result = Benchmark(dataset, [PrecomputedExtractor("raw"), SklearnExtractor("pca2", PCA(2), cache_identity="pca2")],
                       scoring_config=OverlapScoringConfig(k=3), row_resampling=RowResamplingConfig(resamples=20), seed=0, name="iris").run()
    return json.loads(json.dumps(result.to_dict()))


def _write(tmp_path, report) -> str:
    path = tmp_path / "results" / "reports" / "iris" / "report.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(with_content_hash(report)), encoding="utf-8")  # re-hashed: the edit checks still bite
    return str(path)


def _edits(report):
    swapped = json.loads(json.dumps(report))
    swapped["ranking"] = list(reversed(swapped["ranking"]))
    scored = json.loads(json.dumps(report))
    first = scored["extractor_results"][0]
    first["primary_score"] = 0.999  # the drawn bar would not be the candidate's OverlapIndex score
    extra = {**report, "note": "hand-written"}
    return {"ranking": swapped, "primary score": scored, "extra key": extra}


def test_a_written_report_verifies(iris_report, tmp_path):
    assert check_report(_write(tmp_path, iris_report)) == iris_report
    assert verify(tmp_path / "results") == []


@pytest.mark.parametrize("edit", ["ranking", "primary score", "extra key"])
def test_hand_edited_reports_are_refused_naming_the_file(iris_report, tmp_path, edit):
    path = _write(tmp_path, _edits(iris_report)[edit])
    with pytest.raises(CorruptArtifactError) as info:
        check_report(path)
    assert path in str(info.value) and info.value.path == path
    assert [bad for bad, _ in verify(tmp_path / "results")] == [path]


def test_figures_refuse_a_hand_edited_report_and_move_it_aside(iris_report, tmp_path, capsys):
    path = _write(tmp_path, _edits(iris_report)["ranking"])
    ranking, detail = tmp_path / "ranking.png", tmp_path / "detail.png"
    assert main(["figures", "--report", path, "--ranking-output", str(ranking), "--detail-output", str(detail)]) == 2
    message = capsys.readouterr().err
    assert path in message and "edited" in message and "moved it aside to" in message
    assert not ranking.exists() and not detail.exists() and not os.path.exists(path)

    good = _write(tmp_path, iris_report)
    assert main(["figures", "--report", good, "--ranking-output", str(ranking), "--detail-output", str(detail)]) == 0
    assert ranking.stat().st_size > 0 and detail.stat().st_size > 0


def test_verify_command_exit_status(iris_report, tmp_path, capsys):
    _write(tmp_path, iris_report)
    assert main(["verify", str(tmp_path / "results")]) == 0
    path = _write(tmp_path, _edits(iris_report)["extra key"])
    assert main(["verify", str(tmp_path / "results")]) == 2
    captured = capsys.readouterr()
    assert f"bad: {path}" in captured.out and "corrupt or stale" in captured.err
    assert main(["verify", "--repair", str(tmp_path / "results")]) == 0
    assert not os.path.exists(path) and any(".corrupt-" in n for n in os.listdir(os.path.dirname(path)))


def test_verify_reads_fanned_out_partials_in_their_own_format(tmp_path):
    """Issue 32, item 2: a partial lies at ``retrieval/partials/<merge fp>/<fp>.h5``; verify read it as an embedding
    and called every partial of a clean run corrupt (so ``--repair`` looped forever). Clean partials verify; a
    flipped byte, or a partial saved under another's fingerprint, is found."""
    import numpy as np
    import scipy.sparse as sp

    from vertebrae.scoring.retrieval import RetrievalConfig
    from vertebrae.stages.retrieval_fanout import score_retrieval_partial

    rng = np.random.default_rng(0)
    Q, G = rng.normal(size=(4, 3)), rng.normal(size=(6, 3))
    relevance = sp.csr_matrix((np.ones(4), (range(4), [0, 2, 4, 5])), shape=(4, 6))
    folder = tmp_path / "results" / "retrieval" / "partials" / "0123456789abcdef"
    folder.mkdir(parents=True)
    paths = []
    for fp, rows in (("00000000000000aa", (0, 3)), ("00000000000000bb", (3, 6))):
        part = score_retrieval_partial(Q, G, relevance, query_rows=(0, 4), gallery_rows=rows, config=RetrievalConfig())
        part.save(folder / f"{fp}.h5", fingerprint=fp)
        paths.append(folder / f"{fp}.h5")
    assert verify(tmp_path / "results") == []
    os.replace(paths[1], folder / "00000000000000cc.h5")  # a partial under a name (fingerprint) not its own
    data = bytearray(paths[0].read_bytes())
    data[-100] ^= 0xFF
    paths[0].write_bytes(bytes(data))
    found = {os.path.basename(path): problem for path, problem in verify(tmp_path / "results")}
    assert sorted(found) == ["00000000000000aa.h5", "00000000000000cc.h5"], found
    assert "stale" in found["00000000000000cc.h5"] and "embedding" not in " ".join(found.values())


def test_a_report_carries_a_content_hash_and_a_consistent_edit_is_refused(iris_report, tmp_path, capsys):
    """Issue 32, item 2: a hand-edited number that the result class round-trips (a per-class score 0.76 -> 0.7601)
    passed verify and reached the summary; report.json now carries a content hash that verify, figures and the
    summary check."""
    from vertebrae.results import BenchmarkResult

    result = BenchmarkResult.from_dict(iris_report)
    result.save_json(tmp_path / "saved.json")
    saved = json.loads((tmp_path / "saved.json").read_text(encoding="utf-8"))
    assert saved == with_content_hash(iris_report) and len(saved["content_hash"]) == 64
    path = tmp_path / "results" / "reports" / "iris" / "report.json"
    path.parent.mkdir(parents=True)
    edited = json.loads(json.dumps(saved))
    edited["extractor_results"][0]["overlap"]["macro_score"] += 1e-4
    assert BenchmarkResult.from_dict(edited).to_dict() == {k: v for k, v in edited.items() if k != "content_hash"}
    path.write_text(json.dumps(edited), encoding="utf-8")
    with pytest.raises(CorruptArtifactError, match="content hash mismatch"):
        check_report(path)
    assert [bad for bad, _ in verify(tmp_path / "results")] == [str(path)]
    summary = tmp_path / "results" / "summary"
    assert main(["summary", "--output-csv", str(summary / "s.csv"), "--output-markdown", str(summary / "s.md"),
                 "--output-json", str(summary / "summary.json"), str(path)]) == 2
    assert "content hash mismatch" in capsys.readouterr().err and not os.path.exists(path)
    unhashed = {k: v for k, v in saved.items() if k != "content_hash"}
    path.write_text(json.dumps(unhashed), encoding="utf-8")  # a report.json without its hash is not one we wrote
    with pytest.raises(CorruptArtifactError, match="no content_hash"):
        check_report(path)


@pytest.mark.parametrize("item", ["report.md", "ranking.html", "warnings.html", "summary.csv", "summary.md"])
def test_verify_checks_the_text_items_against_their_verified_sources(iris_report, tmp_path, item):
    """Issue 32, item 2: report.md, the HTML pages and the summary's CSV and Markdown are what their verified
    sources give; an edited one is found and ``--repair`` moves it aside."""
    from vertebrae.reports.html_items import write_report_items
    from vertebrae.results import BenchmarkResult
    from vertebrae.stages.summary_job import run_summary

    folder = tmp_path / "results" / "reports" / "iris"
    folder.mkdir(parents=True)
    result = BenchmarkResult.from_dict(iris_report)
    result.save_json(folder / "report.json")
    result.save_markdown(folder / "report.md")
    write_report_items(folder / "report.md", {page: folder / f"{page}.html" for page in
                                              ("ranking", "detail", "comparison", "warnings")})
    summary = tmp_path / "results" / "summary"
    run_summary([folder / "report.json"], summary / "summary.csv", summary / "summary.md", summary / "summary.json")
    assert verify(tmp_path / "results") == []
    path = (summary if item.startswith("summary") else folder) / item
    path.write_text(path.read_text(encoding="utf-8") + "<script>alert(1)</script>\n", encoding="utf-8")
    found = verify(tmp_path / "results", repair=True)
    assert [bad for bad, _ in found] == [str(path)] and "edited" in found[0][1]
    assert not path.exists() and verify(tmp_path / "results") == []


def test_a_plan_whose_declaration_does_not_hash_to_its_fingerprint_is_refused(tmp_path, monkeypatch):
    """Issue 32, item 2: a plan artifact re-written with another recipe under its old fingerprint (its manifest
    re-hashed, so it reads cleanly) is refused before a job builds from it, found by verify, and moved aside."""
    from vertebrae.core.artifacts import write_json_artifact
    from vertebrae.stages.plan import load_plan, run_plan
    from vertebrae.planning import plan

    from workflow_support import USER_CONFIG

    monkeypatch.chdir(tmp_path)
    planned = plan(USER_CONFIG)
    spec = planned.spec(planned.fingerprints("score")[0])
    path = f"results/plans/{spec['fingerprint']}.json"
    run_plan(spec=json.dumps(spec), output=path)
    assert load_plan(path, "score") == json.loads(json.dumps(spec)) and verify("results") == []
    forged = json.loads(json.dumps(spec))
    forged["recipe"]["seed"] = 1 + int(forged["recipe"].get("seed") or 0)
    write_json_artifact(path, "plan", forged, fingerprint=spec["fingerprint"], recipe=forged["recipe"])
    with pytest.raises(CorruptArtifactError, match="declaration does not hash to its fingerprint") as info:
        load_plan(path, "score")
    assert info.value.path == path
    assert [bad for bad, _ in verify("results", repair=True)] == [path] and not os.path.exists(path)


def _flip_image_byte(path):
    data = path.read_bytes()
    at = data.index(b"IDAT") + 40
    path.write_bytes(data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1:])


FIGURE_EDITS = {
    "flipped byte": (lambda folder: _flip_image_byte(folder / "ranking.png"), "ranking.png", "CRC mismatch"),
    "truncated": (lambda folder: (folder / "detail.png").write_bytes((folder / "detail.png").read_bytes()[:500]),
                  "detail.png", "truncated"),
    "swapped names": (lambda folder: os.replace(folder / "detail.png", folder / "ranking.png"), "ranking.png",
                      "it is the 'detail' figure, not 'ranking'"),
}


@pytest.fixture(scope="module")
def raw_only_report() -> dict:
    X, y = load_iris(return_X_y=True)
    dataset = BenchmarkDataset.from_arrays(X, y, identity=DatasetIdentity.declared("iris", "1"))
    result = Benchmark(dataset, [PrecomputedExtractor("raw")], scoring_config=OverlapScoringConfig(k=3),
                       row_resampling=RowResamplingConfig(resamples=20), seed=0, name="iris").run()
    return json.loads(json.dumps(result.to_dict()))


def _figures(path, folder) -> None:
    outputs = [str(folder / f"{name}.png") for name in ("ranking", "detail", "comparison")]
    assert main(["figures", "--report", path, "--ranking-output", outputs[0], "--detail-output", outputs[1],
                 "--comparison-output", outputs[2]]) == 0


@pytest.mark.parametrize("edit", [*FIGURE_EDITS, "drawn from another report"])
def test_verify_checks_the_figures_and_repair_moves_a_bad_one_aside(iris_report, raw_only_report, tmp_path, edit):
    """Issue 32, item 2: a figure PNG is an artifact too: a flipped byte, a cut, a figure under another's name or one
    drawn from another report (stale, or foreign) is found; ``--repair`` moves it aside (the figures job then draws
    it again)."""
    folder = tmp_path / "results" / "reports" / "iris"
    if edit in FIGURE_EDITS:
        change, name, problem = FIGURE_EDITS[edit]
        _figures(_write(tmp_path, iris_report), folder)
        assert verify(tmp_path / "results") == []
        change(folder)
    else:  # the ranking drawn from another report, beside this report and its own other figures
        name, problem = "ranking.png", "drawn from another report"
        _figures(_write(tmp_path, raw_only_report), folder)
        other = (folder / name).read_bytes()
        _figures(_write(tmp_path, iris_report), folder)
        assert verify(tmp_path / "results") == []
        (folder / name).write_bytes(other)
    bad = folder / name
    found = verify(tmp_path / "results", repair=True)
    assert [item for item, _ in found] == [str(bad)] and problem in found[0][1], found
    assert not bad.exists() and verify(tmp_path / "results") == []
