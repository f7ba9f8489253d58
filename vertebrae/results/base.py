"""The ranked-report base the three protocols' result objects share.

A report holds its candidates in declaration order, a ``dataset_summary`` and ``metadata``. ``ranked_results()``
orders the rankable candidates by ``-primary_score`` (a stable sort: ties keep declaration order); a candidate whose
``aggregate_valid`` is False (e.g. a collapsed embedding) is listed without a rank. The JSON form is
``{"schema", "ranking", <summary keys>, <candidates key>: [...], "dataset_summary", "metadata"}``; ``from_dict``
refuses any other schema with ArtifactError. ``save_json`` and ``save_markdown`` write atomically (the workflow's
report jobs stamp the writing vertebrae's version and git revision first: ``with_software``).

Every report may carry the paired comparison of its ranked candidates (``comparison``, a ``PairedComparison``) or
say why it has none (``comparison_skipped``); both are None on a report built without one. ``compare(config)``
computes it from the candidates' per-unit values (``vertebrae.results.comparison``) and ``with_comparison(config)``
returns the report carrying it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

from vertebrae.core.artifacts import atomic_write, write_json
from vertebrae.core.errors import ArtifactError
from vertebrae.core.fingerprint import canonical_json, sha256_hex, to_json_value
from vertebrae.core.provenance import software_line
from vertebrae.results.comparison import ComparisonUnavailable
from vertebrae.scoring.paired import ComparisonConfig, PairedComparison, PairedUnits, compare_units

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
    UNITS: ClassVar[Callable[[list[Any]], PairedUnits]]

    dataset_summary: dict[str, Any]
    metadata: dict[str, Any]
    comparison: PairedComparison | None
    comparison_skipped: str | None

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

    def comparison_units(self) -> PairedUnits:
        """The ranked candidates' per-unit values of the primary metric (ComparisonUnavailable says why not)."""
        ranked = self.ranked_results()
        if len(ranked) < 2:
            raise ComparisonUnavailable(f"{len(ranked)} ranked candidate(s); a comparison needs at least two")
        return type(self).UNITS(ranked)

    def compare(self, config: ComparisonConfig | None = None) -> PairedComparison:
        """Paired intervals and tests of every pair of ranked candidates (``vertebrae.scoring.paired``)."""
        return compare_units(self.comparison_units(), config or ComparisonConfig())

    def with_comparison(self, config: ComparisonConfig | None = None):
        """This report carrying ``compare(config)``, or the reason there is none (disabled, or unavailable)."""
        config = config or ComparisonConfig()
        if not config.enabled:
            return replace(self, comparison=None, comparison_skipped="disabled by the configuration (enabled: false)")
        try:
            return replace(self, comparison=self.compare(config), comparison_skipped=None)
        except ComparisonUnavailable as exc:
            return replace(self, comparison=None, comparison_skipped=str(exc))

    def with_cost_config(self, config):
        """This report weighing cost by ``config`` (a ``vertebrae.reports.costs.CostConfig``): carried in
        ``metadata["costs"]`` when not the default, so that report.md (and ``vertebrae verify``) renders the line
        "cheapest candidate statistically tied with the leader" by the cost it names."""
        from vertebrae.reports.costs import CONFIG_KEY

        metadata = {k: v for k, v in self.metadata.items() if k != CONFIG_KEY}
        return replace(self, metadata=metadata if config.is_default else {**metadata, CONFIG_KEY: config.to_dict()})

    def with_costs(self, records_dir: str | Path | None = None, *, measured: bool = False):
        """This report with every candidate's ``metadata["cost"]`` (``vertebrae.reports.costs``): from the times the
        in-process run measured (``measured``), else from what the workflow's jobs measured of themselves (carried in
        each candidate's metadata), or for a candidate carrying none the Snakemake benchmark records under
        ``records_dir`` (None: none read)."""
        from vertebrae.core.throughput import COSTS_KEY, PAYLOAD_KEY, UNKNOWN
        from vertebrae.reports.costs import COST_KEY, candidate_cost, cost_document, cost_source, measured_cost

        candidates = []
        for candidate in self.candidates:
            document = {**provenance_dict(candidate), "name": candidate.name}
            if measured:
                cost, source = measured_cost(document), "measured in process"
                if cost.embed_status == UNKNOWN and cost.peak_memory_mb is None and cost.score_seconds is None:
                    source = "none"
            else:
                cost = candidate_cost(document, records_dir)
                source = cost_source(document, cost)
            # the embed jobs' throughput records (the score artifacts carry them) become the cost; not kept apart
            metadata = {**{k: v for k, v in candidate.metadata.items() if k not in (PAYLOAD_KEY, COSTS_KEY)},
                        COST_KEY: cost_document(cost, source)}
            candidates.append(replace(candidate, metadata=metadata))
        return replace(self, **{self.CANDIDATES_KEY: candidates})

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
            "comparison": None if self.comparison is None else self.comparison.to_dict(),
            "comparison_skipped": self.comparison_skipped,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]):
        schema = data.get("schema") if isinstance(data, Mapping) else None
        if schema != cls.SCHEMA:
            raise ArtifactError(f"unknown {cls.SCHEMA_LABEL}report schema {schema!r}, expected {cls.SCHEMA!r}")
        comparison = data.get("comparison")
        return cls([cls.CANDIDATE_TYPE.from_dict(item) for item in data[cls.CANDIDATES_KEY]],
                   dict(data["dataset_summary"]), dict(data["metadata"]),
                   None if comparison is None else PairedComparison.from_dict(comparison), data.get("comparison_skipped"))

    def with_software(self, software: Mapping[str, Any]):
        """This report stamped with the vertebrae that writes it (``vertebrae.core.provenance.software()``: version,
        and git revision from a checkout) as ``metadata["software"]``, as the workflow's report jobs write it."""
        return replace(self, metadata={**self.metadata, "software": dict(software)})

    def markdown(self) -> str:
        """The rendered report; a stamped one (``with_software``) says which vertebrae wrote it at the end of its
        introduction, before the first ``## `` section."""
        text = self.RENDER(self)
        software = self.metadata.get("software")
        if not isinstance(software, Mapping):
            return text
        head, sep, rest = text.partition("\n## ")
        line = software_line(dict(software))
        return f"{head.rstrip()}\n\n{line}\n\n{sep.lstrip()}{rest}" if sep else f"{text.rstrip()}\n\n{line}\n"

    def save_json(self, path: str | Path) -> None:
        """The report document with its ``content_hash`` (``with_content_hash``), which ``vertebrae verify``, the
        figures and the summary check before they read it."""
        write_json(path, with_content_hash(to_json_value(self.to_dict())))

    def save_markdown(self, path: str | Path) -> None:
        """``markdown()``, written atomically."""
        with atomic_write(path) as tmp:
            Path(tmp).write_text(self.markdown(), encoding="utf-8")


