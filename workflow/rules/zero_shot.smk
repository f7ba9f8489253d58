# Zero-shot protocol: samples and prompts are embedded by separate rules, so a prompt edit visibly reruns only
# prompt embedding, protocol, score and report jobs (sample embedding and the compression fit stay).
# One merge rule serves both sides; the report rule is in figures.smk.
rule plan_zero_shot:
    input:
        unpack(get_plan_inputs),  # its spec file (ancient: written at parse) and the user's files it checks
    output:
        plan=PLAN.artifact_path("plan", "{fp}", protocol="zero_shot"),
    conda:
        "../../envs/vertebrae.yaml"
    log:
        PLAN.log("plan_zero_shot/{fp}"),
    benchmark:
        PLAN.record("plan_zero_shot/{fp}")
    shell:
        "vertebrae plan-zero-shot --spec-file {input.spec} --output {output.plan} > {log} 2>&1"


rule embed_zero_shot_samples:
    input:
        unpack(get_inputs),
    output:
        shard=PLAN.artifact_path("shard", "{fp}", protocol="zero_shot", side="samples", shard=("{i}", "{n}")),
    resources:
        mem_mb=get_mem_mb,  # from the model's weights, its batch and the shard's rows (vertebrae.planning.resources)
        gpu=get_gpus,
    threads: PLAN.threads["embedding"]
    conda:
        "../../envs/vertebrae.yaml"
    log:
        PLAN.log("embed_zero_shot_samples/{fp}/shard-{i}-of-{n}"),
    benchmark:
        PLAN.record("embed_zero_shot_samples/{fp}/shard-{i}-of-{n}")
    shell:
        "vertebrae embed-zero-shot-shard --plan-json {input.plan} --side samples --shard-index {wildcards.i}"
        " --output {output.shard} > {log} 2>&1"


rule embed_zero_shot_prompts:
    input:
        unpack(get_inputs),
    output:
        shard=PLAN.artifact_path("shard", "{fp}", protocol="zero_shot", side="prompts", shard=("{i}", "{n}")),
    resources:
        mem_mb=get_mem_mb,  # from the model's weights, its batch and the shard's rows (vertebrae.planning.resources)
        gpu=get_gpus,
    threads: PLAN.threads["embedding"]
    conda:
        "../../envs/vertebrae.yaml"
    log:
        PLAN.log("embed_zero_shot_prompts/{fp}/shard-{i}-of-{n}"),
    benchmark:
        PLAN.record("embed_zero_shot_prompts/{fp}/shard-{i}-of-{n}")
    shell:
        "vertebrae embed-zero-shot-shard --plan-json {input.plan} --side prompts --shard-index {wildcards.i}"
        " --protocol {input.protocol} --output {output.shard} > {log} 2>&1"


rule merge_zero_shot:
    input:
        unpack(get_merge_inputs),
    output:
        embeddings=PLAN.artifact_path("embedding", "{fp}", protocol="zero_shot", side="{side}"),
    conda:
        "../../envs/vertebrae.yaml"
    log:
        PLAN.log("merge_zero_shot/{side}/{fp}"),
    benchmark:
        PLAN.record("merge_zero_shot/{side}/{fp}")
    shell:
        "vertebrae merge-zero-shot-embeddings --plan-json {input.plan} --output {output.embeddings} {input.shards} > {log} 2>&1"


rule write_zero_shot_protocol:
    input:
        unpack(get_inputs),
    output:
        protocol=PLAN.artifact_path("protocol", "{fp}", protocol="zero_shot"),
    conda:
        "../../envs/vertebrae.yaml"
    log:
        PLAN.log("write_zero_shot_protocol/{fp}"),
    benchmark:
        PLAN.record("write_zero_shot_protocol/{fp}")
    shell:
        "vertebrae write-zero-shot-protocol --plan-json {input.plan} --output {output.protocol} > {log} 2>&1"


rule compress_zero_shot:
    input:
        unpack(get_inputs),
    output:
        samples=PLAN.artifact_path("compressed", "{fp}", protocol="zero_shot"),
    threads: PLAN.threads["scoring"]  # as the score jobs, which refit it: same BLAS threads, same bits
    conda:
        "../../envs/vertebrae.yaml"
    log:
        PLAN.log("compress_zero_shot/{fp}"),
    benchmark:
        PLAN.record("compress_zero_shot/{fp}")
    shell:
        "vertebrae compress-zero-shot --plan-json {input.plan} --samples {input.samples} --output {output.samples} > {log} 2>&1"


rule score_zero_shot:
    input:
        unpack(get_inputs),
    output:
        score=PLAN.artifact_path("score", "{fp}", protocol="zero_shot"),
    params:
        raw=get_zero_shot_raw_option,
    threads: PLAN.threads["scoring"]
    conda:
        "../../envs/vertebrae.yaml"
    log:
        PLAN.log("score_zero_shot/{fp}"),
    benchmark:
        PLAN.record("score_zero_shot/{fp}")
    shell:
        "vertebrae score-zero-shot --plan-json {input.plan} --samples {input.samples} --prompts {input.prompts}"
        " --protocol {input.protocol}{params.raw} --output {output.score} > {log} 2>&1"
