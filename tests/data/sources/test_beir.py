"""BEIR folders (``source: {type: beir}`` and ``RetrievalDataset.from_beir``): texts joined as BEIR joins them,
queries of the split only, and refusals naming the file and line."""

from __future__ import annotations

import json

import pytest

from tests.beir_fixtures import CORPUS, QUERIES, jsonl, write_beir
from vertebrae.core.errors import ConfigError, ValidationError
from vertebrae.core.identity import DatasetIdentity
from vertebrae.data.sources.beir import beir_files, read_beir
from vertebrae.data.retrieval import RetrievalDataset
from vertebrae.data.declared.retrieval import load_retrieval_source, retrieval_identity, retrieval_row_counts


def test_beir_folder_reads_texts_queries_of_the_split_and_records(tmp_path):
    folder = write_beir(tmp_path / "scifi")
    data = read_beir(beir_files(folder))
    # title + " " + text, stripped; an empty title leaves the text stripped; no title: the text stripped
    assert data.corpus_texts == ("Cats Cats purr and sleep.", "Dogs bark at night.", "Fish swim in water.",
                                 "Birds Birds fly south in winter.", "Cats again Kittens play with yarn.")
    assert data.corpus_ids == ("d1", "d2", "d3", "d4", "d5")
    assert data.query_ids == ("q1", "q2", "q3")  # q4 has records in train only
    assert data.query_texts == ("what do cats do", "which animal barks", "where do birds go")
    assert data.records == (("q1", "d1", 2.0), ("q1", "d5", 1.0), ("q2", "d2", 1.0), ("q3", "d4", 1.0),
                            ("q3", "d3", 0.0))
    train = read_beir(beir_files(folder, "train"))
    assert train.query_ids == ("q4",) and train.records == (("q4", "d3", 1.0),)


def test_gzipped_jsonl_reads_the_same(tmp_path):
    plain = read_beir(beir_files(write_beir(tmp_path / "a")))
    zipped = read_beir(beir_files(write_beir(tmp_path / "b", gz=True)))
    assert zipped.files.corpus.name == "corpus.jsonl.gz"
    assert (zipped.corpus_texts, zipped.query_texts, zipped.records) == (plain.corpus_texts, plain.query_texts,
                                                                         plain.records)


def test_from_beir_equals_the_config_source_and_the_hand_built_dataset(tmp_path):
    folder = write_beir(tmp_path / "b")
    dataset = RetrievalDataset.from_beir(folder)
    decl = {"type": "beir", "path": "b"}
    identity = retrieval_identity({"source": decl}, base_dir=tmp_path, where="r")
    assert dataset.identity_key() == identity.key()  # the same identity as the workflow's
    config = load_retrieval_source(decl, base_dir=tmp_path, where="r").to_dataset(identity)
    assert (config.query_modality, config.gallery_modality) == ("text", "text")
    for built in (dataset, config):
        assert built.query_ids == ("q1", "q2", "q3") and built.gallery_ids == ("d1", "d2", "d3", "d4", "d5")
        assert built.relevance.toarray().tolist() == [[2, 0, 0, 0, 1], [0, 1, 0, 0, 0], [0, 0, 0, 1, 0]]
        assert list(built.gallery)[3] == "Birds Birds fly south in winter."
    assert retrieval_row_counts(decl, base_dir=tmp_path, where="r") == (3, 5)
    other = RetrievalDataset.from_beir(folder, "train", identity=DatasetIdentity.declared("b", "1"))
    assert other.query_ids == ("q4",) and other.identity_key() != dataset.identity_key()


def test_a_qrels_edit_changes_the_files_identity(tmp_path):
    folder = write_beir(tmp_path / "b")
    before = RetrievalDataset.from_beir(folder).identity_key()
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    assert RetrievalDataset.from_beir(folder).identity_key() != before


def _refused(tmp_path, error, pattern, split="test", **files):
    write_beir(tmp_path / "bad", **files)
    with pytest.raises(error, match=pattern):
        load_retrieval_source({"type": "beir", "path": "bad", "split": split}, base_dir=tmp_path, where="src")


def test_a_missing_split_names_the_file_and_the_splits_there(tmp_path):
    _refused(tmp_path, ConfigError, r"src\.split: no relevance file .*qrels/dev\.tsv for split 'dev'; splits there: "
                                     r"test, train", split="dev")


def test_missing_files_and_bad_keys_are_refused(tmp_path):
    folder = write_beir(tmp_path / "b")
    (folder / "queries.jsonl").unlink()
    with pytest.raises(ConfigError, match=r"src: the BEIR folder .* has no queries\.jsonl"):
        load_retrieval_source({"type": "beir", "path": "b"}, base_dir=tmp_path, where="src")
    with pytest.raises(ConfigError, match=r"src\.relevance_path: a key of retrieval source type\(s\) npz_pair, "
                                          r"manifest_pair, source_pair, not of type 'beir'"):
        load_retrieval_source({"type": "beir", "path": "b", "relevance_path": "x"}, base_dir=tmp_path, where="src")
    with pytest.raises(ConfigError, match=r"src\.path: not a folder"):
        load_retrieval_source({"type": "beir", "path": "nowhere"}, base_dir=tmp_path, where="src")


