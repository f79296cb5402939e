//! The exceptions `tarn` raises: `TarnError` and a few subclasses a caller can catch by
//! kind, each carrying the Rust error's message (what failed, on what).

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyRuntimeError};
use pyo3::prelude::*;

create_exception!(
    tarn,
    TarnError,
    PyException,
    "Any error Tarn reports; the message says what failed and on what."
);
create_exception!(
    tarn,
    TableNotFound,
    TarnError,
    "No table (or catalog entry) at the location or name given."
);
create_exception!(
    tarn,
    TableAlreadyExists,
    TarnError,
    "A table (or catalog entry) already exists where one was to be created."
);
create_exception!(
    tarn,
    VersionNotFound,
    TarnError,
    "The version or timestamp asked for is not in the table's log."
);
create_exception!(
    tarn,
    CommitConflict,
    TarnError,
    "A concurrent commit conflicts with this one, and retrying could not resolve it."
);
create_exception!(
    tarn,
    CommitStateUnknown,
    TarnError,
    "A commit was sent but whether it landed could not be found out; it never lands twice."
);
create_exception!(
    tarn,
    SchemaMismatch,
    TarnError,
    "Data, columns or types that do not fit the table's schema."
);
create_exception!(
    tarn,
    InvalidExpression,
    TarnError,
    "A predicate or expression that does not parse or does not bind to the schema."
);
create_exception!(
    tarn,
    ConstraintViolated,
    TarnError,
    "Rows that break a CHECK constraint, NOT NULL, or a generated column's expression."
);
create_exception!(
    tarn,
    InvalidArgument,
    TarnError,
    "An argument Tarn cannot act on: a bad option, name, URL or combination."
);
create_exception!(
    tarn,
    SqlError,
    TarnError,
    "A SQL statement failed to plan or run."
);

/// Adds the exceptions to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("TarnError", py.get_type::<TarnError>())?;
    m.add("TableNotFound", py.get_type::<TableNotFound>())?;
    m.add("TableAlreadyExists", py.get_type::<TableAlreadyExists>())?;
    m.add("VersionNotFound", py.get_type::<VersionNotFound>())?;
    m.add("CommitConflict", py.get_type::<CommitConflict>())?;
    m.add("CommitStateUnknown", py.get_type::<CommitStateUnknown>())?;
    m.add("SchemaMismatch", py.get_type::<SchemaMismatch>())?;
    m.add("InvalidExpression", py.get_type::<InvalidExpression>())?;
    m.add("ConstraintViolated", py.get_type::<ConstraintViolated>())?;
    m.add("InvalidArgument", py.get_type::<InvalidArgument>())?;
    m.add("SqlError", py.get_type::<SqlError>())?;
    Ok(())
}

/// A failure of this package itself (a poisoned lock, a runtime that will not start).
pub(crate) fn internal(message: impl Into<String>) -> PyErr {
    PyRuntimeError::new_err(message.into())
}

/// Tarn's error as the exception of its kind.
pub(crate) fn table(error: tarn::Error) -> PyErr {
    table_kind(&error)(error.to_string())
}

/// The catalog's error as the exception of its kind.
pub(crate) fn catalog(error: tarn_catalog::Error) -> PyErr {
    catalog_kind(&error)(error.to_string())
}

/// The constructor of the exception a catalog error is raised as: a table error's kind
/// for one from a table, and the shared error's for one a grouped commit shared.
fn catalog_kind(error: &tarn_catalog::Error) -> fn(String) -> PyErr {
    use tarn_catalog::Error as E;
    match error {
        E::Table(inner) => table_kind(inner),
        E::Batch(inner) => catalog_kind(inner),
        E::NotFound { .. } => TableNotFound::new_err,
        E::AlreadyExists { .. } => TableAlreadyExists::new_err,
        E::InvalidName { .. }
        | E::InvalidLocation { .. }
        | E::InvalidArgument { .. }
        | E::InvalidPageToken { .. } => InvalidArgument::new_err,
        _ => TarnError::new_err,
    }
}

/// DataFusion's error: Tarn's or the catalog's kind when one is inside, else
/// [`SqlError`].
pub(crate) fn sql(error: datafusion::error::DataFusionError) -> PyErr {
    let message = error.to_string();
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&error);
    while let Some(e) = source {
        if let Some(t) = e.downcast_ref::<tarn::Error>() {
            return table_kind(t)(message);
        }
        if let Some(c) = e.downcast_ref::<tarn_catalog::Error>() {
            return catalog_kind(c)(message);
        }
        source = e.source();
    }
    SqlError::new_err(message)
}

/// The constructor of the exception a Tarn error is raised as.
fn table_kind(error: &tarn::Error) -> fn(String) -> PyErr {
    use tarn::Error as E;
    match error {
        E::TableNotFound { .. } => TableNotFound::new_err,
        E::TableAlreadyExists { .. } => TableAlreadyExists::new_err,
        E::VersionNotFound { .. } | E::TimestampOutOfRange { .. } => VersionNotFound::new_err,
        E::Conflict { .. } | E::CommitRetriesExhausted { .. } => CommitConflict::new_err,
        E::CommitStateUnknown { .. } => CommitStateUnknown::new_err,
        E::SchemaMismatch { .. }
        | E::UnknownColumn { .. }
        | E::TypeMismatch { .. }
        | E::InvalidSchema { .. }
        | E::InvalidPartitionValue { .. } => SchemaMismatch::new_err,
        E::InvalidExpression { .. } | E::TextMatchWithoutIndex { .. } => InvalidExpression::new_err,
        E::ConstraintViolated { .. } => ConstraintViolated::new_err,
        E::InvalidArgument { .. } | E::Location(_) | E::InvalidPath { .. } => {
            InvalidArgument::new_err
        }
        _ => TarnError::new_err,
    }
}

/// Extension to turn results of Tarn, the catalog and DataFusion into `PyResult`.
pub(crate) trait IntoPy<T> {
    /// The result with its error as the matching Python exception.
    fn py_err(self) -> PyResult<T>;
}

impl<T> IntoPy<T> for tarn::Result<T> {
    fn py_err(self) -> PyResult<T> {
        self.map_err(table)
    }
}

impl<T> IntoPy<T> for tarn_catalog::Result<T> {
    fn py_err(self) -> PyResult<T> {
        self.map_err(catalog)
    }
}

impl<T> IntoPy<T> for datafusion::error::Result<T> {
    fn py_err(self) -> PyResult<T> {
        self.map_err(sql)
    }
}
