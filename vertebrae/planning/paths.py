"""The layout of a run's out folder: one template per (protocol, artifact); ``artifact_path`` fills it in.

Every path a run writes is under its out folder ``out`` (the config's ``out:``, default ``results``;
``vertebrae.core.out_folder`` says what lies where: artifacts and reports, ``logs/``, ``benchmarks/``, ``.vertebrae/``).
The rules name no folder of their own: they take every path from here through the plan (``WorkflowPlan.out``).
Paths are relative to the workflow's working directory. The layout under ``out`` is part of the contract with
existing results/ trees: a template changes only together with an artifact's schema.
"""

from __future__ import annotations

from typing import Any

from vertebrae.core.out_folder import LOGS, RECORDS, RESULTS, normal_out

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
        "fanout": "retrieval/fanouts/{fp}",  # a folder: the partials' one input (stages.fanout_bundle)
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


def out_path(name: str, out: str = RESULTS) -> str:
    """``out/name``: a file or folder of the run's out folder (``name`` relative to it)."""
    return f"{normal_out(out)}/{name}"


def artifact_path(artifact: str, fp: str, *, protocol: str = "labelled", side: str = "samples",
                  shard: tuple[int | str, int | str] | None = None, merge: str | None = None,
                  out: str = RESULTS) -> str:
    """Path of ``artifact`` (a key of ``LAYOUT[protocol]``) with fingerprint ``fp``, under the out folder ``out``.

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
    return out_path(LAYOUT[protocol][artifact].format(fp=fp, side=side, index=index, count=count, merge=merge), out)


def report_paths(benchmark: str, out: str = RESULTS) -> dict[str, str]:
    """The JSON and Markdown report of a benchmark (any protocol: report names are unique across protocols)."""
    return {key: out_path(REPORT.format(benchmark=benchmark, suffix=suffix), out)
            for key, suffix in (("json", "json"), ("markdown", "md"))}


def in_results(value: Any, out: str) -> Any:
    """A copy of ``value`` (JSON values) with each ``{"fingerprint", "path"}`` reference under the out folder ``out``
    spelled under ``results/`` instead: how a recipe names an artifact, so that the out folder enters no fingerprint
    (and a recipe hashes as it did before out folders existed). ``value`` itself when ``out`` is ``results``."""
    prefix = f"{normal_out(out)}/"
    if prefix == f"{RESULTS}/":
        return value
    if isinstance(value, dict):
        path = value.get("path")
        if "fingerprint" in value and isinstance(path, str) and path.startswith(prefix):
            return {**value, "path": f"{RESULTS}/{path[len(prefix):]}"}
        return {key: in_results(item, out) for key, item in value.items()}
    if isinstance(value, list):
        return [in_results(item, out) for item in value]
    return value


def log_path(job: str, out: str = RESULTS) -> str:
    """``out/logs/JOB.log``: a job's log (``job``: its rule and wildcards, e.g. ``"plan/{fp}"``)."""
    return out_path(f"{LOGS}/{job}.log", out)


def record_path(job: str, out: str = RESULTS) -> str:
    """``out/benchmarks/JOB.tsv``: a job's Snakemake benchmark record (run time, peak memory: the reports' costs)."""
    return out_path(f"{RECORDS}/{job}.tsv", out)


__all__ = ["LAYOUT", "RESULTS", "artifact_path", "in_results", "log_path", "out_path", "record_path", "report_paths"]
