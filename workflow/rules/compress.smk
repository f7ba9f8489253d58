rule compress:
    input:
        plan="results/plans/{fp}.json",
        embeddings=get_compress_input,
    output:
        embeddings="results/compressed/{fp}/samples.h5",
    conda:
        "../../envs/vertebrae.yaml"
    log:
        "logs/compress/{fp}.log",
    benchmark:
        "benchmarks/compress/{fp}.tsv"
    shell:
        "vertebrae compress --plan-json {input.plan} --embeddings {input.embeddings} --output {output.embeddings} > {log} 2>&1"
