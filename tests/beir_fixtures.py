"""A small BEIR folder written by the tests (no download): corpus, queries and qrels splits."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

CORPUS = [
    {"_id": "d1", "title": "Cats", "text": "Cats purr and sleep. "},
    {"_id": "d2", "title": "", "text": "  Dogs bark at night."},
    {"_id": "d3", "text": "Fish swim in water."},
    {"_id": "d4", "title": "Birds", "text": "Birds fly south in winter."},
    {"_id": "d5", "title": "Cats again", "text": "Kittens play with yarn."},
]
QUERIES = [
    {"_id": "q1", "text": "what do cats do"},
    {"_id": "q2", "text": "which animal barks"},
    {"_id": "q3", "text": "where do birds go"},
    {"_id": "q4", "text": "a query of the train split only"},
]
TEST_QRELS = "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td5\t1\nq2\td2\t1\nq3\td4\t1\nq3\td3\t0\n"
TRAIN_QRELS = "query-id\tcorpus-id\tscore\nq4\td3\t1\n"


def jsonl(records) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def write_beir(folder: Path, *, gz: bool = False, corpus=CORPUS, queries=QUERIES, test_qrels: str = TEST_QRELS) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "qrels").mkdir(exist_ok=True)
    for name, records in (("corpus.jsonl", corpus), ("queries.jsonl", queries)):
        text = jsonl(records) if not isinstance(records, str) else records
        if gz:
            with gzip.open(folder / f"{name}.gz", "wt", encoding="utf-8") as handle:
                handle.write(text)
        else:
            (folder / name).write_text(text, encoding="utf-8")
    (folder / "qrels" / "test.tsv").write_text(test_qrels, encoding="utf-8")
    (folder / "qrels" / "train.tsv").write_text(TRAIN_QRELS, encoding="utf-8")
    return folder
