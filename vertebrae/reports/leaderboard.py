"""The leaderboard: every verified report under a results folder, as one long tidy table and a wide table.

``leaderboard_rows`` turns ``(path, report document)`` pairs (labelled, retrieval or zero-shot report.json, verified
by the caller: ``vertebrae.stages.leaderboard_job``) into ``Row`` records, one per (benchmark, candidate): the
benchmark's metric (its primary metric, or ``metric`` where the candidate's report holds a number under that key),
the value, its interval and verdict against the benchmark's leader (both from the report's paired comparison, for the
primary metric only), the rank, the score and embedding fingerprints, the dataset identity, the model recipe, the
cost columns (``vertebrae.reports.costs``), the vertebrae version and when the report was written.

A benchmark is keyed by its name, and, where two reports of the same name are present (two configs that wrote to
different folders, or an in-process report saved beside the workflow's), by its name with its dataset identity and
report path: the two are shown apart, never merged. The wide table (``wide_table``) has one row per candidate and,
per benchmark, its score, rank and verdict.

A labelled benchmark's target views (``vertebrae.planning.views``: reports ``BENCH@VIEW``) are rows labelled as
views of their benchmark, right after it: ``toy / view site (nuisance: lower is better)``. A nuisance view's report
ranks lowest first (its ``metadata["view"]``), so its rank 1 is the candidate that encodes the nuisance least, and
its verdicts (``paired_verdicts`` too) are against that candidate: ``behind`` encodes it significantly more.

The verdict vocabulary: ``leader`` (rank 1 by the metric shown), ``tied`` (the paired comparison finds it
indistinguishable from the leader), ``behind`` (significantly behind), ``ahead`` (only when the leader by score is
not ahead in the paired test: never in a consistent report), ``n/a`` (no comparison: one candidate, a comparison that could not be made, or a
metric other than the primary one) and ``unranked`` (the benchmark does not rank it).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from vertebrae.core.errors import ValidationError
from vertebrae.reports.costs import Cost, embedding_endpoints
from vertebrae.reports.summary import PROTOCOLS, _primary_metric
from vertebrae.reports.text import dataset_label

VERDICT_WORDS = {"ahead": "ahead", "behind": "behind", "indistinguishable": "tied"}


@dataclass(frozen=True)
class Row:
    """One candidate in one benchmark: the long table's row (``to_dict`` gives its columns, in order)."""

    benchmark: str
    benchmark_name: str
    protocol: str
    candidate: str
    metric: str
    value: float | None
    ci_low: float | None
    ci_high: float | None
    rank: int | None
    verdict: str
    score_fingerprint: str | None
    embedding_fingerprints: str
    dataset_identity: str | None
    recipe: str
    embed_seconds_per_1k_rows: float | None
    embed_status: str
    peak_memory_mb: float | None
    dim: int | None
    bytes_per_vector: int | None
    score_seconds: float | None
    vertebrae_version: str | None
    written_at: str | None
    report: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def cost(self, kind: str) -> float | None:
        """The chosen cost (``COST_KINDS``: ``size`` is bytes per vector, ``throughput`` the steady-state embedding
        seconds per 1,000 rows); None: unknown (or too few rows to measure)."""
        value = {"size": self.bytes_per_vector, "throughput": self.embed_seconds_per_1k_rows,
                 "bytes_per_vector": self.bytes_per_vector, "dim": self.dim}[kind]
        return None if value is None else float(value)

    def cost_text_status(self, kind: str) -> bool:
        """Whether this row's ``kind`` cost is missing because too few rows were embedded to measure it."""
        return kind == "throughput" and self.embed_status == "too few rows to measure"

    def cost_key(self, kind: str) -> tuple[float, ...] | None:
        """What ``cheapest_tied`` orders by: the cost, and for ``size`` then the dimension."""
        value = self.cost(kind)
        if value is None:
            return None
        return (value, float(self.dim if self.dim is not None else math.inf)) if kind == "size" else (value,)


