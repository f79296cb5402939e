"""Write a small deterministic Delta table with delta-rs (the `deltalake`
Python package) so Tarn's integration tests can read it back.

Usage: write_table.py TABLE_PATH

TABLE_PATH must not already contain a Delta table. Commits, in order:

    v0  create: 60 rows (id 0..59), partitioned by `part`
    v1  append: 40 rows (id 60..99)
    v2  delete: DeltaTable.delete("id < 10")  -> remove actions (+ rewritten adds)
        create_checkpoint() at v2  -> 00..02.checkpoint.parquet + _last_checkpoint
    v3  append: 10 rows (id 100..109), after the checkpoint

Schema: id int64 NOT NULL, part string (partition column), value float64,
name string, ts timestamp[us, tz=UTC]. `part` cycles through "a", "b" and
"x y=z" (space and '=' exercise partition-path escaping). Row i has
value = i * 1.5, name = "name_<i>" (null when i % 7 == 3), and
ts = 2024-01-01T00:00:00Z + i hours.

Prints one JSON line: {"version": <final version>, "rows": <live row count>}.
"""

import json
import sys
from datetime import datetime, timedelta, timezone

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

PARTS = ["a", "b", "x y=z"]
BASE_TS = datetime(2024, 1, 1, tzinfo=timezone.utc)
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("part", pa.string()),
        pa.field("value", pa.float64()),
        pa.field("name", pa.string()),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
    ]
)


def rows(start: int, stop: int) -> pa.Table:
    """Deterministic rows with ids in [start, stop)."""
    ids = list(range(start, stop))
    return pa.Table.from_pydict(
        {
            "id": ids,
            "part": [PARTS[i % len(PARTS)] for i in ids],
            "value": [i * 1.5 for i in ids],
            "name": [None if i % 7 == 3 else f"name_{i}" for i in ids],
            "ts": [BASE_TS + timedelta(hours=i) for i in ids],
        },
        schema=SCHEMA,
    )


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    path = sys.argv[1]

    # v0: create (mode="error" refuses to touch an existing table).
    write_deltalake(path, rows(0, 60), partition_by=["part"], mode="error")
    # v1: append.
    write_deltalake(path, rows(60, 100), mode="append")

    # v2: delete ids 0..9, then checkpoint that version.
    dt = DeltaTable(path)
    dt.delete("id < 10")
    dt.create_checkpoint()

    # v3: one more append after the checkpoint.
    write_deltalake(path, rows(100, 110), mode="append")

    dt = DeltaTable(path)
    expected = 110 - 10
    # Sanity check against delta-rs itself before reporting.
    actual = dt.count()
    if actual != expected:
        print(f"row count mismatch: expected {expected}, got {actual}", file=sys.stderr)
        return 1

    print(json.dumps({"version": dt.version(), "rows": expected}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
