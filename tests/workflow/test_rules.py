"""The rules as the house wants them: each job rule has named output, a log, a benchmark file and one shell line
calling one `vertebrae` subcommand; rules that run models or BLAS declare their threads."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

RULES_DIR = Path(__file__).resolve().parents[2] / "workflow" / "rules"
THREADED = {"fit_extractor", "embed_shard", "embed_retrieval_shard", "embed_zero_shot_samples",
            "embed_zero_shot_prompts", "score", "score_labelled_partial", "score_retrieval", "score_retrieval_partial",
            "score_zero_shot",
            "compress", "compress_retrieval", "compress_zero_shot"}


def _rules() -> dict[str, str]:
    rules = {}
    for path in sorted(RULES_DIR.glob("*.smk")):
        for block in re.split(r"(?m)^(?=rule )", path.read_text(encoding="utf-8"))[1:]:
            name = re.match(r"rule (\w+):", block).group(1)
            assert name not in rules, f"rule {name} defined twice"
            rules[name] = block
    return rules


RULES = _rules()


def test_the_rule_files_hold_every_rule():
    assert len(RULES) >= 25 and "score_retrieval_partial" in RULES and "stage_retrieval_fanout" in RULES


@pytest.mark.parametrize("name", sorted(RULES))
def test_each_rule_has_output_log_benchmark_and_one_vertebrae_call(name):
    block = RULES[name]
    for directive in ("    output:", "    log:", "    benchmark:", "    shell:"):
        assert directive in block, f"rule {name} has no {directive.strip()}"
    shell = block.split("    shell:")[1]
    command = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', shell))
    assert command.startswith("vertebrae ") and command.count("vertebrae ") == 1, name
    assert command.rstrip().endswith("> {log} 2>&1"), name
    # under the out folder, named by the rule: PLAN.record("RULE/..."), PLAN.log("RULE/...") (vertebrae.planning.paths)
    benchmark = re.search(r'    benchmark:\n\s+PLAN\.record\("([^"]+)"\)', block).group(1)
    log = re.search(r'    log:\n\s+PLAN\.log\("([^"]+)"\),', block).group(1)
    assert benchmark.startswith(f"{name}/") and log.startswith(f"{name}/"), name


@pytest.mark.parametrize("name", sorted(THREADED))
def test_rules_that_compute_declare_threads(name):
    assert "    threads:" in RULES[name], f"rule {name} declares no threads"


def test_declared_threads_reach_the_jobs(tmp_path):
    """`threads:` from the config's `threads` section (capped by --cores): Snakemake gives the job that many
    threads and sets OMP_NUM_THREADS etc. to it; without it torch and BLAS would run on one thread."""
    from workflow_support import USER_CONFIG, snakemake, write_config

    write_config(tmp_path, {**USER_CONFIG, "threads": {"embedding": 2, "scoring": 1}})
    out = snakemake(tmp_path, "-n", "--forceall").stdout
    jobs = re.split(r"\n(?=rule |localrule )", out)
    embed = [j for j in jobs if j.startswith("rule embed_shard:")]
    score = [j for j in jobs if j.startswith("rule score:")]
    assert embed and score
    assert all(re.search(r"threads: 2\b", j) for j in embed)
    assert not any(re.search(r"threads: [2-9]", j) for j in score)


def test_compression_runs_on_the_threads_of_the_scores_that_refit_it():
    """A score job refits its compression to check it (zero-shot) and must reproduce it bit for bit: BLAS results
    depend on the thread count, so the compress and score rules of a protocol declare the same threads."""
    for compress, score in (("compress", "score"), ("compress_retrieval", "score_retrieval"),
                            ("compress_zero_shot", "score_zero_shot")):
        threads = [re.search(r"    threads: (\S+)", RULES[name]).group(1) for name in (compress, score)]
        assert threads[0] == threads[1], (compress, score, threads)
