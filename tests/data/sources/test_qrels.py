"""Relevance files read strictly: an optional header line, a BOM, plain decimal grades only, UTF-8 named by line,
and integer ids of an .npz matched by the text ids of the file (issues 27 and 32)."""

from __future__ import annotations

import numpy as np
import pytest

from vertebrae.core.errors import ValidationError
from vertebrae.core.identity import DatasetIdentity
from vertebrae.data.sources.qrels import read_qrels
from vertebrae.data.declared.retrieval import load_retrieval_source


def _qrels(tmp_path, data: bytes):
    path = tmp_path / "q.tsv"
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("header", ["query-id\tcorpus-id\tscore", "query_id\tgallery_id\tgrade", "qid\tdocid"])
def test_a_header_line_is_skipped(tmp_path, header):
    qrels = read_qrels(_qrels(tmp_path, f"{header}\nq1\td1\t2\nq2\td2\n".encode()))
    assert qrels.header and qrels.records == (("q1", "d1", 2.0), ("q2", "d2", 1.0)) and qrels.lines == (2, 3)


def test_a_header_after_the_first_record_is_refused_naming_the_line(tmp_path):
    with pytest.raises(ValidationError, match=r"q\.tsv: line 2: grade 'score' is not a number"):
        read_qrels(_qrels(tmp_path, b"q1\td1\t1\nquery-id\tcorpus-id\tscore\n"))
    with pytest.raises(ValidationError, match=r"q\.tsv: line 1: grade 'relevant' is not a number"):
        read_qrels(_qrels(tmp_path, b"q1\td1\trelevant\n"))  # not a header: its ids are not column names


def test_a_byte_order_mark_is_dropped(tmp_path):
    qrels = read_qrels(_qrels(tmp_path, "\ufeffq1\td1\t1\n".encode()))
    assert qrels.records == (("q1", "d1", 1.0),)
    assert read_qrels(_qrels(tmp_path, "\ufeffquery-id\tcorpus-id\tscore\nq1\td1\t1\n".encode())).header


@pytest.mark.parametrize("grade", ["1_0", "nan", "inf", "0x1", "1,5", "", " "])
def test_grades_python_would_misread_are_refused(tmp_path, grade):
    assert float("1_0") == 10.0  # what the former reader did with it
    with pytest.raises(ValidationError, match=r"q\.tsv: line 2: grade .* is not a number"):
        read_qrels(_qrels(tmp_path, f"q1\td1\t1\nq1\td2\t{grade}\n".encode()))


@pytest.mark.parametrize("grade, value", [("2", 2.0), ("1.5", 1.5), ("3e0", 3.0), (".5", 0.5), ("+1", 1.0), ("0", 0.0)])
def test_plain_decimal_grades_are_read(tmp_path, grade, value):
    assert read_qrels(_qrels(tmp_path, f"q1\td1\t{grade}\n".encode())).records == (("q1", "d1", value),)


def test_a_file_that_is_not_utf8_is_refused_naming_file_and_line(tmp_path):
    with pytest.raises(ValidationError, match=r"q\.tsv: line 2: not UTF-8 text"):
        read_qrels(_qrels(tmp_path, "q1\td1\t1\nq\u00e9\td2\t1\n".encode("latin-1")))


def test_a_pair_graded_twice_names_both_lines_and_negative_grades_are_refused(tmp_path):
    with pytest.raises(ValidationError, match=r"q\.tsv: lines 1 and 3 both grade the pair \(query 'q1', gallery 'd1'\)"):
        read_qrels(_qrels(tmp_path, b"q1\td1\t1\nq1\td2\t1\nq1\td1\t2\n"))
    with pytest.raises(ValidationError, match=r"q\.tsv: line 1: grade '-1' is negative"):
        read_qrels(_qrels(tmp_path, b"q1\td1\t-1\n"))


def _npz_pair(tmp_path, qrels: str, ids=(np.array([10, 11]), np.array([20, 21, 22]))):
    np.savez(tmp_path / "pair.npz", queries=np.eye(2, 3), gallery=np.eye(3), query_ids=ids[0], gallery_ids=ids[1])
    (tmp_path / "qrels.tsv").write_text(qrels)
    return {"type": "npz_pair", "path": "pair.npz", "relevance_path": "qrels.tsv"}


def test_integer_npz_ids_match_the_text_ids_of_the_qrels(tmp_path):
    decl = _npz_pair(tmp_path, "query-id\tcorpus-id\tscore\n10\t20\t1\n11\t22\t2\n")
    data = load_retrieval_source(decl, base_dir=tmp_path, where="src")
    assert data.records == [(10, 20, 1.0), (11, 22, 2.0)]
    dataset = data.to_dataset(DatasetIdentity.declared("pair", "1"))
    assert dataset.relevance.toarray().tolist() == [[1, 0, 0], [0, 0, 2]]
    decl = _npz_pair(tmp_path, "10\tx20\t1\n")
    with pytest.raises(ValidationError, match=r"qrels\.tsv: line 1: gallery id 'x20' is not an integer, but the "
                                              r"dataset's gallery ids are integers"):
        load_retrieval_source(decl, base_dir=tmp_path, where="src")
    decl = _npz_pair(tmp_path, "10\t20\t1\n12\t20\t1\n")
    with pytest.raises(ValidationError, match=r"1 record\(s\) name 1 query id\(s\) absent from the queries of src: "
                                              r"12 \(line 2\)"):
        load_retrieval_source(decl, base_dir=tmp_path, where="src")


def test_string_npz_ids_stay_text(tmp_path):
    decl = _npz_pair(tmp_path, "a\tc\t1\n", ids=(np.array(["a", "b"]), np.array(["c", "d", "e"])))
    assert load_retrieval_source(decl, base_dir=tmp_path, where="src").records == [("a", "c", 1.0)]
