"""vertebrae.core.check_records: a passed check recalled for the same declaration under the same versions only; the
planner collects the records a spec's checks consult (``collecting``) and its plan job recalls those alone (``given``)."""

from __future__ import annotations

import pytest

from vertebrae.core import check_records
from vertebrae.core.check_records import collecting, given, recalled, remember, remembered_in

DECLARED = [{"estimator": "sklearn.decomposition.PCA", "params": {"n_components": 4}}]


def test_outside_the_block_nothing_is_recorded_or_recalled(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    remember("c", DECLARED, ["numpy"], ["x"])
    assert recalled("c", DECLARED, ["numpy"]) is None and not list(tmp_path.rglob("*.json"))


def test_a_record_answers_only_its_check_declaration_and_versions(tmp_path, monkeypatch):
    with remembered_in(tmp_path):
        assert recalled("c", DECLARED, ["numpy"]) is None
        remember("c", DECLARED, ["numpy"], ["found"])
        assert recalled("c", DECLARED, ["numpy"]) == ["found"]
        assert recalled("other", DECLARED, ["numpy"]) is None
        assert recalled("c", [{**DECLARED[0], "params": {"n_components": 5}}], ["numpy"]) is None
        assert recalled("c", DECLARED, ["numpy", "scipy"]) is None  # another package decides: another record
        real = check_records._versions
        monkeypatch.setattr(check_records, "_versions", lambda packages: {**real(packages), "numpy": "0.0.1"})
        assert recalled("c", DECLARED, ["numpy"]) is None  # numpy upgraded: checked again
    assert recalled("c", DECLARED, ["numpy"]) is None  # the block is over


@pytest.mark.parametrize("text", ["", "{not json", "[1, 2]", '{"check": "c", "declared": [], "found": ["x"]}'])
def test_an_unreadable_or_foreign_record_is_not_recalled(tmp_path, text):
    with remembered_in(tmp_path):
        remember("c", DECLARED, [], ["found"])
        (record,) = tmp_path.glob("*.json")
        record.write_text(text, encoding="utf-8")
        assert recalled("c", DECLARED, []) is None


def test_the_records_a_block_consults_are_collected_and_recalled_from_them_alone(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with remembered_in(tmp_path / "planner"):
        remember("old", DECLARED, [], ["recalled"])
        with collecting() as found:
            assert recalled("old", DECLARED, []) == ["recalled"]
            remember("new", DECLARED, [], ["checked"])
            assert recalled("absent", DECLARED, []) is None
    assert sorted(r["check"] for r in found.values()) == ["new", "old"]
    assert {p.stem for p in (tmp_path / "planner").glob("*.json")} == set(found)  # named as the planner's files
    with remembered_in(tmp_path / "planner"), given({k: v for k, v in found.items() if v["check"] == "new"}):
        assert recalled("new", DECLARED, []) == ["checked"]
        assert recalled("old", DECLARED, []) is None  # in the folder, not given: the folder is not read
        remember("old", DECLARED, [], ["again"])  # nothing is written under given
    with given(found):
        assert recalled("old", [{**DECLARED[0], "params": {}}], []) is None  # another declaration
    assert {p.stem for p in (tmp_path / "planner").glob("*.json")} == set(found)
    with remembered_in(tmp_path / "planner"):
        assert recalled("old", DECLARED, []) == ["recalled"]  # not overwritten from under given
    assert not [p for p in tmp_path.glob("*.json")]
