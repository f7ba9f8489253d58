rule plan:
    output:
        plan="results/plans/{fp}.json",
    params:
        spec=get_spec,
    conda:
        "../../envs/vertebrae.yaml"
    log:
        "logs/plan/{fp}.log",
    shell:
        "vertebrae plan --spec {params.spec:q} --output {output.plan} > {log} 2>&1"
