//! The Arrow PyCapsule interface, both ways: streams and schemas in from any object with
//! `__arrow_c_stream__`, and Tarn's readers out as capsules pyarrow imports.
//!
//! It is done here rather than by arrow's `pyarrow` feature, which would make arrow (and
//! everything above it) depend on PyO3 and its Python build configuration.

use std::sync::Arc;

use arrow::array::{RecordBatch, RecordBatchIterator, RecordBatchReader};
use arrow::datatypes::{Schema, SchemaRef};
use arrow::ffi_stream::{ArrowArrayStreamReader, FFI_ArrowArrayStream};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyCapsuleMethods};

const STREAM: &std::ffi::CStr = c"arrow_array_stream";

/// Reads the stream `data.__arrow_c_stream__()` exports: nothing is read until the
/// reader is.
///
/// Fails with `TypeError` when `data` has no such method or it returns no stream capsule,
/// and `InvalidArgument` when the stream in it was already released (consumed).
pub(crate) fn stream_reader(data: &Bound<'_, PyAny>) -> PyResult<ArrowArrayStreamReader> {
    let capsule = data.call_method0("__arrow_c_stream__")?;
    let capsule = capsule
        .cast::<PyCapsule>()
        .map_err(|_| PyTypeError::new_err("__arrow_c_stream__ did not return a PyCapsule"))?;
    let pointer = capsule.pointer_checked(Some(STREAM))?;
    // SAFETY: the capsule is named "arrow_array_stream", so by the Arrow PyCapsule
    // interface it holds a valid FFI_ArrowArrayStream; `from_raw` moves it out and leaves
    // a released stream behind, which the capsule's destructor then ignores.
    #[allow(unsafe_code)]
    let stream = unsafe { FFI_ArrowArrayStream::from_raw(pointer.cast().as_ptr()) };
    ArrowArrayStreamReader::try_new(stream).map_err(|e| {
        crate::errors::InvalidArgument::new_err(format!(
            "the Arrow stream cannot be read (already consumed or closed?): {e}"
        ))
    })
}

/// `reader` as a capsule holding an Arrow C stream.
pub(crate) fn stream_capsule<'py>(
    py: Python<'py>,
    reader: Box<dyn RecordBatchReader + Send>,
) -> PyResult<Bound<'py, PyCapsule>> {
    PyCapsule::new_with_value(py, FFI_ArrowArrayStream::new(reader), STREAM)
}

/// `reader` as a `pyarrow.RecordBatchReader`.
pub(crate) fn to_pyarrow_reader<'py>(
    py: Python<'py>,
    reader: Box<dyn RecordBatchReader + Send>,
) -> PyResult<Bound<'py, PyAny>> {
    let capsule = stream_capsule(py, reader)?;
    py.import("pyarrow")?
        .getattr("RecordBatchReader")?
        .call_method1("_import_from_c_capsule", (capsule,))
}

/// `schema` as a `pyarrow.Schema`.
pub(crate) fn to_pyarrow_schema<'py>(
    py: Python<'py>,
    schema: SchemaRef,
) -> PyResult<Bound<'py, PyAny>> {
    let empty = RecordBatchIterator::new(Vec::<Result<RecordBatch, _>>::new(), schema);
    to_pyarrow_reader(py, Box::new(empty))?.getattr("schema")
}

/// The Arrow schema of a `pyarrow.Schema` (or anything `pyarrow.schema()` takes, such as
/// an object with `__arrow_c_schema__`).
pub(crate) fn schema(value: &Bound<'_, PyAny>) -> PyResult<Arc<Schema>> {
    let pa = value.py().import("pyarrow")?;
    let schema = pa.call_method1("schema", (value,))?;
    let empty = pa.getattr("RecordBatchReader")?.call_method1(
        "from_batches",
        (schema, pyo3::types::PyList::empty(value.py())),
    )?;
    Ok(stream_reader(&empty)?.schema())
}
