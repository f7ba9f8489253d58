"""``retrieval-from-artifacts`` and ``zero-shot-from-artifacts`` as users type them (spec and upstream names).

Score artifacts are given as ``--score-key SCORE`` (repeatable; the name the spec and the established library use)
or positionally (ours), keys first; ``--protocol`` may be left out when ``--plan-json`` is given, the report job
spec naming its protocol artifact. The reports themselves are ``retrieval_jobs.run_report`` and
``zero_shot_jobs.run_report``, unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from vertebrae.core.artifacts import read_json_artifact
from vertebrae.core.errors import ValidationError
from vertebrae.stages import retrieval_jobs, zero_shot_jobs
from vertebrae.stages.plan import load_plan


def score_paths(score_keys: Sequence[str | Path] | None, scores: Sequence[str | Path] | None, command: str) -> list:
    """The score artifacts in order: every ``--score-key`` first, then the positional ones; none is an error."""
    paths = [*(score_keys or ()), *(scores or ())]
    if not paths:
        raise ValidationError(f"{command}: give the score artifacts, as --score-key SCORE (repeatable) or positionally")
    return paths


def protocol_path(protocol: str | Path | None, plan: str | Path | None, stage: str, command: str) -> str | Path:
    """``protocol`` when given, else the protocol artifact the report job spec ``plan`` names."""
    if protocol is not None:
        return protocol
    if plan is None:
        raise ValidationError(f"{command}: give --protocol, or a --plan-json whose report job spec names it")
    return load_plan(plan, stage)["protocol"]["path"]


def retrieval_report(plan: str | Path, json_output: str | Path, markdown_output: str | Path, *,
                     protocol: str | Path | None = None, scores: Sequence[str | Path] | None = None,
                     score_keys: Sequence[str | Path] | None = None) -> None:
    """``vertebrae retrieval-from-artifacts``."""
    command = "retrieval-from-artifacts"
    paths = score_paths(score_keys, scores, command)
    retrieval_jobs.run_report(plan, protocol_path(protocol, plan, "retrieval-report", command), paths, json_output,
                              markdown_output)


def zero_shot_report(json_output: str | Path, markdown_output: str | Path, *, plan: str | Path | None = None,
                     protocol: str | Path | None = None, scores: Sequence[str | Path] | None = None,
                     score_keys: Sequence[str | Path] | None = None, benchmark: str | None = None) -> None:
    """``vertebrae zero-shot-from-artifacts``."""
    command = "zero-shot-from-artifacts"
    paths = score_paths(score_keys, scores, command)
    if protocol is None and plan is None:  # name the protocol the first score was computed against
        needed = read_json_artifact(paths[0], "score", fingerprint=None).get("protocol")
        raise ValidationError(f"{command}: {paths[0]} was scored against the protocol {needed}: give that protocol "
                              "artifact as --protocol (the workflow writes it under results/, named by its "
                              "fingerprint), or give the report's --plan-json, whose job spec names it")
    zero_shot_jobs.run_report(plan, protocol_path(protocol, plan, "zero-shot-report", command), paths, json_output,
                              markdown_output, benchmark=benchmark)


__all__ = ["protocol_path", "retrieval_report", "score_paths", "zero_shot_report"]
