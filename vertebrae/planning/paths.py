"""The results/ layout: one template per (protocol, artifact); ``artifact_path`` fills it in.

Paths are relative to the workflow's working directory. The layout is part of the contract with existing
results/ trees: a template changes only together with an artifact's schema.
"""

from __future__ import annotations

RESULTS = "results"

LAYOUT = {
    "labelled": {
        "plan": "plans/{fp}.json",
        "fitted": "fitted/{fp}.json",
        "shard": "embeddings/{fp}/shard-{index}-of-{count}.h5",
        "embedding": "embeddings/{fp}.h5",
        "compressed": "compressed/{fp}/samples.h5",
        "protocol": "protocols/{fp}.json",
        "score": "scores/{fp}.json",
        "comparison": "comparisons/{fp}.json",  # every protocol's: the compare job is protocol-blind
        "sweep-shard": "sweeps/{fp}/shard-{index}-of-{count}",  # a folder: every layer's shard of a layer sweep
        "labelled-partial": "partials/{fp}.json",  # one metric of one candidate (keyed by that metric alone)
    },
    "retrieval": {  # plans and fitted extractors are shared with the labelled layout
        "plan": "plans/{fp}.json",
        "fitted": "fitted/{fp}.json",
        "shard": "retrieval/embeddings/{fp}/shard-{index}-of-{count}.h5",
        "embedding": "retrieval/embeddings/{fp}.h5",
        "compressed": "retrieval/compressed/{fp}/{side}.h5",
        "protocol": "retrieval/relevance/{fp}.json",
        "score": "retrieval/scores/{fp}.json",
        "partial": "retrieval/partials/{merge}/{fp}.h5",  # under the candidate's merge (score) spec
        "fanout": "retrieval/fanouts/{fp}.json",
        "fanout-rows": "retrieval/fanouts/{fp}.{side}.h5",  # the protocol's relevance rows by query / gallery item
    },
    "zero_shot": {
        "plan": "zero_shot/plans/{fp}.json",
        "shard": "zero_shot/{side}/{fp}/shard-{index}-of-{count}.h5",
        "embedding": "zero_shot/{side}/{fp}.h5",
        "compressed": "zero_shot/compressed/{fp}/samples.h5",
        "protocol": "zero_shot/protocols/{fp}.json",
        "score": "zero_shot/scores/{fp}.json",
    },
}
REPORT = "reports/{benchmark}/report.{suffix}"


def artifact_path(artifact: str, fp: str, *, protocol: str = "labelled", side: str = "samples",
                  shard: tuple[int | str, int | str] | None = None, merge: str | None = None) -> str:
    """Path of ``artifact`` (a key of ``LAYOUT[protocol]``) with fingerprint ``fp``.

    ``side`` picks the endpoint where the layout has one (retrieval ``query``/``gallery``, zero-shot
    ``samples``/``prompts``); ``shard=(index, count)`` is required for a ``shard``, ``merge`` (the fingerprint of
    the candidate's merge spec) for a retrieval ``partial``. Wildcard strings (``"{fp}"``) give the rules' output
    patterns.
    """
    index, count = shard if shard is not None else (None, None)
    if (artifact in ("shard", "sweep-shard")) != (shard is not None):
        raise ValueError(f"artifact {artifact!r}: shard=(index, count) is given for shards and only for shards")
    if (artifact == "partial") != (merge is not None):
        raise ValueError(f"artifact {artifact!r}: merge=<fingerprint> is given for partials and only for partials")
    return f"{RESULTS}/" + LAYOUT[protocol][artifact].format(fp=fp, side=side, index=index, count=count, merge=merge)


def report_paths(benchmark: str) -> dict[str, str]:
    """The JSON and Markdown report of a benchmark (any protocol: report names are unique across protocols)."""
    return {key: f"{RESULTS}/" + REPORT.format(benchmark=benchmark, suffix=suffix)
            for key, suffix in (("json", "json"), ("markdown", "md"))}


__all__ = ["LAYOUT", "RESULTS", "artifact_path", "report_paths"]
