"""``vertebrae eval`` arguments it used to take without a word or answer with a traceback (issue 48): a count below
one (``--cores -5``, ``--shards 0``) is argparse's usage error naming the option; a YAML tag in a ``key=value``
option is refused naming the option, before anything is constructed."""

from __future__ import annotations

import os

import pytest

from vertebrae.cli import main

EVAL = ["eval", "--protocol", "labelled", "--data", "sklearn:iris", "--model", "precomputed:x.npz", "--print-config"]


@pytest.mark.parametrize("flag", ["--cores", "--shards"])
@pytest.mark.parametrize("value", ["-5", "0"])
def test_eval_counts_below_one_are_usage_errors_naming_the_option(flag, value, capsys):
    with pytest.raises(SystemExit) as info:  # used to print the config (exit 0) and hand Snakemake --cores -5 / 1
        main([*EVAL, flag, value])
    assert info.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"vertebrae eval: error: argument {flag}: must be at least 1, got {value}"


@pytest.mark.parametrize("value, tag", [("!!python/object:os.system x", "!!python/object:os.system"),
                                        ("!!python/object/apply:os.system [echo]", "!!python/object/apply:os.system"),
                                        ("!!str 5", "!!str"), ("!local x", "!local"), ("[1, !!int 2]", "!!int")])
def test_eval_option_tags_are_refused_naming_the_option_and_nothing_is_built(value, tag, monkeypatch, capsys):
    monkeypatch.setattr(os, "system", lambda *a: pytest.fail("os.system called"))
    spec = f"sklearn:iris,split={value}"
    assert main(["eval", "--protocol", "labelled", "--data", spec, "--model", "precomputed:x.npz",
                 "--print-config"]) == 2
    assert capsys.readouterr().err == (
        f"vertebrae: error: --data {spec!r}: option split: {value!r} holds the YAML tag {tag!r}; an option is plain "
        "data (a number, text, true/false or a [list]), so tags are refused: quote the value to give it as text\n")


def test_eval_option_text_that_is_not_yaml_is_refused_naming_the_option(capsys):
    assert main(["eval", "--protocol", "labelled", "--data", "sklearn:iris", "--model",
                 "precomputed:x.npz,name='open", "--print-config"]) == 2
    assert capsys.readouterr().err.startswith(
        "vertebrae: error: --model \"precomputed:x.npz,name='open\": option name: \"'open\" is not a YAML value (")
    assert main(["eval", "--protocol", "labelled", "--data", "sklearn:iris,split='!x'", "--model",
                 "precomputed:x.npz", "--print-config"]) == 0  # quoted: text
    assert "split: '!x'\n" in capsys.readouterr().out