COLUMNS = tuple(f.name for f in fields(Row))
# size (bytes per vector, then dim) is deterministic, the default; throughput is measured, used only when asked
COST_KINDS = ("size", "throughput", "bytes_per_vector", "dim")
DEFAULT_COST = "size"
COST_WORDS = {"size": "size: bytes per vector, then dim",
              "throughput": "throughput: steady-state embedding seconds per 1,000 rows",
              "bytes_per_vector": "bytes_per_vector", "dim": "dim"}


def _candidates(document: Mapping[str, Any], protocol: str) -> list[Mapping[str, Any]]:
    return list(document["extractor_results" if protocol == "labelled" else "candidate_results"])


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _find_number(tree: Any, key: str, depth: int = 0) -> float | None:
    """The first number under ``key`` in a candidate's document, breadth first (None when there is none)."""
    if depth > 5 or not isinstance(tree, Mapping):
        return None
    if key in tree and _number(tree[key]) is not None:
        return _number(tree[key])
    for value in tree.values():
        found = _find_number(value, key, depth + 1)
        if found is not None:
            return found
    return None


def _metric_keys(tree: Any, inside: bool = False, depth: int = 0) -> set[str]:
    """The keys holding a number in a candidate's ``metrics`` / ``diagnostics`` mappings (its metric values)."""
    if depth > 5 or not isinstance(tree, Mapping):
        return set()
    found = {str(k) for k, v in tree.items() if inside and _number(v) is not None}
    for k, v in tree.items():
        found |= _metric_keys(v, k in ("metrics", "diagnostics"), depth + 1)
    return found


def metric_names(reports: Sequence[tuple[str, Mapping[str, Any]]]) -> list[str]:
    """The metrics the reports hold a value of, sorted: each benchmark's primary metric and the numbers in its
    candidates' ``metrics`` and ``diagnostics`` (what ``leaderboard_rows(metric=...)`` can rank by)."""
    names: set[str] = set()
    for _, document in reports:
        protocol = PROTOCOLS.get(document.get("schema"))
        if protocol is None:
            continue
        candidates = _candidates(document, protocol)
        names.add(str(_primary_metric(document, candidates, protocol)))
        for candidate in candidates:
            names |= _metric_keys(candidate)
    return sorted(names)


def recipe_summary(metadata: Mapping[str, Any]) -> str:
    """The extractor recipe(s) of a candidate's endpoints as compact JSON (distinct recipes joined by ``; ``)."""
    recipes = [e.get("extractor") for e in embedding_endpoints(metadata)] or [metadata.get("extractor")]
    texts = [json.dumps(r, sort_keys=True, separators=(",", ":")) for r in recipes if r is not None]
    return "; ".join(dict.fromkeys(texts))


def _comparison(document: Mapping[str, Any]):
    from vertebrae.scoring.paired.result import PairedComparison

    data = document.get("comparison")
    return None if not data else PairedComparison.from_dict(data)


def lower_is_better(document: Mapping[str, Any]) -> bool:
    """A report of a ``role: nuisance`` target view (``metadata["view"]``): lower separation is better."""
    return ((document.get("metadata") or {}).get("view") or {}).get("role") == "nuisance"


