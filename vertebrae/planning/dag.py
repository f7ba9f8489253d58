"""The WorkflowPlan: every job spec of the DAG by fingerprint, the report targets, and what each rule reads.

A job spec is a JSON object with ``stage``, ``fingerprint`` and ``recipe`` (``vertebrae.stages.plan`` checks it
at job time); artifacts it depends on appear as ``{"fingerprint", "path"}`` references (``ref``). The rules get
their named inputs from ``WorkflowPlan.inputs`` and their GPU request from ``gpus``; the plan rules read each spec
from the file ``WorkflowPlan.write_spec_files`` writes (``vertebrae.planning.spec_files``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vertebrae.core.fingerprint import canonical_json
from vertebrae.core.storage import STORAGE_ROOT_ENV
from vertebrae.core.out_folder import RESULTS, write_out_record
from vertebrae.planning.job_files import DATA_STAGES, data_files
from vertebrae.planning.paths import artifact_path, in_results, log_path, out_path, record_path, report_paths
from vertebrae.planning.resources import embed_mem_mb, part_priority, partial_mem_mb
from vertebrae.planning.spec_files import spec_path, write_spec_files

# rule input name -> the spec key of the {fingerprint, path} reference it reads, by stage (None refs are skipped)
INPUTS = {
    "embed": {"fitted": "fit"},
    "zero-shot-embed": {"protocol": "protocol"},
    "compress": {"embeddings": "embedding"},
    "compress-retrieval": {"queries": "query", "gallery": "gallery"},
    "compress-zero-shot": {"samples": "samples"},
    "score": {"embeddings": "embedding", "protocol": "protocol"},
    "score-retrieval": {"queries": "query", "gallery": "gallery", "protocol": "protocol"},
    "merge-retrieval-partials": {"protocol": "protocol"},
    "score-labelled-partial": {"embeddings": "embedding", "protocol": "protocol", "overlap": "overlap"},
    "merge-labelled-partials": {"embeddings": "embedding", "protocol": "protocol"},
    "score-zero-shot": {"samples": "samples", "prompts": "prompts", "protocol": "protocol",
                        "raw_samples": "raw_samples"},
    "report": {"protocol": "protocol"},
    "retrieval-report": {"protocol": "protocol"},
    "zero-shot-report": {"protocol": "protocol"},
}


def ref(fp: str, path: str) -> dict[str, str]:
    """A spec's reference to an artifact."""
    return {"fingerprint": fp, "path": path}


def segment_key(segments: list[int] | None, tars: list[list] | None = None) -> dict[str, list]:
    """An embedding spec's ``segments`` and ``tars`` entries (``vertebrae.stages.plan.endpoint_tars``): present only
    where the source has them (WebDataset tar files), so every other source's spec stays as it was."""
    return {**({} if segments is None else {"segments": list(segments)}), **({} if tars is None else {"tars": tars})}


def gpus(spec: Mapping[str, Any]) -> int:
    """GPUs a job asks for: 1 when a device it computes on is CUDA (``cuda`` or ``cuda:N``), else 0: a retrieval
    score job's ``device``, else its extractor's; a labelled score job's built-in metrics' (``linear_probe``'s
    ``device``), a labelled partial job's own metric's. The merge and report jobs, whose specs repeat the metrics,
    compute nothing on them and ask for none.

    Scikit-learn, precomputed and CPU-model jobs ask for none, so a CPU-only cluster runs the workflow unchanged.
    """
    decl = (spec.get("extractor") or {}).get("decl") or {}
    devices = [spec.get("device", decl.get("device"))]  # a score job's own device, else its extractor's
    stage = spec.get("stage")
    if stage == "score":
        devices += [metric.get("device") for metric in (spec.get("plan") or {}).get("metrics") or ()
                    if isinstance(metric, Mapping)]
    elif stage == "score-labelled-partial":
        devices.append(((spec.get("recipe") or {}).get("metric") or {}).get("device"))
    return int(any(isinstance(device, str) and device.split(":", 1)[0] == "cuda" for device in devices))


