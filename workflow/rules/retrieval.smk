# Retrieval protocol: query and gallery endpoints embedded shard by shard (plan and fit from labelled.smk) ->
# merge -> write relevance -> optional paired compression -> score (report: figures.smk).
rule embed_retrieval_shard:
    input:
        unpack(get_inputs),
    output:
        shard=PLAN.artifact_path("shard", "{fp}", protocol="retrieval", shard=("{i}", "{n}")),
    resources:
        mem_mb=get_mem_mb,  # from the model's weights, its batch and the shard's rows (vertebrae.planning.resources)
        gpu=get_gpus,
    params:
        side=get_side,
    threads: PLAN.threads["embedding"]
    conda:
        "../../envs/vertebrae.yaml"
    log:
        PLAN.log("embed_retrieval_shard/{fp}/shard-{i}-of-{n}"),
    benchmark:
        PLAN.record("embed_retrieval_shard/{fp}/shard-{i}-of-{n}")
    shell:
        "vertebrae embed-retrieval-shard --plan-json {input.plan} --side {params.side} --shard-index {wildcards.i}"
        " --output {output.shard} > {log} 2>&1"


rule merge_retrieval_embeddings:
    input:
        unpack(get_merge_inputs),
    output:
        embeddings=PLAN.artifact_path("embedding", "{fp}", protocol="retrieval"),
    conda:
        "../../envs/vertebrae.yaml"
    log:
        PLAN.log("merge_retrieval_embeddings/{fp}"),
    benchmark:
        PLAN.record("merge_retrieval_embeddings/{fp}")
    shell:
        "vertebrae merge-retrieval-embeddings --plan-json {input.plan} --output {output.embeddings} {input.shards} > {log} 2>&1"


rule write_retrieval_relevance:
    input:
        unpack(get_inputs),
    output:
        protocol=PLAN.artifact_path("protocol", "{fp}", protocol="retrieval"),
    conda:
        "../../envs/vertebrae.yaml"
    log:
        PLAN.log("write_retrieval_relevance/{fp}"),
    benchmark:
        PLAN.record("write_retrieval_relevance/{fp}")
    shell:
        "vertebrae write-retrieval-relevance --plan-json {input.plan} --output {output.protocol} > {log} 2>&1"


rule compress_retrieval:
    input:
        unpack(get_inputs),
    output:
        queries=PLAN.artifact_path("compressed", "{fp}", protocol="retrieval", side="query"),
        gallery=PLAN.artifact_path("compressed", "{fp}", protocol="retrieval", side="gallery"),
    threads: PLAN.threads["scoring"]  # as the score jobs, which refit it: same BLAS threads, same bits
    conda:
        "../../envs/vertebrae.yaml"
    log:
        PLAN.log("compress_retrieval/{fp}"),
    benchmark:
        PLAN.record("compress_retrieval/{fp}")
    shell:
        "vertebrae compress-retrieval --plan-json {input.plan} --queries {input.queries} --gallery {input.gallery}"
        " --query-output {output.queries} --gallery-output {output.gallery} > {log} 2>&1"


rule score_retrieval:
    input:
        unpack(get_inputs),
    output:
        score=PLAN.artifact_path("score", "{fp}", protocol="retrieval"),
    wildcard_constraints:
        fp=f"(?!(?:{get_fanout_scores_pattern()}))[0-9a-f]{{16}}",  # fingerprints are 16 characters
    resources:
        gpu=get_gpus,
    threads: PLAN.threads["scoring"]
    conda:
        "../../envs/vertebrae.yaml"
    log:
        PLAN.log("score_retrieval/{fp}"),
    benchmark:
        PLAN.record("score_retrieval/{fp}")
    shell:
        "vertebrae score-retrieval --plan-json {input.plan} --queries {input.queries} --gallery {input.gallery}"
        " --protocol {input.protocol} --output {output.score} > {log} 2>&1"


# A fanned-out score (scoring.query_shards x scoring.gallery_shards > 1): partial counts per (direction, query
# range, gallery range), each job reading only its rows; the merge writes the very score artifact score_retrieval
# would have written, under the same fingerprint. stage_retrieval_fanout writes the candidate's fan-out bundle, a
# folder holding every file a partial reads (the merge spec, the endpoints, the protocol's relevance rows by query
# and by gallery item, with their content hashes: vertebrae.stages.fanout_bundle), so a partial declares one input,
# by pattern: {fp} is the candidate's merge spec, {partial} the partial's own fingerprint.
rule stage_retrieval_fanout:
    input:
        unpack(get_fanout_inputs),
    output:
        fanout=directory(PLAN.artifact_path("fanout", "{fp}", protocol="retrieval")),
    conda:
        "../../envs/vertebrae.yaml"
    log:
        PLAN.log("stage_retrieval_fanout/{fp}"),
    benchmark:
        PLAN.record("stage_retrieval_fanout/{fp}")
    shell:
        "vertebrae stage-retrieval-fanout --plan-json {input.plan} --queries {input.queries} --gallery {input.gallery}"
        " --protocol {input.protocol} --output {output.fanout} > {log} 2>&1"


rule score_retrieval_partial:
    input:
        fanout=PLAN.artifact_path("fanout", "{fp}", protocol="retrieval"),
    output:
        partial=PLAN.artifact_path("partial", "{partial}", protocol="retrieval", merge="{fp}"),
    wildcard_constraints:
        fp="[0-9a-f]{16}",  # fingerprints are 16 characters
        partial="[0-9a-f]{16}",
    resources:
        **PLAN.partial_resources(mem_mb=get_partial_mem_mb, gpu=get_partial_gpus),  # constants when all agree
    threads: PLAN.threads["scoring"]
    conda:
        "../../envs/vertebrae.yaml"
    log:
        PLAN.log("score_retrieval_partial/{fp}/{partial}"),
    benchmark:
        PLAN.record("score_retrieval_partial/{fp}/{partial}")
    shell:
        "vertebrae score-retrieval-fanout-partial --fanout {input.fanout} --partial {wildcards.partial}"
        " --output {output.partial} > {log} 2>&1"


rule merge_retrieval_partials:
    input:
        unpack(get_inputs),
    output:
        score=PLAN.artifact_path("score", "{fp}", protocol="retrieval"),
    wildcard_constraints:
        fp=get_fanout_scores_pattern(),
    conda:
        "../../envs/vertebrae.yaml"
    log:
        PLAN.log("merge_retrieval_partials/{fp}"),
    benchmark:
        PLAN.record("merge_retrieval_partials/{fp}")
    shell:
        "vertebrae merge-retrieval-partials --plan-json {input.plan} --protocol {input.protocol}"
        " --output {output.score} > {log} 2>&1"  # the partials: the paths its spec plans (inputs, never arguments)
