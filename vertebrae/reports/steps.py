"""Score against training step: the report's view of a checkpoint sweep (``vertebrae.extractors.checkpoints``).

A step series is one sweep's candidates by step (``checkpoint_series``: ``{"sweep", "layer", "points": [{"step",
"candidate"}]}``; a layer x step grid gives one series per layer). The workflow's report spec carries them, the
labelled report job puts them in ``metadata["checkpoints"]`` (``with_step_definitions``) and, once the paired
comparison is attached, their numbers (``with_step_series``), so report.json holds, per series and step, the
candidate, its primary score and its interval:

- the paired comparison's interval of the candidate (``ci_low`` / ``ci_high``, the bootstrap interval over the
  comparison's units), when the comparison scored the same number as the candidate's primary score;
- else the stability interval (``interval_low`` / ``interval_high`` of the stability analysis), when one ran;
- else none (``ci_low`` / ``ci_high`` null, ``interval`` null).

``step_figure`` draws them: score against step, one line per series, the intervals as error bars; the labelled
report's detail figure draws the same panel beside its per-class heat map (``draw_steps``). In Python, with a
``CheckpointSweep`` and the ``BenchmarkResult`` of its candidates: ``step_series(result.to_dict(), sweep)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from vertebrae.core.errors import ValidationError
from vertebrae.reports.comparison import UNITS, table

METADATA_KEY = "checkpoints"


def _definitions(definitions: Any) -> list[Mapping[str, Any]]:
    if hasattr(definitions, "definitions"):  # a CheckpointSweep
        definitions = definitions.definitions()
    if not isinstance(definitions, Sequence) or isinstance(definitions, str):
        raise ValidationError(f"step series: a list of series, got {type(definitions).__name__}")
    for i, series in enumerate(definitions):
        points = series.get("points") if isinstance(series, Mapping) else None
        if not isinstance(points, Sequence) or not all(isinstance(p, Mapping) and isinstance(p.get("step"), int)
                                                       and isinstance(p.get("candidate"), str) for p in points):
            raise ValidationError(f"step series [{i}]: needs points of an integer step and a candidate name")
    return list(definitions)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _candidates(report: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    for key in ("extractor_results", "candidate_results"):
        if isinstance(report.get(key), list):
            return {c["name"]: c for c in report[key]}
    raise ValidationError("step series: the report has no candidates")


def step_series(report: Mapping[str, Any], definitions: Any) -> list[dict[str, Any]]:
    """The numbers of each step series in a report document (module docstring): ``[{"sweep", "layer", "metric",
    "interval", "points": [{"step", "candidate", "score", "ci_low", "ci_high", "interval_source"}]}]``. A point
    whose candidate the report lacks is refused naming it."""
    candidates = _candidates(report)
    comparison = report.get("comparison") or {}
    entries = {c["name"]: c for c in comparison.get("candidates", [])}
    label = None
    if comparison:
        label = (f"{comparison['config']['confidence_level']:.0%} bootstrap CI over "
                 f"{UNITS.get(comparison['unit'], comparison['unit'])}")
    out = []
    for series in _definitions(definitions):
        points, sources = [], set()
        metric = None
        for point in sorted(series["points"], key=lambda p: p["step"]):
            candidate = candidates.get(point["candidate"])
            if candidate is None:
                raise ValidationError(f"step series {series.get('sweep')!r}: step {point['step']}'s candidate "
                                      f"{point['candidate']!r} is not in the report")
            metric = metric or candidate.get("primary_metric_name") or candidate.get("primary_metric")
            score = _number(candidate.get("primary_score"))
            low = high = source = None
            entry = entries.get(point["candidate"])
            if (entry is not None and score is not None and _number(entry.get("score")) is not None
                    and abs(entry["score"] - score) <= 1e-9 * max(1.0, abs(score))):
                low, high, source = _number(entry.get("ci_low")), _number(entry.get("ci_high")), "comparison"
            else:
                summary = (candidate.get("stability") or {}).get("summary") or {}
                if _number(summary.get("interval_low")) is not None and _number(summary.get("interval_high")) is not None:
                    low, high, source = float(summary["interval_low"]), float(summary["interval_high"]), "stability"
            sources.add(source)
            points.append({"step": point["step"], "candidate": point["candidate"], "score": score, "ci_low": low,
                           "ci_high": high, "interval_source": source})
        interval = label if sources == {"comparison"} else ("stability interval" if sources == {"stability"} else
                                                            None if sources == {None} else "mixed (see each point)")
        out.append({"sweep": series.get("sweep"), "layer": series.get("layer"), "metric": metric,
                    "interval": interval, "points": points})
    return out


def with_step_definitions(report: Any, definitions: Sequence[Mapping[str, Any]] | None) -> Any:
    """``report`` (a result dataclass with ``metadata``) carrying the step series' definitions, when there are any."""
    from dataclasses import replace

    if not definitions:
        return report
    return replace(report, metadata={**report.metadata, METADATA_KEY: [dict(d) for d in _definitions(definitions)]})


