"""The directory catalog, and SQL through DataFusion."""

import pyarrow as pa
import pytest

import tarn
from conftest import sales


def test_catalog_namespaces_and_tables(tmp_path):
    cat = tarn.Catalog.open(str(tmp_path / "cat"))
    cat.create_namespace("sales")
    cat.create_namespace("sales.eu", description="Europe")
    cat.create_namespace("sales", exist_ok=True)
    with pytest.raises(tarn.TableAlreadyExists):
        cat.create_namespace("sales")
    assert cat.list_namespaces() == ["sales"]
    assert cat.list_namespaces("sales") == ["sales.eu"]
    t = cat.create_table(["sales", "eu", "orders"], sales([]).schema)
    t.append(sales(range(5)))
    assert cat.list_tables("sales.eu") == ["sales.eu.orders"]
    assert cat.table_exists("sales.eu.orders")
    assert tarn.Catalog.open(str(tmp_path / "cat")).load_table("sales.eu.orders").count() == 5
    with pytest.raises(tarn.TableNotFound):
        cat.load_table("sales.eu.missing")
    cat.drop_table("sales.eu.orders")
    assert not cat.table_exists("sales.eu.orders")
    with pytest.raises(tarn.TarnError):
        cat.drop_namespace("sales")
    cat.drop_namespace("sales", cascade=True)
    assert cat.list_namespaces() == []


def test_sql_query_over_tables(table, tmp_path):
    other = tarn.Table.create(str(tmp_path / "names"), data=pa.table({"country": ["NL", "FR"], "name": ["Netherlands", "France"]}))
    reader = tarn.sql(
        "SELECT n.name, count(*) AS c, sum(s.amount) AS total FROM s JOIN n ON s.country = n.country "
        "GROUP BY n.name ORDER BY n.name",
        tables={"s": table, "n": other},
    )
    assert isinstance(reader, pa.RecordBatchReader)
    got = reader.read_all().to_pylist()
    assert [(r["name"], r["c"]) for r in got] == [("France", 100), ("Netherlands", 100)]
    assert got[1]["total"] == sum(i * 1.5 for i in range(100))


def test_sql_changes_commit_before_returning(table):
    tarn.sql("DELETE FROM s WHERE id >= 100", tables={"s": table})
    assert tarn.Table.open(table.uri).count() == 100
    tarn.sql("INSERT INTO s VALUES (1000, 'BE', 1.0)", tables={"s": table})
    assert tarn.Table.open(table.uri).count("country = 'BE'") == 1


def test_sql_over_a_catalog(tmp_path):
    cat = tarn.Catalog.open(str(tmp_path / "cat"))
    cat.create_namespace("shop")
    cat.create_table("shop.items", sales([]).schema).append(sales(range(7)))
    got = tarn.sql("SELECT count(*) AS c FROM c.shop.items", catalogs={"c": cat}).read_all()
    assert got.column("c").to_pylist() == [7]


def test_sql_errors_keep_their_kind(tmp_path, table):
    cat = tarn.Catalog.open(str(tmp_path / "cat"))
    cat.create_namespace("shop")
    cat.create_table("shop.items", sales([]).schema)
    # DataFusion finds the name taken before the catalog is asked.
    with pytest.raises(tarn.SqlError, match="already exists"):
        tarn.sql("CREATE TABLE c.shop.items (id BIGINT)", catalogs={"c": cat})
    # A Tarn error inside DataFusion's keeps Tarn's kind.
    checked = tarn.Table.create(
        str(tmp_path / "checked"),
        data=pa.table({"id": pa.array([1], pa.int64())}),
        properties={"delta.constraints.positive": "id > 0"},
    )
    with pytest.raises(tarn.ConstraintViolated, match="positive"):
        tarn.sql("INSERT INTO s VALUES (-5)", tables={"s": checked})
    with pytest.raises(tarn.ConstraintViolated):
        checked.append(pa.table({"id": pa.array([-1], pa.int64())}))
    assert tarn.Table.open(checked.uri).version == 0


def test_bad_sql_raises(table):
    with pytest.raises(tarn.SqlError):
        tarn.sql("SELEC nothing", tables={"s": table})
    with pytest.raises(tarn.SqlError):
        tarn.sql("SELECT missing FROM s", tables={"s": table})
