"""Answer a SQL query over a Delta table with DuckDB, for Tarn's SQL tests.

Usage: duckdb_query.py TABLE_PATH SQL OUT_PARQUET [STATEMENT...]

Loads the `delta` extension from the `duckdb-ext-delta` wheel (unsigned
extensions allowed, since the wheel's file is loaded from disk), makes the
table the view `t` (`delta_scan(TABLE_PATH)`), runs each STATEMENT in order
(for example to copy `t` into a table and MERGE into it), then runs SQL and
writes its answer to OUT_PARQUET with DuckDB's own Parquet writer.

Prints one JSON line to stdout: {"rows": <row count>}
"""

import json
import sys

import duckdb

from duckdb_read import delta_extension


def main() -> int:
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    table_path, sql, out_path = sys.argv[1], sys.argv[2], sys.argv[3]
    statements = sys.argv[4:]
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    con.load_extension(delta_extension())
    con.execute(f"CREATE VIEW t AS SELECT * FROM delta_scan('{table_path}')")
    for statement in statements:
        con.execute(statement)
    con.execute(f"COPY ({sql}) TO '{out_path}' (FORMAT parquet)")
    rows = con.execute(f"SELECT count(*) FROM ({sql})").fetchone()[0]
    print(json.dumps({"rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
