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


rule figures:
    input:
        report="results/reports/{report_name}/report.json",
    output:
        ranking=report(
            "results/reports/{report_name}/ranking.png",
            caption="../report/ranking.rst",
            category="{report_name}",
            labels={"benchmark": "{report_name}", "figure": "ranking"},
        ),
        detail=report(
            "results/reports/{report_name}/detail.png",
            caption="../report/detail.rst",
            category="{report_name}",
            labels={"benchmark": "{report_name}", "figure": "detail"},
        ),
    wildcard_constraints:
        report_name=get_report_names_pattern(),
    conda:
        "../../envs/vertebrae.yaml"
    log:
        "logs/figures/{report_name}.log",
    shell:
        "vertebrae figures --report {input.report} --ranking-output {output.ranking} --detail-output {output.detail} > {log} 2>&1"
