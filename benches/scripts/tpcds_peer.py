"""The TPC-DS side of `tarn-bench tpcds` for the peers, each in a process of its own.

Usage:
    tpcds_peer.py queries OUT_DIR
        DuckDB's TPC-DS queries (the `tpcds` extension's `tpcds_queries()`) into
        OUT_DIR/queries.json.
    tpcds_peer.py duckdb ROOT OUT_DIR RUNS
        Runs every query in OUT_DIR/queries.json with DuckDB's `delta` extension over the
        tables in ROOT (one folder per TPC-DS table), RUNS times each; then writes each
        answer, untimed, to OUT_DIR/duckdb/qN.parquet.
    tpcds_peer.py deltars ROOT OUT_DIR RUNS
        The same with delta-rs (`deltalake`'s QueryBuilder: DataFusion over delta-rs),
        tables registered once before the queries, as a user would.
    tpcds_peer.py refresh ROOT SOURCES
        LHBench's refresh with delta-rs: for each entry of SOURCES/merges.json, merges
        the Delta table SOURCES/<table> into ROOT/<table> on its keys (an `op` column of `D`
        deletes the match, other matches update the `set` column, unmatched rows are
        inserted). Prints one JSON line per table: {"table", "ms", "rows", "peak_rss_mib"},
        rows being the target rows updated, deleted and inserted.

Each peer's address space is capped at TPCDS_PEER_MEMORY_GIB (default 16) GiB, so a query
that would exhaust the machine fails instead. A last argument AFTER_NR runs only the queries numbered above it (the harness restarts a
peer that died, say killed for memory, after the query that killed it).

Prints one JSON line per query: {"nr", "ms": [per run], "rows", "error", "peak_mib"}
(the process's peak resident memory over the query's runs, reset before it), then
{"peak_rss_mib"}. The DuckDB modes need the `duckdb-ext-delta` and `duckdb-ext-tpcds`
wheels (their extension files are loaded with unsigned extensions allowed).
"""

import glob
import json
import os
import resource
import sys
import time

from peak import peak_mib, reset_peak


def extension(name: str) -> str:
    import duckdb_ext

    for root in duckdb_ext.__path__:
        found = glob.glob(os.path.join(root, "extensions", "*", "*", f"{name}.duckdb_extension"))
        if found:
            return found[0]
    raise SystemExit(f"no {name}.duckdb_extension in the duckdb_ext wheels")


def duckdb_connection():
    import duckdb

    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    con.load_extension(extension("delta"))
    con.load_extension(extension("tpcds"))
    return con


def tables(root: str):
    return sorted(
        d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d, "_delta_log"))
    )


def queries(out_dir: str, after: int = 0):
    with open(os.path.join(out_dir, "queries.json")) as f:
        return [q for q in json.load(f) if q["nr"] > after]


def timed(run, runs: int, nr: int):
    times, rows = [], None
    reset_peak()
    try:
        for _ in range(runs):
            start = time.perf_counter()
            n = run()
            times.append((time.perf_counter() - start) * 1000.0)
            rows = n
        line = {"nr": nr, "ms": times, "rows": rows, "error": None}
    except Exception as e:  # a query an engine cannot run is reported, not fatal
        line = {"nr": nr, "ms": [], "rows": None, "error": str(e)[:300]}
    line["peak_mib"] = peak_mib()
    print(json.dumps(line), flush=True)


def refresh(root: str, sources: str):
    from deltalake import DeltaTable

    with open(os.path.join(sources, "merges.json")) as f:
        merges = json.load(f)
    for m in merges:
        table = m["table"]
        # The source is read and the table opened before the clock starts. The merge
        # runs with delta-rs's defaults (streamed source), as a user's first call would.
        source = DeltaTable(os.path.join(sources, table)).to_pyarrow_table()
        dt = DeltaTable(os.path.join(root, table))
        on = " AND ".join(f"t.{k} = s.{k}" for k in m["keys"])
        reset_peak()
        start = time.perf_counter()
        metrics = (
            dt.merge(source, on, source_alias="s", target_alias="t")
            .when_matched_delete(predicate="s.op = 'D'")
            .when_matched_update(updates={m["set"]: f"s.{m['set']}"})
            .when_not_matched_insert(updates={c: f"s.{c}" for c in m["columns"]})
            .execute()
        )
        ms = (time.perf_counter() - start) * 1000.0
        rows = sum(
            metrics.get(k) or 0
            for k in ("num_target_rows_updated", "num_target_rows_deleted", "num_target_rows_inserted")
        )
        print(json.dumps({"table": table, "ms": ms, "rows": rows, "peak_rss_mib": peak_mib()}), flush=True)


def cap_memory():
    """Past this address space a peer fails rather than take the machine down."""
    limit = int(float(os.environ.get("TPCDS_PEER_MEMORY_GIB", "16")) * (1 << 30))
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def main() -> int:
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "refresh" and len(sys.argv) == 4:
        cap_memory()
        refresh(sys.argv[2], sys.argv[3])
        return 0
    if mode == "queries" and len(sys.argv) == 3:
        con = duckdb_connection()
        listed = con.execute("SELECT query_nr, query FROM tpcds_queries() ORDER BY query_nr").fetchall()
        with open(os.path.join(sys.argv[2], "queries.json"), "w") as f:
            json.dump([{"nr": nr, "sql": sql} for nr, sql in listed], f)
        print(json.dumps({"queries": len(listed)}))
        return 0
    if mode not in ("duckdb", "deltars") or len(sys.argv) not in (5, 6):
        print(__doc__, file=sys.stderr)
        return 2
    root, out_dir, runs = sys.argv[2], sys.argv[3], int(sys.argv[4])
    cap_memory()
    after = int(sys.argv[5]) if len(sys.argv) == 6 else 0
    reset_peak()
    if mode == "duckdb":
        con = duckdb_connection()
        for name in tables(root):
            path = os.path.join(root, name)
            con.execute(f"CREATE VIEW {name} AS SELECT * FROM delta_scan('{path}')")
        answers = os.path.join(out_dir, "duckdb")
        os.makedirs(answers, exist_ok=True)
        for q in queries(out_dir, after):
            sql = q["sql"].strip().rstrip(";")

            def run(sql=sql):
                return len(con.execute(sql).fetchall())

            timed(run, runs, q["nr"])
            # The answer, untimed, written by DuckDB's own Parquet writer.
            try:
                out = os.path.join(answers, f"q{q['nr']}.parquet")
                con.execute(f"COPY ({sql}) TO '{out}' (FORMAT parquet)")
            except Exception:
                pass
    else:
        from deltalake import DeltaTable, QueryBuilder

        qb = QueryBuilder()
        for name in tables(root):
            qb.register(name, DeltaTable(os.path.join(root, name)))
        for q in queries(out_dir, after):
            def run(sql=q["sql"]):
                return sum(b.num_rows for b in qb.execute(sql))

            timed(run, runs, q["nr"])
    print(json.dumps({"peak_rss_mib": peak_mib()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
