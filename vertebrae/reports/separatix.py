"""The ``## Separatix`` section of the labelled Markdown report and the Separatix lines of its Warnings.

Separatix is descriptive (it never changes the ranking); the JSON report keeps its complete report. The section
shows, for every candidate that has a Separatix result (``ExtractorResult.separatix``, a ``SeparatixResult``):

- a summary table: ran, recommendation, recommendation confidence, the overlap gate (score against threshold)
  and why it did not run;
- **Decision path**: separatix's decision steps, one list item each, per candidate that ran;
- **Key scores**: separatix's scores (``SeparatixResult.scores``, e.g. ``signal_score``) side by side, with the
  meaning separatix gives each (``report["interpretations"]``); separatix's ``overlap_score`` is its own
  neighbourhood-mixing score (higher = more mixed), not the OverlapIndex score;
- **Probe evidence** (``probe_summary``): the best probe on the primary probe metric, the linear probe against
  the best nonlinear one (improvement > 0 favours the nonlinear probe, on the metric's own direction), separatix's
  paired 95 % interval of that improvement and the probe-comparison confidence, which is not the
  recommendation's confidence;
- **Evaluation context**: the cross-validation method and number of folds, whether the folds respect declared
  groups (group CV) and how many groups, the rows the probes used;
- **Skips**: a candidate not run (the reason), probes and diagnostics separatix skipped (name: reason) and a
  requested MLP probe that did not run; ``None.`` when nothing was skipped.

:func:`separatix_warnings` gives a candidate's Separatix warnings for the report's Warnings section.
Cells follow ``reports.comparison.cell``: None is ``–``, floats have 4 decimals.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vertebrae.reports.comparison import cell as _cell
from vertebrae.reports.comparison import table as _table

INTRODUCTION = ("Separatix classifier-complexity diagnostic on the evaluated embedding; descriptive only, it never "
                "changes the ranking. The recommendation's confidence and the probe-comparison confidence describe "
                "different evidence. The complete Separatix report is in the JSON report.")


def _gate(result) -> str | None:
    gate = result.gate or {}
    if gate.get("score") is None or gate.get("threshold") is None:
        return None
    sign = ">=" if gate.get("passed") else "<"
    return f"{gate.get('metric', 'overlap')} {gate['score']:.4f} {sign} {gate['threshold']:.4f}"


def _signed(value: Any) -> str | None:
    return None if value is None else f"{value:+.4f}"


def _summary_table(diagnosed: list) -> list[str]:
    return _table(["extractor", "ran", "recommendation", "confidence", "overlap gate", "skipped"],
                  [[r.name, r.separatix.ran, r.separatix.recommendation, r.separatix.confidence, _gate(r.separatix),
                    r.separatix.skipped_reason] for r in diagnosed])


def _decision_path(ran: list) -> list[str]:
    lines = ["", "**Decision path**", ""]
    for r in ran:
        steps = r.separatix.decision_path
        lines += [f"- **{_cell(r.name)}** step {i}: {_cell(step)}" for i, step in enumerate(steps, start=1)] or \
                 [f"- **{_cell(r.name)}**: separatix recorded no decision path"]
    return lines


def _score_name(key: str) -> str:
    return key[: -len("_score")] if key.endswith("_score") else key


def _key_scores(ran: list) -> list[str]:
    keys = list(dict.fromkeys(key for r in ran for key in r.separatix.scores))
    if not keys:
        return []
    meanings: dict[str, str] = {}
    for r in ran:
        for name, text in ((r.separatix.report or {}).get("interpretations") or {}).items():
            meanings.setdefault(str(name), str(text))
    rows = [[_score_name(key)] + [r.separatix.scores.get(key) for r in ran] + [_meaning(_score_name(key), meanings)]
            for key in keys]
    note = ("; its overlap is neighbourhood mixing, higher = more mixed, not the OverlapIndex score"
            if "overlap_score" in keys else "")
    return ["", f"**Key scores** (separatix's own scores{note})", ""] + _table(["score"] + [r.name for r in ran] + ["meaning"], rows)


def _meaning(name: str, meanings: Mapping[str, str]) -> str | None:
    """Separatix's interpretation of a score: its own entry, else that of the longest ``<prefix>_`` it starts with
    (``signal_micro_f1`` -> ``signal``)."""
    if name in meanings:
        return meanings[name]
    prefixes = [key for key in meanings if name.startswith(f"{key}_")]
    return meanings[max(prefixes, key=len)] if prefixes else None


def _interval(paired: Mapping[str, Any] | None) -> str | None:
    if not paired:
        return None
    return f"[{paired['lower_95']:+.4f}, {paired['upper_95']:+.4f}]"


def _probe_row(r) -> list[Any]:
    summary = r.separatix.probe_summary or {}
    best = summary.get("best_probe") or {}
    versus = summary.get("linear_vs_nonlinear") or {}
    if versus.get("status") == "available":
        nonlinear = f"{versus['nonlinear_probe']} ({versus['nonlinear_family']}) {versus['nonlinear_score']:.4f}"
        comparison = [versus.get("linear_score"), nonlinear, _signed(versus.get("improvement")),
                      _interval(versus.get("paired")), versus.get("confidence")]
    else:
        comparison = [None, None, None, None, f"unavailable: {versus.get('reason') or 'no comparison'}"]
    best_name = None if not best else f"{best.get('name')} ({best.get('family')})"
    return [r.name, best_name, best.get("metric") or summary.get("primary_metric"), best.get("score")] + comparison


def _probe_evidence(ran: list) -> list[str]:
    with_summary = [r for r in ran if r.separatix.probe_summary]
    if not with_summary:
        return []
    header = ["extractor", "best probe", "metric", "best score", "linear", "best nonlinear",
              "improvement (nonlinear - linear)", "paired 95% interval", "probe-comparison confidence"]
    return ["", "**Probe evidence** (improvement > 0 favours the nonlinear probe on the metric's own direction)", ""] \
        + _table(header, [_probe_row(r) for r in with_summary])


def _groups(r) -> str:
    grouping = r.separatix.grouping or (r.separatix.probe_summary or {}).get("grouping") or {}
    if not grouping.get("provided"):
        return "none declared"
    count = grouping.get("group_count")
    return f"{count} groups" if count is not None else "declared"


def _rows_used(sampling: Mapping[str, Any]) -> str | None:
    if sampling.get("n_used") is None:
        return None
    text = f"{sampling['n_used']} of {sampling.get('n_original')}"
    return text + (" (sampled)" if sampling.get("sampled") else "")


def _evaluation_row(r) -> list[Any]:
    summary = r.separatix.probe_summary or {}
    evaluation = summary.get("evaluation") or {}
    grouping = r.separatix.grouping or summary.get("grouping") or {}
    group_aware = evaluation.get("group_aware")
    return [r.name, evaluation.get("cv_method"), evaluation.get("n_splits"),
            None if group_aware is None else ("yes" if group_aware else "no"), _groups(r),
            grouping.get("effective_supervised_evaluation_mode"), _rows_used(summary.get("sampling") or {}),
            (summary.get("sampling") or {}).get("budget") or r.separatix.settings.get("budget")]


def _evaluation(ran: list) -> list[str]:
    header = ["extractor", "cv method", "folds", "group CV", "groups", "evaluation mode", "rows used", "budget"]
    return ["", "**Evaluation context**", ""] + _table(header, [_evaluation_row(r) for r in ran])


def _skip_lines(r) -> list[str]:
    name = f"**{_cell(r.name)}**"
    result = r.separatix
    if not result.ran:
        return [f"- {name}: not run: {_cell(result.skipped_reason)}"]
    summary = result.probe_summary or {}
    lines = [f"- {name}: probe {_cell(probe)} skipped: {_cell(reason)}"
             for probe, reason in ((summary.get("skips") or {}).get("probes") or {}).items()]
    lines += [f"- {name}: diagnostic {_cell(entry.get('name'))} skipped: {_cell(entry.get('reason'))}"
              for entry in result.skipped_diagnostics if isinstance(entry, Mapping)]
    mlp = summary.get("mlp") or {}
    if mlp.get("requested") and mlp.get("status") not in (None, "completed", "triggered"):
        lines.append(f"- {name}: MLP probes {_cell(mlp.get('status'))}: {_cell(mlp.get('reason'))}")
    return lines


def separatix_lines(candidates: list) -> list[str]:
    """The ``## Separatix`` section for the candidates that carry a Separatix result; empty when none does."""
    diagnosed = [r for r in candidates if r.separatix is not None]
    if not diagnosed:
        return []
    ran = [r for r in diagnosed if r.separatix.ran]
    lines = ["", "## Separatix", "", INTRODUCTION, ""] + _summary_table(diagnosed)
    if ran:
        lines += _decision_path(ran) + _key_scores(ran) + _probe_evidence(ran) + _evaluation(ran)
    skips = [line for r in diagnosed for line in _skip_lines(r)]
    lines += ["", "**Skips**", ""] + (skips or ["None."])
    return lines


def separatix_warnings(candidate) -> list[str]:
    """A candidate's Separatix warnings as ``separatix: text`` lines (none without a Separatix result)."""
    result = getattr(candidate, "separatix", None)
    return [] if result is None else [f"separatix: {text}" for text in result.warnings]
