"""DELETE, UPDATE and MERGE, copy-on-write and merge-on-read."""

import pyarrow as pa
import pytest

import tarn
from conftest import sales

STRATEGIES = ["copy-on-write", "merge-on-read"]


def rows(t, filter=None):
    return {r["id"]: r for r in t.to_pyarrow(filter=filter).to_pylist()}


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_delete(table, strategy):
    out = table.delete("id < 50", strategy=strategy)
    assert out["version"] == 2 and out["rows_deleted"] == 50
    if strategy == "merge-on-read":
        assert out["deletion_vectors_written"] >= 1
    else:
        assert out["deletion_vectors_written"] == 0
    assert sorted(rows(table)) == list(range(50, 200))
    assert tarn.Table.open(table.uri).count() == 150


def test_delete_everything(table):
    table.delete()
    assert table.count() == 0


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_update(table, strategy):
    out = table.update({"amount": "amount * 2", "country": "'XX'"}, where="id BETWEEN 10 AND 19", strategy=strategy)
    assert out["rows_updated"] == 10
    got = rows(table)
    assert len(got) == 200
    assert got[10]["amount"] == 30.0 and got[10]["country"] == "XX"
    assert got[20]["amount"] == 30.0 and got[20]["country"] == "NL"


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_merge_upsert(table, strategy):
    source = pa.table(
        {
            "id": pa.array([5, 6, 500], pa.int64()),
            "country": ["DE", "DE", "DE"],
            "amount": [0.0, 0.0, 0.0],
        }
    )
    out = (
        table.merge(source, on=["id"], strategy=strategy)
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    assert (out["rows_updated"], out["rows_inserted"]) == (2, 1)
    got = rows(table)
    assert len(got) == 201
    assert got[5]["country"] == "DE" and got[500]["amount"] == 0.0
    assert got[7]["country"] == "NL"


def test_merge_clauses_with_conditions(table):
    source = pa.table({"id": pa.array([1, 2, 3, 900], pa.int64()), "amount": [10.0, 20.0, 30.0, 90.0]})
    out = (
        table.merge(source, on=["id"], strategy="merge-on-read")
        .when_matched_delete("source.amount > 25")
        .when_matched_update({"amount": "source.amount + target.amount"})
        .when_not_matched_insert({"id": "source.id", "amount": "source.amount", "country": "'NEW'"})
        .when_not_matched_by_source_delete("target.id >= 100")
        .execute()
    )
    assert out["rows_deleted"] == 1 + 100 and out["rows_updated"] == 2 and out["rows_inserted"] == 1
    got = rows(table)
    assert 3 not in got and 150 not in got
    assert got[1]["amount"] == 10.0 + 1.5 and got[900]["country"] == "NEW"
    assert len(got) == 100 - 1 + 1


def test_a_merge_runs_once_and_needs_a_clause(table):
    builder = table.merge(pa.table({"id": pa.array([1], pa.int64())}), on=["id"])
    with pytest.raises(tarn.InvalidArgument, match="at least one"):
        builder.execute()
    out = builder.when_matched_delete().execute()
    assert out["rows_deleted"] == 1
    with pytest.raises(tarn.InvalidArgument, match="already run"):
        builder.execute()
    with pytest.raises(tarn.InvalidArgument, match="no key column"):
        table.merge(pa.table({"id": pa.array([1], pa.int64())}), on=[])


def test_a_merge_matching_twice_fails_and_commits_nothing(table):
    source = pa.table({"id": pa.array([1, 1], pa.int64()), "country": ["A", "B"], "amount": [1.0, 2.0]})
    with pytest.raises(tarn.TarnError):
        table.merge(source, on=["id"]).when_matched_update_all().execute()
    assert tarn.Table.open(table.uri).version == 1