def _benchmark_rows(path: str, document: Mapping[str, Any], key: str, metric: str | None,
                    costs: Mapping[tuple[str, str], Cost], written_at: str | None) -> list[Row]:
    protocol = PROTOCOLS[document["schema"]]
    candidates = _candidates(document, protocol)
    name = str(document["metadata"].get("benchmark") or Path(path).parent.name)
    primary = _primary_metric(document, candidates, protocol)
    use_primary = metric is None or metric == primary
    ranking = [str(n) for n in document["ranking"]]
    values = {str(c["name"]): (_number(c.get("primary_score")) if use_primary else _find_number(c, metric))
              for c in candidates}
    lower = lower_is_better(document)  # a nuisance view's report: its ranking is lowest first
    if use_primary:
        ranks = {n: i for i, n in enumerate(ranking, start=1)}
    else:  # ranked by the chosen metric, higher first (a nuisance view: lower), among the ranked that have it
        order = sorted((n for n in ranking if values.get(n) is not None), key=lambda n: values[n] if lower else -values[n])
        ranks = {n: i for i, n in enumerate(order, start=1)}
    comparison = _comparison(document) if use_primary else None
    intervals = {} if comparison is None else {c["name"]: (c["ci_low"], c["ci_high"]) for c in comparison.candidates}
    if comparison is None:
        verdicts = {}
    elif lower and ranking:  # against the rank-1 candidate (the least encoding); ahead in score = behind
        flip = {"ahead": "behind", "behind": "ahead", "indistinguishable": "indistinguishable"}
        names = [c["name"] for c in comparison.candidates]
        verdicts = {n: VERDICT_WORDS[flip[comparison.pair(n, ranking[0])["verdict"]]]
                    for n in names if n != ranking[0] and ranking[0] in names}
    else:
        verdicts = {r["name"]: VERDICT_WORDS[r["verdict"]] for r in comparison.versus_leader()}
    identity = document.get("dataset_summary", {}).get("identity")
    rows = []
    for c in candidates:
        cname = str(c["name"])
        rank = ranks.get(cname)
        verdict = "unranked" if rank is None else "leader" if rank == 1 else verdicts.get(cname, "n/a")
        meta = c.get("embedding_metadata") or {}
        cost = costs.get((path, cname), Cost())
        low, high = intervals.get(cname, (None, None))
        rows.append(Row(
            benchmark=key, benchmark_name=name, protocol=protocol, candidate=cname,
            metric=primary if use_primary else str(metric), value=values.get(cname), ci_low=_number(low),
            ci_high=_number(high), rank=rank, verdict=verdict,
            score_fingerprint=(c.get("metadata") or {}).get("score_fingerprint"),
            embedding_fingerprints=" ".join(str(e["fingerprint"]) for e in embedding_endpoints(meta)),
            dataset_identity=None if identity is None else str(identity), recipe=recipe_summary(meta),
            embed_seconds_per_1k_rows=cost.embed_seconds_per_1k_rows, embed_status=cost.embed_status,
            peak_memory_mb=cost.peak_memory_mb,
            dim=cost.dim, bytes_per_vector=cost.bytes_per_vector, score_seconds=cost.score_seconds,
            vertebrae_version=document["metadata"].get("vertebrae_version"), written_at=written_at, report=path))
    return rows


def benchmark_keys(reports: Sequence[tuple[str, Mapping[str, Any]]]) -> list[str]:
    """Each report's benchmark key: its name, or ``name [dataset] (path)`` where two reports share a name (the
    dataset as ``vertebrae.reports.text.dataset_label`` names it; the long table keeps its identity key)."""
    names = []
    for path, document in reports:
        if not isinstance(document, Mapping) or document.get("schema") not in PROTOCOLS:
            raise ValidationError(f"report {path}: unknown report schema")
        names.append(str((document.get("metadata") or {}).get("benchmark") or Path(path).parent.name))
    keys = []
    for (path, document), name in zip(reports, names):
        if names.count(name) == 1:
            keys.append(_view_key(name, document))
        else:
            keys.append(f"{_view_key(name, document)} [{dataset_label(document.get('dataset_summary') or {})}] ({path})")
    return keys


VIEW_SEPARATOR = "@"  # planning.views: a target view's report is BENCH@VIEW
NUISANCE = "nuisance: lower is better"  # in a nuisance view's benchmark key (pareto_front reads it)


