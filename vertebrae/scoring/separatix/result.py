"""SeparatixResult, the descriptive record of the Separatix stage, and ``json_safe`` for separatix's report."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vertebrae.core.errors import ValidationError
from vertebrae.core.fingerprint import to_json_value
from vertebrae.core.records import record_fields


def json_safe(value: Any) -> Any:
    """Plain JSON data: numpy values converted, NaN/inf -> None, keys as str, tuples as lists.

    Objects JSON has no form for are written as their ``str`` (separatix's terse report holds none).
    """
    if value is None or isinstance(value, (bool, str)):
        return str.__str__(value) if isinstance(value, str) else value
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        return value if math.isfinite(value) else None
    if isinstance(value, np.ndarray):
        return json_safe(value.tolist())
    if isinstance(value, Mapping):
        return {str(key): json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [json_safe(item) for item in value]
    return str(value)


@dataclass(frozen=True)
class SeparatixResult:
    """Outcome of the Separatix stage; descriptive only (never used for ranking).

    ``report`` is the complete terse separatix report (``DiagnosticReport.to_dict(terse=True)`` made JSON-safe:
    recommendation, recommendation_text, confidence, metrics, scores, interpretations, decision_path, warnings,
    errors, skipped_diagnostics, preprocessing, sampling, densification_events, class_summary, grouping,
    runtime, config); row-level arrays (predictions, indices, fold assignments, per-label/target metrics) are
    pruned by separatix. ``preprocessing``, ``densification_events``, ``skipped_diagnostics`` and ``grouping``
    repeat the report's entries for direct access; ``warnings`` adds captured Python warnings (module
    docstring). ``settings`` are the arguments given (or that would have been given) to ``separatix.diagnose``.
    """

    ran: bool
    skipped_reason: str | None
    gate: dict[str, Any]
    target_type: str
    target_mode: str
    recommendation: str | None = None
    confidence: str | None = None
    decision_path: list[str] = field(default_factory=list)
    scores: dict[str, Any] = field(default_factory=dict)
    report: dict[str, Any] | None = None
    probe_summary: dict[str, Any] | None = None
    preprocessing: dict[str, Any] = field(default_factory=dict)
    densification_events: list[dict[str, Any]] = field(default_factory=list)
    skipped_diagnostics: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    grouping: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {name: to_json_value(json_safe(getattr(self, name)), f"SeparatixResult.{name}")
                for name in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SeparatixResult:
        data = record_fields(cls, data, error=ValidationError)
        missing = [name for name in ("ran", "skipped_reason", "gate", "target_type", "target_mode") if name not in data]
        if missing:
            raise ValidationError(f"SeparatixResult fields missing: {missing}")
        return cls(**data)
