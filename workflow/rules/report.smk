rule report:
    input:
        plan=get_report_plan,
        protocol=get_report_protocol,
        scores=get_report_scores,
    output:
        json="results/reports/{benchmark}/report.json",
        markdown="results/reports/{benchmark}/report.md",
    conda:
        "../../envs/vertebrae.yaml"
    log:
        "logs/report/{benchmark}.log",
    shell:
        "vertebrae report --plan-json {input.plan} --protocol {input.protocol} --json-output {output.json}"
        " --markdown-output {output.markdown} {input.scores} > {log} 2>&1"
