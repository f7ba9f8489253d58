"""The views document (vertebrae.reports.views) from hand-made view reports: direction, verdicts, escaping."""

from __future__ import annotations

import json

import pytest

from vertebrae.core.errors import ValidationError
from vertebrae.reports.views import views_markdown, views_summary, write_views


def _report(scores: dict[str, float], pairs=None, skipped=None):
    ranking = sorted(scores, key=lambda n: -scores[n])
    comparison = None if pairs is None else {
        "candidates": [{"name": n} for n in ranking],
        "pairs": [{"a": a, "b": b, "verdict": v} for a, b, v in pairs]}
    return {"ranking": ranking, "comparison": comparison, "comparison_skipped": skipped,
            "extractor_results": [{"name": n, "primary_score": s, "primary_metric_name": "overlap"}
                                  for n, s in scores.items()]}


VIEWS = [{"view": "species", "role": "task", "type": "classification", "level": None, "alias": None},
         {"view": "site", "role": "nuisance", "type": "classification", "level": None, "alias": None},
         {"view": "genus", "role": "task", "type": "classification", "level": 0, "alias": None},
         {"view": "leaf", "role": "task", "type": "classification", "level": 1, "alias": "species"}]


def _summary(**site):
    reports = {"species": _report({"a|b": 0.9, "c": 0.5, "d": 0.2}),
               "site": _report({"a|b": 0.1, "c": 0.8, "d": 0.7}, **site),
               "genus": _report({"a|b": 0.95, "c": 0.4, "d": 0.3})}
    return views_summary(reports, VIEWS, benchmark="b<1>", primary="species")


def test_a_nuisance_ranks_lowest_first_and_names_who_encodes_it_more():
    summary = _summary(pairs=[("c", "d", "indistinguishable"), ("c", "a|b", "ahead"), ("d", "a|b", "ahead")])
    assert summary["candidates"] == ["a|b", "c", "d"]  # the primary view's ranking
    assert summary["rankings"] == {"species": ["a|b", "c", "d"], "site": ["a|b", "d", "c"],
                                   "genus": ["a|b", "c", "d"], "leaf": ["a|b", "c", "d"]}
    assert summary["nuisance"]["site"]["encoders"] == [{"candidate": "c", "more_than": ["a|b"]},
                                                       {"candidate": "d", "more_than": ["a|b"]}]
    assert summary["levels"] == ["genus", "leaf"] and summary["table"]["c"]["leaf"] == 0.5  # the alias's scores
    assert [v["better"] for v in summary["views"]] == ["higher", "lower", "higher", "higher"]
    markdown = views_markdown(summary)
    assert "**c** encodes site significantly more than a\\|b." in markdown  # a cell's pipe is escaped
    assert "Least encoding of site: a\\|b." in markdown


def test_a_behind_verdict_counts_for_the_second_candidate_and_no_comparison_says_why():
    flipped = _summary(pairs=[("c", "d", "indistinguishable"), ("c", "a|b", "indistinguishable"),
                              ("a|b", "d", "behind")])
    assert flipped["nuisance"]["site"]["encoders"] == [{"candidate": "d", "more_than": ["a|b"]}]
    skipped = _summary(skipped="disabled by the configuration (enabled: false)")
    assert skipped["nuisance"]["site"] == {"encoders": [], "skipped": "disabled by the configuration (enabled: false)"}
    assert "no paired comparison (disabled by the configuration" in views_markdown(skipped)


def test_a_missing_view_report_or_other_candidates_are_refused(tmp_path):
    reports = {"species": _report({"a": 0.9, "c": 0.5})}
    with pytest.raises(ValidationError, match=r"no report for view\(s\) \['genus', 'site'\]"):
        views_summary(reports, VIEWS, benchmark="b", primary="species")
    reports.update(site=_report({"a": 0.1, "x": 0.2}), genus=_report({"a": 0.1, "c": 0.2}))
    with pytest.raises(ValidationError, match="view 'site' scores \\['a', 'x'\\]"):
        views_summary(reports, VIEWS, benchmark="b", primary="species")
    reports["site"] = _report({"a": 0.1, "c": 0.2})
    summary = views_summary(reports, VIEWS, benchmark="b", primary="species")
    write_views(summary, tmp_path / "v.json", tmp_path / "v.md", tmp_path / "v.png")
    assert json.loads((tmp_path / "v.json").read_text())["table"] == summary["table"]
    assert (tmp_path / "v.png").read_bytes()[:4] == b"\x89PNG"


def test_verify_refuses_an_edited_views_file(tmp_path):
    from vertebrae.core.errors import CorruptArtifactError
    from vertebrae.reports.views import check_views_file

    summary = _summary(pairs=[("c", "d", "indistinguishable"), ("c", "a|b", "ahead"), ("d", "a|b", "ahead")])
    paths = [tmp_path / "reports" / "b" / name for name in ("views.json", "views.md", "views.png")]
    paths[0].parent.mkdir(parents=True)
    write_views(summary, *paths)
    for path in paths:
        check_views_file(path)
    paths[1].write_text(paths[1].read_text() + "edited\n")
    with pytest.raises(CorruptArtifactError, match="views.md: not what .* renders to"):
        check_views_file(paths[1])
    paths[0].write_text(paths[0].read_text().replace('"primary": "species"', '"primary": "site"'))
    with pytest.raises(CorruptArtifactError, match="content hash"):
        check_views_file(paths[0])
