"""Report figures with matplotlib (Agg backend, no display): ranking, per-class scores, confusion matrix, comparison.

The building blocks take plain numbers and return a ``matplotlib.figure.Figure``:

- :func:`ranking_figure` — one horizontal bar per candidate (best first), the primary score on the bar, and each
  score's confidence interval as a whisker when intervals are given;
- :func:`per_class_figure` — a classes x candidates heat map of per-class scores (values printed in the cells),
  with, when the benchmark declares a few-shot metric, its accuracy-against-shots curves beside it
  (:func:`few_shot_curves`, :func:`draw_few_shot_curves`);
- :func:`confusion_matrix_figure` — rows = true class, columns = predicted class, cells = counts, colour = the
  row-normalised fraction (each row sums to 1 over a class's samples);
- :func:`comparison_figure` — the pairwise matrix of a comparison document (``reports.comparison``): candidates x
  candidates in ranking order, colour = Δ row - column, each cell's Δ with ``*`` where the adjusted p is below
  alpha; :func:`no_comparison_figure` says why a report has none.

:func:`report_figures` picks the right figures for a report JSON (labelled, retrieval or zero-shot; the ranking's
whiskers and the comparison figure come from its ``comparison``) and :func:`write_report_figures` renders them to
files atomically, each PNG stamped with its name and the report's content hash (``reports.png``, which
``vertebrae verify`` reads). Bad input raises ValidationError naming what is
wrong (the candidate, the class, the matrix shape); nothing is drawn from invalid numbers.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from vertebrae.core.errors import ArtifactError, ValidationError
from vertebrae.reports.comparison import UNITS, check_comparison, ranked_names, versus
from vertebrae.reports.png import stamp
from vertebrae.reports.steps import METADATA_KEY as STEPS_KEY, draw_steps, step_figure
from vertebrae.reports.schemas import (
    LABELLED_SCHEMA,
    RETRIEVAL_SCHEMA,
    ZERO_SHOT_SCHEMA,
)

FIGURES = ("ranking", "detail", "comparison")


def report_names(final_outputs: Sequence[str]) -> list[str]:
    """Benchmark names of the ``results/reports/<name>/report.json`` targets among ``final_outputs``."""
    return [Path(p).parent.name for p in final_outputs if Path(p).name == "report.json"]


def report_names_pattern(final_outputs: Sequence[str]) -> str:
    """A regular expression matching exactly those benchmark names (the figures rule's wildcard constraint)."""
    import re

    return "|".join(re.escape(name) for name in report_names(final_outputs)) or "no-report"


def figure_targets(final_outputs: Sequence[str]) -> list[str]:
    """``results/reports/<name>/<figure>.png`` for every report among ``final_outputs`` (the figures rule's outputs)."""
    return [str(Path(p).parent / f"{figure}.png") for p in final_outputs if Path(p).name == "report.json" for figure in FIGURES]


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _finite(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValidationError(f"{what}: expected a finite number, got {value!r}")
    return float(value)


def ranking_figure(names: Sequence[str], scores: Sequence[float], *, metric: str, title: str | None = None,
                   intervals: Sequence[tuple[float, float] | None] | None = None, interval_label: str = "confidence interval"):
    """Horizontal bars of ``scores`` in the given order (first on top), each labelled with its value.

    ``intervals`` (one ``(low, high)`` or None per candidate) are drawn as whiskers from low to high, named
    ``interval_label`` in the axis label; the value labels then sit right of the whiskers.
    """
    if len(names) != len(scores) or not names:
        raise ValidationError(f"ranking figure: {len(names)} names for {len(scores)} scores (need at least one of each)")
    values = [_finite(s, f"ranking figure: score of candidate {n!r}") for n, s in zip(names, scores)]
    if intervals is not None and len(intervals) != len(names):
        raise ValidationError(f"ranking figure: {len(intervals)} intervals for {len(names)} candidates")
    spans = {}
    for i, (name, interval) in enumerate(zip(names, intervals or [])):
        if interval is not None:
            lo, hi = (_finite(v, f"ranking figure: interval of candidate {name!r}") for v in interval)
            if lo > hi:
                raise ValidationError(f"ranking figure: interval of candidate {name!r} is [{lo}, {hi}], low above high")
            spans[i] = (lo, hi)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(names) + 1.4))
    positions = list(range(len(names)))[::-1]
    bars = ax.barh(positions, values, color="#4c72b0")
    ax.set_yticks(positions, labels=[str(n) for n in names])
    if spans:
        ax.errorbar([(lo + hi) / 2 for lo, hi in spans.values()], [positions[i] for i in spans],
                    xerr=[(hi - lo) / 2 for lo, hi in spans.values()], fmt="none", ecolor="black", capsize=3, lw=1)
        width = max(max(values), max(hi for _, hi in spans.values())) - min(0.0, min(values))
        for i, value in enumerate(values):
            ax.text(max(value, spans[i][1] if i in spans else value) + 0.01 * (width or 1.0), positions[i],
                    f"{value:.4f}", va="center", fontsize=8)
    else:
        ax.bar_label(bars, labels=[f"{v:.4f}" for v in values], padding=3, fontsize=8)
    low = min([0.0, *values, *(lo for lo, _ in spans.values())])
    high = max([*values, *(hi for _, hi in spans.values())])
    ax.set_xlim(low, high + 0.15 * (high - low or 1.0))
    ax.set_xlabel(f"{metric} (whiskers: {interval_label})" if spans else metric)
    ax.set_title(title or f"Ranking by {metric}")
    fig.tight_layout()
    return fig


