"""Optimize, vacuum, indices, full-text search and exactly-once writers."""

import time

import pyarrow as pa
import pytest

import tarn
from conftest import sales


def test_optimize_compacts_files(uri):
    t = tarn.Table.create(uri, data=sales(range(10)))
    for i in range(1, 5):
        t.append(sales(range(i * 10, i * 10 + 10)))
    assert t.file_count() == 5
    out = t.optimize()
    assert out["files_removed"] == 5 and out["files_added"] == 1
    assert t.file_count() == 1 and t.count() == 50


def test_vacuum_dry_run_then_delete(uri):
    t = tarn.Table.create(uri, data=sales(range(10)))
    t.overwrite(sales(range(5)))
    time.sleep(0.05)  # past the removal's millisecond, so a zero retention covers it
    dry = t.vacuum(retention_hours=0, enforce_retention=False)
    assert dry["dry_run"] and len(dry["files"]) == 1
    done = t.vacuum(retention_hours=0, enforce_retention=False, dry_run=False)
    assert done["files"] == dry["files"]
    assert t.vacuum(retention_hours=0, enforce_retention=False)["files"] == []
    with pytest.raises(tarn.InvalidArgument):
        t.vacuum(retention_hours=0)


def test_indices_and_text_match(uri):
    docs = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "body": ["the quick fox", "a lazy dog", "quick thinking"]})
    t = tarn.Table.create(uri, data=docs)
    info = t.create_index("body", "fulltext")
    assert info["kind"] == "fulltext"
    t.create_index("id", name="by_id")
    assert sorted(i["name"] for i in t.indices()) == sorted([info["name"], "by_id"])
    got = pa.table(t.scan(text_match=("body", "quick")))
    assert sorted(got.column("id").to_pylist()) == [1, 3]
    got = pa.table(t.scan(filter="id > 1", text_match=("body", "quick")))
    assert got.column("id").to_pylist() == [3]
    t.drop_index("by_id")
    assert [i["name"] for i in t.indices()] == [info["name"]]


def test_text_match_without_an_index_raises(table):
    with pytest.raises(tarn.InvalidExpression):
        pa.table(table.scan(text_match=("country", "NL")))


def test_app_transactions_write_once(table):
    first = table.append(sales([1000]), app_transaction=("loader", 7))
    assert not first["skipped"]
    again = table.append(sales([1000]), app_transaction=("loader", 7))
    assert again["skipped"]
    assert table.app_transaction_version("loader") == 7
    assert table.count("id = 1000") == 1
