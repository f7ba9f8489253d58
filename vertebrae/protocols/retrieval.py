"""RetrievalBenchmark: the retrieval protocol in one process.

Per candidate: fit (if the extractor learns) on the gallery -> embed the gallery and the queries (through the
extractor's query / gallery branches when it has them) -> optional paired compression fitted on the gallery
-> exact scoring -> a report ranked by the primary score (NDCG@10 by default).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from vertebrae.compression import EmbeddingCompressionConfig, variant_name
from vertebrae.core.errors import ValidationError
from vertebrae.core.fingerprint import fingerprint
from vertebrae.core.memory import MemoryConfig
from vertebrae.data.retrieval import RetrievalDataset
from vertebrae.extractors.base import Extractor
from vertebrae.core.config import EmbeddingConfig
from vertebrae.reports.costs import peak_memory_mb, reset_peak_memory
from vertebrae.results.retrieval import RetrievalBenchmarkResult, RetrievalCandidateResult
from vertebrae.scoring.retrieval import RetrievalConfig
from vertebrae.scoring.paired import ComparisonConfig
from vertebrae.scoring.retrieval.device import resolve_device
from vertebrae.stages.common import comparison_config_or_default, embed_endpoint, embedding_recipe
from vertebrae.stages.retrieval import (
    GALLERY,
    QUERY,
    compress_retrieval_pair,
    endpoint_metadata,
    retrieval_branch,
    retrieval_compression_recipe,
    retrieval_protocol_recipe,
    retrieval_protocol_summary,
    retrieval_report,
    retrieval_score_recipe,
    score_retrieval,
)


class RetrievalBenchmark:
    """Compare extractors on one retrieval dataset; ``run()`` returns a RetrievalBenchmarkResult.

    ``query_branch`` / ``gallery_branch`` name the branches that encode each endpoint (e.g. "text_branch" and
    "image_branch" for text-to-image retrieval with an image-text model); by default an extractor with "query" /
    "gallery" branches uses them, any other extractor its one (or default) transform for both endpoints
    (``vertebrae.stages.retrieval.retrieval_branch``). ``device`` runs the block products on cpu (NumPy), cuda,
    auto or torch:cpu, with identical results (``vertebrae.scoring.retrieval.device``).
    """

    def __init__(
        self,
        dataset: RetrievalDataset,
        extractors: Sequence[Extractor] = (),
        *,
        retrieval_config: RetrievalConfig | None = None,
        query_branch: str | None = None,
        gallery_branch: str | None = None,
        compression_config: EmbeddingCompressionConfig | None = None,
        embedding_config: EmbeddingConfig | None = None,
        memory_config: MemoryConfig | None = None,
        device: str = "cpu",
        name: str = "retrieval",
        comparison_config: ComparisonConfig | None = None,
    ) -> None:
        if not isinstance(dataset, RetrievalDataset):
            raise ValidationError(f"RetrievalBenchmark needs a RetrievalDataset, got {type(dataset).__name__}")
        self.dataset = dataset
        self.config = retrieval_config or RetrievalConfig()
        self.query_branch, self.gallery_branch = query_branch, gallery_branch
        self.compression_config = compression_config
        self.embedding_config = embedding_config or EmbeddingConfig()
        self.memory_config = memory_config
        resolve_device(device)  # a bad string or a missing GPU is refused here, before any embedding
        self.device = device
        self.name = name
        self.comparison_config = comparison_config_or_default(comparison_config, 0)
        self.extractors: list[Extractor] = []
        for extractor in extractors:
            if any(e.name == extractor.name for e in self.extractors):
                raise ValidationError(f"benchmark {name!r} already has an extractor named {extractor.name!r}")
            self.extractors.append(extractor)

    def _branch(self, extractor: Extractor, side: str) -> str | None:
        chosen = self.query_branch if side == QUERY else self.gallery_branch
        return retrieval_branch(extractor, side, chosen, where=f"benchmark {self.name!r}")

    def _embed(self, extractor: Extractor, side: str, rows: Any, ids: Sequence[str], fit: bool):
        if self.dataset.query_modality == "embedding" and extractor.branches:
            raise ValidationError(f"extractor {extractor.name!r} encodes raw inputs; the dataset holds embeddings")
        branch = self._branch(extractor, side)
        block = embed_endpoint(extractor, rows, ids, shards=self.embedding_config.shards,
                               batch_size=self.embedding_config.batch_size, endpoint=side, branch=branch, fit=fit,
                               memory=self.memory_config)
        recipe = embedding_recipe(self.dataset.endpoint_key(side), side, extractor, branch, fit_endpoint=GALLERY,
                                  fit_identity=self.dataset.endpoint_key(GALLERY))
        return block, fingerprint("embedding", recipe)

    def run(self) -> RetrievalBenchmarkResult:
        if not self.extractors:
            raise ValidationError(f"benchmark {self.name!r} has no extractors")
        dataset, protocol = self.dataset, self.dataset.protocol
        protocol_fp = fingerprint("protocol", retrieval_protocol_recipe(dataset.identity_key(), dataset.exclude_same_id))
        candidates = []
        for extractor in self.extractors:
            reset = reset_peak_memory()
            started = time.perf_counter()
            gallery, gallery_fp = self._embed(extractor, GALLERY, dataset.gallery, dataset.gallery_ids, fit=True)
            queries, query_fp = self._embed(extractor, QUERY, dataset.queries, dataset.query_ids, fit=False)
            variants = [(extractor.name, queries, gallery, query_fp, gallery_fp, None)]
            if self.compression_config is not None:
                q_c, g_c, metadata = compress_retrieval_pair(queries, gallery, self.compression_config)
                pair_fp = fingerprint("compressed", retrieval_compression_recipe(query_fp, gallery_fp, self.compression_config))
                variants.append((variant_name(extractor.name, self.compression_config), q_c, g_c, f"{pair_fp}/query",
                                 f"{pair_fp}/gallery", metadata))
            embedded, peak = time.perf_counter(), peak_memory_mb() if reset else None
            for name, q, g, q_fp, g_fp, compression in variants:
                score = score_retrieval(q, g, protocol, self.config, device=self.device)
                candidates.append(RetrievalCandidateResult(
                    name, score,
                    {**endpoint_metadata(q, g), "query_fingerprint": q_fp, "gallery_fingerprint": g_fp,
                     "extractor": extractor.recipe()},
                    compression,
                    {"score_fingerprint": fingerprint("score", retrieval_score_recipe(q_fp, g_fp, protocol_fp, self.config)),
                     "timings": {"embed_s": embedded - started, "embed_peak_mb": peak,
                                 "score_s": time.perf_counter() - embedded}},
                ))
        report = retrieval_report(candidates, protocol, benchmark=self.name, config=self.config,
                                  dataset_summary=retrieval_protocol_summary(protocol, dataset.identity_key(),
                                                                             dataset.metadata.get("name")))
        return report.with_comparison(self.comparison_config).with_costs(measured=True)
