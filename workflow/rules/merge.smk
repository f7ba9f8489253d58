rule merge_embeddings:
    input:
        plan="results/plans/{fp}.json",
        shards=get_shards,
    output:
        embeddings="results/embeddings/{fp}.h5",
    conda:
        "../../envs/vertebrae.yaml"
    log:
        "logs/merge_embeddings/{fp}.log",
    shell:
        "vertebrae merge-embeddings --plan-json {input.plan} --output {output.embeddings} {input.shards} > {log} 2>&1"
