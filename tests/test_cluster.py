"""GPU requests of workflow jobs: one GPU exactly for an extractor declared on a CUDA device."""

import pytest

from vertebrae.cluster import gpus


@pytest.mark.parametrize("decl, expected", [
    ({"type": "huggingface", "device": "cuda"}, 1),
    ({"type": "open_clip", "device": "cuda:1"}, 1),
    ({"type": "open_clip", "device": "auto"}, 0),
    ({"type": "huggingface", "device": "cpu"}, 0),
    ({"type": "huggingface", "device": "cudax"}, 0),
    ({"type": "sklearn"}, 0),
])
def test_gpus_follow_the_declared_device(decl, expected):
    assert gpus({"stage": "embed", "extractor": {"name": "m", "decl": decl, "where": "x"}}) == expected


def test_jobs_without_extractor_ask_for_no_gpu():
    assert gpus({"stage": "score"}) == 0
