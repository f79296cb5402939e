"""Two builds of `tarn-bench` on the same tables: `step query` (the seven LHBench
queries of `compare`, one fresh process per run) alternating which build goes first,
then the medians per query and the ratio first / second (above 1: the second is faster).

Usage: python3 ab_query.py RUNS BIN_A BIN_B TABLE...
(TABLE: a table `compare` made, e.g. /tmp/compare/compare/tables/tarn-base)
"""

import json
import statistics
import subprocess
import sys


def main():
    runs, bins, tables = int(sys.argv[1]), sys.argv[2:4], sys.argv[4:]
    times = {}
    for i in range(runs):
        for table in tables:
            for b in bins if i % 2 == 0 else bins[::-1]:
                out = subprocess.run(
                    [b, "step", "query", table], capture_output=True, text=True, check=True
                ).stdout
                report = json.loads(out.strip().splitlines()[-1])
                for q in report["queries"]:
                    times.setdefault((table, q["query"], b), []).append(q["ms"])
                times.setdefault((table, "peak MiB", b), []).append(report["peak_rss_mib"])
                times.setdefault((table, "all seven", b), []).append(report["ms"])
    print("| table | query | A | B | A / B |")
    print("| --- | --- | ---: | ---: | ---: |")
    for table in tables:
        for query in dict.fromkeys(q for (t, q, _) in times if t == table):
            a, b = (statistics.median(times[(table, query, x)]) for x in bins)
            print(f"| {table} | {query} | {a:.1f} | {b:.1f} | {a / b if b else 0:.2f} |")


if __name__ == "__main__":
    main()
