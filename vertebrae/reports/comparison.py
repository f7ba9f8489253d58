"""The paired comparison in the reports: the Markdown section "Is the leader really ahead?" and its document check.

A report's comparison is the JSON document ``report.to_dict()["comparison"]`` (schema ``vertebrae.comparison/v1``):
the configuration (resamples, confidence level, interval method, adjustment, alpha, seed), the unit the
candidates are paired on (query, sample, class or repeat) and how many, the statistic, the leader, every
candidate's score with its bootstrap interval and every pair's Δ (score a - score b) with its interval, test,
raw and adjusted p-value and verdict (a relative to b). ``comparison_skipped`` says why a report has none.

- :func:`check_comparison` checks a document's shape (finite numbers, known names, every pair once) and raises
  ValidationError naming the field, candidate or pair; both the Markdown section and the figures call it, so
  nothing is drawn or printed from a malformed document.
- :func:`comparison_lines` renders the section: each candidate against the leader in descending score order.

The table and cell helpers of the Markdown reports live here too (``cell``, ``table``): ``markdown`` imports
them from this module, so that the two modules share them without an import circle.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from vertebrae.core.errors import ValidationError
from vertebrae.reports.text import markdown_text

SCHEMA = "vertebrae.comparison/v1"
TITLE = "Is the leader really ahead?"
UNITS = {"query": "queries", "sample": "samples", "class": "classes", "repeat": "repeats",
         "row subsample": "row subsamples"}
TESTS = {
    "mcnemar-exact": "McNemar's exact test (a binomial test on the {units} exactly one of the two candidates gets right)",
    "randomization": "a paired randomization test ({resamples} random sign flips of the per-{unit} differences)",
    "randomization-exact": "an exact paired randomization test (every sign flip of the per-{unit} differences)",
    "subsampling": "the symmetric subsampling test (the rate-corrected spread of Δ over the {units})",
}
VERDICTS = ("ahead", "behind", "indistinguishable")
ADJUSTMENTS = {"holm": "Holm", "bonferroni": "Bonferroni", "none": "no adjustment"}
INTERVALS = {"percentile": "percentile", "bca": "BCa"}


def cell(value: Any) -> str:
    """A Markdown table cell or text from data: None is ``–``, floats have 4 decimals, anything else is plain text
    (``reports.text.markdown_text``: no HTML, link, emphasis, pipe or line break from data)."""
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.4f}"
    return markdown_text(value)


def table(header: list[str], rows: list[list[Any]]) -> list[str]:
    """A Markdown table: the header line, the rule line and one line per row, every value through :func:`cell`."""
    lines = ["| " + " | ".join(cell(h) for h in header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return lines


def _fail(where: str, message: str):
    raise ValidationError(f"comparison: {where}: {message}")


def _number(value: Any, where: str, *, low: float | None = None, high: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        _fail(where, f"expected a finite number, got {value!r}")
    if (low is not None and value < low) or (high is not None and value > high):
        _fail(where, f"{value!r} is outside [{low}, {high}]")
    return float(value)


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        _fail(where, f"expected a non-empty string, got {value!r}")
    return value


def _mapping(value: Any, where: str, keys: tuple[str, ...]) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        _fail(where, f"expected an object, got {type(value).__name__}")
    missing = [key for key in keys if key not in value]
    if missing:
        _fail(where, f"missing {', '.join(missing)}")
    return value


def _check_config(config: Any) -> None:
    config = _mapping(config, "config", ("resamples", "confidence_level", "interval", "adjustment", "alpha", "seed"))
    resamples = config["resamples"]
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 1:
        _fail("config.resamples", f"expected a positive integer, got {resamples!r}")
    for key in ("confidence_level", "alpha"):
        if not 0.0 < _number(config[key], f"config.{key}") < 1.0:
            _fail(f"config.{key}", f"{config[key]!r} is not strictly between 0 and 1")
    _text(config["interval"], "config.interval")
    _text(config["adjustment"], "config.adjustment")
    if isinstance(config["seed"], bool) or not isinstance(config["seed"], int):
        _fail("config.seed", f"expected an integer, got {config['seed']!r}")


def _check_interval(entry: Mapping[str, Any], where: str) -> None:
    if _number(entry["ci_low"], f"{where}.ci_low") > _number(entry["ci_high"], f"{where}.ci_high"):
        _fail(where, f"ci_low {entry['ci_low']!r} is above ci_high {entry['ci_high']!r}")


def check_comparison(document: Any) -> dict[str, Any]:
    """The comparison document, checked: a ValidationError names the first bad field, candidate or pair.

    Checked: the schema, the configuration, the unit, ``n_units`` >= 1, at least two uniquely named candidates with
    finite scores and intervals (``ci_low <= ci_high``), a leader among them, every unordered pair of candidates
    exactly once with finite Δ = score a - score b and interval, a known test, p-values in [0, 1] and a known
    verdict, ``min_p_value`` in [0, 1] and notes as strings.
    """
    document = _mapping(document, "document", ("schema", "config", "unit", "statistic", "n_units", "leader",
                                               "candidates", "pairs", "min_p_value", "notes"))
    if document["schema"] != SCHEMA:
        _fail("schema", f"expected {SCHEMA!r}, got {document['schema']!r}")
    _check_config(document["config"])
    if document["unit"] not in UNITS:
        _fail("unit", f"expected one of {sorted(UNITS)}, got {document['unit']!r}")
    _text(document["statistic"], "statistic")
    n_units = document["n_units"]
    if isinstance(n_units, bool) or not isinstance(n_units, int) or n_units < 1:
        _fail("n_units", f"expected a positive integer, got {n_units!r}")
    candidates = document["candidates"]
    if not isinstance(candidates, list) or len(candidates) < 2:
        _fail("candidates", "expected a list of at least two candidates")
    scores: dict[str, float] = {}
    for i, entry in enumerate(candidates):
        name = _text(_mapping(entry, f"candidates[{i}]", ("name", "score", "ci_low", "ci_high"))["name"],
                     f"candidates[{i}].name")
        if name in scores:
            _fail(f"candidate {name!r}", "listed twice")
        scores[name] = _number(entry["score"], f"candidate {name!r}.score")
        _check_interval(entry, f"candidate {name!r}")
    if document["leader"] not in scores:
        _fail("leader", f"{document['leader']!r} is not one of the candidates {list(scores)}")
    pairs = document["pairs"]
    if not isinstance(pairs, list):
        _fail("pairs", "expected a list")
    seen: set[frozenset[str]] = set()
    for i, entry in enumerate(pairs):
        entry = _mapping(entry, f"pairs[{i}]", ("a", "b", "delta", "ci_low", "ci_high", "test", "p_value",
                                                "p_adjusted", "verdict"))
        for side in ("a", "b"):
            if entry[side] not in scores:
                _fail(f"pairs[{i}].{side}", f"unknown candidate {entry[side]!r}")
        where = f"pair {entry['a']!r} vs {entry['b']!r}"
        key = frozenset((entry["a"], entry["b"]))
        if len(key) != 2 or key in seen:
            _fail(where, "a candidate against itself" if len(key) != 2 else "listed twice")
        seen.add(key)
        delta = _number(entry["delta"], f"{where}.delta")
        expected = scores[entry["a"]] - scores[entry["b"]]
        if abs(delta - expected) > 1e-6 * max(1.0, abs(scores[entry["a"]]), abs(scores[entry["b"]])):
            _fail(f"{where}.delta", f"{delta!r} is not score a - score b = {expected!r}")
        _check_interval(entry, where)
        if entry["test"] not in TESTS:
            _fail(f"{where}.test", f"expected one of {sorted(TESTS)}, got {entry['test']!r}")
        for key_ in ("p_value", "p_adjusted"):
            _number(entry[key_], f"{where}.{key_}", low=0.0, high=1.0)
        if entry["verdict"] not in VERDICTS:
            _fail(f"{where}.verdict", f"expected one of {list(VERDICTS)}, got {entry['verdict']!r}")
    expected_pairs = len(scores) * (len(scores) - 1) // 2
    if len(seen) != expected_pairs:
        names = list(scores)
        absent = [f"{a!r} vs {b!r}" for i, a in enumerate(names) for b in names[i + 1:] if frozenset((a, b)) not in seen]
        _fail("pairs", f"{len(seen)} pairs for {len(scores)} candidates; missing {', '.join(absent)}")
    _number(document["min_p_value"], "min_p_value", low=0.0, high=1.0)
    notes = document["notes"]
    if not isinstance(notes, list) or not all(isinstance(note, str) for note in notes):
        _fail("notes", f"expected a list of strings, got {notes!r}")
    return dict(document)


def ranked_names(document: Mapping[str, Any]) -> list[str]:
    """Candidate names by descending score (declaration order among equal scores), the leader first."""
    order = sorted(document["candidates"], key=lambda c: -c["score"])
    names = [c["name"] for c in order]
    names.remove(document["leader"])
    return [document["leader"], *names]


def versus(document: Mapping[str, Any], a: str, b: str) -> dict[str, Any]:
    """The pair ``a`` vs ``b`` seen from ``a``: Δ = score a - score b, its interval, p-values and a's verdict."""
    flip = {"ahead": "behind", "behind": "ahead", "indistinguishable": "indistinguishable"}
    for pair in document["pairs"]:
        if (pair["a"], pair["b"]) == (a, b):
            return dict(pair)
        if (pair["a"], pair["b"]) == (b, a):
            return {**pair, "a": a, "b": b, "delta": -pair["delta"], "ci_low": -pair["ci_high"],
                    "ci_high": -pair["ci_low"], "verdict": flip[pair["verdict"]]}
    raise ValidationError(f"comparison: no pair {a!r} vs {b!r}")