def with_step_series(report: Any) -> Any:
    """``report`` with its step series' numbers (``step_series``) in ``metadata["checkpoints"]``; unchanged when it
    has none. Call it after the comparison is attached: the intervals come from it."""
    from dataclasses import replace

    definitions = report.metadata.get(METADATA_KEY)
    if not definitions:
        return report
    return replace(report, metadata={**report.metadata, METADATA_KEY: step_series(report.to_dict(), definitions)})


def step_lines(metadata: Mapping[str, Any]) -> list[str]:
    """report.md's ``## Score against checkpoint step`` section: one row per series and step (nothing when the report
    has no step series with numbers)."""
    series = [s for s in (metadata.get(METADATA_KEY) or []) if any("score" in p for p in s.get("points", []))]
    if not series:
        return []
    rows = [[series_label(s), p["step"], p["candidate"], p["score"],
             None if p.get("ci_low") is None else f"[{p['ci_low']:.4f}, {p['ci_high']:.4f}]", p.get("interval_source")]
            for s in series for p in s["points"]]
    return ["", "## Score against checkpoint step", "",
            "Each checkpoint sweep's candidates by training step (figure: detail.png), with each candidate's interval.",
            ""] + table(["sweep", "step", "candidate", "score", "interval", "interval from"], rows)


def series_label(series: Mapping[str, Any]) -> str:
    """A series' legend: its sweep's name, and its layer for a layer x step grid."""
    return str(series.get("sweep")) if series.get("layer") is None else f"{series.get('sweep')} (layer {series['layer']})"


def draw_steps(ax, series: Sequence[Mapping[str, Any]], *, title: str | None = None) -> None:
    """Score against step on ``ax``: one line per series, each point's interval as an error bar where it has one."""
    metrics = set()
    for i, line in enumerate(series):
        points = [p for p in line["points"] if p.get("score") is not None]
        steps = [p["step"] for p in points]
        scores = [p["score"] for p in points]
        style = {"marker": "os^Dvp<>*h"[i % 10], "linestyle": ("-", "--", "-.", ":")[i % 4], "label": series_label(line)}
        if any(p.get("ci_low") is not None for p in points):
            yerr = [[s - (p["ci_low"] if p.get("ci_low") is not None else s) for s, p in zip(scores, points)],
                    [(p["ci_high"] if p.get("ci_high") is not None else s) - s for s, p in zip(scores, points)]]
            ax.errorbar(steps, scores, yerr=[[max(0.0, v) for v in yerr[0]], [max(0.0, v) for v in yerr[1]]],
                        capsize=3, **style)
        else:
            ax.plot(steps, scores, **style)
        metrics.add(line.get("metric") or "primary score")
    intervals = {line.get("interval") for line in series} - {None}
    ax.set_xlabel("training step")
    ax.set_ylabel(", ".join(sorted(metrics)) + (f" (bars: {', '.join(sorted(intervals))})" if intervals else ""))
    ax.set_title(title or "score against checkpoint step")
    ax.legend(fontsize=8)


def step_figure(series: Sequence[Mapping[str, Any]], *, title: str | None = None):
    """A figure of score against step (``draw_steps``); ValidationError when there is no series to draw."""
    if not series or not any(p.get("score") is not None for s in series for p in s.get("points", [])):
        raise ValidationError("step figure: no step series with a score to draw")
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    draw_steps(ax, series, title=title)
    fig.tight_layout()
    return fig


__all__ = ["METADATA_KEY", "draw_steps", "series_label", "step_figure", "step_lines", "step_series", "with_step_definitions",
           "with_step_series"]
