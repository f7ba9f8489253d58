rule write_protocol:
    input:
        plan="results/plans/{fp}.json",
    output:
        protocol="results/protocols/{fp}.json",
    conda:
        "../../envs/vertebrae.yaml"
    log:
        "logs/write_protocol/{fp}.log",
    shell:
        "vertebrae write-protocol --plan-json {input.plan} --output {output.protocol} > {log} 2>&1"
