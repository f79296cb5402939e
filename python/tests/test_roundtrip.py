"""Data in and out through pyarrow, Polars, pandas and DuckDB."""

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

import tarn
from conftest import sales


def ids(data):
    return sorted(pa.table(data).column("id").to_pylist())


def test_create_with_data_then_append_and_scan(uri):
    t = tarn.Table.create(uri, data=sales(range(3)))
    assert t.version == 0
    out = t.append(sales(range(3, 5)))
    assert out["version"] == 1 and out["rows_written"] == 2
    assert ids(t.scan()) == [0, 1, 2, 3, 4]
    assert tarn.Table.open(uri).version == 1


def test_create_with_schema_and_partitions(uri):
    schema = sales([]).schema
    t = tarn.Table.create(uri, schema, partition_by=["country"], properties={"delta.appendOnly": "false"})
    assert t.partition_columns == ["country"]
    assert t.schema().names == ["id", "country", "amount"]
    t.append(sales(range(4), "NL"))
    t.append(sales(range(4, 6), "FR"))
    assert ids(t.scan(filter="country = 'FR'")) == [4, 5]
    assert t.file_count() == 2


def test_scan_columns_filter_limit(table):
    got = pa.table(table.scan(columns=["id", "amount"], filter="id >= 150 AND country = 'FR'"))
    assert got.column_names == ["id", "amount"]
    assert sorted(got.column("id").to_pylist()) == list(range(150, 200))
    assert pa.table(table.scan(limit=7)).num_rows == 7
    assert table.count() == 200
    assert table.count("id < 10") == 10
    assert table.scan(filter="id < 10").count() == 10


def test_limits_hold_for_counts_and_empty_scans(table):
    assert table.scan(limit=7).count() == 7
    assert table.scan(filter="id < 3", limit=7).count() == 3
    assert pa.table(table.scan(filter="id < 0", limit=5)).num_rows == 0
    assert pa.table(table.scan(filter="id < 3", limit=5)).num_rows == 3


def test_an_empty_scan_keeps_its_schema(table):
    got = pa.table(table.scan(columns=["amount", "id"], filter="id < 0"))
    assert got.num_rows == 0
    assert got.column_names == ["amount", "id"]


def test_a_scan_is_read_again_from_the_start(table):
    scan = table.scan(filter="id < 5")
    assert ids(scan) == ids(scan) == [0, 1, 2, 3, 4]


def test_polars_in_and_out(uri):
    df = pl.DataFrame({"id": [1, 2, 3], "name": ["a", "b", "c"]})
    t = tarn.Table.create(uri, data=df)
    t.append(pl.DataFrame({"id": [4], "name": ["d"]}))
    out = t.to_polars(filter="id > 1")
    assert isinstance(out, pl.DataFrame)
    assert sorted(out["name"].to_list()) == ["b", "c", "d"]
    assert pl.DataFrame(t.scan(columns=["id"])).sort("id")["id"].to_list() == [1, 2, 3, 4]


def test_pandas_in(uri):
    df = pd.DataFrame({"id": [1, 2], "x": [0.5, 1.5]})
    t = tarn.Table.create(uri, data=df)
    assert t.to_pyarrow().sort_by("id").column("x").to_pylist() == [0.5, 1.5]


def test_duckdb_in_and_out(uri, table):
    con = duckdb.connect()
    rel = con.sql("SELECT range AS id, 'DE' AS country, CAST(range * 1.5 AS DOUBLE) AS amount FROM range(1000, 1010)")
    table.append(rel)
    scan = table.scan(filter="country = 'DE'")
    got = con.sql("SELECT count(*), min(id), max(id) FROM scan").fetchall()
    assert got == [(10, 1000, 1009)]


def test_a_stream_is_written_as_it_arrives(uri):
    schema = sales([]).schema
    batches = (sales(range(i * 1000, (i + 1) * 1000)).to_batches()[0] for i in range(20))
    reader = pa.RecordBatchReader.from_batches(schema, batches)
    t = tarn.Table.create(uri, schema)
    out = t.append(reader)
    assert out["rows_written"] == 20_000
    assert t.count() == 20_000


def test_to_reader_streams_batches(table):
    reader = table.scan(columns=["id"]).to_reader()
    assert isinstance(reader, pa.RecordBatchReader)
    assert sum(b.num_rows for b in reader) == 200


def test_overwrite_and_replace_where(uri):
    t = tarn.Table.create(uri, sales([]).schema, partition_by=["country"])
    t.append(sales(range(3), "NL"))
    t.append(sales(range(3, 6), "FR"))
    t.overwrite(sales([10, 11], "NL"), replace_where="country = 'NL'")
    assert ids(t.scan()) == [3, 4, 5, 10, 11]
    t.overwrite(sales([42], "FR"))
    assert ids(t.scan()) == [42]


def test_schema_merge_adds_a_column(uri):
    t = tarn.Table.create(uri, data=pa.table({"id": [1]}))
    t.append(pa.table({"id": [2], "extra": ["x"]}), schema_mode="merge")
    got = t.to_pyarrow().sort_by("id")
    assert got.column("extra").to_pylist() == [None, "x"]


@pytest.mark.parametrize("memory", ["memory://py-roundtrip"])
def test_memory_tables(memory):
    t = tarn.Table.create(memory, data=pa.table({"id": [1, 2]}))
    assert t.count() == 2
