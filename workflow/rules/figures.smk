# Comparisons, reports and their figures, for every protocol: `vertebrae report` reads the report spec's stage.
# In `snakemake --report report.html` each benchmark is a category holding its figures (ranking, detail,
# comparison) and its tables as HTML pages (ranking, detail, comparison, warnings), each with the caption of its kind
# (vertebrae.reports.html_items.report_options).
import vertebrae.reports.html_items
import vertebrae.reports.summary

ITEM = vertebrae.reports.html_items.report_options


rule report:
    input:
        unpack(get_report_inputs),
    output:
        **PLAN.report_paths("{benchmark}"),
    wildcard_constraints:
        benchmark=get_report_names_pattern(),
    conda:
        "../../envs/vertebrae.yaml"
    log:
        PLAN.log("report/{benchmark}"),
    benchmark:
        PLAN.record("report/{benchmark}")
    shell:
        "vertebrae report --plan-json {input.plan} --protocol {input.protocol} --comparison {input.comparison}"
        " --json-output {output.json} --markdown-output {output.markdown}"
        " {input.scores} > {log} 2>&1"


rule figures:
    input:
        report=PLAN.report_paths("{report_name}")["json"],
    output:
        ranking=report(PLAN.path("reports/{report_name}/ranking.png"), **ITEM("ranking", "figure")),
        detail=report(PLAN.path("reports/{report_name}/detail.png"), **ITEM("detail", "figure")),
        comparison=report(PLAN.path("reports/{report_name}/comparison.png"), **ITEM("comparison", "figure")),
    wildcard_constraints:
        report_name=get_report_names_pattern(),
    conda:
        "../../envs/vertebrae.yaml"
    log:
        PLAN.log("figures/{report_name}"),
    benchmark:
        PLAN.record("figures/{report_name}")
    shell:
        "vertebrae figures --report {input.report} --ranking-output {output.ranking} --detail-output {output.detail}"
        " --comparison-output {output.comparison} > {log} 2>&1"


rule report_tables:
    input:
        markdown=PLAN.report_paths("{report_name}")["markdown"],
        report=PLAN.report_paths("{report_name}")["json"],
    output:
        ranking=report(PLAN.path("reports/{report_name}/ranking.html"), **ITEM("ranking", "table")),
        detail=report(PLAN.path("reports/{report_name}/detail.html"), **ITEM("detail", "table")),
        comparison=report(PLAN.path("reports/{report_name}/comparison.html"), **ITEM("comparison", "table")),
        warnings=report(PLAN.path("reports/{report_name}/warnings.html"), **ITEM("warnings", "table")),
    wildcard_constraints:
        report_name=get_report_names_pattern(),
    conda:
        "../../envs/vertebrae.yaml"
    log:
        PLAN.log("report_tables/{report_name}"),
    benchmark:
        PLAN.record("report_tables/{report_name}")
    shell:
        "vertebrae report-tables --markdown {input.markdown} --ranking-output {output.ranking}"
        " --detail-output {output.detail} --comparison-output {output.comparison}"
        " --warnings-output {output.warnings} > {log} 2>&1"


rule compare:
    input:
        unpack(get_inputs),
    output:
        comparison=PLAN.artifact_path("comparison", "{fp}"),
    conda:
        "../../envs/vertebrae.yaml"
    log:
        PLAN.log("compare/{fp}"),
    benchmark:
        PLAN.record("compare/{fp}")
    shell:
        "vertebrae compare --plan-json {input.plan} --report-plan {input.report_plan} --protocol {input.protocol}"
        " --output {output.comparison} {input.scores} > {log} 2>&1"


