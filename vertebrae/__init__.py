"""vertebrae: compare frozen embedding backbones on your own data, exactly and reproducibly.

Public names are imported lazily on first access, so ``import vertebrae`` (and the CLI) start fast.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "vertebrae.core.errors": (
        "ArtifactError", "BudgetError", "ConfigError", "IdentityError", "LabelError", "ValidationError",
        "VertebraeError", "VertebraeWarning",
    ),
    "vertebrae.core.identity": ("DatasetIdentity",),
    "vertebrae.core.labels": ("LabelCatalog",),
    "vertebrae.data.labelled": ("BenchmarkDataset",),
    "vertebrae.extractors": ("PrecomputedExtractor", "SklearnExtractor"),
    "vertebrae.protocols.labelled": ("Benchmark", "Evaluator"),
    "vertebrae.data.target_views": ("Hierarchy", "TargetView"),
    "vertebrae.protocols.views": ("ViewsBenchmark", "ViewsResult"),
    "vertebrae.core.config": ("CacheConfig", "EmbeddingConfig"),
    "vertebrae.results": ("BenchmarkResult", "ExtractorResult"),
    "vertebrae.scoring.overlap": (
        "ContinuousOverlapScoringConfig", "OverlapIndexScorer", "OverlapScoreResult", "OverlapScoringConfig",
    ),
    "vertebrae.scoring.metrics": ("CallableMetric", "LabelRetrievalMetric", "Metric", "MetricResult", "OverlapMetric"),
    "vertebrae.scoring.knn": ("KNNMetric",),
    "vertebrae.scoring.linear_probe": ("LinearProbeMetric",),
    "vertebrae.scoring.few_shot": ("FewShotMetric",),
    "vertebrae.scoring.clustering": ("ClusteringMetric",),
    "vertebrae.scoring.stability": ("StabilityConfig", "StabilityResult", "run_stability_analysis"),
    "vertebrae.scoring.separatix": ("SeparatixConfig", "SeparatixResult", "SeparatixScorer"),
    "vertebrae.scoring.degenerate": ("DegenerateEmbeddingWarning",),
    "vertebrae.compression": ("EmbeddingCompressionConfig", "fit_paired_compression"),
    "vertebrae.data.targets": ("Targets",),
    "vertebrae.data.retrieval": ("RetrievalDataset",),
    "vertebrae.scoring.retrieval": ("RetrievalConfig", "RetrievalResult", "RetrievalScore", "RetrievalScorer"),
    "vertebrae.protocols.retrieval": ("RetrievalBenchmark",),
    "vertebrae.core.memory": ("MemoryConfig",),
    "vertebrae.extractors.callable": ("CallableExtractor", "CallableRetrievalExtractor"),
    "vertebrae.data.zero_shot": ("ZeroShotDataset",),
    "vertebrae.scoring.zero_shot": ("ZeroShotConfig", "ZeroShotResult", "ZeroShotScorer"),
    "vertebrae.protocols.zero_shot": ("ZeroShotBenchmark", "ZeroShotCandidate"),
    "vertebrae.extractors.open_clip": ("OpenCLIPExtractor",),
    "vertebrae.extractors.huggingface": ("HFMultimodalExtractor", "HFTextExtractor", "HFVisionExtractor"),
    "vertebrae.extractors.torch_module": ("TorchExtractor",),
    "vertebrae.extractors.checkpoints": ("CheckpointSweep",),
    "vertebrae.extractors.timm_models": ("TimmExtractor",),
    "vertebrae.extractors.sentence_transformer_model": ("SentenceTransformerExtractor",),
    "vertebrae.core.inputs": ("RawInputs",),
    "vertebrae.data.sources.manifest": ("ManifestSpec", "read_manifest"),
    "vertebrae.data.split_files": ("read_split",),
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}
__all__ = sorted(_MODULE_OF)


def __getattr__(name: str) -> Any:
    if name not in _MODULE_OF:
        raise AttributeError(f"module 'vertebrae' has no attribute {name!r}")
    value = getattr(importlib.import_module(_MODULE_OF[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