def _view_key(name: str, document: Mapping[str, Any]) -> str:
    """A target view's report as a view of its benchmark: ``toy / view site (nuisance: lower is better)``."""
    view = (document.get("metadata") or {}).get("view")
    if VIEW_SEPARATOR not in name or not isinstance(view, Mapping):
        return name
    base = name.rsplit(VIEW_SEPARATOR, 1)[0]
    role = NUISANCE if view.get("role") == "nuisance" else "task"
    return f"{base} / view {view.get('name')} ({role})"


def is_view(row: Row) -> bool:
    """The row is of a target view's report (``BENCH@VIEW``), not of a benchmark's primary report."""
    return VIEW_SEPARATOR in row.benchmark_name


def _grouped(reports: Sequence[tuple[str, Mapping[str, Any]]]) -> list[tuple[str, Mapping[str, Any]]]:
    """The reports with every target view's (``BENCH@VIEW``) right after its benchmark's, else in the order given."""
    def name(document: Any, path: str) -> str:
        meta = (document.get("metadata") or {}) if isinstance(document, Mapping) else {}
        return str(meta.get("benchmark") or Path(path).parent.name)

    names = [name(d, str(p)) for p, d in reports]
    bases = [n.rsplit(VIEW_SEPARATOR, 1)[0] for n in names]
    first = {b: i for i, b in reversed(list(enumerate(bases)))}
    return [reports[i] for i in sorted(range(len(reports)), key=lambda i: (first[bases[i]], VIEW_SEPARATOR in names[i]))]


def leaderboard_rows(reports: Sequence[tuple[str, Mapping[str, Any]]], *, metric: str | None = None,
                     costs: Mapping[tuple[str, str], Cost] | None = None,
                     written: Mapping[str, str] | None = None) -> list[Row]:
    """The long table of ``(path, report document)`` pairs, benchmarks in the order given, candidates in each
    report's declaration order. ``costs``: by (report path, candidate); ``written``: the time each path was written."""
    rows: list[Row] = []
    reports = _grouped(reports)  # a benchmark's target views right after it
    for (path, document), key in zip(reports, benchmark_keys(reports)):
        try:
            rows += _benchmark_rows(str(path), document, key, metric, costs or {}, (written or {}).get(str(path)))
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValidationError(f"report {path}: malformed report ({type(exc).__name__}: {exc})") from None
    return rows


def paired_verdicts(reports: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, dict[tuple[str, str], str]]:
    """Per benchmark key, the paired verdict of every ordered pair ``(a, b)`` of its compared candidates (``ahead``:
    a is significantly ahead of b); a benchmark without a comparison has none."""
    out = {}
    for (path, document), key in zip(reports, benchmark_keys(reports)):
        comparison = _comparison(document)
        verdicts: dict[tuple[str, str], str] = {}
        names = [] if comparison is None else [c["name"] for c in comparison.candidates]
        flip = {"ahead": "behind", "behind": "ahead", "indistinguishable": "indistinguishable"}
        lower = lower_is_better(document)  # a nuisance view: ahead in score is behind
        for a in names:
            for b in names:
                if a != b:
                    verdict = comparison.pair(a, b)["verdict"]
                    verdicts[(a, b)] = flip[verdict] if lower else verdict
        out[key] = verdicts
    return out


def benchmarks_of(rows: Sequence[Row]) -> list[str]:
    return list(dict.fromkeys(r.benchmark for r in rows))


def candidates_of(rows: Sequence[Row]) -> list[str]:
    return list(dict.fromkeys(r.candidate for r in rows))


def wide_table(rows: Sequence[Row]) -> tuple[list[str], list[list[Any]]]:
    """One row per candidate: per benchmark ``<benchmark> score``, ``<benchmark> rank``, ``<benchmark> verdict``
    (empty where the candidate is not in it)."""
    benchmarks = benchmarks_of(rows)
    by_key = {(r.candidate, r.benchmark): r for r in rows}
    header = ["candidate"] + [f"{b} {what}" for b in benchmarks for what in ("score", "rank", "verdict")]
    table = []
    for name in candidates_of(rows):
        line: list[Any] = [name]
        for b in benchmarks:
            row = by_key.get((name, b))
            line += ["", "", ""] if row is None else [row.value, row.rank, row.verdict]
        table.append(line)
    return header, table


