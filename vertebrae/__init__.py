"""vertebrae: compare frozen embedding backbones on your own data, exactly and reproducibly."""

__version__ = "0.1.0"

from vertebrae.core.errors import (  # noqa: E402
    ArtifactError,
    BudgetError,
    ConfigError,
    IdentityError,
    LabelError,
    ValidationError,
    VertebraeError,
    VertebraeWarning,
)
from vertebrae.core.identity import DatasetIdentity  # noqa: E402
from vertebrae.core.labels import LabelCatalog  # noqa: E402
from vertebrae.data.labelled import BenchmarkDataset  # noqa: E402
from vertebrae.extractors import PrecomputedExtractor, SklearnExtractor  # noqa: E402
from vertebrae.protocols.labelled import Benchmark, CacheConfig, EmbeddingConfig, Evaluator  # noqa: E402
from vertebrae.results import BenchmarkResult, ExtractorResult  # noqa: E402
from vertebrae.scoring.overlap import OverlapIndexScorer, OverlapScoreResult, OverlapScoringConfig  # noqa: E402

__all__ = [
    "ArtifactError", "Benchmark", "BenchmarkDataset", "BenchmarkResult", "BudgetError", "CacheConfig", "ConfigError",
    "DatasetIdentity", "EmbeddingConfig", "Evaluator", "ExtractorResult", "IdentityError", "LabelCatalog", "LabelError",
    "OverlapIndexScorer", "OverlapScoreResult", "OverlapScoringConfig", "PrecomputedExtractor", "SklearnExtractor",
    "ValidationError", "VertebraeError", "VertebraeWarning",
]
