"""The ``schema`` value of each protocol's ranked report JSON; results write them, figures dispatch on them."""

LABELLED_SCHEMA = "vertebrae.report/v1"
RETRIEVAL_SCHEMA = "vertebrae.retrieval-report/v1"
ZERO_SHOT_SCHEMA = "vertebrae.zero-shot-report/v1"
