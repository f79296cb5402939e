//! `tarn._tarn`, the native half of the `tarn` Python package: Tarn's tables, scans,
//! row-level changes, SQL and catalog as Python classes. Data crosses as Arrow C streams
//! (`__arrow_c_stream__`), so pyarrow, Polars, pandas and DuckDB hand batches over and
//! take them back without a copy. Every call that does IO or CPU work releases the GIL
//! and runs on one tokio runtime per process; Ctrl-C cancels it.

mod catalog;
mod errors;
mod ffi;
mod input;
mod malloc;
mod merge;
mod options;
mod records;
mod runtime;
mod scan;
mod sql;
mod table;

use pyo3::prelude::*;

/// The module `tarn._tarn`: the classes, functions and exceptions `tarn` re-exports.
#[pymodule]
fn _tarn(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<table::PyTable>()?;
    m.add_class::<scan::PyScan>()?;
    m.add_class::<merge::PyMergeBuilder>()?;
    m.add_class::<catalog::PyCatalog>()?;
    m.add_function(wrap_pyfunction!(sql::sql, m)?)?;
    m.add_function(wrap_pyfunction!(runtime::settle_background_work, m)?)?;
    runtime::set_main_thread();
    malloc::raise_mmap_threshold();
    errors::register(m)?;
    Ok(())
}
