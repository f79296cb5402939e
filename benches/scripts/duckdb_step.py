"""The read steps of `tarn-bench compare` on DuckDB, in a fresh process, printing one
JSON line.

Usage:
    duckdb_step.py query   TABLE QUERIES.json   the queries on a Delta table, through
                                                DuckDB's `delta` extension
    duckdb_step.py parquet FILES.json QUERIES.json
                                                the same queries over the table's data
                                                files with DuckDB's own `read_parquet`
                                                (no log, no deletion vectors): the
                                                speed of this machine for the scan

QUERIES.json lists {"query": name, "statement": SQL over a table `t`}; FILES.json the
data files' paths. The table is attached (its snapshot pinned) or the view made before
the clock starts, once per process, as a long-lived user process would; each query is
then timed on its own. The JSON line holds `ms` (all queries), `peak_rss_mib` and
`queries`: [{"query", "ms", "value"}]. Needs the `duckdb-ext-delta` wheel (its extension
file is loaded with unsigned extensions allowed).
"""

import json
import sys
import time

import duckdb
from peak import peak_mib, reset_peak
from tpcds_peer import extension


def main(argv) -> int:
    if len(argv) != 4 or argv[1] not in ("query", "parquet"):
        print(__doc__, file=sys.stderr)
        return 2
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    if argv[1] == "query":
        con.load_extension(extension("delta"))
        path = argv[2].replace("'", "''")
        con.execute(f"ATTACH '{path}' AS t (TYPE delta, PIN_SNAPSHOT)")
    else:
        with open(argv[2]) as f:
            files = ", ".join("'" + p.replace("'", "''") + "'" for p in json.load(f))
        con.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet([{files}])")
    with open(argv[3]) as f:
        queries = json.load(f)
    out = []
    reset_peak()
    started = time.perf_counter()
    for q in queries:
        t0 = time.perf_counter()
        value = con.execute(q["statement"]).fetchone()[0]
        ms = (time.perf_counter() - t0) * 1e3
        out.append({"query": q["query"], "ms": ms, "value": None if value is None else float(value)})
    ms = (time.perf_counter() - started) * 1e3
    print(json.dumps({"ms": ms, "peak_rss_mib": peak_mib(), "queries": out}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