def per_class_figure(class_names: Sequence[str], scores: Mapping[str, Sequence[float | None]], *, metric: str,
                     title: str | None = None, few_shot: Mapping[str, Any] | None = None,
                     steps: Sequence[Mapping[str, Any]] | None = None):
    """Heat map with one row per class and one column per candidate; ``None`` cells (no score) stay blank.

    With ``few_shot`` (:func:`few_shot_curves`), the figure gains a second panel beside the heat map: each
    few-shot metric's curves (:func:`draw_few_shot_curves`). With ``steps`` (checkpoint sweeps' step series with
    their numbers, ``reports.steps``), one more panel: score against step (``reports.steps.draw_steps``).
    """
    if not class_names or not scores:
        raise ValidationError("per-class figure: needs at least one class and one candidate")
    columns = list(scores)
    grid = []
    for name in columns:
        column = list(scores[name])
        if len(column) != len(class_names):
            raise ValidationError(f"per-class figure: candidate {name!r} has {len(column)} scores for {len(class_names)} classes")
        grid.append([math.nan if v is None else _finite(v, f"per-class figure: candidate {name!r}, class {c!r}")
                     for c, v in zip(class_names, column)])
    rows = [[grid[j][i] for j in range(len(columns))] for i in range(len(class_names))]
    plt = _pyplot()
    width, height = 1.1 * len(columns) + 2.5, 0.4 * len(class_names) + 1.8
    panels = len(few_shot or {}) + (1 if steps else 0)
    if panels:
        fig, axes = plt.subplots(1, 1 + panels, figsize=(width + 5.5 * panels, max(height, 4.0)),
                                 gridspec_kw={"width_ratios": [width] + [5.5] * panels})
        ax, curve_axes = axes[0], axes[1:]
    else:
        fig, ax = plt.subplots(figsize=(width, height))
        curve_axes = []
    image = ax.imshow(rows, aspect="auto", cmap="viridis", vmin=0.0, vmax=1.0)
    ax.set_xticks(range(len(columns)), labels=columns, rotation=30, ha="right")
    ax.set_yticks(range(len(class_names)), labels=[str(c) for c in class_names])
    for i, row in enumerate(rows):
        for j, value in enumerate(row):
            if not math.isnan(value):
                ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=7, color="white" if value < 0.6 else "black")
    fig.colorbar(image, ax=ax, label=metric)
    ax.set_title(title or f"Per-class {metric}")
    for curve_ax, (name, curves) in zip(curve_axes, (few_shot or {}).items()):
        draw_few_shot_curves(curve_ax, curves, metric=name)
    if steps:
        draw_steps(curve_axes[-1], steps)
    fig.tight_layout()
    return fig


