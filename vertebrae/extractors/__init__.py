"""Extractors turn dataset inputs into embeddings; see ``base.Extractor`` for the contract."""

from vertebrae.extractors.base import Extractor
from vertebrae.extractors.callable import CallableExtractor, CallableRetrievalExtractor
from vertebrae.extractors.precomputed import PrecomputedExtractor
from vertebrae.extractors.sklearn import SklearnExtractor

__all__ = ["CallableExtractor", "CallableRetrievalExtractor", "Extractor", "PrecomputedExtractor", "SklearnExtractor"]
