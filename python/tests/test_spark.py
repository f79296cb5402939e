"""Tables shared with Spark: Spark's golden tables read here as Spark wrote them, and a
table written here that the Rust side of the suite (`tests/tests/interop/python.rs`)
reads with Spark at every version."""

import os
import pathlib

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tarn
from conftest import sales

GOLDEN = pathlib.Path(
    os.environ.get("TARN_GOLDEN_DIR")
    or pathlib.Path(__file__).resolve().parents[3] / "shared" / "delta-golden"
)


@pytest.mark.parametrize(
    "name", ["dv-partitioned-with-checkpoint", "dv-with-columnmapping", "table-with-columnmapping-mode-name"]
)
def test_spark_golden_tables_read_as_spark_wrote_them(name):
    table = GOLDEN / name
    assert table.is_dir(), f"no golden table at {table}: set TARN_GOLDEN_DIR"
    got = tarn.Table.open(str(table / "delta")).to_pyarrow()
    expected = pq.read_table(str(table / "expected"))
    assert got.num_rows == expected.num_rows
    cols = expected.column_names
    key = lambda t: sorted(map(str, t.select(cols).to_pylist()))
    assert key(got) == key(expected)


def test_write_a_table_for_spark(tmp_path):
    root = pathlib.Path(os.environ.get("TARN_PY_SPARK_DIR") or tmp_path)
    uri = str(root / "written-by-python")
    t = tarn.Table.create(
        uri,
        data=sales(range(50)),
        partition_by=["country"],
        properties={"delta.enableDeletionVectors": "true"},
    )
    t.append(sales(range(50, 80), "FR"))
    t.delete("id BETWEEN 10 AND 19 OR id = 60", strategy="merge-on-read")
    t.update({"amount": "amount + 1"}, where="id > 70", strategy="merge-on-read")
    assert t.version == 3
    assert t.count() == 80 - 11
