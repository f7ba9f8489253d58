rule embed_retrieval_shard:
    input:
        plan="results/plans/{fp}.json",
        fitted=get_fitted,
    output:
        shard="results/retrieval/embeddings/{fp}/shard-{i}-of-{n}.h5",
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
        plan="results/plans/{fp}.json",
        shards=get_shards,
    output:
        embeddings="results/retrieval/embeddings/{fp}.h5",
    conda:
        "../../envs/vertebrae.yaml"
    log:
        "logs/merge_retrieval_embeddings/{fp}.log",
    shell:
        "vertebrae merge-retrieval-embeddings --plan-json {input.plan} --output {output.embeddings} {input.shards} > {log} 2>&1"


rule write_retrieval_relevance:
    input:
        plan="results/plans/{fp}.json",
    output:
        protocol="results/retrieval/relevance/{fp}.json",
    conda:
        "../../envs/vertebrae.yaml"
    log:
        "logs/write_retrieval_relevance/{fp}.log",
    shell:
        "vertebrae write-retrieval-relevance --plan-json {input.plan} --output {output.protocol} > {log} 2>&1"


rule compress_retrieval:
    input:
        unpack(get_retrieval_pair),
        plan="results/plans/{fp}.json",
    output:
        queries="results/retrieval/compressed/{fp}/query.h5",
        gallery="results/retrieval/compressed/{fp}/gallery.h5",
    conda:
        "../../envs/vertebrae.yaml"
    log:
        "logs/compress_retrieval/{fp}.log",
    shell:
        "vertebrae compress-retrieval --plan-json {input.plan} --queries {input.queries} --gallery {input.gallery}"
        " --query-output {output.queries} --gallery-output {output.gallery} > {log} 2>&1"


rule score_retrieval:
    input:
        unpack(get_retrieval_pair),
        plan="results/plans/{fp}.json",
        protocol=get_retrieval_protocol,
    output:
        score="results/retrieval/scores/{fp}.json",
    conda:
        "../../envs/vertebrae.yaml"
    log:
        "logs/score_retrieval/{fp}.log",
    benchmark:
        "benchmarks/score_retrieval/{fp}.tsv"
    shell:
        "vertebrae score-retrieval --plan-json {input.plan} --queries {input.queries} --gallery {input.gallery}"
        " --protocol {input.protocol} --output {output.score} > {log} 2>&1"


rule retrieval_report:
    input:
        plan=get_retrieval_report_plan,
        protocol=get_retrieval_report_protocol,
        scores=get_retrieval_report_scores,
    output:
        json="results/reports/{retrieval_benchmark}/report.json",
        markdown="results/reports/{retrieval_benchmark}/report.md",
    conda:
        "../../envs/vertebrae.yaml"
    log:
        "logs/retrieval_report/{retrieval_benchmark}.log",
    shell:
        "vertebrae retrieval-from-artifacts --plan-json {input.plan} --protocol {input.protocol} --json-output {output.json}"
        " --markdown-output {output.markdown} {input.scores} > {log} 2>&1"
