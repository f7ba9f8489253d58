# Labelled protocol: plan -> fit -> embed shard -> merge -> compress -> write protocol -> score (report: figures.smk).
# The plan and fit rules serve every protocol; a branch-less zero-shot encoder's samples use embed_shard and
# merge_embeddings too (the very same embedding job).
rule plan:
    input:
        unpack(get_plan_inputs),  # its spec file (ancient: written at parse) and the user's files it checks
    output:
        plan=PLAN.artifact_path("plan", "{fp}"),
    conda:
        "../../envs/vertebrae.yaml"
    log:
        PLAN.log("plan/{fp}"),
    benchmark:
        PLAN.record("plan/{fp}")
    shell:
        "vertebrae plan --spec-file {input.spec} --output {output.plan} > {log} 2>&1"


rule fit_extractor:
    input:
        unpack(get_inputs),
    output:
        fitted=PLAN.artifact_path("fitted", "{fp}"),
    resources:
        mem_mb=get_mem_mb,  # from the fit endpoint's rows (vertebrae.planning.resources)
    threads: PLAN.threads["embedding"]
    conda:
        "../../envs/vertebrae.yaml"
    log:
        PLAN.log("fit_extractor/{fp}"),
    benchmark:
        PLAN.record("fit_extractor/{fp}")
    shell:
        "vertebrae fit-extractor --plan-json {input.plan} --output {output.fitted} > {log} 2>&1"


rule embed_shard:
    input:
        unpack(get_inputs),
    output:
        shard=PLAN.artifact_path("shard", "{fp}", shard=("{i}", "{n}")),
    resources:
        mem_mb=get_mem_mb,  # from the model's weights, its batch and the shard's rows (vertebrae.planning.resources)
        gpu=get_gpus,
    threads: PLAN.threads["embedding"]
    conda:
        "../../envs/vertebrae.yaml"
    log:
        PLAN.log("embed_shard/{fp}/shard-{i}-of-{n}"),
    benchmark:
        PLAN.record("embed_shard/{fp}/shard-{i}-of-{n}")
    shell:
        "vertebrae embed-shard --plan-json {input.plan} --shard-index {wildcards.i} --output {output.shard} > {log} 2>&1"


rule merge_embeddings:
    input:
        unpack(get_merge_inputs),
    output:
        embeddings=PLAN.artifact_path("embedding", "{fp}"),
    conda:
        "../../envs/vertebrae.yaml"
    log:
        PLAN.log("merge_embeddings/{fp}"),
    benchmark:
        PLAN.record("merge_embeddings/{fp}")
    shell:
        "vertebrae merge-embeddings --plan-json {input.plan} --output {output.embeddings} {input.shards} > {log} 2>&1"


rule compress:
    input:
        unpack(get_inputs),
    output:
        embeddings=PLAN.artifact_path("compressed", "{fp}"),
    threads: PLAN.threads["scoring"]  # as the score jobs, which refit it: same BLAS threads, same bits
    conda:
        "../../envs/vertebrae.yaml"
    log:
        PLAN.log("compress/{fp}"),
    benchmark:
        PLAN.record("compress/{fp}")
    shell:
        "vertebrae compress --plan-json {input.plan} --embeddings {input.embeddings} --output {output.embeddings} > {log} 2>&1"


rule write_protocol:
    input:
        unpack(get_inputs),
    output:
        protocol=PLAN.artifact_path("protocol", "{fp}"),
    conda:
        "../../envs/vertebrae.yaml"
    log:
        PLAN.log("write_protocol/{fp}"),
    benchmark:
        PLAN.record("write_protocol/{fp}")
    shell:
        "vertebrae write-protocol --plan-json {input.plan} --output {output.protocol} > {log} 2>&1"


rule score:
    input:
        unpack(get_inputs),
    output:
        score=PLAN.artifact_path("score", "{fp}"),
    wildcard_constraints:
        fp=f"(?!(?:{get_labelled_fanout_pattern()}))[0-9a-f]{{16}}",  # fingerprints are 16 characters
    resources:
        gpu=get_gpus,  # a built-in metric on a CUDA device (linear_probe's device)
    threads: PLAN.threads["scoring"]
    conda:
        "../../envs/vertebrae.yaml"
    log:
        PLAN.log("score/{fp}"),
    benchmark:
        PLAN.record("score/{fp}")
    shell:
        "vertebrae score --plan-json {input.plan} --embeddings {input.embeddings} --protocol {input.protocol}"
        " --output {output.score} > {log} 2>&1"


# A fanned-out labelled score (the benchmark's `fanout: true`): OverlapIndex, each stability repeat, Separatix and
# each declared metric are jobs of their own, each writing a partial keyed by that metric alone (embedding, protocol,
# its config; vertebrae.stages.labelled_partials), and the merge writes the very score artifact `score` would have
# written, under the same fingerprint. The Separatix partial also reads the overlap partial (its gate).
rule score_labelled_partial:
    input:
        unpack(get_inputs),
    output:
        partial=PLAN.artifact_path("labelled-partial", "{fp}"),
    params:
        overlap=get_overlap_option,
    resources:
        gpu=get_gpus,  # its metric on a CUDA device (linear_probe's device)
    threads: PLAN.threads["scoring"]
    priority: get_part_priority
    conda:
        "../../envs/vertebrae.yaml"
    log:
        PLAN.log("score_labelled_partial/{fp}"),
    benchmark:
        PLAN.record("score_labelled_partial/{fp}")
    shell:
        "vertebrae score-labelled-partial --plan-json {input.plan} --embeddings {input.embeddings}"
        " --protocol {input.protocol}{params.overlap} --output {output.partial} > {log} 2>&1"


rule merge_labelled_partials:
    input:
        unpack(get_inputs),
    output:
        score=PLAN.artifact_path("score", "{fp}"),
    wildcard_constraints:
        fp=get_labelled_fanout_pattern(),
    conda:
        "../../envs/vertebrae.yaml"
    log:
        PLAN.log("merge_labelled_partials/{fp}"),
    benchmark:
        PLAN.record("merge_labelled_partials/{fp}")
    shell:
        "vertebrae merge-labelled-partials --plan-json {input.plan} --embeddings {input.embeddings}"
        " --protocol {input.protocol} --output {output.score} > {log} 2>&1"  # the partials: the paths its spec plans