def test_qrels_ids_absent_from_the_corpus_say_how_many_and_show_lines(tmp_path):
    qrels = "query-id\tcorpus-id\tscore\n" + "".join(f"q1\tgone{i}\t1\n" for i in range(7)) + "q2\td2\t1\n"
    _refused(tmp_path, ValidationError, r"test\.tsv: 7 record\(s\) name 7 gallery id\(s\) absent from .*corpus\.jsonl: "
                                        r"'gone0' \(line 2\), 'gone1' \(line 3\), .*\.\.\. \(2 more\)", test_qrels=qrels)
    _refused(tmp_path, ValidationError, r"test\.tsv: 1 record\(s\) name 1 query id\(s\) absent from .*queries\.jsonl: "
                                        r"'q9' \(line 3\)", test_qrels="query-id\tcorpus-id\tscore\nq1\td1\t1\nq9\td1\t1\n")


def test_duplicate_ids_and_bad_lines_name_file_and_line(tmp_path):
    _refused(tmp_path, ValidationError, r"corpus\.jsonl: line 4: duplicate _id 'd1' \(first at line 1\)",
             corpus=jsonl(CORPUS[:3]) + json.dumps(CORPUS[0]) + "\n")
    _refused(tmp_path, ValidationError, r"corpus\.jsonl: line 2: not JSON",
             corpus=jsonl(CORPUS[:1]) + '{"_id": "d2", "text": oops}\n' + jsonl(CORPUS[2:]))
    _refused(tmp_path, ValidationError, r"queries\.jsonl: line 2: '_id' must be a non-empty string",
             queries=jsonl(QUERIES[:1]) + '{"text": "no id"}\n')
    _refused(tmp_path, ValidationError, r"corpus\.jsonl: line 1: 'text' must be a string",
             corpus='{"_id": "d1", "text": 3}\n')
    _refused(tmp_path, ValidationError, r"test\.tsv: line 3: grade 'x' is not a number",
             test_qrels="query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\tx\n")


def test_endpoint_keys_follow_each_sides_rows_not_the_relevance(tmp_path):
    """Issue 27: an embedding is named by the rows it embeds. A grade edit keeps both endpoint keys, a corpus edit
    moves the gallery's only, a qrels edit that drops a query moves the queries' only."""
    folder = write_beir(tmp_path / "b")
    before = RetrievalDataset.from_beir(folder)
    keys = {side: before.endpoint_key(side) for side in ("query", "gallery")}
    assert keys["query"] != keys["gallery"] and all(k.startswith("endpoint:v1:") for k in keys.values())
    qrels = folder / "qrels" / "test.tsv"
    qrels.write_text(qrels.read_text().replace("q1\td1\t2", "q1\td1\t1"))
    graded = RetrievalDataset.from_beir(folder)
    assert graded.identity_key() != before.identity_key()  # the protocol (and scores) follow the relevance
    assert {side: graded.endpoint_key(side) for side in keys} == keys  # the embeddings do not
    qrels.write_text(qrels.read_text().replace("q2\td2\t1\n", ""))  # q2 is no longer a query
    fewer = RetrievalDataset.from_beir(folder)
    assert fewer.endpoint_key("query") != keys["query"] and fewer.endpoint_key("gallery") == keys["gallery"]
    corpus = folder / "corpus.jsonl"
    corpus.write_text(corpus.read_text().replace("Fish swim", "Fish glide"))
    edited = RetrievalDataset.from_beir(folder)
    assert edited.endpoint_key("gallery") != keys["gallery"] and edited.endpoint_key("query") == fewer.endpoint_key("query")
    from dataclasses import replace

    square = RetrievalDataset.from_embeddings([[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [0.0, 1.0]], [(0, 0), (1, 1)],
                                              identity=DatasetIdentity.declared("s", "1"))
    square = replace(square, endpoint_keys={"query": "kq", "gallery": "kg"})
    reverse = square.transposed()  # bidirectional scoring: the sides swap their keys
    assert (reverse.endpoint_key("query"), reverse.endpoint_key("gallery")) == ("kg", "kq")


def test_content_identity_endpoint_keys_ignore_the_relevance():
    import numpy as np

    q, g = np.eye(2, 3), np.eye(3)
    one = RetrievalDataset.from_embeddings(q, g, [(0, 0, 1), (1, 1, 1)], identity=DatasetIdentity.from_content())
    two = RetrievalDataset.from_embeddings(q, g, [(0, 0, 2), (1, 2, 1)], identity=DatasetIdentity.from_content())
    assert one.identity_key() != two.identity_key()
    assert [one.endpoint_key(s) for s in ("query", "gallery")] == [two.endpoint_key(s) for s in ("query", "gallery")]
    three = RetrievalDataset.from_embeddings(q, 2 * g, [(0, 0, 1), (1, 1, 1)], identity=DatasetIdentity.from_content())
    assert three.endpoint_key("query") == one.endpoint_key("query") and three.endpoint_key("gallery") != \
        one.endpoint_key("gallery")


def test_endpoint_key_golden_value():
    """The endpoint key is a public contract (it names retrieval embeddings). Introduced by issue 27 with schema
    vertebrae.retrieval-endpoint/v1: retrieval embedding fingerprints moved then (they were keyed by the whole
    dataset identity, relevance included); a run from before re-embeds each retrieval endpoint once."""
    import hashlib

    from vertebrae.data.retrieval import endpoint_key

    text = '{"endpoint":{"dataset":"declared:x@1","side":"query"},"schema":"vertebrae.retrieval-endpoint/v1"}'
    assert endpoint_key({"dataset": "declared:x@1", "side": "query"}) == \
        "endpoint:v1:" + hashlib.sha256(text.encode()).hexdigest()
    declared = RetrievalDataset.from_embeddings([[1.0, 0.0]], [[1.0, 0.0]], [(0, 0)],
                                                identity=DatasetIdentity.declared("x", "1"))
    assert declared.endpoint_key("query") == endpoint_key({"dataset": declared.identity_key(), "side": "query"})
