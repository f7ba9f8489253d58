rule score:
    input:
        unpack(get_score_inputs),
        plan="results/plans/{fp}.json",
    output:
        score="results/scores/{fp}.json",
    conda:
        "../../envs/vertebrae.yaml"
    log:
        "logs/score/{fp}.log",
    benchmark:
        "benchmarks/score/{fp}.tsv"
    shell:
        "vertebrae score --plan-json {input.plan} --embeddings {input.embeddings} --protocol {input.protocol}"
        " --output {output.score} > {log} 2>&1"
