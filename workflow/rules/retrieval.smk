# Retrieval protocol: query and gallery endpoints embedded shard by shard (plan and fit from labelled.smk) ->
# merge -> write relevance -> optional paired compression -> score (report: figures.smk).
rule embed_retrieval_shard:
    input:
        unpack(get_inputs),
    output:
        shard=artifact_path("shard", "{fp}", protocol="retrieval", shard=("{i}", "{n}")),
    resources:
        gpu=get_gpus,
    params:
        side=get_side,
    conda:
        "../../envs/vertebrae.yaml"
    log:
        "logs/embed_retrieval_shard/{fp}/shard-{i}-of-{n}.log",
    benchmark:
        "benchmarks/embed_retrieval_shard/{fp}/shard-{i}-of-{n}.tsv"
    shell:
        "vertebrae embed-retrieval-shard --plan-json {input.plan} --side {params.side} --shard-index {wildcards.i}"
        " --output {output.shard} > {log} 2>&1"


rule merge_retrieval_embeddings:
    input:
        unpack(get_merge_inputs),
    output:
        embeddings=artifact_path("embedding", "{fp}", protocol="retrieval"),
    conda:
        "../../envs/vertebrae.yaml"
    log:
        "logs/merge_retrieval_embeddings/{fp}.log",
    shell:
        "vertebrae merge-retrieval-embeddings --plan-json {input.plan} --output {output.embeddings} {input.shards} > {log} 2>&1"


rule write_retrieval_relevance:
    input:
        unpack(get_inputs),
    output:
        protocol=artifact_path("protocol", "{fp}", protocol="retrieval"),
    conda:
        "../../envs/vertebrae.yaml"
    log:
        "logs/write_retrieval_relevance/{fp}.log",
    shell:
        "vertebrae write-retrieval-relevance --plan-json {input.plan} --output {output.protocol} > {log} 2>&1"


rule compress_retrieval:
    input:
        unpack(get_inputs),
    output:
        queries=artifact_path("compressed", "{fp}", protocol="retrieval", side="query"),
        gallery=artifact_path("compressed", "{fp}", protocol="retrieval", side="gallery"),
    conda:
        "../../envs/vertebrae.yaml"
    log:
        "logs/compress_retrieval/{fp}.log",
    shell:
        "vertebrae compress-retrieval --plan-json {input.plan} --queries {input.queries} --gallery {input.gallery}"
        " --query-output {output.queries} --gallery-output {output.gallery} > {log} 2>&1"


rule score_retrieval:
    input:
        unpack(get_inputs),
    output:
        score=artifact_path("score", "{fp}", protocol="retrieval"),
    conda:
        "../../envs/vertebrae.yaml"
    log:
        "logs/score_retrieval/{fp}.log",
    benchmark:
        "benchmarks/score_retrieval/{fp}.tsv"
    shell:
        "vertebrae score-retrieval --plan-json {input.plan} --queries {input.queries} --gallery {input.gallery}"
        " --protocol {input.protocol} --output {output.score} > {log} 2>&1"
