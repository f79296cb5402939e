"""Write a Parquet file whose timestamps are INT96, as Spark writes them by default.

Usage: write_int96.py OUT_PARQUET

Columns: `id` (int64) and `ts` (INT96 timestamps, microsecond values), rows:
    1  0001-01-01 00:00:00
    2  9999-12-31 23:59:59.999999
    3  1970-01-01 00:00:00.000001
    4  1677-09-21 00:12:43.145224   (just before the nanosecond range starts)
    5  2262-04-11 23:47:16.854776   (just after it ends)
    6  null
"""

import datetime
import sys

import pyarrow as pa
import pyarrow.parquet as pq


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    utc = datetime.timezone.utc
    values = [
        datetime.datetime(1, 1, 1, tzinfo=utc),
        datetime.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=utc),
        datetime.datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=utc),
        datetime.datetime(1677, 9, 21, 0, 12, 43, 145224, tzinfo=utc),
        datetime.datetime(2262, 4, 11, 23, 47, 16, 854776, tzinfo=utc),
        None,
    ]
    table = pa.table(
        {
            "id": pa.array([1, 2, 3, 4, 5, 6], pa.int64()),
            "ts": pa.array(values, pa.timestamp("us", tz="UTC")),
        }
    )
    pq.write_table(
        table, sys.argv[1], use_deprecated_int96_timestamps=True, store_schema=False
    )
    meta = pq.ParquetFile(sys.argv[1]).schema
    assert meta.column(1).physical_type == "INT96", meta
    return 0


if __name__ == "__main__":
    sys.exit(main())
