# Reports and their figures, for every protocol: `vertebrae report` reads the report spec's stage.
rule report:
    input:
        unpack(get_report_inputs),
    output:
        **report_paths("{benchmark}"),
    wildcard_constraints:
        benchmark=get_report_names_pattern(),
    conda:
        "../../envs/vertebrae.yaml"
    log:
        "logs/report/{benchmark}.log",
    shell:
        "vertebrae report --plan-json {input.plan} --protocol {input.protocol} --json-output {output.json}"
        " --markdown-output {output.markdown} {input.scores} > {log} 2>&1"


rule figures:
    input:
        report=report_paths("{report_name}")["json"],
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