def _signed(value: float) -> str:
    return f"{value:+.4f}"


def _p(value: float) -> str:
    return f"{value:.4f}" if value >= 1e-4 else f"{value:.1e}"


def _plural(n: int, unit: str) -> str:
    return f"{n} {unit if n == 1 else UNITS[unit]}"


def _row_method(document: Mapping[str, Any]) -> str:
    """The method paragraph of a row-resampled comparison (``vertebrae.scoring.paired.rows``)."""
    config, method = document["config"], document["method"]
    adjustment = ADJUSTMENTS.get(config["adjustment"], config["adjustment"])
    return (
        f"**Row-resampled comparison** ({cell(method.get('name'))}; {cell(method.get('reference'))}). With "
        f"{method.get('n_classes')} classes the per-class comparison cannot reach significance, so every candidate is "
        f"compared with the leader, **{cell(document['leader'])}**, on {cell(document['statistic'])} over the same "
        f"{method.get('resamples')} row subsamples ({method.get('subsample_rows')} of {method.get('n_rows')} rows, "
        f"stratified by class, drawn without replacement, seed {method.get('random_state')}), paired subsample by "
        f"subsample. Δ is the candidate's score minus the leader's on all rows; its "
        f"{config['confidence_level']:.0%} interval and the symmetric subsampling test of Δ = 0 come from the spread "
        f"of Δ over the subsamples, rate-corrected by {cell(method.get('rate_correction'))}. p-values are adjusted "
        f"across all {len(document['pairs'])} pairs ({adjustment}); a candidate is ahead or behind when its adjusted "
        f"p is below alpha = {config['alpha']}, indistinguishable otherwise. The smallest p-value the test can reach "
        f"here is {_p(document['min_p_value'])} (before adjustment). This answers how the verdict varies over the rows "
        "of this dataset, not over other datasets."
    )