# A benchmark's one-page report.html (ranking, figures inline, comparison, cost, warnings, details), the results
# index linking every page under the out folder (whichever config wrote it) and the leaderboard page over all of them.
# The pages (and report_tables' tables) are cut from report.md, which the job checks first against its report.json
# (vertebrae.stages.verify_pages.check_markdown): a hand-edited report.md, newer than the pages, is refused and moved
# aside with what was built from it, and the next run writes it again; an edit never reaches a page. The
# leaderboard links every page of a report, so it comes after them (and `vertebrae verify` can tell what it holds).
rule report_page:
    input:
        markdown=PLAN.report_paths("{report_name}")["markdown"],
        report=PLAN.report_paths("{report_name}")["json"],
        figures=rules.figures.output,
    output:
        page=PLAN.path("reports/{report_name}/report.html"),
    wildcard_constraints:
        report_name=get_report_names_pattern(),
    conda:
        "../../envs/vertebrae.yaml"
    log:
        PLAN.log("report_page/{report_name}"),
    benchmark:
        PLAN.record("report_page/{report_name}")
    shell:
        "vertebrae report-page --markdown {input.markdown} --output {output.page} > {log} 2>&1"


# Both pages cover the whole out folder, whichever config wrote its reports, yet read only declared inputs: the plan
# lists the report folders other configs wrote there (PLAN.other_reports, a listing of OUT/reports/*/ at parse), and
# each job reads exactly the report.json files it is given (--reports) and the files beside them it declares. A
# report another config writes into the folder changes this config's input set: its next run rewrites both pages.
rule leaderboard_page:
    input:
        reports=PLAN.page_reports(),  # this config's report.json files and the other configs'
        markdowns=vertebrae.reports.summary.report_markdowns(get_final_outputs()),  # linked from the page
        pages=get_page_outputs(),
        tables=get_report_item_outputs(),
        others=PLAN.other_report_files("report.md", "report.html", "ranking.html", "detail.html", "comparison.html",
                                       "warnings.html"),  # linked from the page where they lie beside a report
    output:
        page=PLAN.path("leaderboard.html"),
    params:
        out=out_folder_of,  # the folder the output lies in: the run's out folder
    conda:
        "../../envs/vertebrae.yaml"
    log:
        PLAN.log("leaderboard_page/leaderboard"),
    benchmark:
        PLAN.record("leaderboard_page/leaderboard")
    shell:
        "vertebrae leaderboard {params.out:q} --format html --output {output.page} --reports {input.reports:q}"
        " > {log} 2>&1"


rule results_index:
    input:
        pages=get_page_outputs(),
        leaderboard=PLAN.path("leaderboard.html"),
        reports=PLAN.page_reports(),
        others=PLAN.other_report_files("report.html"),  # the other configs' pages it lists
    output:
        index=PLAN.path("index.html"),
    params:
        out=out_folder_of,  # the folder the output lies in: the run's out folder
    conda:
        "../../envs/vertebrae.yaml"
    log:
        PLAN.log("results_index/index"),
    benchmark:
        PLAN.record("results_index/index")
    shell:
        "vertebrae results-index {params.out:q} --output {output.index} --reports {input.reports:q} > {log} 2>&1"


# The cross-benchmark summary (candidates x benchmarks table of primary scores) of every report.json.
rule summary:
    input:
        reports=vertebrae.reports.summary.summary_inputs(get_final_outputs()),
    output:
        **vertebrae.reports.summary.summary_paths(PLAN.out),
    conda:
        "../../envs/vertebrae.yaml"
    log:
        PLAN.log("summary/summary"),
    benchmark:
        PLAN.record("summary/summary")
    shell:
        "vertebrae summary --output-csv {output.csv} --output-markdown {output.markdown}"
        " --output-json {output.json} {input.reports} > {log} 2>&1"


# A labelled benchmark's target views (vertebrae.planning.views): every view's report.json -> the candidates x views
# table, the nuisance verdicts and the score-by-level figure. Adding a view reruns its own jobs and this one.
rule views_report:
    input:
        unpack(get_views_inputs),
    output:
        json=PLAN.path("reports/{benchmark}/views.json"),
        markdown=PLAN.path("reports/{benchmark}/views.md"),
        figure=PLAN.path("reports/{benchmark}/views.png"),
    wildcard_constraints:
        benchmark=PLAN.views_pattern(),
    conda:
        "../../envs/vertebrae.yaml"
    log:
        PLAN.log("views_report/{benchmark}"),
    benchmark:
        PLAN.record("views_report/{benchmark}")
    shell:
        "vertebrae views-report --plan-json {input.plan} --json-output {output.json} --markdown-output"
        " {output.markdown} --figure-output {output.figure} {input.reports} > {log} 2>&1"
