"""The ranked-report base the three protocols' results share: ranking order, quality cohort, JSON round trip,
schema refusal and atomic saves, checked on a minimal candidate type and on the three concrete classes."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from vertebrae.core.errors import ArtifactError
from vertebrae.results import BenchmarkResult
from vertebrae.results.base import COHORT_TOLERANCE, CohortReport, compression_method, with_content_hash
from vertebrae.results.retrieval import RetrievalBenchmarkResult
from vertebrae.results.zero_shot import ZeroShotBenchmarkResult


@dataclass(frozen=True)
class Candidate:
    name: str
    primary_score: float

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "primary_score": self.primary_score}

    @classmethod
    def from_dict(cls, data):
        return cls(data["name"], data["primary_score"])


def _render(result) -> str:
    return "# " + ", ".join(result.ranking_names()) + "\n"


@dataclass(frozen=True)
class Toy(CohortReport):
    SCHEMA = "toy-report/v1"
    SCHEMA_LABEL = "toy "
    CANDIDATE_TYPE = Candidate
    RENDER = staticmethod(_render)

    def ranking_names(self) -> list[str]:
        return [r.name for r in self.ranked_results()]

    def _ranks(self, candidate: Candidate) -> bool:
        return candidate.primary_score >= 0

    def _columns(self, candidate: Candidate) -> dict[str, Any]:
        return {"score": candidate.primary_score}


def _toy(*scores: float, metadata: dict | None = None) -> Toy:
    return Toy([Candidate(f"c{i}", s) for i, s in enumerate(scores)], {"n_rows": 3}, metadata or {})


def test_ranking_is_best_first_and_ties_keep_declaration_order():
    result = _toy(0.5, 0.9, 0.5, 0.7)
    assert [r.name for r in result.ranked_results()] == ["c1", "c3", "c0", "c2"]


def test_quality_cohort_is_within_the_tolerance_of_the_best():
    assert COHORT_TOLERANCE == 0.01
    result = _toy(0.80, 0.795, 0.7899, 0.790)
    assert result.quality_cohort() == ["c0", "c1", "c3"]
    assert _toy().quality_cohort() == []


def test_json_round_trip_and_layout():
    result = _toy(0.2, 0.4, metadata={"benchmark": "b"})
    data = json.loads(json.dumps(result.to_dict()))
    assert data == {"schema": "toy-report/v1", "ranking": ["c1", "c0"], "quality_cohort": ["c1"],
                    "candidate_results": [{"name": "c0", "primary_score": 0.2}, {"name": "c1", "primary_score": 0.4}],
                    "dataset_summary": {"n_rows": 3}, "metadata": {"benchmark": "b"}, "comparison": None,
                    "comparison_skipped": None}
    assert Toy.from_dict(data) == result


@pytest.mark.parametrize("data", [{"schema": "other/v1"}, {}, ["not", "a", "mapping"]])
def test_from_dict_refuses_another_schema_naming_both(data):
    found = data.get("schema") if isinstance(data, dict) else None
    with pytest.raises(ArtifactError, match=rf"^unknown toy report schema {found!r}, expected 'toy-report/v1'$"):
        Toy.from_dict(data)


@pytest.mark.parametrize(("cls", "label", "schema"), [
    (BenchmarkResult, "", "vertebrae.report/v1"),
    (RetrievalBenchmarkResult, "retrieval ", "vertebrae.retrieval-report/v1"),
    (ZeroShotBenchmarkResult, "zero-shot ", "vertebrae.zero-shot-report/v1"),
])
def test_each_protocol_refuses_a_foreign_report_schema(cls, label, schema):
    with pytest.raises(ArtifactError, match=rf"^unknown {label}report schema 'vertebrae.report/v0', expected '{schema}'$"):
        cls.from_dict({"schema": "vertebrae.report/v0"})


def test_empty_reports_of_the_paired_protocols_round_trip():
    for cls in (RetrievalBenchmarkResult, ZeroShotBenchmarkResult):
        empty = cls([], {}, {})
        assert empty.ranked_results() == [] and empty.quality_cohort() == []
        assert cls.from_dict(empty.to_dict()) == empty
        assert "| rank | extractor |" in empty.RENDER(empty)


def test_save_json_and_markdown_write_the_dict_and_the_renderer_text(tmp_path):
    result = _toy(0.1, 0.3)
    result.save_json(tmp_path / "report.json")
    result.save_markdown(tmp_path / "report.md")
    assert json.loads((tmp_path / "report.json").read_text()) == with_content_hash(result.to_dict())  # + its hash
    assert (tmp_path / "report.md").read_text() == "# c1, c0\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json", "report.md"]  # no temporary left behind


def test_table_rows_rank_the_ranked_then_list_the_unranked():
    result = _toy(0.1, -1.0, 0.3)
    assert result.table_rows() == [{"rank": 1, "extractor": "c2", "score": 0.3},
                                   {"rank": 2, "extractor": "c0", "score": 0.1},
                                   {"rank": None, "extractor": "c1", "score": -1.0}]
    assert [r.name for r in result.ranked_results()] == ["c2", "c0"]


def test_to_dataframe_has_the_table_rows():
    frame = _toy(0.1, 0.3).to_dataframe()
    assert list(frame.columns) == ["rank", "extractor", "score"]
    assert list(frame["extractor"]) == ["c1", "c0"]


@pytest.mark.parametrize(("metadata", "expected"), [
    (None, None), ({}, None), ({"method": "pca", "applied": False}, None), ({"method": "pca", "applied": True}, "pca"),
])
def test_compression_method_only_when_applied(metadata, expected):
    assert compression_method(metadata) == expected


@dataclass(frozen=True)
class Flagged(Candidate):
    aggregate_valid: bool = True


@dataclass(frozen=True)
class PlainCohort(CohortReport):
    SCHEMA = "plain-report/v1"
    CANDIDATE_TYPE = Flagged
    RENDER = staticmethod(_render)

    def _columns(self, candidate: Flagged) -> dict[str, Any]:
        return {"score": candidate.primary_score}


def test_a_cohort_report_ranks_only_aggregate_valid_candidates():
    # a collapsed embedding's candidate says aggregate_valid=False: listed without a rank, never in the cohort
    result = PlainCohort([Flagged("collapsed", 1.0, False), Flagged("real", 0.6), Flagged("other", 0.595)], {}, {})
    assert [r.name for r in result.ranked_results()] == ["real", "other"]
    assert result.quality_cohort() == ["real", "other"]
    assert [(row["rank"], row["extractor"]) for row in result.table_rows()] == [(1, "real"), (2, "other"), (None, "collapsed")]
    assert PlainCohort([Flagged("collapsed", 1.0, False)], {}, {}).quality_cohort() == []


def test_cohort_reports_answer_to_the_labelled_name_of_their_candidates():
    result = _toy(0.2, 0.4)
    assert result.extractor_results is result.candidate_results and len(result.extractor_results) == 2


def test_a_stamped_report_names_the_vertebrae_that_wrote_it_and_round_trips(tmp_path):
    """Issue 34, item 4: the workflow's report jobs stamp the version (and git revision) into every report."""
    software = {"vertebrae": "9.9.9", "git_revision": "0123456789abcdef" * 2 + "01234567", "git_dirty": True}
    result = _toy(0.1, 0.3).with_software(software)
    assert result.to_dict()["metadata"] == {"software": software}
    assert Toy.from_dict(result.to_dict()) == result
    assert result.markdown() == "# c1, c0\n\nWritten by vertebrae 9.9.9 (git 0123456789ab, uncommitted changes).\n"
    wheel = _toy(0.1).with_software({"vertebrae": "9.9.9"})
    assert wheel.markdown().endswith("\n\nWritten by vertebrae 9.9.9.\n")
    sectioned = type("Sectioned", (Toy,), {"RENDER": staticmethod(lambda r: "# t\n\nintro\n\n## Ranking\n\n| 1 |\n")})
    stamped = sectioned([Candidate("c0", 0.5)], {}, {}).with_software({"vertebrae": "9.9.9"})
    assert stamped.markdown() == "# t\n\nintro\n\nWritten by vertebrae 9.9.9.\n\n## Ranking\n\n| 1 |\n"
