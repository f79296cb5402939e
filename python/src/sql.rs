//! `tarn.sql`: one SQL statement through DataFusion over Tarn tables and catalogs named
//! by the caller, its rows returned as a `pyarrow.RecordBatchReader` read as consumed.
//! Statements that change data (INSERT, DELETE, UPDATE, MERGE, CREATE TABLE AS) run to
//! their commit before the call returns.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::RecordBatchReader;
use datafusion::logical_expr::LogicalPlan;
use datafusion::prelude::SessionContext;
use futures::StreamExt;
use pyo3::prelude::*;
use tarn_datafusion::{TarnCatalogProvider, TarnTableProvider};

use crate::catalog::PyCatalog;
use crate::errors::IntoPy;
use crate::runtime::{run, runtime};
use crate::scan::BlockingReader;
use crate::table::PyTable;

/// Runs `query` with each of `tables` registered under its name and each of `catalogs`
/// as a catalog (its namespaces as schemas: `SELECT * FROM cat.ns.t`), and returns its
/// rows as a `pyarrow.RecordBatchReader`.
///
/// Raises `SqlError` when the statement does not plan or run, and Tarn's own exceptions
/// when a table operation fails (a constraint, a conflict).
#[pyfunction]
#[pyo3(signature = (query, *, tables=None, catalogs=None))]
pub(crate) fn sql<'py>(
    py: Python<'py>,
    query: String,
    tables: Option<HashMap<String, Bound<'py, PyTable>>>,
    catalogs: Option<HashMap<String, Bound<'py, PyCatalog>>>,
) -> PyResult<Bound<'py, PyAny>> {
    let tables: Vec<(String, tarn::Table)> = tables
        .unwrap_or_default()
        .into_iter()
        .map(|(name, t)| Ok((name, t.get().handle(py)?)))
        .collect::<PyResult<_>>()?;
    let catalogs: Vec<_> = catalogs
        .unwrap_or_default()
        .into_iter()
        .map(|(name, c)| (name, c.get().catalog()))
        .collect();
    let (schema, first, stream) = run(py, async move {
        let ctx = SessionContext::new();
        tarn_datafusion::register(&ctx);
        for (name, table) in tables {
            ctx.register_table(name, Arc::new(TarnTableProvider::new(table)))
                .py_err()?;
        }
        for (name, catalog) in catalogs {
            let provider = TarnCatalogProvider::new((*catalog).clone())
                .await
                .py_err()?;
            ctx.register_catalog(name, Arc::new(provider));
        }
        let frame = ctx.sql(&query).await.py_err()?;
        let changes = matches!(
            frame.logical_plan(),
            LogicalPlan::Dml(_) | LogicalPlan::Ddl(_) | LogicalPlan::Copy(_)
        );
        let mut stream = frame.execute_stream().await.py_err()?;
        let schema = stream.schema();
        // A change commits before the call returns, whether or not its result is read.
        let first = if changes {
            stream.next().await.transpose().py_err()?
        } else {
            None
        };
        Ok((schema, first, stream))
    })?;
    let rt = runtime()?;
    let reader: Box<dyn RecordBatchReader + Send> =
        Box::new(BlockingReader::new(schema, first, stream, &rt));
    crate::ffi::to_pyarrow_reader(py, reader)
}
