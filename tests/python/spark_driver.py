"""A long-lived Spark session with Delta Lake for Tarn's integration tests.

Usage: spark_driver.py IVY_DIR WAREHOUSE_DIR

Starts one local SparkSession with the Delta extensions (the delta-spark jar is
resolved from Maven Central through `spark.jars.packages` into IVY_DIR), then
answers requests, one JSON object per line on standard input, with one JSON
object per line on standard output. Spark's own output (the JVM's stdout and
stderr) goes to standard error, so it never mixes with the answers.

Requests (every answer has "ok": true, or "ok": false and "error"):

  {"op": "ping"}
      -> {"ok": true, "spark": <version>, "delta": <version>}
  {"op": "sql", "sql": "..."}
      Runs one statement; answers its rows as JSON objects (values made
      JSON-safe: timestamps and dates as ISO text, decimals as text, binary as
      hex) -> {"ok": true, "rows": [...]}
  {"op": "read", "path": P, "out": O, "version": V?, "timestamp": T?}
      Reads the Delta table at P (optionally as of version V, or of timestamp
      text T) and writes its rows to the Parquet file O, with Arrow types
      normalised as read_table.py does -> {"ok": true, "rows": n}
  {"op": "history", "path": P}
      DESCRIBE HISTORY of the table at P, newest first, each row's
      operationParameters included -> {"ok": true, "rows": [...]}
"""

import datetime
import decimal
import json
import os
import shutil
import sys
import traceback


def start_session(ivy_dir: str, warehouse: str):
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master("local[2]")
        .appName("tarn-tests")
        .config("spark.jars.packages", "io.delta:delta-spark_4.2_2.13:4.4.0")
        .config("spark.jars.ivy", ivy_dir)
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config(
            "spark.sql.catalog.spark_catalog",
            "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        )
        .config("spark.sql.warehouse.dir", warehouse)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.databricks.delta.snapshotPartitions", "2")
        .config("spark.sql.shuffle.partitions", "2")
        # Proleptic Gregorian dates and times, whatever their age, both ways.
        .config("spark.sql.parquet.int96RebaseModeInWrite", "CORRECTED")
        .config("spark.sql.parquet.int96RebaseModeInRead", "CORRECTED")
        .config("spark.sql.parquet.datetimeRebaseModeInWrite", "CORRECTED")
        .config("spark.sql.parquet.datetimeRebaseModeInRead", "CORRECTED")
        # Tests vacuum and time-travel on young tables.
        .config("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def json_safe(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, datetime.datetime):
        return value.isoformat()
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if hasattr(value, "asDict"):
        return json_safe(value.asDict(recursive=True))
    return str(value)


def rows_of(df):
    return [json_safe(row.asDict(recursive=True)) for row in df.collect()]


def normalise_type(t):
    import pyarrow as pa

    if pa.types.is_string_view(t) or pa.types.is_large_string(t):
        return pa.string()
    if pa.types.is_binary_view(t) or pa.types.is_large_binary(t):
        return pa.binary()
    if pa.types.is_dictionary(t):
        return normalise_type(t.value_type)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(normalise_field(t.value_field))
    if pa.types.is_map(t):
        return pa.map_(normalise_field(t.key_field), normalise_field(t.item_field))
    if pa.types.is_struct(t):
        return pa.struct([normalise_field(t.field(i)) for i in range(t.num_fields)])
    return t


def normalise_field(f):
    import pyarrow as pa

    return pa.field(f.name, normalise_type(f.type), f.nullable)


def read(spark, request):
    import pyarrow as pa
    import pyarrow.parquet as pq

    reader = spark.read.format("delta")
    if request.get("version") is not None:
        reader = reader.option("versionAsOf", int(request["version"]))
    if request.get("timestamp") is not None:
        reader = reader.option("timestampAsOf", request["timestamp"])
    df = reader.load(request["path"])
    table = df.toArrow()
    schema = pa.schema([normalise_field(f) for f in table.schema])
    if schema != table.schema:
        table = table.cast(schema)
    pq.write_table(table, request["out"])
    return {"rows": table.num_rows}


def answer(spark, request):
    op = request.get("op")
    if op == "ping":
        import delta

        return {"spark": spark.version, "delta": getattr(delta, "__version__", "?")}
    if op == "sql":
        return {"rows": rows_of(spark.sql(request["sql"]))}
    if op == "read":
        return read(spark, request)
    if op == "history":
        path = request["path"].replace("`", "``")
        return {"rows": rows_of(spark.sql(f"DESCRIBE HISTORY delta.`{path}`"))}
    raise ValueError(f"unknown op {op!r}")


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    # Answers go to the original stdout; everything else (the JVM inherits fd 1)
    # goes to stderr.
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        spark = start_session(sys.argv[1], sys.argv[2])
    except Exception as e:  # noqa: BLE001 - reported to the test, which fails
        answers.write(json.dumps({"ok": False, "error": f"Spark did not start: {e}"}) + "\n")
        traceback.print_exc()
        return 1
    answers.write(json.dumps({"ok": True, "ready": True}) + "\n")
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            request = json.loads(line)
            out = {"ok": True}
            out.update(answer(spark, request))
        except Exception as e:  # noqa: BLE001 - each failure is the test's to judge
            traceback.print_exc()
            out = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        answers.write(json.dumps(out) + "\n")
    spark.stop()
    # The warehouse is this process's own scratch folder; leave nothing in /tmp.
    shutil.rmtree(sys.argv[2], ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
