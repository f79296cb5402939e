"""One measured step of `tarn-bench python` in a fresh process, through the `tarn` Python
package or through `deltalake` (delta-rs's), printing one JSON line.

Usage:
    python_step.py ENGINE load   INPUT.parquet TABLE        write INPUT as a new table
    python_step.py ENGINE append TABLE INPUT.parquet        append INPUT to the table
    python_step.py ENGINE scan   TABLE TO                   read every row into TO:
                                                            pyarrow, polars or duckdb
    python_step.py ENGINE merge  TABLE SOURCE.parquet [S]   upsert SOURCE on `key`
    python_step.py ENGINE delete TABLE PREDICATE [S]        delete the matching rows

ENGINE is `tarn` or `deltalake`; S is Tarn's strategy, `cow` (copy-on-write, the default)
or `mor` (merge-on-read), and is ignored by `deltalake`, which has copy-on-write only.

Inputs are read into memory and the table opened before the clock starts, as in
`deltars_step.py` and Tarn's Rust steps. A scan into pyarrow or Polars builds the whole
table in memory; a scan into DuckDB runs an aggregate over every column, reading the
stream as it comes (for `deltalake`, its pyarrow dataset), so its peak memory shows
whether the rows were held. The JSON line holds `ms` (the timed part), `peak_rss_mib`
(the process's peak resident memory during the timed part, on Linux), `start_rss_mib`
(its resident memory when the clock started) and what the step did (`rows`, `updated`,
`inserted`, `deleted`), so the harness can check both engines did the same work. The
package's scan into pyarrow or Polars also reports `bytes`, the Arrow memory its result
holds: the peak's rise over that is what the scan needed beyond the rows it handed over.
"""

import json
import os
import sys

import pyarrow.parquet as pq
from peak import start_mib, timed

STRATEGIES = {"cow": "copy-on-write", "mor": "merge-on-read"}
# Every column in the aggregate, so DuckDB decodes all of them.
AGGREGATE = "SELECT count(*), sum(key), sum(value), max(value2), sum(part) FROM data"


def tarn_step(op, args):
    import tarn

    if op == "load":
        data = pq.read_table(args[0])
        props = {"delta.enableDeletionVectors": "true"}
        table, ms, peak = timed(
            lambda: tarn.Table.create(args[1], data=data, properties=props)
        )
        return {"rows": table.count()}, ms, peak
    table = tarn.Table.open(args[0])
    if op == "append":
        data = pq.read_table(args[1])
        out, ms, peak = timed(lambda: table.append(data))
        return {"rows": out["rows_written"]}, ms, peak
    if op == "scan":
        to = args[1]
        if to == "pyarrow":
            out, ms, peak = timed(lambda: table.scan().to_pyarrow())
            return {"rows": out.num_rows, "bytes": out.nbytes}, ms, peak
        if to == "polars":
            import polars  # imported before the clock, as deltalake's side does

            out, ms, peak = timed(lambda: table.scan().to_polars())
            # The frame's own buffers, seen through a zero-copy export.
            held = out.to_arrow(compat_level=polars.CompatLevel.newest()).nbytes
            return {"rows": out.height, "bytes": held}, ms, peak
        if to == "duckdb":
            import duckdb

            def aggregate():
                data = table.scan()  # noqa: F841 (read by name in the query)
                return duckdb.sql(AGGREGATE).fetchone()

            out, ms, peak = timed(aggregate)
            return {"rows": out[0]}, ms, peak
        raise SystemExit(f"scan into {to!r}: pyarrow, polars or duckdb")
    strategy = STRATEGIES[args[2] if len(args) > 2 else "cow"]
    if op == "merge":
        source = pq.read_table(args[1])

        def merge():
            return (
                table.merge(source, on=["key"], strategy=strategy)
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute()
            )

        out, ms, peak = timed(merge)
        return {"updated": out["rows_updated"], "inserted": out["rows_inserted"]}, ms, peak
    if op == "delete":
        out, ms, peak = timed(lambda: table.delete(args[1], strategy=strategy))
        return {"deleted": out["rows_deleted"]}, ms, peak
    raise SystemExit(f"unknown step {op!r}")


def deltalake_step(op, args):
    from deltalake import DeltaTable, write_deltalake

    if op == "load":
        data = pq.read_table(args[0])
        _, ms, peak = timed(lambda: write_deltalake(args[1], data))
        return {"rows": DeltaTable(args[1]).to_pyarrow_dataset().count_rows()}, ms, peak
    dt = DeltaTable(args[0])
    if op == "append":
        data = pq.read_table(args[1])
        _, ms, peak = timed(lambda: write_deltalake(dt, data, mode="append"))
        return {"rows": data.num_rows}, ms, peak
    if op == "scan":
        to = args[1]
        if to == "pyarrow":
            out, ms, peak = timed(dt.to_pyarrow_table)
            return {"rows": out.num_rows}, ms, peak
        if to == "polars":
            import polars as pl

            out, ms, peak = timed(lambda: pl.from_arrow(dt.to_pyarrow_table()))
            return {"rows": out.height}, ms, peak
        if to == "duckdb":
            import duckdb

            def aggregate():
                data = dt.to_pyarrow_dataset()  # noqa: F841 (read by name in the query)
                return duckdb.sql(AGGREGATE).fetchone()

            out, ms, peak = timed(aggregate)
            return {"rows": out[0]}, ms, peak
        raise SystemExit(f"scan into {to!r}: pyarrow, polars or duckdb")
    if op == "merge":
        source = pq.read_table(args[1])

        def merge():
            return (
                dt.merge(source, "t.key = s.key", source_alias="s", target_alias="t")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute()
            )

        out, ms, peak = timed(merge)
        return {
            "updated": out.get("num_target_rows_updated"),
            "inserted": out.get("num_target_rows_inserted"),
        }, ms, peak
    if op == "delete":
        out, ms, peak = timed(lambda: dt.delete(args[1]))
        return {"deleted": out.get("num_deleted_rows")}, ms, peak
    raise SystemExit(f"unknown step {op!r}")


def main(argv):
    if len(argv) < 4:
        raise SystemExit(__doc__)
    engine, op, args = argv[1], argv[2], argv[3:]
    steps = {"tarn": tarn_step, "deltalake": deltalake_step}
    if engine not in steps:
        raise SystemExit(f"unknown engine {engine!r}: tarn or deltalake")
    result, ms, peak = steps[engine](op, args)
    result.update({"ms": ms, "peak_rss_mib": peak, "start_rss_mib": start_mib()})
    print(json.dumps(result), flush=True)
    if engine == "deltalake":
        # Its pyarrow dataset's threads now and then abort the interpreter's teardown
        # ("terminate called without an active exception"); the step is done.
        os._exit(0)


if __name__ == "__main__":
    main(sys.argv)
