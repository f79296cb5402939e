"""One measured step of `tarn-bench compare` on delta-rs (the `deltalake` package: its
Rust core with DataFusion), in a fresh process, printing one JSON line.

Usage:
    deltars_step.py load  INPUT.parquet TABLE       write INPUT as a new table
    deltars_step.py merge TABLE SOURCE.parquet      upsert SOURCE on `key`
    deltars_step.py append TABLE INPUT.parquet      append INPUT to the table
    deltars_step.py query TABLE QUERIES.json        the read queries, one by one
    deltars_step.py open  TABLE                     a cold open and the list of its files

Inputs are read before the clock starts; the table is opened before it too, as Tarn's
side does, and for queries registered once in one `QueryBuilder`, as a long-lived user
process would (QUERIES.json lists {"query": name, "statement": SQL over a table `t`}). The JSON line holds `ms` (the timed part), `peak_rss_mib` (the process's
peak resident memory during the timed part, on Linux) and what the step did, so the
harness can check both engines did the same work.
"""

import json
import sys
import time

import pyarrow.parquet as pq
from deltalake import DeltaTable, QueryBuilder, write_deltalake
from peak import peak_mib, reset_peak, timed


def main(argv):
    op = argv[1]
    if op == "load":
        data = pq.read_table(argv[2])
        _, ms, peak = timed(lambda: write_deltalake(argv[3], data))
        result = {"rows": data.num_rows}
    elif op == "append":
        dt = DeltaTable(argv[2])
        data = pq.read_table(argv[3])
        _, ms, peak = timed(lambda: write_deltalake(dt, data, mode="append"))
        result = {"rows": data.num_rows}
    elif op == "merge":
        dt = DeltaTable(argv[2])
        source = pq.read_table(argv[3])

        def merge():
            return (
                dt.merge(source, "t.key = s.key", source_alias="s", target_alias="t")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute()
            )

        metrics, ms, peak = timed(merge)
        result = {
            "updated": metrics.get("num_target_rows_updated"),
            "inserted": metrics.get("num_target_rows_inserted"),
        }
    elif op == "query":
        dt = DeltaTable(argv[2])
        with open(argv[3]) as f:
            listed = json.load(f)
        builder = QueryBuilder().register("t", dt)
        queries = []
        reset_peak()
        started = time.perf_counter()
        for q in listed:
            name = q["query"]
            t0 = time.perf_counter()
            table = builder.execute(q["statement"]).read_all()
            value = table.column(0)[0].as_py()
            queries.append(
                {"query": name, "ms": (time.perf_counter() - t0) * 1e3, "value": value}
            )
        ms = (time.perf_counter() - started) * 1e3
        peak = peak_mib()
        result = {"queries": queries}
    elif op == "open":
        # Cold: a fresh process; the table and its list of files, checkpoint and all.
        dt, ms, peak = timed(lambda: DeltaTable(argv[2]))
        started = time.perf_counter()
        files = len(dt.file_uris())
        ms += (time.perf_counter() - started) * 1e3
        result = {"files": files}
    else:
        raise SystemExit(f"unknown step {op!r}; one of load, append, merge, query, open")
    result.update({"ms": ms, "peak_rss_mib": peak})
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv)
