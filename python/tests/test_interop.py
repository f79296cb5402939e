"""Tables written from Python read by delta-rs (`deltalake`), and theirs read here."""

import deltalake
import pyarrow as pa

import tarn
from conftest import sales


def test_deltalake_reads_a_table_written_here(table):
    table.delete("id < 10", strategy="merge-on-read")
    table.update({"amount": "0.0"}, where="id = 150", strategy="merge-on-read")
    theirs = deltalake.DeltaTable(table.uri)
    assert theirs.version() == table.version
    # deltalake's pyarrow reader refuses deletion vectors; its DataFusion one reads them.
    got = pa.table(deltalake.QueryBuilder().register("t", theirs).execute("SELECT * FROM t").read_all())
    by_id = lambda rows: sorted(rows, key=lambda r: r["id"])
    assert by_id(got.to_pylist()) == by_id(table.to_pyarrow().to_pylist())
    assert got.num_rows == 190


def test_a_deltalake_table_reads_here(tmp_path):
    uri = str(tmp_path / "theirs")
    deltalake.write_deltalake(uri, sales(range(10)))
    deltalake.write_deltalake(uri, sales(range(10, 15), "FR"), mode="append")
    deltalake.DeltaTable(uri).delete("id < 3")
    t = tarn.Table.open(uri)
    assert t.version == 2
    got = t.to_pyarrow().sort_by("id")
    assert got.column("id").to_pylist() == list(range(3, 15))
    t.append(sales([99]))
    assert deltalake.DeltaTable(uri).to_pyarrow_table().num_rows == 13
    assert deltalake.DeltaTable(uri).version() == 3
