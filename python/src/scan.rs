//! `Scan`: a table's rows at one version, narrowed by columns, a predicate and a limit,
//! handed to Python as an Arrow C stream. Nothing is read until a consumer asks: each
//! `__arrow_c_stream__` call starts a fresh stream, decoded by Tarn's scan on the runtime
//! while the consumer takes batches one at a time, so memory holds a few batches however
//! large the table.

use std::sync::Arc;

use arrow::array::{RecordBatch, RecordBatchReader};
use arrow::datatypes::{Schema, SchemaRef};
use arrow::error::ArrowError;
use futures::StreamExt;
use pyo3::prelude::*;
use pyo3::types::PyCapsule;
use tarn::Snapshot;
use tarn::expr::Expr;
use tokio::runtime::Runtime;

use crate::errors::IntoPy;
use crate::runtime::{run, runtime};

/// A scan of a table's snapshot: call `pyarrow.table(scan)`, `polars.DataFrame(scan)` or
/// `duckdb.sql("SELECT ... FROM scan")`, or `to_pyarrow()`, `to_polars()`, `count()`.
#[pyclass(module = "tarn._tarn", name = "Scan", frozen)]
pub(crate) struct PyScan {
    snapshot: Snapshot,
    columns: Option<Vec<String>>,
    filter: Option<Expr>,
    limit: Option<usize>,
    /// String and binary columns as Arrow views (for Polars, whose strings are views).
    string_views: bool,
}

impl PyScan {
    /// A scan of `snapshot` with the given narrowing (the filter already parsed).
    pub(crate) fn new(
        snapshot: Snapshot,
        columns: Option<Vec<String>>,
        filter: Option<Expr>,
        limit: Option<usize>,
    ) -> Self {
        PyScan {
            snapshot,
            columns,
            filter,
            limit,
            string_views: false,
        }
    }

    fn scan(&self) -> tarn::Scan {
        let mut scan = self.snapshot.scan();
        if let Some(columns) = &self.columns {
            scan = scan.select(columns.clone());
        }
        if let Some(filter) = &self.filter {
            scan = scan.filter(filter.clone());
        }
        if let Some(limit) = self.limit {
            scan = scan.with_limit(limit);
        }
        scan.with_string_views(self.string_views)
    }

    /// Starts the scan and returns it as a blocking Arrow reader.
    fn reader(&self, py: Python<'_>) -> PyResult<BlockingReader> {
        let scan = self.scan();
        let projected = self.projected_schema()?;
        let (stream, first) = run(py, async move {
            let mut stream = scan.execute().await.py_err()?;
            let first = stream.next().await.transpose().py_err()?;
            Ok((stream, first))
        })?;
        let schema = first.as_ref().map(|b| b.schema()).unwrap_or(projected);
        let rt = runtime()?;
        Ok(BlockingReader::new(schema, first, stream, &rt))
    }

    /// The schema of a scan that yields no batch: the table's columns, narrowed.
    fn projected_schema(&self) -> PyResult<SchemaRef> {
        let all = self.snapshot.arrow_schema();
        let Some(columns) = &self.columns else {
            return Ok(all.clone());
        };
        let fields = columns
            .iter()
            .map(|c| {
                all.field_with_name(c).cloned().map_err(|_| {
                    crate::errors::table(tarn::Error::UnknownColumn {
                        column: c.clone(),
                        available: all.fields().iter().map(|f| f.name().clone()).collect(),
                    })
                })
            })
            .collect::<PyResult<Vec<_>>>()?;
        Ok(Arc::new(Schema::new(fields)))
    }
}

#[pymethods]
impl PyScan {
    /// The scan as an Arrow C stream capsule (the Arrow PyCapsule interface), a new stream
    /// each call. A `requested_schema` is not applied (the protocol lets a producer ignore
    /// it); the caller casts.
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let _ = requested_schema;
        let reader: Box<dyn RecordBatchReader + Send> = Box::new(self.reader(py)?);
        crate::ffi::stream_capsule(py, reader)
    }

    /// The rows as a `pyarrow.RecordBatchReader`, read as it is consumed.
    fn to_reader<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let reader: Box<dyn RecordBatchReader + Send> = Box::new(self.reader(py)?);
        crate::ffi::to_pyarrow_reader(py, reader)
    }

    /// The rows as a `pyarrow.Table`.
    pub(crate) fn to_pyarrow<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        py.import("pyarrow")?.call_method1("table", (slf,))
    }

    /// The rows as a `polars.DataFrame`. Polars reads the stream itself, its strings as
    /// the views it keeps them in, so no column is copied.
    pub(crate) fn to_polars<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let this = slf.get();
        let views = PyScan {
            snapshot: this.snapshot.clone(),
            columns: this.columns.clone(),
            filter: this.filter.clone(),
            limit: this.limit,
            string_views: true,
        };
        py.import("polars")?
            .call_method1("DataFrame", (Bound::new(py, views)?,))
    }

    /// The number of rows the scan yields (at most its limit), from file statistics and
    /// deletion vectors where they answer it, reading data only where they do not.
    pub(crate) fn count(&self, py: Python<'_>) -> PyResult<u64> {
        let scan = self.scan();
        let count = run(py, async move { scan.count().await.py_err() })?;
        // Counting answers from statistics and never looks at the limit.
        Ok(self.limit.map_or(count, |l| count.min(l as u64)))
    }

    /// The version of the snapshot the scan reads.
    #[getter]
    fn version(&self) -> i64 {
        self.snapshot.version()
    }

    fn __repr__(&self) -> String {
        format!(
            "Scan(version={}, columns={:?}, filter={})",
            self.snapshot.version(),
            self.columns,
            self.filter
                .as_ref()
                .map_or_else(|| "None".to_string(), |f| format!("{f}"))
        )
    }
}

/// An async stream of batches (Tarn's scan, DataFusion's plan) as the blocking
/// `RecordBatchReader` a C stream wraps. A task on Tarn's runtime drives the stream a
/// couple of batches ahead of the consumer; `next` waits for the next one without entering
/// a runtime, so any thread may read, including one inside another tokio runtime.
/// Dropping the reader stops the task and the stream.
pub(crate) struct BlockingReader {
    schema: SchemaRef,
    first: Option<RecordBatch>,
    batches: tokio::sync::mpsc::Receiver<Result<RecordBatch, ArrowError>>,
}

impl BlockingReader {
    /// A reader over `stream` (whose batches have `schema`), `first` read already.
    pub(crate) fn new<S, E>(
        schema: SchemaRef,
        first: Option<RecordBatch>,
        stream: S,
        runtime: &Runtime,
    ) -> Self
    where
        S: futures::Stream<Item = Result<RecordBatch, E>> + Send + 'static,
        E: std::error::Error + Send + Sync + 'static,
    {
        let (tx, rx) = tokio::sync::mpsc::channel(2);
        runtime.spawn(async move {
            let stream = std::pin::pin!(stream);
            let mut stream = stream.fuse();
            while let Some(item) = stream.next().await {
                let failed = item.is_err();
                let item = item.map_err(|e| ArrowError::ExternalError(Box::new(e)));
                // The consumer dropped the reader, or the stream failed: stop.
                if tx.send(item).await.is_err() || failed {
                    break;
                }
            }
        });
        BlockingReader {
            schema,
            first,
            batches: rx,
        }
    }
}

impl Iterator for BlockingReader {
    type Item = Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(batch) = self.first.take() {
            return Some(Ok(batch));
        }
        futures::executor::block_on(self.batches.recv())
    }
}

impl RecordBatchReader for BlockingReader {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
}
