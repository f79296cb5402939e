"""Read a Delta table with delta-rs (the `deltalake` Python package) for Tarn's
integration tests.

Usage: read_table.py TABLE_PATH OUT_PARQUET [VERSION]

Opens the Delta table at TABLE_PATH (at VERSION if given), runs
`SELECT * FROM t` through `deltalake.QueryBuilder` (DataFusion SQL) and writes
the result to OUT_PARQUET. Arrow types are normalised so the Rust side can
compare them directly:

    string_view / large_string        -> string
    binary_view / large_binary        -> binary
    list_view / large_list(_view)     -> list
    dictionary<_, T>                  -> T

applied recursively inside list, fixed-size list, struct and map types.
Everything else (timestamps with their unit/timezone, decimals, dates, ...) is
kept unchanged. Column order is what the query returns.

Prints one JSON line to stdout:
    {"version": <table version>, "rows": <row count>, "files": <data files>}
"""

import json
import sys

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, QueryBuilder


def normalise_type(t: pa.DataType) -> pa.DataType:
    """Return `t` with view/large/dictionary types replaced by plain ones."""
    if pa.types.is_string_view(t) or pa.types.is_large_string(t):
        return pa.string()
    if pa.types.is_binary_view(t) or pa.types.is_large_binary(t):
        return pa.binary()
    if pa.types.is_dictionary(t):
        return normalise_type(t.value_type)
    if (
        pa.types.is_list(t)
        or pa.types.is_large_list(t)
        or pa.types.is_list_view(t)
        or pa.types.is_large_list_view(t)
    ):
        return pa.list_(normalise_field(t.value_field))
    if pa.types.is_fixed_size_list(t):
        return pa.list_(normalise_field(t.value_field), t.list_size)
    if pa.types.is_map(t):
        return pa.map_(
            normalise_field(t.key_field),
            normalise_field(t.item_field),
            keys_sorted=t.keys_sorted,
        )
    if pa.types.is_struct(t):
        return pa.struct([normalise_field(t.field(i)) for i in range(t.num_fields)])
    return t


def normalise_field(f: pa.Field) -> pa.Field:
    """Same as normalise_type, keeping the field's name, nullability and metadata."""
    return pa.field(f.name, normalise_type(f.type), f.nullable, f.metadata)


def main() -> int:
    if len(sys.argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        return 2
    table_path, out_path = sys.argv[1], sys.argv[2]
    version = int(sys.argv[3]) if len(sys.argv) == 4 else None

    dt = DeltaTable(table_path, version=version)

    # In deltalake 1.6.6 QueryBuilder.execute() returns an arro3
    # RecordBatchReader; pyarrow consumes it via the Arrow PyCapsule stream
    # interface (__arrow_c_stream__). The schema survives even with no batches.
    reader = QueryBuilder().register("t", dt).execute("SELECT * FROM t")
    table = pa.RecordBatchReader.from_stream(reader).read_all()

    # Cast column by column to the normalised schema (no-op for plain types).
    schema = pa.schema(
        [normalise_field(f) for f in table.schema], metadata=table.schema.metadata
    )
    if schema != table.schema:
        table = table.cast(schema)

    pq.write_table(table, out_path)

    print(
        json.dumps(
            {
                "version": dt.version(),
                "rows": table.num_rows,
                "files": len(dt.file_uris()),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
