# Retrieval protocol: query and gallery endpoints embedded shard by shard (plan and fit from labelled.smk) ->
# merge -> write relevance -> optional paired compression -> score (report: figures.smk).
rule embed_retrieval_shard:
    input:
        unpack(get_inputs),
    output:
        shard=artifact_path("shard", "{fp}", protocol="retrieval", shard=("{i}", "{n}")),
    resources:
        mem_mb=get_mem_mb,  # from the model's weights, its batch and the shard's rows (vertebrae.planning.resources)
        gpu=get_gpus,
    params:
        side=get_side,
    threads: PLAN.threads["embedding"]
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
    benchmark:
        "benchmarks/merge_retrieval_embeddings/{fp}.tsv"
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
    benchmark:
        "benchmarks/write_retrieval_relevance/{fp}.tsv"
    shell:
        "vertebrae write-retrieval-relevance --plan-json {input.plan} --output {output.protocol} > {log} 2>&1"


rule compress_retrieval:
    input:
        unpack(get_inputs),
    output:
        queries=artifact_path("compressed", "{fp}", protocol="retrieval", side="query"),
        gallery=artifact_path("compressed", "{fp}", protocol="retrieval", side="gallery"),
    threads: PLAN.threads["scoring"]  # as the score jobs, which refit it: same BLAS threads, same bits
    conda:
        "../../envs/vertebrae.yaml"
    log:
        "logs/compress_retrieval/{fp}.log",
    benchmark:
        "benchmarks/compress_retrieval/{fp}.tsv"
    shell:
        "vertebrae compress-retrieval --plan-json {input.plan} --queries {input.queries} --gallery {input.gallery}"
        " --query-output {output.queries} --gallery-output {output.gallery} > {log} 2>&1"


rule score_retrieval:
    input:
        unpack(get_inputs),
    output:
        score=artifact_path("score", "{fp}", protocol="retrieval"),
    wildcard_constraints:
        fp=f"(?!(?:{get_fanout_scores_pattern()}))[0-9a-f]{{16}}",  # fingerprints are 16 characters
    resources:
        gpu=get_gpus,
    threads: PLAN.threads["scoring"]
    conda:
        "../../envs/vertebrae.yaml"
    log:
        "logs/score_retrieval/{fp}.log",
    benchmark:
        "benchmarks/score_retrieval/{fp}.tsv"
    shell:
        "vertebrae score-retrieval --plan-json {input.plan} --queries {input.queries} --gallery {input.gallery}"
        " --protocol {input.protocol} --output {output.score} > {log} 2>&1"


# A fanned-out score (scoring.query_shards x scoring.gallery_shards > 1): partial counts per (direction, query
# range, gallery range), each job reading only its rows; the merge writes the very score artifact score_retrieval
# would have written, under the same fingerprint. A partial's file lies under its candidate's merge spec ({fp}), so
# its one input is a pattern: the fan-out inputs artifact, which names the merge spec, endpoints and protocol with
# their content hashes and the protocol's relevance rows (by query, by gallery item) that stage_retrieval_fanout
# writes beside it, read by range; {partial} is the partial's own fingerprint.
rule stage_retrieval_fanout:
    input:
        unpack(get_fanout_inputs),
    output:
        fanout=artifact_path("fanout", "{fp}", protocol="retrieval"),
        query_rows=artifact_path("fanout-rows", "{fp}", protocol="retrieval", side="query"),
        gallery_rows=artifact_path("fanout-rows", "{fp}", protocol="retrieval", side="gallery"),
    conda:
        "../../envs/vertebrae.yaml"
    log:
        "logs/stage_retrieval_fanout/{fp}.log",
    benchmark:
        "benchmarks/stage_retrieval_fanout/{fp}.tsv"
    shell:
        "vertebrae stage-retrieval-fanout --plan-json {input.plan} --queries {input.queries} --gallery {input.gallery}"
        " --protocol {input.protocol} --output {output.fanout} --query-rows-output {output.query_rows}"
        " --gallery-rows-output {output.gallery_rows} > {log} 2>&1"


rule score_retrieval_partial:
    input:
        fanout=artifact_path("fanout", "{fp}", protocol="retrieval"),
    output:
        partial=artifact_path("partial", "{partial}", protocol="retrieval", merge="{fp}"),
    resources:
        **PLAN.partial_resources(mem_mb=get_partial_mem_mb, gpu=get_partial_gpus),  # constants when all agree
    threads: PLAN.threads["scoring"]
    conda:
        "../../envs/vertebrae.yaml"
    log:
        "logs/score_retrieval_partial/{fp}/{partial}.log",
    benchmark:
        "benchmarks/score_retrieval_partial/{fp}/{partial}.tsv"
    shell:
        "vertebrae score-retrieval-fanout-partial --fanout {input.fanout} --partial {wildcards.partial}"
        " --output {output.partial} > {log} 2>&1"


rule merge_retrieval_partials:
    input:
        unpack(get_inputs),
    output:
        score=artifact_path("score", "{fp}", protocol="retrieval"),
    wildcard_constraints:
        fp=get_fanout_scores_pattern(),
    conda:
        "../../envs/vertebrae.yaml"
    log:
        "logs/merge_retrieval_partials/{fp}.log",
    benchmark:
        "benchmarks/merge_retrieval_partials/{fp}.tsv"
    shell:
        "vertebrae merge-retrieval-partials --plan-json {input.plan} --protocol {input.protocol}"
        " --output {output.score} > {log} 2>&1"  # the partials: the paths its spec plans (inputs, never arguments)