def few_shot_curves(ranked: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, dict[int, tuple[float, float, float]]]]:
    """``{metric: {candidate: {shots: (accuracy, ci_low, ci_high)}}}`` of every few-shot metric of ``ranked``.

    A few-shot metric is a candidate metric whose metadata ``type`` is ``few_shot``; its numbers are the
    diagnostics' ``per_shot`` entries (``scoring.few_shot``), checked finite with low <= accuracy <= high.
    """
    out: dict[str, dict[str, dict[int, tuple[float, float, float]]]] = {}
    for candidate in ranked:
        for metric, result in (candidate.get("metrics") or {}).items():
            if (result.get("metadata") or {}).get("type") != "few_shot":
                continue
            where = f"candidate {candidate['name']!r}, few-shot metric {metric!r}"
            per_shot = (result.get("diagnostics") or {}).get("per_shot")
            if not isinstance(per_shot, Mapping) or not per_shot:
                raise ValidationError(f"{where}: no per-shot accuracies")
            curve = {}
            for shots, entry in per_shot.items():
                at = f"{where}, {shots} shots"
                if not str(shots).isdigit():
                    raise ValidationError(f"{at}: shot count is not a positive integer")
                values = tuple(_finite(entry.get(k) if isinstance(entry, Mapping) else None, f"{at}: {k}")
                               for k in ("accuracy", "ci_low", "ci_high"))
                if not values[1] <= values[0] <= values[2]:
                    raise ValidationError(f"{at}: interval [{values[1]}, {values[2]}] does not hold accuracy {values[0]}")
                curve[int(shots)] = values
            out.setdefault(metric, {})[candidate["name"]] = dict(sorted(curve.items()))
    return out


def draw_few_shot_curves(ax, curves: Mapping[str, Mapping[int, tuple[float, float, float]]], *, metric: str) -> None:
    """Accuracy against shots per class on ``ax``: one line per candidate, its interval as error bars."""
    for i, (name, curve) in enumerate(curves.items()):
        shots = list(curve)
        acc = [curve[s][0] for s in shots]
        ax.errorbar(shots, acc, yerr=[[a - curve[s][1] for s, a in zip(shots, acc)],
                                       [curve[s][2] - a for s, a in zip(shots, acc)]],
                    marker="os^Dvp<>*h"[i % 10], linestyle=("-", "--", "-.", ":")[i % 4], capsize=3, label=name)
    every = sorted({s for curve in curves.values() for s in curve})
    ax.set_xscale("log")
    ax.set_xticks(every, labels=[str(s) for s in every])
    ax.minorticks_off()
    ax.set_xlabel("shots per class")
    ax.set_ylabel("mean accuracy (bars: 95% interval over episodes)")
    ax.set_title(f"{metric}: few-shot accuracy")
    ax.legend(fontsize=8)


def confusion_matrix_figure(matrix: Sequence[Sequence[int]], class_names: Sequence[str], *, title: str | None = None):
    """Counts of (true class = row, predicted class = column); colour is the fraction of the row."""
    n = len(class_names)
    if n == 0 or len(matrix) != n or any(len(row) != n for row in matrix):
        shape = f"{len(matrix)} x {sorted({len(r) for r in matrix})}" if len(matrix) else "empty"
        raise ValidationError(f"confusion matrix: shape {shape} does not match {n} class names")
    counts = []
    for name, row in zip(class_names, matrix):
        for value in row:
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValidationError(f"confusion matrix: row of class {name!r} holds {value!r}, expected counts >= 0")
        counts.append([int(v) for v in row])
    fractions = [[v / sum(row) if sum(row) else 0.0 for v in row] for row in counts]
    plt = _pyplot()
    size = 0.45 * n + 2.5
    fig, ax = plt.subplots(figsize=(size + 1.0, size))
    image = ax.imshow(fractions, cmap="Blues", vmin=0.0, vmax=1.0)
    labels = [str(c) for c in class_names]
    ax.set_xticks(range(n), labels=labels, rotation=45, ha="right")
    ax.set_yticks(range(n), labels=labels)
    ax.set_xlabel("predicted class")
    ax.set_ylabel("true class")
    if n <= 30:
        for i, row in enumerate(counts):
            for j, value in enumerate(row):
                ax.text(j, i, str(value), ha="center", va="center", fontsize=7,
                        color="white" if fractions[i][j] > 0.5 else "black")
    fig.colorbar(image, ax=ax, label="fraction of the true class")
    ax.set_title(title or "Confusion matrix")
    fig.tight_layout()
    return fig