def pareto_front(rows: Sequence[Row], kind: str) -> list[Row]:
    """The ranked candidates of one benchmark no other beats on both quality (higher) and cost (lower), cheapest
    first; candidates of unknown cost are left out."""
    known = [r for r in rows if r.rank is not None and r.value is not None and r.cost(kind) is not None]
    sign = -1.0 if any(NUISANCE in r.benchmark for r in known) else 1.0  # a nuisance view: lower is better
    front = [r for r in known if not any(sign * o.value >= sign * r.value and o.cost(kind) <= r.cost(kind)
                                         and (sign * o.value > sign * r.value or o.cost(kind) < r.cost(kind))
                                         for o in known)]
    return sorted(front, key=lambda r: (r.cost(kind), -sign * r.value))


def cheapest_tied(rows: Sequence[Row], kind: str) -> tuple[Row | None, list[str]]:
    """The cheapest of the leader and the candidates the paired comparison finds tied with it (by ``kind``), and the
    tied candidates whose cost is unknown (left out). ``(None, [])`` when the benchmark has no comparison (one ranked
    candidate needs none: it is the answer)."""
    tied = [r for r in rows if r.verdict in ("leader", "tied")]
    compared = any(r.verdict in VERDICT_WORDS.values() for r in rows) or sum(r.rank is not None for r in rows) == 1
    if not compared or not any(r.verdict == "leader" for r in tied):
        return None, []
    unknown = [r.candidate for r in tied if r.cost_key(kind) is None]
    known = [r for r in tied if r.cost_key(kind) is not None]
    best = min(known, key=lambda r: (r.cost_key(kind), r.rank)) if known else None
    return best, unknown


def cheapest_tied_line(rows: Sequence[Row], kind: str = DEFAULT_COST) -> str:
    """The sentence "cheapest candidate statistically tied with the leader" of one benchmark's rows, naming the cost
    it used (``COST_WORDS``)."""
    if kind not in COST_KINDS:
        raise ValidationError(f"cost {kind!r}: expected one of {', '.join(COST_KINDS)}")
    best, unknown = cheapest_tied(rows, kind)
    head = f"cheapest candidate statistically tied with the leader (by {COST_WORDS[kind]}): "
    if best is None and not unknown:
        return head + "n/a (no paired comparison)"
    leader = next(r for r in rows if r.verdict == "leader")
    text = head + ("unknown" if best is None else f"{best.candidate} ({_cost_text(best, kind)}; leader "
                                                  f"{leader.candidate}: {_cost_text(leader, kind)})")
    few = [name for name in unknown if next(r for r in rows if r.candidate == name).cost_text_status(kind)]
    rest = [name for name in unknown if name not in few]
    text += f"; too few rows to measure for {', '.join(few)}" if few else ""
    return text + (f"; cost unknown for {', '.join(rest)}" if rest else "")


def _number_text(value: float | None) -> str:
    if value is None:
        return "unknown"
    return str(int(value)) if float(value).is_integer() else f"{value:.3g}"


def _cost_text(row: Row, kind: str) -> str:
    if kind == "size":
        return f"{_number_text(row.cost(kind))} bytes per vector, dim {_number_text(row.dim)}"
    if kind == "throughput" and row.cost_text_status(kind):
        return row.embed_status
    return f"{kind} {_number_text(row.cost(kind))}"


__all__ = ["COLUMNS", "COST_KINDS", "COST_WORDS", "DEFAULT_COST", "Row", "benchmark_keys", "benchmarks_of", "candidates_of",
           "cheapest_tied", "cheapest_tied_line", "embedding_endpoints", "leaderboard_rows", "metric_names",
           "is_view", "lower_is_better", "paired_verdicts",
           "pareto_front", "recipe_summary", "wide_table"]
