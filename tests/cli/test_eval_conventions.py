"""``vertebrae eval --conventions NAME``: the retrieval benchmark's ``retrieval.conventions`` in the config it
writes; an unknown name is refused naming the known ones, and the option is refused for the labelled protocol."""

from __future__ import annotations

import yaml

from vertebrae.cli import main
from vertebrae.cli.eval_command import build_config

EVAL = ["eval", "--protocol", "retrieval", "--data", "sklearn:iris", "--model", "precomputed:x.npz", "--print-config"]


def test_eval_conventions_land_in_the_retrieval_config(capsys):
    assert main([*EVAL, "--conventions", "trec_eval"]) == 0
    config = yaml.safe_load(capsys.readouterr().out)
    assert config["retrieval"]["iris"]["retrieval"] == {"conventions": "trec_eval"}
    assert main(EVAL) == 0  # without the option: no retrieval section, the default conventions
    assert "retrieval" not in yaml.safe_load(capsys.readouterr().out)["retrieval"]["iris"]
    _, built = build_config("retrieval", "sklearn:iris", ["precomputed:x.npz"], conventions="sentence_transformers")
    assert built["retrieval"]["iris"]["retrieval"] == {"conventions": "sentence_transformers"}


def test_eval_conventions_refusals_name_the_known_ones(capsys):
    assert main([*EVAL, "--conventions", "trec"]) == 2
    assert capsys.readouterr().err == ("vertebrae: error: --conventions must be one of vertebrae, trec_eval, beir, "
                                       "mteb, sentence_transformers; got 'trec'\n")
    labelled = [*EVAL, "--conventions", "beir"]
    labelled[2] = "labelled"
    assert main(labelled) == 2
    assert "--conventions 'beir': applies to --protocol retrieval only" in capsys.readouterr().err