def comparison_figure(document: Mapping[str, Any], *, title: str | None = None):
    """The pairwise matrix of a comparison document, candidates in ranking order (the leader first).

    Cell (row, column) is coloured by Δ = score row - score column (blue: the row is higher) and shows that Δ,
    with ``*`` where the pair's adjusted p-value is below the document's alpha; the diagonal stays blank.
    """
    document = check_comparison(document)
    names = ranked_names(document)
    config = document["config"]
    cells = {(a, b): versus(document, a, b) for a in names for b in names if a != b}
    grid = [[cells[a, b]["delta"] if a != b else math.nan for b in names] for a in names]
    scale = max(abs(pair["delta"]) for pair in cells.values()) or 1.0
    plt = _pyplot()
    n = len(names)
    fig, ax = plt.subplots(figsize=(0.9 * n + 3.2, 0.6 * n + 2.2))
    image = ax.imshow(grid, cmap="RdBu", vmin=-scale, vmax=scale)
    ax.set_xticks(range(n), labels=names, rotation=30, ha="right")
    ax.set_yticks(range(n), labels=names)
    ax.set_xlabel("column")
    ax.set_ylabel("row")
    if n <= 30:
        for i, a in enumerate(names):
            for j, b in enumerate(names):
                if a != b:
                    pair = cells[a, b]
                    mark = "*" if pair["p_adjusted"] < config["alpha"] else ""
                    ax.text(j, i, f"{pair['delta']:+.4f}{mark}", ha="center", va="center", fontsize=7,
                            color="white" if abs(pair["delta"]) > 0.6 * scale else "black")
    fig.colorbar(image, ax=ax, label=f"Δ {document['statistic']} (row − column)")
    units = document["unit"] if document["n_units"] == 1 else UNITS[document["unit"]]
    ax.set_title(title or f"Pairwise Δ {document['statistic']}")
    fig.text(0.01, 0.01, f"* adjusted p < {config['alpha']} ({config['adjustment']}); paired over "
             f"{document['n_units']} {units}", fontsize=7, ha="left", va="bottom")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return fig


