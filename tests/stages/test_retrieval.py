"""Which branch encodes each retrieval endpoint (retrieval_branch), for every kind of extractor."""

from __future__ import annotations

import pytest

from vertebrae.core.errors import ValidationError
from vertebrae.extractors.callable import CallableExtractor, CallableRetrievalExtractor
from vertebrae.extractors.open_clip import OpenCLIPExtractor
from vertebrae.stages.retrieval import retrieval_branch


def _rows(x):
    return x


def test_branch_routing_by_extractor_kind():
    plain = CallableExtractor("plain", _rows, cache_identity="1")
    explicit = CallableRetrievalExtractor("pair", _rows, _rows, cache_identity="1")
    clip = OpenCLIPExtractor("clip", "ViT-B-32")  # nothing loads until it encodes
    for side in ("query", "gallery"):
        assert retrieval_branch(plain, side) is None
        assert retrieval_branch(plain, side, "text_branch") is None  # no branches: one transform for both sides
        assert retrieval_branch(explicit, side) == side
        assert retrieval_branch(clip, side) is None  # its default (image) branch on both sides
        assert retrieval_branch(clip, side, "text_branch") == "text_branch"
    with pytest.raises(ValidationError, match=r"bench\.gallery_branch: extractor 'pair' has branches \['query', "
                                              r"'gallery'\], not 'image_branch'"):
        retrieval_branch(explicit, "gallery", "image_branch", where="bench")
