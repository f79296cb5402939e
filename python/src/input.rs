//! Data handed in from Python: anything with `__arrow_c_stream__` (a pyarrow Table or
//! RecordBatchReader, a Polars DataFrame, a DuckDB relation), read as a stream of
//! batches; a pandas DataFrame goes through `pyarrow.table` first.

use arrow::ffi_stream::ArrowArrayStreamReader;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyAnyMethods;

/// `data` as an Arrow stream reader: its `__arrow_c_stream__` when it has one (nothing is
/// read yet), else what `pyarrow.table(data)` makes of it (pandas, dicts of columns).
///
/// Fails with `TypeError` when `data` is neither.
pub(crate) fn reader(data: &Bound<'_, PyAny>) -> PyResult<ArrowArrayStreamReader> {
    if data.hasattr("__arrow_c_stream__")? {
        return crate::ffi::stream_reader(data);
    }
    let py = data.py();
    let converted = py
        .import("pyarrow")?
        .call_method1("table", (data,))
        .map_err(|e| {
            // Only "not something pyarrow takes" becomes this TypeError; anything else
            // (bad values, memory, Ctrl-C) passes through as it is.
            if !e.is_instance_of::<PyTypeError>(py) {
                return e;
            }
            PyTypeError::new_err(format!(
                "expected Arrow data (an object with __arrow_c_stream__, such as a pyarrow \
                 Table or RecordBatchReader, a Polars DataFrame or a DuckDB relation) or \
                 something pyarrow.table() accepts; got {}: {e}",
                data.get_type()
                    .name()
                    .map(|n| n.to_string())
                    .unwrap_or_else(|_| "an unknown type".into())
            ))
        })?;
    crate::ffi::stream_reader(&converted)
}
