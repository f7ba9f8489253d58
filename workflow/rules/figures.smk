# Comparisons, reports and their figures, for every protocol: `vertebrae report` reads the report spec's stage.
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
        "vertebrae report --plan-json {input.plan} --protocol {input.protocol} --comparison {input.comparison}"
        " --json-output {output.json} --markdown-output {output.markdown} {input.scores} > {log} 2>&1"


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
        comparison=report(
            "results/reports/{report_name}/comparison.png",
            caption="../report/comparison.rst",
            category="{report_name}",
            labels={"benchmark": "{report_name}", "figure": "comparison"},
        ),
    wildcard_constraints:
        report_name=get_report_names_pattern(),
    conda:
        "../../envs/vertebrae.yaml"
    log:
        "logs/figures/{report_name}.log",
    shell:
        "vertebrae figures --report {input.report} --ranking-output {output.ranking} --detail-output {output.detail}"
        " --comparison-output {output.comparison} > {log} 2>&1"


rule compare:
    input:
        unpack(get_inputs),
    output:
        comparison=artifact_path("comparison", "{fp}"),
    conda:
        "../../envs/vertebrae.yaml"
    log:
        "logs/compare/{fp}.log",
    benchmark:
        "benchmarks/compare/{fp}.tsv"
    shell:
        "vertebrae compare --plan-json {input.plan} --report-plan {input.report_plan} --protocol {input.protocol}"
        " --output {output.comparison} {input.scores} > {log} 2>&1"
