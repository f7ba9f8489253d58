# Zero-shot protocol: samples and prompts are embedded by separate rules, so a prompt edit visibly reruns only
# prompt embedding, protocol, score and report jobs (sample embedding and the compression fit stay).
# One merge rule serves both sides; the report rule is in figures.smk.
rule plan_zero_shot:
    input:
        spec=ancient(get_spec_file),  # named by the spec's text: a new spec, a new name (rerun); written at parse
    output:
        plan=artifact_path("plan", "{fp}", protocol="zero_shot"),
    conda:
        "../../envs/vertebrae.yaml"
    log:
        "logs/plan_zero_shot/{fp}.log",
    benchmark:
        "benchmarks/plan_zero_shot/{fp}.tsv"
    shell:
        "vertebrae plan-zero-shot --spec-file {input.spec} --output {output.plan} > {log} 2>&1"


rule embed_zero_shot_samples:
    input:
        unpack(get_inputs),
    output:
        shard=artifact_path("shard", "{fp}", protocol="zero_shot", side="samples", shard=("{i}", "{n}")),
    resources:
        mem_mb=get_mem_mb,  # from the model's weights, its batch and the shard's rows (vertebrae.planning.resources)
        gpu=get_gpus,
    threads: PLAN.threads["embedding"]
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
        unpack(get_inputs),
    output:
        shard=artifact_path("shard", "{fp}", protocol="zero_shot", side="prompts", shard=("{i}", "{n}")),
    resources:
        mem_mb=get_mem_mb,  # from the model's weights, its batch and the shard's rows (vertebrae.planning.resources)
        gpu=get_gpus,
    threads: PLAN.threads["embedding"]
    conda:
        "../../envs/vertebrae.yaml"
    log:
        "logs/embed_zero_shot_prompts/{fp}/shard-{i}-of-{n}.log",
    benchmark:
        "benchmarks/embed_zero_shot_prompts/{fp}/shard-{i}-of-{n}.tsv"
    shell:
        "vertebrae embed-zero-shot-shard --plan-json {input.plan} --side prompts --shard-index {wildcards.i}"
        " --protocol {input.protocol} --output {output.shard} > {log} 2>&1"


rule merge_zero_shot:
    input:
        unpack(get_merge_inputs),
    output:
        embeddings=artifact_path("embedding", "{fp}", protocol="zero_shot", side="{side}"),
    conda:
        "../../envs/vertebrae.yaml"
    log:
        "logs/merge_zero_shot/{side}/{fp}.log",
    benchmark:
        "benchmarks/merge_zero_shot/{side}/{fp}.tsv"
    shell:
        "vertebrae merge-zero-shot-embeddings --plan-json {input.plan} --output {output.embeddings} {input.shards} > {log} 2>&1"


rule write_zero_shot_protocol:
    input:
        unpack(get_inputs),
    output:
        protocol=artifact_path("protocol", "{fp}", protocol="zero_shot"),
    conda:
        "../../envs/vertebrae.yaml"
    log:
        "logs/write_zero_shot_protocol/{fp}.log",
    benchmark:
        "benchmarks/write_zero_shot_protocol/{fp}.tsv"
    shell:
        "vertebrae write-zero-shot-protocol --plan-json {input.plan} --output {output.protocol} > {log} 2>&1"


rule compress_zero_shot:
    input:
        unpack(get_inputs),
    output:
        samples=artifact_path("compressed", "{fp}", protocol="zero_shot"),
    threads: PLAN.threads["scoring"]  # as the score jobs, which refit it: same BLAS threads, same bits
    conda:
        "../../envs/vertebrae.yaml"
    log:
        "logs/compress_zero_shot/{fp}.log",
    benchmark:
        "benchmarks/compress_zero_shot/{fp}.tsv"
    shell:
        "vertebrae compress-zero-shot --plan-json {input.plan} --samples {input.samples} --output {output.samples} > {log} 2>&1"


rule score_zero_shot:
    input:
        unpack(get_inputs),
    output:
        score=artifact_path("score", "{fp}", protocol="zero_shot"),
    params:
        raw=get_zero_shot_raw_option,
    threads: PLAN.threads["scoring"]
    conda:
        "../../envs/vertebrae.yaml"
    log:
        "logs/score_zero_shot/{fp}.log",
    benchmark:
        "benchmarks/score_zero_shot/{fp}.tsv"
    shell:
        "vertebrae score-zero-shot --plan-json {input.plan} --samples {input.samples} --prompts {input.prompts}"
        " --protocol {input.protocol}{params.raw} --output {output.score} > {log} 2>&1"
