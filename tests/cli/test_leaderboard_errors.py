"""``vertebrae leaderboard`` answers it used to give wrong (issue 48): a ``--metric`` no report holds (a typo) exited 0
with every candidate "unranked", and is now refused listing the metrics present; an ``--output`` that is a folder or
cannot be written was a traceback, and is now named."""

from __future__ import annotations

import json

import pytest

from vertebrae.cli import main
from vertebrae.reports.schemas import LABELLED_SCHEMA, RETRIEVAL_SCHEMA


def _reports(root):
    """Two hand-made reports (read back as written: the verification is not what these tests are about)."""
    flowers = {"schema": LABELLED_SCHEMA, "ranking": ["big", "small"], "metadata": {"benchmark": "flowers"},
               "dataset_summary": {"identity": "declared:a@1"}, "comparison": None,
               "extractor_results": [{"name": n, "primary_metric_name": "overlap", "primary_score": s,
                                      "metrics": {"knn": {"score": s, "diagnostics": {"accuracy": s}}},
                                      "embedding_metadata": {"dim": 4}} for n, s in (("big", 0.9), ("small", 0.5))]}
    search = {"schema": RETRIEVAL_SCHEMA, "ranking": ["big"], "metadata": {"benchmark": "search",
                                                                          "primary_metric": "ndcg@10"},
              "dataset_summary": {"identity": "d:s@1"}, "comparison": None,
              "candidate_results": [{"name": "big", "primary_score": 0.25, "embedding_metadata": {"dim": 4},
                                     "score": {"forward": {"metrics": {"mrr": 0.5, "ndcg@10": 0.25}}}}]}
    for name, document in (("flowers", flowers), ("search", search)):
        (root / "results" / name).mkdir(parents=True)
        (root / "results" / name / "report.json").write_text(json.dumps(document), encoding="utf-8")
    return root / "results"


@pytest.fixture()
def results(tmp_path, monkeypatch):
    import vertebrae.stages.leaderboard_job as job

    monkeypatch.setattr(job, "check_report", lambda path: json.loads(path.read_text(encoding="utf-8")))
    monkeypatch.chdir(tmp_path)
    return _reports(tmp_path)


def test_leaderboard_refuses_a_metric_no_report_holds_listing_those_present(results, capsys):
    # used to exit 0 with every candidate "unranked"
    assert main(["leaderboard", str(results), "--metric", "acuracy"]) == 2
    assert capsys.readouterr().err == (f"vertebrae: error: --metric 'acuracy': no report under {results} holds that "
                                       "metric; the metrics present: accuracy, mrr, ndcg@10, overlap\n")
    assert main(["leaderboard", str(results), "--metric", "accuracy", "--format", "csv"]) == 0
    assert "flowers,flowers,labelled,big,accuracy,0.9," in capsys.readouterr().out


def test_leaderboard_output_that_is_a_folder_or_unwritable_is_named(results, tmp_path, capsys):
    # used to be IsADirectoryError / FileExistsError tracebacks
    assert main(["leaderboard", str(results), "--output", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (f"vertebrae: error: --output {tmp_path}: is a folder; name the file to write "
                                       f"(e.g. {tmp_path / 'leaderboard.md'})\n")
    (tmp_path / "plain").write_text("", encoding="utf-8")
    for format in ("md", "parquet"):
        assert main(["leaderboard", str(results), "--format", format, "--output", "plain/board.out"]) == 2
        assert capsys.readouterr().err == (f"vertebrae: error: --output plain/board.out: cannot write it: "
                                           f"{tmp_path / 'plain'} is a file, not a folder\n")
    assert main(["leaderboard", str(results), "--output", "out/board.md"]) == 0
    assert (tmp_path / "out" / "board.md").read_text(encoding="utf-8").startswith("# vertebrae leaderboard")