def _method(document: Mapping[str, Any]) -> str:
    if isinstance(document.get("method"), Mapping) and document["method"].get("unit") == "rows":
        return _row_method(document)
    config, unit = document["config"], document["unit"]
    tests = sorted({pair["test"] for pair in document["pairs"]})
    described = " and ".join(TESTS[t].format(units=UNITS[unit], unit=unit, resamples=config["resamples"]) for t in tests)
    adjustment = ADJUSTMENTS.get(config["adjustment"], config["adjustment"])
    n_pairs = len(document["pairs"])
    return (
        f"Every candidate is compared with the leader, **{cell(document['leader'])}**, on {cell(document['statistic'])} "
        f"over the same {_plural(document['n_units'], unit)}, paired {unit} by {unit}. Δ is the candidate's score minus "
        f"the leader's; its {config['confidence_level']:.0%} confidence interval is a paired "
        f"{INTERVALS.get(config['interval'], config['interval'])} bootstrap with {config['resamples']} resamples "
        f"(seed {config['seed']}). The test is {described}; p-values are adjusted across all {n_pairs} pairs "
        f"({adjustment}), and a candidate is ahead or behind when its adjusted p is below alpha = {config['alpha']}, "
        f"indistinguishable otherwise. The smallest p-value the test can reach here is {_p(document['min_p_value'])} "
        "(before adjustment). The full pairwise table is in the JSON report (`comparison.pairs`)."
    )


def _least_first(document: Mapping[str, Any]) -> dict[str, Any]:
    """A nuisance view's comparison seen lowest score first: its leader the candidate that separates the nuisance
    least (declaration order among equal scores); the pairs as they are (Δ = score a - score b)."""
    least = min(document["candidates"], key=lambda c: c["score"])["name"]
    return {**document, "leader": least}


