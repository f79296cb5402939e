"""Tarn: ACID tables on object storage in the Delta Lake format, from Python.

Data goes in and comes out as Arrow C streams (``__arrow_c_stream__``), so pyarrow,
Polars, pandas and DuckDB exchange it with Tarn without a copy::

    import pyarrow as pa, tarn
    t = tarn.Table.create("/tmp/sales", data=pa.table({"id": [1, 2], "n": ["a", "b"]}))
    t.append(pa.table({"id": [3], "n": ["c"]}))
    print(pa.table(t.scan(filter="id > 1")))
"""

from ._tarn import (
    Catalog,
    CommitConflict,
    CommitStateUnknown,
    ConstraintViolated,
    InvalidArgument,
    InvalidExpression,
    MergeBuilder,
    Scan,
    SchemaMismatch,
    SqlError,
    Table,
    TableAlreadyExists,
    TableNotFound,
    TarnError,
    VersionNotFound,
    __version__,
    settle_background_work,
    sql,
)

import atexit as _atexit

# Checkpoints and the clearing of group-commit proposals run after a call returns; give
# them a moment to finish before the interpreter exits.
_atexit.register(settle_background_work, 10.0)

__all__ = [
    "Catalog",
    "CommitConflict",
    "CommitStateUnknown",
    "ConstraintViolated",
    "InvalidArgument",
    "InvalidExpression",
    "MergeBuilder",
    "Scan",
    "SchemaMismatch",
    "SqlError",
    "Table",
    "TableAlreadyExists",
    "TableNotFound",
    "TarnError",
    "VersionNotFound",
    "__version__",
    "settle_background_work",
    "sql",
]