@dataclass
class WorkflowPlan:
    """Every job spec by fingerprint, the results/ layout each belongs to, and the report targets by name."""

    specs: dict[str, dict[str, Any]] = field(default_factory=dict)
    layouts: dict[str, str] = field(default_factory=dict)
    shard_counts: dict[str, int] = field(default_factory=dict)
    reports: dict[str, str] = field(default_factory=dict)
    retrieval_reports: dict[str, str] = field(default_factory=dict)
    zero_shot_reports: dict[str, str] = field(default_factory=dict)
    comparisons: dict[str, str] = field(default_factory=dict)  # report fingerprint -> its compare spec's
    fanouts: dict[str, str] = field(default_factory=dict)  # partial-score fingerprint -> its merge spec's
    views: dict[str, str] = field(default_factory=dict)  # labelled benchmark -> its views spec (planning.views)
    threads: dict[str, int] = field(default_factory=lambda: {"embedding": 1, "scoring": 1})  # config `threads`
    spec_files: dict[str, str] = field(default_factory=dict)  # plan-job fingerprint -> its spec file (relative)
    memory: dict[str, int] = field(default_factory=dict)  # embedding / fit job fingerprint -> its mem_mb
    out: str = RESULTS  # the run's out folder (config `out`): every path below is under it; in no fingerprint
    # report folder of another config under OUT/reports/ -> its files the pages over the out folder read (planning,
    # reports.report_page.report_folders): declared inputs of the leaderboard and index jobs; in no fingerprint
    other_reports: dict[str, list[str]] = field(default_factory=dict)

    # ---- the paths of the run's out folder (vertebrae.planning.paths), for the planners and the rules ---------------
    def artifact_path(self, artifact: str, fp: str, **where: Any) -> str:
        """``paths.artifact_path`` under this plan's out folder."""
        return artifact_path(artifact, fp, out=self.out, **where)

    def recipe_refs(self, value: Any) -> Any:
        """``value`` as a recipe holds it: its ``{"fingerprint", "path"}`` references spelled under ``results/``
        whatever this plan's out folder (``paths.in_results``), so that no fingerprint depends on the out folder (a
        report's recipe names its candidates' score references)."""
        return in_results(value, self.out)

    def report_paths(self, benchmark: str) -> dict[str, str]:
        return report_paths(benchmark, out=self.out)

    def path(self, name: str) -> str:
        """``OUT/name``: a file of the out folder the layout has no template for (a page, the index)."""
        return out_path(name, self.out)

    def log(self, job: str) -> str:
        """``OUT/logs/JOB.log``: a rule's ``log:`` (``job``: its rule and wildcards, ``"plan/{fp}"``)."""
        return log_path(job, self.out)

    def record(self, job: str) -> str:
        """``OUT/benchmarks/JOB.tsv``: a rule's ``benchmark:`` record."""
        return record_path(job, self.out)

    def add(self, spec: dict[str, Any], *, protocol: str = "labelled") -> str:
        """Add ``spec`` (the first one added under a fingerprint wins), filed under ``protocol``'s layout."""
        fp = spec["fingerprint"]
        self.specs.setdefault(fp, spec)
        self.layouts.setdefault(fp, protocol)
        if "shards" in spec:
            self.shard_counts.setdefault(fp, len(self.specs[fp]["shards"]))
        return fp

    def size(self, fp: str, extractor: Any, *, rows: int, batch_size: int) -> str:
        """Record the mem_mb of embedding or fit job ``fp`` (``resources.embed_mem_mb``: ``rows`` = its largest
        shard's, or the fit endpoint's); returns ``fp``."""
        self.memory.setdefault(fp, embed_mem_mb(extractor, rows=rows, batch_size=batch_size))
        return fp

    def spec(self, fp: str) -> dict[str, Any]:
        return self.specs[fp]

    def spec_json(self, fp: str) -> str:
        return canonical_json(self.specs[fp])

    def planned(self) -> list[str]:
        """The fingerprints of the specs that have a plan job: all but partial scores (which read their
        candidate's merge spec)."""
        return [fp for fp in self.specs if fp not in self.fanouts]

    def write_spec_files(self, directory: str | Path = ".") -> None:
        """Write the spec file of every planned spec under ``directory`` (the working directory of the rules), in
        the out folder's state (``spec_files``), and the record of the out folder's spelling (``write_out_record``)."""
        write_out_record(self.out, directory)
        self.spec_files.update(write_spec_files({fp: self.specs[fp] for fp in self.planned()}, directory,
                                                out=self.out))

    def spec_file(self, fp: str) -> str:
        """The spec file the plan job of ``fp`` reads (relative to the working directory; see
        ``write_spec_files``, which must have run for the file to exist)."""
        if fp not in self.spec_files:
            self.spec_files[fp] = spec_path(self.specs[fp], out=self.out)
        return self.spec_files[fp]

    def fingerprints(self, stage: str) -> list[str]:
        return [fp for fp, spec in self.specs.items() if spec["stage"] == stage]

    def plan_path(self, fp: str) -> str:
        return self.artifact_path("plan", fp, protocol=self.layouts[fp])

    def shard_paths(self, fp: str) -> list[str]:
        """The shard files a merge job reads; for a layer of a layer sweep, the sweep's shard folders (each holds
        the layer's shard file, ``vertebrae.planning.sweeps``)."""
        n, side = self.shard_counts[fp], self.specs[fp].get("side", "samples")
        sweep = self.specs[fp].get("sweep")
        if sweep is not None:
            return [self.artifact_path("sweep-shard", sweep["fingerprint"], shard=(i, n)) for i in range(n)]
        return [self.artifact_path("shard", fp, protocol=self.layouts[fp], side=side, shard=(i, n)) for i in range(n)]

    def inputs(self, fp: str, *, merge: bool = False, fanout: bool = False,
               shard: int | None = None) -> dict[str, str | list[str]]:
        """The named inputs of the job on spec ``fp``, for ``unpack``: of its shards' merge job when ``merge``; of
        the fan-out staging job of a merge-retrieval-partials spec when ``fanout`` (plan, endpoints, protocol); of
        its embedding job of shard ``shard`` (whose data files are its own rows': ``job_files.data_files``).
        A partial score has one input, its candidate's fan-out bundle (``stages.fanout_bundle``: a folder holding
        every file it reads; one input per job keeps the planning of 10,000 partial jobs near Snakemake's own
        cost)."""
        spec = self.specs[fp]
        named: dict[str, str | list[str]] = {"plan": self.plan_path(fp)}
        if merge:
            named["shards"] = self.shard_paths(fp)
            return named
        if fp in self.fanouts:
            return {"fanout": self.artifact_path("fanout", self.fanouts[fp], protocol="retrieval")}
        if fanout:
            return {**named, **{name: spec[key]["path"] for name, key in INPUTS["score-retrieval"].items()}}  # as one job
        if spec["stage"] == "compare":  # the report's inputs, its spec as report_plan
            report = self.inputs(spec["report"]["fingerprint"])
            report.pop("comparison", None)
            return {**named, "report_plan": report.pop("plan"), **report}
        if fp in self.comparisons:
            named["comparison"] = self.artifact_path("comparison", self.comparisons[fp])
        for name, key in INPUTS.get(spec["stage"], {}).items():
            if spec.get(key) is not None:
                named[name] = spec[key]["path"]
        if "candidates" in spec:
            named["scores"] = [candidate["score"]["path"] for candidate in spec["candidates"]]
        if "partials" in spec:
            named["partials"] = [partial["path"] for partial in spec["partials"]]
        if "view_reports" in spec:  # a views job: every view's report.json
            named["reports"] = [item["path"] for item in spec["view_reports"]]
        if spec["stage"] in DATA_STAGES and self.data_files(fp, shard=shard):
            named["data"] = self.data_files(fp, shard=shard)
        return named

    def data_files(self, fp: str, *, shard: int | None = None, plan_job: bool = False) -> list[str]:
        """The user's files the job of spec ``fp`` reads (of its shard ``shard``, of its plan job when ``plan_job``:
        ``vertebrae.planning.job_files``), listed once per process."""
        found = self.__dict__.setdefault("_data_files", {})  # not a field: no part of the plan's record
        key = (fp, shard, plan_job)
        if key not in found:
            root = os.environ.get(STORAGE_ROOT_ENV)  # where planning read: object storage's local copy
            found[key] = data_files(self.specs[fp], root or ".", shard=shard, plan_job=plan_job, storage=bool(root))
        return found[key]

    def plan_inputs(self, fp: str) -> dict[str, str | list[str]]:
        """The named inputs of the plan job of spec ``fp``: its spec file, and the user's files it checks."""
        named: dict[str, str | list[str]] = {"spec": self.spec_file(fp)}
        if self.data_files(fp, plan_job=True):
            named["data"] = self.data_files(fp, plan_job=True)
        return named

    def partial_mem_mb(self, fp: str) -> int:
        """mem_mb of a partial-score job (``resources.partial_mem_mb``), from the rows of its split's largest
        partial: all partials of a candidate ask for the same."""
        spec = self.specs[fp]
        split = self.specs[self.fanouts[fp]]["fanout"]
        sizes = {"query": -(-split["n_queries"] // split["query_shards"]),
                 "gallery": -(-split["n_gallery"] // split["gallery_shards"])}
        rows = (sizes["query"], sizes["gallery"]) if spec["direction"] == "forward" else \
            (sizes["gallery"], sizes["query"])
        return partial_mem_mb(spec["retrieval"], *rows)

    def mem_mb(self, fp: str) -> int:
        """mem_mb of the job on spec ``fp``: a partial score's, or the one its planner recorded (embedding and fit
        jobs, ``resources.embed_mem_mb``)."""
        return self.partial_mem_mb(fp) if fp in self.fanouts else self.memory[fp]

    def priority(self, fp: str) -> int:
        """Scheduling priority of the labelled part job on spec ``fp`` (``resources.part_priority``)."""
        return part_priority(self.specs[fp]["recipe"])

    def partial_resources(self, *, mem_mb: Callable[[Any], int], gpu: Callable[[Any], int]
                          ) -> dict[str, int | Callable[[Any], int]]:
        """The partial-score rule's resources: ``mem_mb``, and ``gpu`` only when some partial asks for a GPU (a
        resource Snakemake need not evaluate 10,000 times). Each is the one value every partial job of the plan
        asks for (candidates of one benchmark and split do), so Snakemake evaluates nothing per job, or the
        rule's per-job function given when they differ."""
        resources: dict[str, int | Callable[[Any], int]] = {}
        for name, of, per_job in (("mem_mb", self.partial_mem_mb, mem_mb), ("gpu", self.gpus, gpu)):
            values = {of(fp) for fp in self.fanouts}
            if name == "gpu" and not any(values):
                continue
            resources[name] = values.pop() if len(values) == 1 else per_job
        return resources

    def fanout_scores_pattern(self) -> str:
        """A regular expression matching exactly the fingerprints of merged (fanned-out) retrieval scores."""
        return "|".join(self.fingerprints("merge-retrieval-partials")) or "no-fanout"

    def report_fingerprint(self, name: str) -> str:
        """The report spec of benchmark ``name`` (whatever its protocol)."""
        return {**self.reports, **self.retrieval_reports, **self.zero_shot_reports}[name]

    def gpus(self, fp: str) -> int:
        return gpus(self.specs[fp])

    def views_pattern(self) -> str:
        """A regular expression matching exactly the benchmarks with a views job (the views rule's wildcard)."""
        import re

        return "|".join(re.escape(name) for name in self.views) or "no-views"

    def page_reports(self) -> list[str]:
        """Every report.json the pages over the out folder (leaderboard, results index) are made from, sorted: this
        config's and those of ``other_reports`` (other configs' reports that lay in the out folder when it planned)."""
        own = [p for p in self.final_outputs()
               if Path(p).name == "report.json" and Path(p).parent.parent.name == "reports"]
        return sorted({*own, *(self.path(f"reports/{name}/report.json") for name in self.other_reports)})

    def other_report_files(self, *names: str) -> list[str]:
        """The files of ``other_reports`` named ``names`` (where a folder holds them)."""
        return [self.path(f"reports/{name}/{file}") for name, files in sorted(self.other_reports.items())
                for file in files if file in names]

    def final_outputs(self) -> list[str]:
        names = [*self.reports, *self.retrieval_reports, *self.zero_shot_reports]
        views = [path for fp in self.views.values() for path in self.specs[fp]["outputs"].values()]
        return [path for name in names for path in self.report_paths(name).values()] + views


__all__ = ["INPUTS", "WorkflowPlan", "gpus", "ref", "segment_key"]