NUISANCE_VERDICTS = {"ahead": "encodes more", "behind": "encodes less", "indistinguishable": "indistinguishable"}


def comparison_lines(document: Mapping[str, Any] | None, skipped: str | None, *,
                     nuisance: str | None = None) -> list[str]:
    """The Markdown section ``## Is the leader really ahead?``, starting with a blank line; ``[]`` when both are None.

    With a document: the method paragraph, a table of each candidate against the leader in descending score order
    (candidate, score, Δ vs leader, CI of Δ, adjusted p, verdict; the leader's row says ``leader``), the
    candidates statistically tied with the leader and their ranks, and the document's notes. Without one, one
    line saying why (``skipped``). A malformed document raises ValidationError (:func:`check_comparison`).
    ``nuisance``: the report is that nuisance view's (lower is better): the leader is the candidate that encodes
    it least, the others in ascending score order, and a verdict says whether a candidate encodes it more or less.
    """
    if document is None:
        if skipped is None:
            return []
        return ["", f"## {TITLE}", "", f"No paired comparison: {cell(str(skipped).rstrip('.'))}."]
    document = check_comparison(document)
    if nuisance is not None:
        document = _least_first(document)
    leader = document["leader"]
    scores = {c["name"]: c["score"] for c in document["candidates"]}
    names = ranked_names(document)
    if nuisance is not None:
        names = [leader] + [c["name"] for c in sorted(document["candidates"], key=lambda c: c["score"])
                            if c["name"] != leader]
    rows: list[list[Any]] = [[f"{leader} (leader)", float(scores[leader]), None, None, None, "leader"]]
    tied, behind = [], 0
    for rank, name in enumerate(names[1:], start=2):
        pair = versus(document, name, leader)
        word = pair["verdict"] if nuisance is None else NUISANCE_VERDICTS[pair["verdict"]]
        rows.append([name, float(scores[name]), _signed(pair["delta"]),
                     f"[{_signed(pair['ci_low'])}, {_signed(pair['ci_high'])}]", _p(pair["p_adjusted"]), word])
        if pair["verdict"] == "indistinguishable":
            tied.append((rank, name))
        behind += pair["verdict"] == ("behind" if nuisance is None else "ahead")
    alpha = document["config"]["alpha"]
    if tied:
        ranks = [str(rank) for rank in [1] + [rank for rank, _ in tied]]
        ranks = ", ".join(ranks[:-1]) + " and " + ranks[-1]
        tie_line = (f"Statistically tied with the leader: {', '.join(f'**{cell(n)}** (rank {r})' for r, n in tied)}. "
                    f"The ranking stays by point score, but ranks {ranks} are not told apart at alpha = {alpha}.")
    else:
        worse = "is behind it" if nuisance is None else f"encodes {cell(nuisance)} significantly more"
        tie_line = "Statistically tied with the leader: none." + (
            f" Every other candidate {worse} at alpha = {alpha}." if behind == len(names) - 1 else "")
    lines = ["", f"## {TITLE}", ""]
    if nuisance is not None:
        lines += [f"Nuisance view {cell(nuisance)}: lower separation is better, so the leader is the candidate that "
                  f"encodes it least, **{cell(leader)}**, and a positive Δ means a candidate encodes it more.", ""]
    method = _method(document)
    if nuisance is not None:
        method = method.replace("a candidate is ahead or behind when", "a candidate encodes it more or less when")
    lines += [method, ""]
    lines += table(["candidate", "score", "Δ vs leader", "CI of Δ", "adjusted p", "verdict"], rows)
    lines += ["", tie_line]
    if document["notes"]:
        lines += ["", *[f"- {cell(note)}" for note in document["notes"]]]
    return lines


def result_comparison_lines(result: Any) -> list[str]:
    """:func:`comparison_lines` of a result object's ``comparison`` (``.to_dict()`` or a dict) and
    ``comparison_skipped``, read with getattr so that results without them render nothing."""
    comparison = getattr(result, "comparison", None)
    if comparison is not None and not isinstance(comparison, Mapping):
        comparison = comparison.to_dict()
    nuisance = (getattr(result, "metadata", None) or {}).get("view") or {}  # a nuisance view's report: lower first
    return comparison_lines(comparison, getattr(result, "comparison_skipped", None),
                            nuisance=nuisance.get("name") if nuisance.get("role") == "nuisance" else None)


__all__ = ["SCHEMA", "TITLE", "cell", "check_comparison", "comparison_lines", "ranked_names", "result_comparison_lines",
           "table", "versus"]
