"""The ranked-report base the three protocols' result objects share.

A report holds its candidates in declaration order, a ``dataset_summary`` and ``metadata``. ``ranked_results()``
orders the rankable candidates by ``-primary_score`` (a stable sort: ties keep declaration order); a candidate whose
``aggregate_valid`` is False (e.g. a collapsed embedding) is listed without a rank. The JSON form is
``{"schema", "ranking", <summary keys>, <candidates key>: [...], "dataset_summary", "metadata"}``; ``from_dict``
refuses any other schema with ArtifactError. ``save_json`` and ``save_markdown`` write atomically.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from vertebrae.core.artifacts import atomic_write, write_json
from vertebrae.core.errors import ArtifactError
from vertebrae.core.fingerprint import to_json_value

COHORT_TOLERANCE = 0.01


def compression_method(compression_metadata: Mapping[str, Any] | None) -> str | None:
    """The compression method of a candidate's table row; None when no compression was applied."""
    compression = compression_metadata or {}
    return compression.get("method") if compression.get("applied") else None


def provenance_dict(candidate) -> dict[str, Any]:
    """A candidate's ``embedding_metadata``, ``compression_metadata`` and ``metadata`` as JSON values."""
    return {
        "embedding_metadata": to_json_value(candidate.embedding_metadata),
        "compression_metadata": to_json_value(candidate.compression_metadata),
        "metadata": to_json_value(candidate.metadata),
    }


class RankedReport:
    """Shared behaviour of a protocol's benchmark result; subclasses are frozen dataclasses.

    A subclass sets ``SCHEMA``, ``SCHEMA_LABEL`` (the protocol word in the schema error, e.g. ``"retrieval "``),
    ``CANDIDATES_KEY`` (its candidates field and JSON key), ``CANDIDATE_TYPE`` (with ``from_dict``) and ``RENDER``
    (its Markdown renderer, a staticmethod), and implements ``_columns`` (a candidate's table columns after
    ``rank`` and ``extractor``) and ``_summary`` (the JSON keys after ``ranking``); ``_ranks`` may exclude
    candidates from the ranking.
    Its fields are, in order: the candidates, ``dataset_summary``, ``metadata``.
    """

    SCHEMA: ClassVar[str]
    SCHEMA_LABEL: ClassVar[str] = ""
    CANDIDATES_KEY: ClassVar[str]
    CANDIDATE_TYPE: ClassVar[Any]
    RENDER: ClassVar[Callable[[Any], str]]
    TABLE_COLUMNS: ClassVar[tuple[str, ...] | None] = None

    dataset_summary: dict[str, Any]
    metadata: dict[str, Any]

    @property
    def candidates(self) -> list[Any]:
        return getattr(self, self.CANDIDATES_KEY)

    def _ranks(self, candidate: Any) -> bool:
        return bool(getattr(candidate, "aggregate_valid", True))

    def ranked_results(self) -> list[Any]:
        """The ranked candidates, best primary score first; ties keep declaration order."""
        return sorted((r for r in self.candidates if self._ranks(r)), key=lambda r: -r.primary_score)

    def table_rows(self) -> list[dict[str, Any]]:
        """One row per candidate: ranked ones first (rank 1..), then unranked ones (rank None)."""
        ranks = [(rank, r) for rank, r in enumerate(self.ranked_results(), start=1)]
        ranks += [(None, r) for r in self.candidates if not self._ranks(r)]
        return [{"rank": rank, "extractor": r.name, **self._columns(r)} for rank, r in ranks]

    def _columns(self, candidate: Any) -> dict[str, Any]:
        raise NotImplementedError

    def _summary(self) -> dict[str, Any]:
        raise NotImplementedError

    def to_dataframe(self):
        """The ranking table as a pandas DataFrame (pandas is needed only here)."""
        import pandas as pd

        columns = None if self.TABLE_COLUMNS is None else list(self.TABLE_COLUMNS)
        return pd.DataFrame(self.table_rows(), columns=columns)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": self.SCHEMA,
            "ranking": [r.name for r in self.ranked_results()],
            **self._summary(),
            self.CANDIDATES_KEY: [r.to_dict() for r in self.candidates],
            "dataset_summary": to_json_value(self.dataset_summary),
            "metadata": to_json_value(self.metadata),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]):
        schema = data.get("schema") if isinstance(data, Mapping) else None
        if schema != cls.SCHEMA:
            raise ArtifactError(f"unknown {cls.SCHEMA_LABEL}report schema {schema!r}, expected {cls.SCHEMA!r}")
        return cls([cls.CANDIDATE_TYPE.from_dict(item) for item in data[cls.CANDIDATES_KEY]],
                   dict(data["dataset_summary"]), dict(data["metadata"]))

    def save_json(self, path: str | Path) -> None:
        write_json(path, self.to_dict())

    def save_markdown(self, path: str | Path) -> None:
        with atomic_write(path) as tmp:
            Path(tmp).write_text(self.RENDER(self), encoding="utf-8")


@dataclass(frozen=True)
class CohortReport(RankedReport):
    """A report that ranks every aggregate-valid candidate and names the quality cohort (retrieval, zero-shot)."""

    candidate_results: list[Any]
    dataset_summary: dict[str, Any]
    metadata: dict[str, Any] = field(default_factory=dict)

    CANDIDATES_KEY: ClassVar[str] = "candidate_results"

    def quality_cohort(self) -> list[str]:
        """Candidates within COHORT_TOLERANCE (0.01) of the best primary score."""
        ranked = self.ranked_results()
        if not ranked:
            return []
        return [r.name for r in ranked if r.primary_score >= ranked[0].primary_score - COHORT_TOLERANCE]

    def _summary(self) -> dict[str, Any]:
        return {"quality_cohort": self.quality_cohort()}
