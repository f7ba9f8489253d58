"""Layer sweeps in the workflow: the layers of one model embedded in ONE forward pass per batch.

``hidden_layers: [4, 8, 12]`` is expanded when the config is validated into the candidates ``NAME@4``, ``NAME@8``,
``NAME@12`` (``vertebrae.extractors.registry.expand_layer_sweeps``), each exactly the ``hidden_layer: N`` candidate
a user would write, so each layer's embedding spec, fingerprint, merge, scores and report entry are that
candidate's. ``group_layer_sweeps`` then finds the embedding specs that differ only in their layer (same model
declaration, endpoint, rows, shards and batch size; whether they came from one sweep or from single-layer
candidates) and plans one ``embed-sweep`` job per shard for them: it runs the model once per batch and writes every
layer's shard (the very file the single-layer embed job would write) into one folder,
``results/sweeps/{sweep}/shard-{i}-of-{n}/{layer fingerprint}.h5``; each layer's merge job reads its file from there.
"""

from __future__ import annotations

from typing import Any

from vertebrae.core.fingerprint import canonical_json, fingerprint
from vertebrae.extractors.registry import SWEEPABLE
from vertebrae.planning.dag import WorkflowPlan

_NOT_IN_KEY = ("stage", "fingerprint", "recipe", "extractor", "where", "sweep")


def _group_key(spec: dict[str, Any]) -> str | None:
    """What a layer's embedding spec shares with the other layers of its sweep; None when it is not a layer."""
    decl = (spec.get("extractor") or {}).get("decl") or {}
    if spec.get("stage") != "embed" or decl.get("type") not in SWEEPABLE or decl.get("hidden_layer") is None:
        return None
    if spec.get("fit") is not None:
        return None
    model = {k: v for k, v in decl.items() if k != "hidden_layer"}
    return canonical_json({"spec": {k: v for k, v in spec.items() if k not in _NOT_IN_KEY}, "model": model})


def sweep_recipe(layer_fps: list[str], shards: list[list[int]], batch_size: int) -> dict[str, Any]:
    """A sweep job's recipe: the embeddings it writes (each fingerprint names its model, layer and rows), and the
    shard and batch boundaries of its output files."""
    return {"embeddings": list(layer_fps), "shards": shards, "batch_size": batch_size}


def group_layer_sweeps(result: WorkflowPlan) -> None:
    """Plan one ``embed-sweep`` spec for every group of two or more layer embedding specs of one model, and point
    each layer's spec at it (``spec["sweep"]``: its merge job reads the sweep's shard folders)."""
    groups: dict[str, list[str]] = {}
    for fp, spec in result.specs.items():
        key = _group_key(spec)
        if key is not None:
            groups.setdefault(key, []).append(fp)
    for fps in groups.values():
        if len(fps) < 2:
            continue
        specs = [result.specs[fp] for fp in fps]
        base = specs[0]
        recipe = sweep_recipe(fps, base["shards"], base["batch_size"])
        sweep = {k: v for k, v in base.items() if k not in ("stage", "fingerprint", "recipe")}
        sweep.update({"stage": "embed-sweep", "fingerprint": fingerprint("embedding-sweep", recipe), "recipe": recipe,
                      "layers": [{"layer": s["extractor"]["decl"]["hidden_layer"], "fingerprint": s["fingerprint"],
                                  "extractor": s["extractor"]} for s in specs]})
        sweep_fp = result.add(sweep, protocol=result.layouts[fps[0]])
        result.memory[sweep_fp] = max(result.memory[fp] for fp in fps)
        for spec in specs:
            spec["sweep"] = {"fingerprint": sweep_fp}


__all__ = ["group_layer_sweeps", "sweep_recipe"]
