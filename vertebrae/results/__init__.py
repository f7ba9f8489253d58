"""Result objects of the three protocols on one ranked-report base (:mod:`vertebrae.results.base`).

``labelled`` (BenchmarkResult, ExtractorResult; re-exported here), ``retrieval`` and ``zero_shot``.
"""

from vertebrae.results.labelled import TABLE_COLUMNS, BenchmarkResult, ExtractorResult

__all__ = ["TABLE_COLUMNS", "BenchmarkResult", "ExtractorResult"]
