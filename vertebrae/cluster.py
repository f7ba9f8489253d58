"""Cluster resources a workflow job asks for, derived from its job spec (pure; the rules call it).

``gpus(spec)``: an embedding or fitting job asks for one GPU exactly when its extractor declares a CUDA
``device`` (``device: cuda`` or ``cuda:N``); everything else (scikit-learn, precomputed, CPU models) asks for none,
so a CPU-only cluster runs the default workflow unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def gpus(spec: Mapping[str, Any]) -> int:
    """1 when the job's extractor runs a model on a CUDA device, else 0."""
    decl = (spec.get("extractor") or {}).get("decl") or {}
    device = decl.get("device")
    return int(isinstance(device, str) and device.split(":", 1)[0] == "cuda")
