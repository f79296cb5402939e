"""Read a Delta table with DuckDB's delta extension for Tarn's integration tests.

Usage: duckdb_read.py TABLE_PATH OUT_PARQUET

Loads the `delta` extension from the `duckdb-ext-delta` wheel (unsigned
extensions allowed, since the wheel's file is loaded from disk), runs
`SELECT * FROM delta_scan(TABLE_PATH)` and writes the result to OUT_PARQUET
with DuckDB's own Parquet writer.

Prints one JSON line to stdout: {"rows": <row count>}
"""

import glob
import json
import os
import sys

import duckdb
import duckdb_ext


def delta_extension() -> str:
    """The path of the delta extension file the wheel ships."""
    for root in duckdb_ext.__path__:
        found = glob.glob(
            os.path.join(root, "extensions", "*", "*", "delta.duckdb_extension")
        )
        if found:
            return found[0]
    raise SystemExit("duckdb-ext-delta ships no delta.duckdb_extension")


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    table_path, out_path = sys.argv[1], sys.argv[2]
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    con.load_extension(delta_extension())
    scan = f"SELECT * FROM delta_scan('{table_path}')"
    con.execute(f"COPY ({scan}) TO '{out_path}' (FORMAT parquet)")
    rows = con.execute(f"SELECT count(*) FROM ({scan})").fetchone()[0]
    print(json.dumps({"rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
