"""Target views in one process: ``ViewsBenchmark(dataset, extractors, targets=..., hierarchy=...).run()``.

The in-process twin of a config's ``targets:`` / ``hierarchy:`` (``vertebrae.planning.views``): every candidate is
embedded once, then scored under every view (``TargetView``: ``values`` one label per row, ``type``, ``role``) with
that view's own plan (row resampling, metric checks), each view ranked and compared as a ``Benchmark`` would, and
the views document (``vertebrae.reports.views``) built from the views' reports: the candidates x views table, the
nuisance verdicts and the per-level scores. ``targets`` maps a name to a ``TargetView``, to the labels themselves
(a task view, classification) or to ``{"values": ..., "type": ..., "role": ...}``; without it the one view is the
dataset's own target (``"target"``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vertebrae.core.errors import ValidationError
from vertebrae.core.fingerprint import fingerprint
from vertebrae.data.labelled import BenchmarkDataset
from vertebrae.data.target_views import (
    DEFAULT_VIEW, Hierarchy, ResolvedView, TargetView, resolve_views, view_dataset,
)
from vertebrae.data.targets import build_targets
from vertebrae.extractors.base import Extractor
from vertebrae.protocols.labelled import Benchmark
from vertebrae.reports.views import levels_figure, views_markdown, views_summary
from vertebrae.results import BenchmarkResult
from vertebrae.scoring.overlap import ContinuousOverlapScoringConfig, OverlapScoringConfig
from vertebrae.stages.labelled import (
    build_protocol, build_report, candidate_result, check_metrics, protocol_recipe, score_embeddings, score_recipe,
)


def _as_view(name: str, value: Any) -> TargetView:
    if isinstance(value, TargetView):
        if value.name != name:
            raise ValidationError(f"targets[{name!r}] is a TargetView named {value.name!r}")
        return value
    if isinstance(value, Mapping):
        return TargetView(name, **value)
    return TargetView(name, values=value)


def _targets_of(view: TargetView, dataset: BenchmarkDataset):
    if view.is_default:
        return dataset.targets
    if view.values is None:
        raise ValidationError(f"targets.{view.name}: in process, give the labels as values= (column, key and file "
                              "are read from a config's dataset)")
    values = list(view.values.tolist() if hasattr(view.values, "tolist") else view.values)
    if len(values) != dataset.n_rows:
        raise ValidationError(f"targets.{view.name}: {len(values)} labels for {dataset.n_rows} rows; one per row")
    try:
        return build_targets(values, view.type)
    except ValueError as exc:
        raise ValidationError(f"targets.{view.name}: {exc}") from None


@dataclass(frozen=True, eq=False)
class ViewsResult:
    """Each view's ranked report (``reports``, by view name; a hierarchy level equal to another view shares its
    report) and the views document (``summary``: table, rankings, nuisance verdicts, levels)."""

    reports: dict[str, BenchmarkResult]
    summary: dict[str, Any]

    @property
    def primary(self) -> BenchmarkResult:
        return self.reports[self.summary["primary"]]

    def table(self) -> dict[str, dict[str, float | None]]:
        return self.summary["table"]

    def nuisance_encoders(self, view: str) -> list[dict[str, Any]]:
        """Who encodes nuisance ``view`` significantly more than whom (``[{candidate, more_than}]``)."""
        return self.summary["nuisance"][view]["encoders"]

    def markdown(self) -> str:
        return views_markdown(self.summary)

    def figure(self):
        """Score by hierarchy level (or by view), one line a candidate (a matplotlib figure)."""
        return levels_figure(self.summary)

    def to_dict(self) -> dict[str, Any]:
        return {"summary": self.summary, "reports": {name: r.to_dict() for name, r in self.reports.items()}}


class ViewsBenchmark:
    """``Benchmark``'s options (``metrics``, ``scoring_config``, ``compression_configs``, ``comparison_config``,
    ``row_resampling``, ...) applied under every target view; ``primary_view`` (default: the first task view)
    ranks the candidates. ``scoring_config`` applies to the views of its kind (classes and labels, or regression);
    ``continuous_scoring_config`` to regression views besides (each view of the other kind gets the default)."""

    def __init__(self, dataset: BenchmarkDataset, extractors: Sequence[Extractor] = (), *,
                 targets: Mapping[str, Any] | None = None, hierarchy: Hierarchy | None = None,
                 primary_view: str | None = None, name: str = "benchmark", **options: Any) -> None:
        views = [_as_view(n, v) for n, v in (targets or {DEFAULT_VIEW: TargetView(DEFAULT_VIEW)}).items()]
        tasks = [v.name for v in views if v.role == "task"]
        if primary_view is None and not tasks:
            raise ValidationError("targets: every view is a nuisance; declare a task view to rank by")
        primary_view = primary_view if primary_view is not None else tasks[0]
        if primary_view not in tasks:
            raise ValidationError(f"primary_view: {primary_view!r} is not a task view; task views: {tasks}")
        resolved = resolve_views(views, hierarchy, dataset, lambda v: _targets_of(v, dataset),
                                 base_dir=Path("."), where="targets")
        self._setup(dataset, extractors, resolved, primary_view, name, options)

    @classmethod
    def from_resolved(cls, dataset: BenchmarkDataset, extractors: Sequence[Extractor],
                      resolved: Sequence[ResolvedView], primary_view: str, *, name: str = "benchmark",
                      **options: Any) -> ViewsBenchmark:
        """The benchmark of views already resolved (``data.target_views.resolve_views``: a config's, say)."""
        self = cls.__new__(cls)
        self._setup(dataset, extractors, list(resolved), primary_view, name, options)
        return self

    def _setup(self, dataset, extractors, resolved, primary_view, name, options) -> None:
        self.primary_view, self.resolved, self.name = primary_view, resolved, name
        configs = [c for c in (options.pop("scoring_config", None), options.pop("continuous_scoring_config", None))
                   if c is not None]
        self.benchmarks: dict[str, Benchmark] = {}
        for item in self.resolved:  # each view's own plan (checks, row resampling) as a Benchmark builds it
            if item.alias is None:
                data = view_dataset(dataset, item.view, item.targets, item.recipe)
                wanted = ContinuousOverlapScoringConfig if data.target_type == "regression" else OverlapScoringConfig
                scoring = next((c for c in configs if isinstance(c, wanted)), None)
                label = name if item.view.name == primary_view else f"{name}@{item.view.name}"
                self.benchmarks[item.view.name] = Benchmark(data, extractors, name=label, scoring_config=scoring,
                                                            **options)

    def run(self) -> ViewsResult:
        primary = self.benchmarks[self.primary_view]
        if not primary.extractors:
            raise ValidationError(f"benchmark {self.name!r} has no extractors")
        results: dict[str, list] = {view: [] for view in self.benchmarks}
        protocols = {view: build_protocol(b.dataset) for view, b in self.benchmarks.items()}
        protocol_fps = {view: fingerprint("protocol", protocol_recipe(b.dataset.identity_key(),
                                                                      b.dataset.target_declaration))
                        for view, b in self.benchmarks.items()}
        checked = {view: check_metrics(b.plan, protocols[view].targets, protocols[view].row_ids,
                                       protocols[view].groups) for view, b in self.benchmarks.items()}
        for extractor in primary.extractors:
            for variant, block, embed_fp, compression, provenance in primary._variants(extractor):  # embedded once
                timings = {"embed_s": provenance.pop("embed_s"), "embed_peak_mb": provenance.pop("embed_peak_mb")}
                for view, bench in self.benchmarks.items():
                    started = time.perf_counter()
                    payload = score_embeddings(block, protocols[view], bench.plan, checked=checked[view])
                    score_fp = fingerprint("score", score_recipe(embed_fp, protocol_fps[view], bench.plan))
                    results[view].append(candidate_result(
                        variant, payload, plan=bench.plan, embedding_metadata=dict(provenance),
                        compression_metadata=compression,
                        metadata={"score_fingerprint": score_fp,
                                  "timings": {**timings, "score_s": time.perf_counter() - started}}))
        reports = {}
        own = {r.view.name: r for r in self.resolved if r.alias is None and r.recipe is not None}
        for view, bench in self.benchmarks.items():
            report = build_report(results[view], protocols[view], benchmark=bench.name, plan=bench.plan)
            if view != self.primary_view and view in own:  # as the workflow's BENCH@VIEW report records it
                report = report.with_view(view, own[view].view.role)
            reports[view] = report.with_comparison(bench.comparison_config).with_costs(measured=True)
        entries = [{"view": r.view.name, "role": r.view.role, "type": r.targets.target_type, "level": r.view.level,
                    "alias": r.alias} for r in self.resolved]
        for item in self.resolved:
            if item.alias is not None:
                reports[item.view.name] = reports[item.alias]
        summary = views_summary({v: reports[v].to_dict() for v in self.benchmarks}, entries, benchmark=self.name,
                                primary=self.primary_view)
        return ViewsResult(reports, summary)


__all__ = ["Hierarchy", "TargetView", "ViewsBenchmark", "ViewsResult"]