def no_comparison_figure(reason: str, *, title: str | None = None):
    """A figure that only says ``no comparison: <reason>`` (a report without a paired comparison)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 1.6))
    ax.axis("off")
    ax.text(0.5, 0.5, f"no comparison: {str(reason).rstrip('.')}", ha="center", va="center", fontsize=10, wrap=True)
    if title:
        ax.set_title(title)
    return fig


def _ranking(report: dict[str, Any], ranked: list[dict[str, Any]], metric: str, name: str):
    """The ranking figure of ``ranked``; with the report's comparison, each candidate's interval as a whisker.

    A whisker is drawn only for a candidate whose comparison score is the bar's score (within 1e-9, relative):
    an interval of another statistic would not belong on that bar.
    """
    names, scores = [c["name"] for c in ranked], [c["primary_score"] for c in ranked]
    title = f"{name}: ranking by {metric}"
    if report.get("comparison") is None:
        return ranking_figure(names, scores, metric=metric, title=title)
    document = check_comparison(report["comparison"])
    entries = {c["name"]: c for c in document["candidates"]}
    intervals = []
    for candidate in ranked:
        entry, score = entries.get(candidate["name"]), candidate["primary_score"]
        same = (entry is not None and isinstance(score, (int, float)) and not isinstance(score, bool)
                and abs(entry["score"] - score) <= 1e-9 * max(1.0, abs(score)))
        intervals.append((entry["ci_low"], entry["ci_high"]) if same else None)
    label = f"{document['config']['confidence_level']:.0%} bootstrap CI over {UNITS[document['unit']]}"
    return ranking_figure(names, scores, metric=metric, title=title, intervals=intervals, interval_label=label)


def _ranked(candidates: list[dict[str, Any]], ranking: list[str]) -> list[dict[str, Any]]:
    by_name = {c["name"]: c for c in candidates}
    missing = [name for name in ranking if name not in by_name]
    if missing:
        raise ValidationError(f"report ranks unknown candidates {missing}")
    return [by_name[name] for name in ranking]


def _labelled_figures(report: dict[str, Any], name: str) -> dict[str, Any]:
    ranked = _ranked(report["extractor_results"], report["ranking"])
    if not ranked:  # no aggregate-valid candidate: show every candidate, unranked
        ranked = list(report["extractor_results"])
    metric = ranked[0]["primary_metric_name"] if ranked else "primary score"
    figures = {"ranking": _ranking(report, ranked, metric, name)}
    steps = [s for s in (report["metadata"].get(STEPS_KEY) or []) if any("score" in p for p in s["points"])]
    labels = report["dataset_summary"].get("labels") or {}
    if labels:
        keys = list(labels)
        figures["detail"] = per_class_figure(
            [labels[k] for k in keys], {c["name"]: [c["overlap"]["per_class_scores"].get(k) for k in keys] for c in ranked},
            metric="OverlapIndex class score", title=f"{name}: per-class separation", few_shot=few_shot_curves(ranked),
            steps=steps)
    elif steps:  # regression with checkpoint sweeps: score against step, with the intervals
        figures["detail"] = step_figure(steps, title=f"{name}: {metric} against checkpoint step")
    else:  # regression: no classes; the primary score with its stability interval instead
        figures["detail"] = _interval_figure(ranked, metric, f"{name}: {metric} with stability interval")
    return figures


def _interval_figure(ranked: list[dict[str, Any]], metric: str, title: str):
    plt = _pyplot()
    names = [c["name"] for c in ranked]
    scores = [_finite(c["primary_score"], f"candidate {c['name']!r}") for c in ranked]
    low, high = [], []
    for c, s in zip(ranked, scores):
        summary = (c.get("stability") or {}).get("summary") or {}
        lo, hi = summary.get("interval_low"), summary.get("interval_high")
        low.append(0.0 if lo is None else max(0.0, s - float(lo)))
        high.append(0.0 if hi is None else max(0.0, float(hi) - s))
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(names) + 1.4))
    positions = list(range(len(names)))[::-1]
    ax.barh(positions, scores, xerr=[low, high], color="#55a868", capsize=3)
    ax.set_yticks(positions, labels=names)
    ax.set_xlabel(metric)
    ax.set_title(title)
    fig.tight_layout()
    return fig


def _retrieval_figures(report: dict[str, Any], name: str) -> dict[str, Any]:
    ranked = _ranked(report["candidate_results"], report["ranking"])
    metric = report["metadata"].get("primary_metric") or "primary score"
    figures = {"ranking": _ranking(report, ranked, metric, name)}
    family = metric.split("@")[0] if "@" in metric else "ndcg"
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    all_ks = set()
    # equal scores must not hide each other: each candidate its own marker and dash, nudged sideways (log scale)
    for i, c in enumerate(ranked):
        metrics = c["score"]["forward"]["metrics"]
        ks = sorted(int(k.split("@")[1]) for k in metrics if k.startswith(f"{family}@"))
        all_ks.update(ks)
        nudge = 1 + 0.04 * (i - (len(ranked) - 1) / 2)
        ax.plot([k * nudge for k in ks],
                [_finite(metrics[f"{family}@{k}"], f"candidate {c['name']!r}, {family}@{k}") for k in ks],
                marker="os^Dvp<>*h"[i % 10], linestyle=("-", "--", "-.", ":")[i % 4], alpha=0.85, label=c["name"])
    ax.set_xlabel("k")
    ax.set_ylabel(family)
    ax.set_xscale("log")
    ax.set_xticks(sorted(all_ks), labels=[str(k) for k in sorted(all_ks)])
    ax.minorticks_off()
    ax.legend(fontsize=8)
    ax.set_title(f"{name}: {family}@k per candidate")
    fig.tight_layout()
    figures["detail"] = fig
    return figures


def _zero_shot_figures(report: dict[str, Any], name: str) -> dict[str, Any]:
    ranked = _ranked(report["candidate_results"], report["ranking"])
    metric = ranked[0]["primary_metric"] if ranked else "primary score"
    figures = {"ranking": _ranking(report, ranked, metric, name)}
    best = ranked[0]["zero_shot"]
    labels = best.get("labels") or {}
    figures["detail"] = confusion_matrix_figure(best["confusion_matrix"], [labels.get(k, k) for k in best["class_keys"]],
                                                title=f"{name}: confusion matrix of {ranked[0]['name']}")
    return figures


def report_figures(report: Mapping[str, Any], *, name: str = "report") -> dict[str, Any]:
    """``{"ranking": Figure, "detail": Figure, "comparison": Figure}`` for a labelled, retrieval or zero-shot report.

    The detail figure is the per-class score heat map (labelled classes / labels; with each few-shot metric's
    curves beside it), the primary score with its
    stability interval (regression), metric@k curves (retrieval) or the best candidate's confusion matrix
    (zero-shot). The comparison figure is :func:`comparison_figure` of the report's ``comparison``, or
    :func:`no_comparison_figure` with its ``comparison_skipped`` reason; the ranking's whiskers are the
    comparison's candidate intervals.
    """
    schema = report.get("schema") if isinstance(report, Mapping) else None
    builders = {LABELLED_SCHEMA: _labelled_figures, RETRIEVAL_SCHEMA: _retrieval_figures, ZERO_SHOT_SCHEMA: _zero_shot_figures}
    if schema not in builders:
        raise ValidationError(f"report {name!r}: unknown report schema {schema!r}; expected one of {sorted(builders)}")
    try:
        figures = builders[schema](dict(report), name)
    except (KeyError, TypeError, IndexError) as exc:
        raise ValidationError(f"report {name!r}: malformed {schema} report ({type(exc).__name__}: {exc})") from None
    view = (report.get("metadata") or {}).get("view") or {}  # a nuisance view's report: lower is better
    title = (f"{name}: who encodes {view.get('name')} more? (lower is better)" if view.get("role") == "nuisance"
             else f"{name}: is the leader really ahead?")
    if report.get("comparison") is not None:
        figures["comparison"] = comparison_figure(report["comparison"], title=title)
    else:
        reason = report.get("comparison_skipped") or "this report was written without a paired comparison"
        figures["comparison"] = no_comparison_figure(reason, title=title)
    return figures


def write_report_figures(report_path: str | Path, ranking_path: str | Path, detail_path: str | Path,
                         comparison_path: str | Path | None = None) -> None:
    """Render :func:`report_figures` of the JSON report at ``report_path``; each file is written atomically.

    The comparison figure is written only when ``comparison_path`` is given.
    """
    from vertebrae.core.artifacts import atomic_write

    try:
        report = json.loads(Path(report_path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ArtifactError(f"report {report_path}: cannot be read as JSON: {exc}") from None
    try:
        figures = report_figures(report, name=report.get("metadata", {}).get("benchmark") or Path(report_path).parent.name)
    except ValidationError as exc:
        raise ValidationError(f"{report_path}: {exc}") from None
    plt = _pyplot()
    paths = {"ranking": ranking_path, "detail": detail_path, "comparison": comparison_path}
    for key, figure in figures.items():
        path = paths.get(key)
        if path is not None:
            suffix = Path(path).suffix.lstrip(".") or "png"
            buffer = io.BytesIO()
            figure.savefig(buffer, format=suffix, dpi=110, metadata={"Software": None} if suffix == "png" else None)
            data = buffer.getvalue()
            if suffix == "png":  # stamped for `vertebrae verify` (reports.png)
                data = stamp(data, figure=key, report_hash=report.get("content_hash"))  # results.base.CONTENT_HASH_KEY
            with atomic_write(path) as tmp:
                Path(tmp).write_bytes(data)
        plt.close(figure)
