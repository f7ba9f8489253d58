"""A report.json verified like an artifact (``check_report``): its content hash, its protocol's strict result class and
the round trip back to the same document. The jobs that read reports (figures, summary, leaderboard) and ``vertebrae
verify`` all check a report through here; it imports no other stage module, so each of them can.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from vertebrae.core.errors import ArtifactError, CorruptArtifactError


def report_classes() -> dict[str, type]:
    """The result class of each report schema."""
    from vertebrae.results import BenchmarkResult
    from vertebrae.results.retrieval import RetrievalBenchmarkResult
    from vertebrae.results.zero_shot import ZeroShotBenchmarkResult

    return {cls.SCHEMA: cls for cls in (BenchmarkResult, RetrievalBenchmarkResult, ZeroShotBenchmarkResult)}


def check_report(path: str | Path) -> dict[str, Any]:
    """A report.json verified like an artifact: valid JSON whose ``content_hash`` matches its other keys (a hand-edited
    number is refused), parsed by its protocol's strict result class, and serialising back to the same document;
    return it (without the hash). Raises CorruptArtifactError naming the path."""
    from vertebrae.results.base import CONTENT_HASH_KEY, report_content_hash

    path = str(path)
    try:
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
    except FileNotFoundError:
        raise ArtifactError(f"report {path}: file not found") from None
    except (OSError, ValueError) as exc:
        raise CorruptArtifactError(f"report {path}: not valid JSON ({exc})", path) from None
    if not isinstance(document, dict) or CONTENT_HASH_KEY not in document:
        raise CorruptArtifactError(f"report {path}: no {CONTENT_HASH_KEY}: not a report.json vertebrae wrote", path)
    if document.pop(CONTENT_HASH_KEY) != report_content_hash(document):
        raise CorruptArtifactError(f"report {path}: content hash mismatch: edited since it was written", path)
    classes = report_classes()
    schema = document.get("schema") if isinstance(document, dict) else None
    if schema not in classes:
        raise CorruptArtifactError(f"report {path}: unknown report schema {schema!r}, expected one of "
                                   f"{sorted(classes)}", path)
    try:
        again = classes[schema].from_dict(document).to_dict()
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise CorruptArtifactError(f"report {path}: malformed {schema} report ({type(exc).__name__}: {exc})",
                                   path) from None
    if again != document:
        keys = sorted(k for k in {*again, *document} if again.get(k) != document.get(k))
        raise CorruptArtifactError(f"report {path}: edited or inconsistent (keys {keys} differ from the report "
                                   f"its own results give)", path)
    return document


__all__ = ["check_report", "report_classes"]
