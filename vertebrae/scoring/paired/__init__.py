"""Paired comparison of candidates scored on the same units: bootstrap intervals, paired tests, adjustment.

Modules, in the order data flows:

- ``config``: ``ComparisonConfig``.
- ``units``: ``PairedUnits`` (per-unit feature vectors of m candidates on n units, strata, reducer) and
  ``macro_f1_features``.
- ``reducers``: the statistic from per-stratum feature totals ("mean", "ratio", "macro_f1").
- ``resampling``: seeded chunked resample blocks (stratified bootstrap counts, swap bits) and the
  percentile / BCa intervals; ``jackknife``: the BCa acceleration.
- ``significance``: McNemar's exact test, the randomization p-value, ``holm`` and the other adjustments.
- ``comparison``: ``compare_units``; ``result``: ``PairedComparison`` (schema ``vertebrae.comparison/v1``).
"""

from vertebrae.scoring.paired.comparison import compare_units
from vertebrae.scoring.paired.config import ComparisonConfig
from vertebrae.scoring.paired.result import COMPARISON_SCHEMA, PairedComparison
from vertebrae.scoring.paired.significance import adjust, bonferroni, holm, mcnemar_exact
from vertebrae.scoring.paired.units import PairedUnits, macro_f1_features

__all__ = ["COMPARISON_SCHEMA", "ComparisonConfig", "PairedComparison", "PairedUnits", "adjust", "bonferroni",
           "compare_units", "holm", "macro_f1_features", "mcnemar_exact"]
