rule fit_extractor:
    input:
        plan="results/plans/{fp}.json",
    output:
        fitted="results/fitted/{fp}.json",
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
        plan="results/plans/{fp}.json",
        fitted=get_fitted,
    output:
        shard="results/embeddings/{fp}/shard-{i}-of-{n}.h5",
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
