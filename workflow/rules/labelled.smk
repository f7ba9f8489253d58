# Labelled protocol: plan -> fit -> embed shard -> merge -> compress -> write protocol -> score (report: figures.smk).
# The plan and fit rules serve every protocol; a branch-less zero-shot encoder's samples use embed_shard and
# merge_embeddings too (the very same embedding job).
rule plan:
    output:
        plan=artifact_path("plan", "{fp}"),
    params:
        spec=get_spec,
    conda:
        "../../envs/vertebrae.yaml"
    log:
        "logs/plan/{fp}.log",
    shell:
        "vertebrae plan --spec {params.spec:q} --output {output.plan} > {log} 2>&1"


rule fit_extractor:
    input:
        unpack(get_inputs),
    output:
        fitted=artifact_path("fitted", "{fp}"),
    conda:
        "../../envs/vertebrae.yaml"
    log:
        "logs/fit_extractor/{fp}.log",
    benchmark:
        "benchmarks/fit_extractor/{fp}.tsv"
    shell:
        "vertebrae fit-extractor --plan-json {input.plan} --output {output.fitted} > {log} 2>&1"


rule embed_shard:
    input:
        unpack(get_inputs),
    output:
        shard=artifact_path("shard", "{fp}", shard=("{i}", "{n}")),
    resources:
        gpu=get_gpus,
    conda:
        "../../envs/vertebrae.yaml"
    log:
        "logs/embed_shard/{fp}/shard-{i}-of-{n}.log",
    benchmark:
        "benchmarks/embed_shard/{fp}/shard-{i}-of-{n}.tsv"
    shell:
        "vertebrae embed-shard --plan-json {input.plan} --shard-index {wildcards.i} --output {output.shard} > {log} 2>&1"


rule merge_embeddings:
    input:
        unpack(get_merge_inputs),
    output:
        embeddings=artifact_path("embedding", "{fp}"),
    conda:
        "../../envs/vertebrae.yaml"
    log:
        "logs/merge_embeddings/{fp}.log",
    shell:
        "vertebrae merge-embeddings --plan-json {input.plan} --output {output.embeddings} {input.shards} > {log} 2>&1"


rule compress:
    input:
        unpack(get_inputs),
    output:
        embeddings=artifact_path("compressed", "{fp}"),
    conda:
        "../../envs/vertebrae.yaml"
    log:
        "logs/compress/{fp}.log",
    benchmark:
        "benchmarks/compress/{fp}.tsv"
    shell:
        "vertebrae compress --plan-json {input.plan} --embeddings {input.embeddings} --output {output.embeddings} > {log} 2>&1"


rule write_protocol:
    input:
        unpack(get_inputs),
    output:
        protocol=artifact_path("protocol", "{fp}"),
    conda:
        "../../envs/vertebrae.yaml"
    log:
        "logs/write_protocol/{fp}.log",
    shell:
        "vertebrae write-protocol --plan-json {input.plan} --output {output.protocol} > {log} 2>&1"


rule score:
    input:
        unpack(get_inputs),
    output:
        score=artifact_path("score", "{fp}"),
    conda:
        "../../envs/vertebrae.yaml"
    log:
        "logs/score/{fp}.log",
    benchmark:
        "benchmarks/score/{fp}.tsv"
    shell:
        "vertebrae score --plan-json {input.plan} --embeddings {input.embeddings} --protocol {input.protocol}"
        " --output {output.score} > {log} 2>&1"
