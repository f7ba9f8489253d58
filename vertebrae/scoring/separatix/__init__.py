"""Separatix complexity diagnostics: the one adapter between vertebrae and the ``separatix`` package.

- ``config``: :class:`SeparatixConfig`, the gate thresholds and the settings of the separatix call;
- ``scorer``: :class:`SeparatixScorer`, the overlap gate and the one ``separatix.diagnose`` call;
- ``probes``: :func:`summarize_probes`, normalised probe evidence of a separatix report;
- ``result``: :class:`SeparatixResult`, the stage's descriptive record, and ``json_safe``.
"""

from vertebrae.scoring.separatix.config import BUDGETS, DENSIFY_POLICIES, TARGET_MODES, SeparatixConfig
from vertebrae.scoring.separatix.probes import metric_direction, summarize_probes
from vertebrae.scoring.separatix.result import SeparatixResult, json_safe
from vertebrae.scoring.separatix.scorer import SeparatixScorer

__all__ = ["BUDGETS", "DENSIFY_POLICIES", "TARGET_MODES", "SeparatixConfig", "SeparatixResult", "SeparatixScorer",
           "json_safe", "metric_direction", "summarize_probes"]
