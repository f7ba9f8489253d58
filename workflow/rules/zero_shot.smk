# Zero-shot protocol: samples and prompts are embedded by separate rules, so a prompt edit visibly reruns only
# prompt embedding, protocol, score and report jobs (sample embedding and the compression fit stay).
rule plan_zero_shot:
    output:
        plan="results/zero_shot/plans/{fp}.json",
    params:
        spec=get_spec,
    conda:
        "../../envs/vertebrae.yaml"
    log:
        "logs/plan_zero_shot/{fp}.log",
    shell:
        "vertebrae plan-zero-shot --spec {params.spec:q} --output {output.plan} > {log} 2>&1"


rule embed_zero_shot_samples:
    input:
        plan="results/zero_shot/plans/{fp}.json",
    output:
        shard="results/zero_shot/samples/{fp}/shard-{i}-of-{n}.h5",
    resources:
        gpu=get_gpus,
    conda:
        "../../envs/vertebrae.yaml"
    log:
        "logs/embed_zero_shot_samples/{fp}/shard-{i}-of-{n}.log",
    benchmark:
        "benchmarks/embed_zero_shot_samples/{fp}/shard-{i}-of-{n}.tsv"
    shell:
        "vertebrae embed-zero-shot-shard --plan-json {input.plan} --side samples --shard-index {wildcards.i}"
        " --output {output.shard} > {log} 2>&1"


rule embed_zero_shot_prompts:
    input:
        plan="results/zero_shot/plans/{fp}.json",
        protocol=get_zero_shot_protocol,
    output:
        shard="results/zero_shot/prompts/{fp}/shard-{i}-of-{n}.h5",
    resources:
        gpu=get_gpus,
    conda:
        "../../envs/vertebrae.yaml"
    log:
        "logs/embed_zero_shot_prompts/{fp}/shard-{i}-of-{n}.log",
    benchmark:
        "benchmarks/embed_zero_shot_prompts/{fp}/shard-{i}-of-{n}.tsv"
    shell:
        "vertebrae embed-zero-shot-shard --plan-json {input.plan} --side prompts --shard-index {wildcards.i}"
        " --protocol {input.protocol} --output {output.shard} > {log} 2>&1"


rule merge_zero_shot_samples:
    input:
        plan="results/zero_shot/plans/{fp}.json",
        shards=get_shards,
    output:
        embeddings="results/zero_shot/samples/{fp}.h5",
    conda:
        "../../envs/vertebrae.yaml"
    log:
        "logs/merge_zero_shot_samples/{fp}.log",
    shell:
        "vertebrae merge-zero-shot-embeddings --plan-json {input.plan} --output {output.embeddings} {input.shards} > {log} 2>&1"


rule merge_zero_shot_prompts:
    input:
        plan="results/zero_shot/plans/{fp}.json",
        shards=get_shards,
    output:
        embeddings="results/zero_shot/prompts/{fp}.h5",
    conda:
        "../../envs/vertebrae.yaml"
    log:
        "logs/merge_zero_shot_prompts/{fp}.log",
    shell:
        "vertebrae merge-zero-shot-embeddings --plan-json {input.plan} --output {output.embeddings} {input.shards} > {log} 2>&1"


rule write_zero_shot_protocol:
    input:
        plan="results/zero_shot/plans/{fp}.json",
    output:
        protocol="results/zero_shot/protocols/{fp}.json",
    conda:
        "../../envs/vertebrae.yaml"
    log:
        "logs/write_zero_shot_protocol/{fp}.log",
    shell:
        "vertebrae write-zero-shot-protocol --plan-json {input.plan} --output {output.protocol} > {log} 2>&1"


rule compress_zero_shot:
    input:
        plan="results/zero_shot/plans/{fp}.json",
        samples=get_zero_shot_raw_samples,
    output:
        samples="results/zero_shot/compressed/{fp}/samples.h5",
    conda:
        "../../envs/vertebrae.yaml"
    log:
        "logs/compress_zero_shot/{fp}.log",
    shell:
        "vertebrae compress-zero-shot --plan-json {input.plan} --samples {input.samples} --output {output.samples} > {log} 2>&1"


rule score_zero_shot:
    input:
        unpack(get_zero_shot_score_inputs),
        plan="results/zero_shot/plans/{fp}.json",
    output:
        score="results/zero_shot/scores/{fp}.json",
    params:
        raw=get_zero_shot_raw_option,
    conda:
        "../../envs/vertebrae.yaml"
    log:
        "logs/score_zero_shot/{fp}.log",
    benchmark:
        "benchmarks/score_zero_shot/{fp}.tsv"
    shell:
        "vertebrae score-zero-shot --plan-json {input.plan} --samples {input.samples} --prompts {input.prompts}"
        " --protocol {input.protocol}{params.raw} --output {output.score} > {log} 2>&1"


rule zero_shot_report:
    input:
        plan=get_zero_shot_report_plan,
        protocol=get_zero_shot_report_protocol,
        scores=get_zero_shot_report_scores,
    output:
        json="results/reports/{zero_shot_benchmark}/report.json",
        markdown="results/reports/{zero_shot_benchmark}/report.md",
    params:
        score_keys=get_zero_shot_score_keys,
    wildcard_constraints:
        zero_shot_benchmark="|".join(PLAN.zero_shot_reports) or "no-zero-shot-benchmark",
    conda:
        "../../envs/vertebrae.yaml"
    log:
        "logs/zero_shot_report/{zero_shot_benchmark}.log",
    shell:
        "vertebrae zero-shot-from-artifacts --plan-json {input.plan} --protocol {input.protocol} {params.score_keys}"
        " --json-output {output.json} --markdown-output {output.markdown} > {log} 2>&1"
