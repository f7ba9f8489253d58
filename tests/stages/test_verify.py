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
from vertebrae.stages.verify import check_report, verify


@pytest.fixture(scope="module")
def iris_report() -> dict:
    from sklearn.decomposition import PCA

    X, y = load_iris(return_X_y=True)
    dataset = BenchmarkDataset.from_arrays(X, y, identity=DatasetIdentity.declared("iris", "1"))
    result = Benchmark(dataset, [PrecomputedExtractor("raw"), SklearnExtractor("pca2", PCA(2), cache_identity="pca2")],
                       scoring_config=OverlapScoringConfig(k=3), seed=0, name="iris").run()
    return json.loads(json.dumps(result.to_dict()))


def _write(tmp_path, report) -> str:
    path = tmp_path / "results" / "reports" / "iris" / "report.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report), encoding="utf-8")
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