CONTENT_HASH_KEY = "content_hash"


def report_content_hash(document: Mapping[str, Any]) -> str:
    """SHA-256 of a report document's canonical JSON, its own ``content_hash`` left out."""
    return sha256_hex(canonical_json({k: v for k, v in document.items() if k != CONTENT_HASH_KEY}))


def with_content_hash(document: Mapping[str, Any]) -> dict[str, Any]:
    """A report document as report.json holds it: its keys and ``content_hash``."""
    return {**document, CONTENT_HASH_KEY: report_content_hash(document)}


@dataclass(frozen=True)
class CohortReport(RankedReport):
    """A report that ranks every aggregate-valid candidate and names the quality cohort (retrieval, zero-shot)."""

    candidate_results: list[Any]
    dataset_summary: dict[str, Any]
    metadata: dict[str, Any] = field(default_factory=dict)
    comparison: PairedComparison | None = None
    comparison_skipped: str | None = None

    CANDIDATES_KEY: ClassVar[str] = "candidate_results"

    @property
    def extractor_results(self) -> list[Any]:
        """The candidates (the labelled report's name for them)."""
        return self.candidate_results

    def quality_cohort(self) -> list[str]:
        """Candidates within COHORT_TOLERANCE (0.01) of the best primary score."""
        ranked = self.ranked_results()
        if not ranked:
            return []
        return [r.name for r in ranked if r.primary_score >= ranked[0].primary_score - COHORT_TOLERANCE]

    def _summary(self) -> dict[str, Any]:
        return {"quality_cohort": self.quality_cohort()}
