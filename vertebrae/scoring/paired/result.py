"""``PairedComparison``: the document of one comparison (schema ``vertebrae.comparison/v1``)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from vertebrae.core.errors import ArtifactError, ValidationError
from vertebrae.core.fingerprint import to_json_value
from vertebrae.core.records import is_int, is_real
from vertebrae.scoring.paired.config import ComparisonConfig
from vertebrae.scoring.paired.reducers import REDUCERS

COMPARISON_SCHEMA = "vertebrae.comparison/v1"
TESTS = ("mcnemar-exact", "randomization-exact", "randomization", "subsampling")
VERDICTS = ("ahead", "behind", "indistinguishable")
CANDIDATE_KEYS = ("name", "score", "ci_low", "ci_high")
PAIR_KEYS = ("a", "b", "delta", "ci_low", "ci_high", "test", "p_value", "p_adjusted", "min_p_value", "verdict")
_FLIP = {"ahead": "behind", "behind": "ahead", "indistinguishable": "indistinguishable"}
_OWNER = "PairedComparison"


def _number(value: Any, where: str, *, unit_interval: bool = False) -> float:
    if not is_real(value) or not math.isfinite(float(value)):
        raise ValidationError(f"{_OWNER}.{where} must be a finite number, got {value!r}")
    if unit_interval and not 0.0 <= float(value) <= 1.0:
        raise ValidationError(f"{_OWNER}.{where} must lie in [0, 1], got {value!r}")
    return float(value)


def _entry(item: Any, keys: tuple[str, ...], where: str) -> dict[str, Any]:
    if not isinstance(item, Mapping) or tuple(sorted(item)) != tuple(sorted(keys)):
        shown = sorted(item) if isinstance(item, Mapping) else type(item).__name__
        raise ValidationError(f"{_OWNER}.{where} must hold exactly the keys {list(keys)}, got {shown}")
    return {key: item[key] for key in keys}


@dataclass(frozen=True, eq=False)
class PairedComparison:
    """Every candidate's point score with its bootstrap interval, and every pair ``(a, b)`` (``a`` before
    ``b`` in candidate order) with ``delta = score[a] - score[b]``, its paired bootstrap interval, the paired
    test (``test``: "mcnemar-exact", "randomization-exact" or "randomization"; candidates equal on every unit
    get delta 0, interval [0, 0], p 1), its p-value, the p-value adjusted across all pairs,
    the smallest p-value the test could give (``min_p_value``) and the verdict of ``a`` against ``b``.

    ``leader`` = the candidate with the highest score (ties: the earliest). ``min_p_value`` = the smallest
    attainable p-value over the pairs. ``notes``: plain sentences a report shows (coarse tests, fallbacks).
    Equality compares ``to_dict`` documents; JSON round trips are exact.
    """

    config: ComparisonConfig
    unit: str
    statistic: str
    reducer: str
    n_units: int
    n_strata: int
    candidates: list[dict[str, Any]]
    pairs: list[dict[str, Any]]
    min_p_value: float
    leader: str
    notes: list[str]
    method: dict[str, Any] | None = None  # a row-resampled comparison's method (``rows``); absent from older documents

    def __post_init__(self) -> None:
        if not isinstance(self.config, ComparisonConfig):
            raise ValidationError(f"{_OWNER}.config must be a ComparisonConfig, got {type(self.config).__name__}")
        for name in ("unit", "statistic"):
            if not isinstance(getattr(self, name), str):
                raise ValidationError(f"{_OWNER}.{name} must be a string, got {getattr(self, name)!r}")
        if self.reducer not in REDUCERS:
            raise ValidationError(f"{_OWNER}.reducer must be one of {REDUCERS}, got {self.reducer!r}")
        for name in ("n_units", "n_strata"):
            if not is_int(getattr(self, name)) or getattr(self, name) < 1:
                raise ValidationError(f"{_OWNER}.{name} must be a positive integer, got {getattr(self, name)!r}")
            object.__setattr__(self, name, int(getattr(self, name)))
        object.__setattr__(self, "candidates", self._check_candidates())
        object.__setattr__(self, "pairs", self._check_pairs())
        object.__setattr__(self, "min_p_value", _number(self.min_p_value, "min_p_value", unit_interval=True))
        if self.min_p_value != min(pair["min_p_value"] for pair in self.pairs):
            raise ValidationError(f"{_OWNER}.min_p_value must be the smallest of the pairs' min_p_value")
        scores = [c["score"] for c in self.candidates]
        leader = self.candidates[scores.index(max(scores))]["name"]
        if self.leader != leader:
            raise ValidationError(f"{_OWNER}.leader must be {leader!r} (the highest score, earliest on ties), "
                                  f"got {self.leader!r}")
        if not isinstance(self.notes, list) or not all(isinstance(note, str) for note in self.notes):
            raise ValidationError(f"{_OWNER}.notes must be a list of strings")
        object.__setattr__(self, "notes", list(self.notes))
        if self.method is not None and not isinstance(self.method, Mapping):
            raise ValidationError(f"{_OWNER}.method must be a mapping or None, got {type(self.method).__name__}")

    @property
    def row_resampled(self) -> bool:
        """True when the candidates were compared over matched row subsamples (``vertebrae.scoring.paired.rows``)."""
        return self.method is not None and self.method.get("unit") == "rows"

    def _check_candidates(self) -> list[dict[str, Any]]:
        if not isinstance(self.candidates, list) or len(self.candidates) < 2:
            raise ValidationError(f"{_OWNER}.candidates must be a list of at least 2 entries")
        out = []
        for i, item in enumerate(self.candidates):
            entry = _entry(item, CANDIDATE_KEYS, f"candidates[{i}]")
            if not isinstance(entry["name"], str):
                raise ValidationError(f"{_OWNER}.candidates[{i}].name must be a string, got {entry['name']!r}")
            for key in CANDIDATE_KEYS[1:]:
                entry[key] = _number(entry[key], f"candidates[{i}].{key}")
            out.append(entry)
        names = [c["name"] for c in out]
        if len(set(names)) != len(names):
            raise ValidationError(f"{_OWNER}.candidates holds duplicate names: {names}")
        return out

    def _check_pairs(self) -> list[dict[str, Any]]:
        expected = list(combinations([c["name"] for c in self.candidates], 2))
        if not isinstance(self.pairs, list) or len(self.pairs) != len(expected):
            raise ValidationError(f"{_OWNER}.pairs must list all {len(expected)} pairs of candidates")
        out = []
        for i, (item, (a, b)) in enumerate(zip(self.pairs, expected)):
            entry = _entry(item, PAIR_KEYS, f"pairs[{i}]")
            if (entry["a"], entry["b"]) != (a, b):
                raise ValidationError(f"{_OWNER}.pairs[{i}] must compare {a!r} with {b!r}, got "
                                      f"{entry['a']!r} with {entry['b']!r}")
            for key in ("delta", "ci_low", "ci_high"):
                entry[key] = _number(entry[key], f"pairs[{i}].{key}")
            for key in ("p_value", "p_adjusted", "min_p_value"):
                entry[key] = _number(entry[key], f"pairs[{i}].{key}", unit_interval=True)
            if entry["test"] not in TESTS:
                raise ValidationError(f"{_OWNER}.pairs[{i}].test must be one of {TESTS}, got {entry['test']!r}")
            if entry["verdict"] not in VERDICTS:
                raise ValidationError(f"{_OWNER}.pairs[{i}].verdict must be one of {VERDICTS}, got "
                                      f"{entry['verdict']!r}")
            out.append(entry)
        return out

    @property
    def n_pairs(self) -> int:
        return len(self.pairs)

    def scores(self) -> dict[str, float]:
        return {c["name"]: c["score"] for c in self.candidates}

    def pair(self, a: str, b: str) -> dict[str, Any]:
        """The comparison of ``a`` against ``b`` (either order; a reversed pair is returned with delta and
        interval negated and the verdict flipped)."""
        for entry in self.pairs:
            if (entry["a"], entry["b"]) == (a, b):
                return dict(entry)
            if (entry["a"], entry["b"]) == (b, a):
                return {**entry, "a": a, "b": b, "delta": -entry["delta"], "ci_low": -entry["ci_high"],
                        "ci_high": -entry["ci_low"], "verdict": _FLIP[entry["verdict"]]}
        raise ValidationError(f"no pair of {a!r} and {b!r} in this comparison ({[c['name'] for c in self.candidates]})")

    def versus_leader(self) -> list[dict[str, Any]]:
        """Each other candidate against the leader, in descending score order (ties: candidate order):
        ``{"name", "score", "delta" (candidate - leader), "ci_low", "ci_high", "p_adjusted", "verdict"}``."""
        order = sorted(range(len(self.candidates)), key=lambda i: (-self.candidates[i]["score"], i))
        rows = []
        for i in order:
            name = self.candidates[i]["name"]
            if name == self.leader:
                continue
            entry = self.pair(name, self.leader)
            rows.append({"name": name, "score": self.candidates[i]["score"], "delta": entry["delta"],
                         "ci_low": entry["ci_low"], "ci_high": entry["ci_high"], "p_adjusted": entry["p_adjusted"],
                         "verdict": entry["verdict"]})
        return rows

    def tied_with_leader(self) -> list[str]:
        """The leader and every candidate indistinguishable from it, in descending score order."""
        return [self.leader] + [row["name"] for row in self.versus_leader() if row["verdict"] == "indistinguishable"]

    def to_dict(self) -> dict[str, Any]:
        doc = {name: getattr(self, name) for name in self.__dataclass_fields__
               if name != "config" and (name != "method" or self.method is not None)}
        return {"schema": COMPARISON_SCHEMA, "config": self.config.to_dict(), **to_json_value(doc)}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PairedComparison) and self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PairedComparison:
        """Strict: the schema, every field and nothing else (``ArtifactError`` naming what is wrong)."""
        if not isinstance(data, Mapping):
            raise ArtifactError(f"comparison must be a mapping, got {type(data).__name__}")
        if data.get("schema") != COMPARISON_SCHEMA:
            raise ArtifactError(f"comparison has schema {data.get('schema')!r}, expected {COMPARISON_SCHEMA!r}")
        fields = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - fields - {"schema"})
        missing = sorted(fields - set(data) - {"method"})
        if unknown or missing:
            raise ArtifactError(f"comparison document: unknown fields {unknown}, missing fields {missing}")
        try:
            config = ComparisonConfig.from_dict(data["config"])
        except ValidationError as exc:
            raise ArtifactError(f"comparison document: invalid recorded config: {exc}") from None
        values = {name: data[name] for name in fields if name != "config" and name in data}
        try:
            return cls(config=config, **values)
        except (ValidationError, TypeError) as exc:
            raise ArtifactError(f"malformed comparison document: {exc}") from None
