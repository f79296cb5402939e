//! `Table`: one Tarn (Delta) table from Python: create, open, time travel, writes,
//! scans, row-level changes, maintenance and indices, each a call of the Rust API with
//! the GIL released.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use tarn::expr::{Expr, lit};
use tarn::{ChangeStrategy, IndexKind, IndexMode, SchemaMode, Table, WriteMode};
use tokio::sync::Mutex;

use crate::errors::{IntoPy, InvalidArgument};
use crate::input::reader;
use crate::merge::PyMergeBuilder;
use crate::options::store_options;
use crate::records;
use crate::runtime::run;
use crate::scan::PyScan;

/// A Tarn table: a Delta table on a local path, `memory://`, or `s3://` URL.
#[pyclass(module = "tarn._tarn", name = "Table", frozen)]
pub(crate) struct PyTable {
    pub(crate) inner: Arc<Mutex<Table>>,
}

impl PyTable {
    /// Wraps an opened table.
    pub(crate) fn wrap(table: Table) -> Self {
        PyTable {
            inner: Arc::new(Mutex::new(table)),
        }
    }

    /// A clone of the handle (cheap: snapshots share their state), once a call running
    /// on another thread lets go of it; Ctrl-C interrupts the wait.
    pub(crate) fn handle(&self, py: Python<'_>) -> PyResult<Table> {
        let inner = self.inner.clone();
        run(py, async move { Ok(inner.lock().await.clone()) })
    }
}

/// Parses a SQL predicate (Spark SQL's expression syntax, as CHECK constraints use).
pub(crate) fn predicate(text: &str) -> PyResult<Expr> {
    tarn::expr::parse_sql(text).py_err()
}

/// An optional predicate.
pub(crate) fn maybe_predicate(text: Option<&str>) -> PyResult<Option<Expr>> {
    text.map(predicate).transpose()
}

/// `copy-on-write` / `cow` or `merge-on-read` / `mor`; None keeps the table's choice.
pub(crate) fn strategy(name: Option<&str>) -> PyResult<Option<ChangeStrategy>> {
    match name {
        None => Ok(None),
        Some("copy-on-write" | "cow") => Ok(Some(ChangeStrategy::CopyOnWrite)),
        Some("merge-on-read" | "mor") => Ok(Some(ChangeStrategy::MergeOnRead)),
        Some(other) => Err(InvalidArgument::new_err(format!(
            "strategy {other:?}: expected \"copy-on-write\" or \"merge-on-read\""
        ))),
    }
}

/// A timestamp given as milliseconds since the epoch, a `datetime` or an ISO-8601 string.
fn timestamp_ms(value: &Bound<'_, PyAny>) -> PyResult<i64> {
    if let Ok(ms) = value.extract::<i64>() {
        return Ok(ms);
    }
    let py = value.py();
    let datetime = if value.is_instance_of::<pyo3::types::PyString>() {
        py.import("datetime")?
            .getattr("datetime")?
            .call_method1("fromisoformat", (value,))?
    } else {
        value.clone()
    };
    let seconds: f64 = datetime.call_method0("timestamp")?.extract()?;
    Ok((seconds * 1000.0).round() as i64)
}

fn schema_mode(name: &str) -> PyResult<SchemaMode> {
    match name {
        "strict" => Ok(SchemaMode::Strict),
        "merge" | "add-columns" => Ok(SchemaMode::AddColumns),
        other => Err(InvalidArgument::new_err(format!(
            "schema_mode {other:?}: expected \"strict\" or \"merge\""
        ))),
    }
}

#[pymethods]
impl PyTable {
    /// Creates a table at `uri` with `schema` (a pyarrow schema, or anything with
    /// `__arrow_c_schema__`), or with `data`'s schema and rows in its first commit.
    #[staticmethod]
    #[pyo3(signature = (uri, schema=None, *, data=None, partition_by=None, properties=None,
        name=None, description=None, storage_options=None))]
    #[allow(clippy::too_many_arguments)]
    fn create(
        py: Python<'_>,
        uri: &str,
        schema: Option<&Bound<'_, PyAny>>,
        data: Option<&Bound<'_, PyAny>>,
        partition_by: Option<Vec<String>>,
        properties: Option<HashMap<String, String>>,
        name: Option<String>,
        description: Option<String>,
        storage_options: Option<HashMap<String, String>>,
    ) -> PyResult<Self> {
        let schema = schema.map(crate::ffi::schema).transpose()?;
        let mut builder = Table::create(uri).with_store_options(store_options(storage_options));
        if let Some(schema) = &schema {
            builder = builder.with_arrow_schema(schema);
        }
        if let Some(columns) = partition_by {
            builder = builder.with_partition_columns(columns);
        }
        for (k, v) in properties.unwrap_or_default() {
            builder = builder.with_property(k, v);
        }
        if let Some(name) = name {
            builder = builder.with_name(name);
        }
        if let Some(description) = description {
            builder = builder.with_description(description);
        }
        let table = match data {
            Some(data) => {
                let input = reader(data)?;
                if schema.is_none() {
                    builder =
                        builder.with_arrow_schema(&arrow::array::RecordBatchReader::schema(&input));
                }
                run(
                    py,
                    async move { builder.execute_reader(input).await.py_err() },
                )?
            }
            None if schema.is_none() => {
                return Err(InvalidArgument::new_err(format!(
                    "Table.create({uri:?}): give a schema or data"
                )));
            }
            None => run(py, async move { builder.execute().await.py_err() })?,
        };
        Ok(Self::wrap(table))
    }

    /// Opens the table at `uri`, at its latest version, or at `version` or `timestamp`
    /// (milliseconds since the epoch, a `datetime`, or an ISO-8601 string).
    #[staticmethod]
    #[pyo3(signature = (uri, *, version=None, timestamp=None, storage_options=None))]
    fn open(
        py: Python<'_>,
        uri: &str,
        version: Option<i64>,
        timestamp: Option<&Bound<'_, PyAny>>,
        storage_options: Option<HashMap<String, String>>,
    ) -> PyResult<Self> {
        if version.is_some() && timestamp.is_some() {
            return Err(InvalidArgument::new_err(
                "Table.open: give at most one of version and timestamp",
            ));
        }
        let at = timestamp.map(timestamp_ms).transpose()?;
        let options = store_options(storage_options);
        let uri = uri.to_string();
        let table = run(py, async move {
            let mut table = Table::open_with_options(&uri, &options).await.py_err()?;
            if let Some(v) = version {
                table.load_version(v).await.py_err()?;
            } else if let Some(ms) = at {
                table.load_timestamp(ms).await.py_err()?;
            }
            Ok(table)
        })?;
        Ok(Self::wrap(table))
    }

    /// The table's location.
    #[getter]
    fn uri(&self, py: Python<'_>) -> PyResult<String> {
        Ok(self.handle(py)?.location().url().to_string())
    }

    /// The version this handle reads.
    #[getter]
    fn version(&self, py: Python<'_>) -> PyResult<i64> {
        Ok(self.handle(py)?.version())
    }

    /// The table's schema as a `pyarrow.Schema`.
    fn schema<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::ffi::to_pyarrow_schema(py, self.handle(py)?.snapshot().arrow_schema().clone())
    }

    /// The partition columns, in order.
    #[getter]
    fn partition_columns(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        Ok(self
            .handle(py)?
            .snapshot()
            .metadata()
            .partition_columns
            .clone())
    }

    /// The table's properties (`delta.*` and others).
    #[getter]
    fn properties(&self, py: Python<'_>) -> PyResult<HashMap<String, String>> {
        Ok(self
            .handle(py)?
            .snapshot()
            .metadata()
            .configuration
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), v.clone()?)))
            .collect())
    }

    /// The number of data files at this version.
    fn file_count(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(self.handle(py)?.snapshot().file_count())
    }

    /// Catches up with commits made since this handle's version; returns the new version.
    fn refresh(&self, py: Python<'_>) -> PyResult<i64> {
        let inner = self.inner.clone();
        run(py, async move {
            let mut t = inner.lock().await;
            t.refresh().await.py_err()?;
            Ok(t.version())
        })
    }

    /// Moves this handle to `version` (time travel).
    fn load_version(&self, py: Python<'_>, version: i64) -> PyResult<()> {
        let inner = self.inner.clone();
        run(py, async move {
            inner.lock().await.load_version(version).await.py_err()
        })
    }

    /// Moves this handle to the version current at `timestamp`.
    fn load_timestamp(&self, py: Python<'_>, timestamp: &Bound<'_, PyAny>) -> PyResult<()> {
        let ms = timestamp_ms(timestamp)?;
        let inner = self.inner.clone();
        run(py, async move {
            inner.lock().await.load_timestamp(ms).await.py_err()
        })
    }

    /// Every version still in the log, oldest first, as `{"version", "timestamp"}` dicts.
    fn versions<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let table = self.handle(py)?;
        let versions = run(py, async move { table.versions().await.py_err() })?;
        let list = PyList::empty(py);
        for v in versions {
            let d = PyDict::new(py);
            d.set_item("version", v.version)?;
            d.set_item("timestamp", v.timestamp_ms)?;
            list.append(d)?;
        }
        Ok(list)
    }

    /// The commits up to this version, newest first (at most `limit`).
    #[pyo3(signature = (limit=None))]
    fn history<'py>(&self, py: Python<'py>, limit: Option<usize>) -> PyResult<Bound<'py, PyList>> {
        let table = self.handle(py)?;
        let commits = run(py, async move { table.history(limit).await.py_err() })?;
        let list = PyList::empty(py);
        for c in &commits {
            list.append(records::commit(py, c)?)?;
        }
        Ok(list)
    }

    /// Appends `data` (read as a stream) in one commit.
    #[pyo3(signature = (data, *, schema_mode="strict", app_transaction=None))]
    fn append<'py>(
        &self,
        py: Python<'py>,
        data: &Bound<'py, PyAny>,
        schema_mode: &str,
        app_transaction: Option<(String, i64)>,
    ) -> PyResult<Bound<'py, PyDict>> {
        self.write(
            py,
            data,
            WriteMode::Append,
            None,
            schema_mode,
            app_transaction,
        )
    }

    /// Replaces the table's rows with `data`, or only the rows `replace_where` matches.
    #[pyo3(signature = (data, *, replace_where=None, schema_mode="strict", app_transaction=None))]
    fn overwrite<'py>(
        &self,
        py: Python<'py>,
        data: &Bound<'py, PyAny>,
        replace_where: Option<&str>,
        schema_mode: &str,
        app_transaction: Option<(String, i64)>,
    ) -> PyResult<Bound<'py, PyDict>> {
        self.write(
            py,
            data,
            WriteMode::Overwrite,
            maybe_predicate(replace_where)?,
            schema_mode,
            app_transaction,
        )
    }

    /// The version at which application `app_id` last committed (exactly-once writers).
    fn app_transaction_version(&self, py: Python<'_>, app_id: &str) -> PyResult<Option<i64>> {
        Ok(self.handle(py)?.snapshot().app_transaction_version(app_id))
    }

    /// A scan of this version (or `version`): `columns`, rows matching `filter` (a SQL
    /// predicate) and, with a full-text index, `text_match=(column, query)`.
    #[pyo3(signature = (columns=None, filter=None, *, version=None, limit=None, text_match=None))]
    fn scan(
        &self,
        py: Python<'_>,
        columns: Option<Vec<String>>,
        filter: Option<&str>,
        version: Option<i64>,
        limit: Option<usize>,
        text_match: Option<(String, String)>,
    ) -> PyResult<PyScan> {
        let mut filter = maybe_predicate(filter)?;
        if let Some((column, query)) = text_match {
            let matched = tarn::expr::text_match(column, query);
            filter = Some(match filter {
                Some(f) => f.and(matched),
                None => matched,
            });
        }
        let mut table = self.handle(py)?;
        if let Some(v) = version {
            table = run(py, async move {
                table.load_version(v).await.py_err()?;
                Ok(table)
            })?;
        }
        Ok(PyScan::new(
            table.snapshot().clone(),
            columns,
            filter,
            limit,
        ))
    }

    /// The rows (optionally `columns`, matching `filter`) as a `pyarrow.Table`.
    #[pyo3(signature = (columns=None, filter=None))]
    fn to_pyarrow<'py>(
        &self,
        py: Python<'py>,
        columns: Option<Vec<String>>,
        filter: Option<&str>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let scan = Bound::new(py, self.scan(py, columns, filter, None, None, None)?)?;
        PyScan::to_pyarrow(&scan)
    }

    /// The rows (optionally `columns`, matching `filter`) as a `polars.DataFrame`.
    #[pyo3(signature = (columns=None, filter=None))]
    fn to_polars<'py>(
        &self,
        py: Python<'py>,
        columns: Option<Vec<String>>,
        filter: Option<&str>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let scan = Bound::new(py, self.scan(py, columns, filter, None, None, None)?)?;
        PyScan::to_polars(&scan)
    }

    /// The number of rows (matching `filter`).
    #[pyo3(signature = (filter=None))]
    fn count(&self, py: Python<'_>, filter: Option<&str>) -> PyResult<u64> {
        self.scan(py, None, filter, None, None, None)?.count(py)
    }

    /// Deletes the rows `predicate` matches (every row when None), copy-on-write or
    /// merge-on-read (`strategy`, default the table's), in one commit.
    #[pyo3(signature = (predicate=None, *, strategy=None))]
    fn delete<'py>(
        &self,
        py: Python<'py>,
        predicate: Option<&str>,
        strategy: Option<&str>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let predicate = maybe_predicate(predicate)?.unwrap_or_else(|| lit(true));
        let strategy = self::strategy(strategy)?;
        let inner = self.inner.clone();
        let outcome = run(py, async move {
            let mut t = inner.lock().await;
            let mut builder = t.delete(predicate);
            if let Some(s) = strategy {
                builder = builder.with_strategy(s);
            }
            builder.execute().await.py_err()
        })?;
        records::dml(py, &outcome)
    }

    /// Sets columns to SQL expressions (`set={"price": "price * 2"}`) on the rows
    /// `where` matches (every row when None), in one commit.
    #[pyo3(signature = (set, *, r#where=None, strategy=None))]
    fn update<'py>(
        &self,
        py: Python<'py>,
        set: HashMap<String, String>,
        r#where: Option<&str>,
        strategy: Option<&str>,
    ) -> PyResult<Bound<'py, PyDict>> {
        if set.is_empty() {
            return Err(InvalidArgument::new_err("update: `set` names no column"));
        }
        let assignments = set
            .into_iter()
            .map(|(c, e)| Ok((c, predicate(&e)?)))
            .collect::<PyResult<Vec<_>>>()?;
        let filter = maybe_predicate(r#where)?;
        let strategy = self::strategy(strategy)?;
        let inner = self.inner.clone();
        let outcome = run(py, async move {
            let mut t = inner.lock().await;
            let mut builder = t.update();
            for (c, e) in assignments {
                builder = builder.set(c, e);
            }
            if let Some(f) = filter {
                builder = builder.filter(f);
            }
            if let Some(s) = strategy {
                builder = builder.with_strategy(s);
            }
            builder.execute().await.py_err()
        })?;
        records::dml(py, &outcome)
    }

    /// Starts a MERGE of `source` into the table, matching rows on the `on` columns (same
    /// names in both) and the optional `condition` (on `target.x` and `source.x`). Add
    /// `when_...` clauses, then `execute()`.
    #[pyo3(signature = (source, on, *, condition=None, strategy=None))]
    fn merge(
        &self,
        source: &Bound<'_, PyAny>,
        on: Vec<String>,
        condition: Option<&str>,
        strategy: Option<&str>,
    ) -> PyResult<PyMergeBuilder> {
        // Arguments first: reading `source` consumes its stream.
        let condition = maybe_predicate(condition)?;
        let strategy = self::strategy(strategy)?;
        PyMergeBuilder::new(self.inner.clone(), on, condition, strategy, source)
    }

    /// Compacts small files and purges deletion vectors (of the rows `filter` matches).
    #[pyo3(signature = (*, target_size=None, filter=None, sort_by=None))]
    fn optimize<'py>(
        &self,
        py: Python<'py>,
        target_size: Option<u64>,
        filter: Option<&str>,
        sort_by: Option<Vec<String>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let filter = maybe_predicate(filter)?;
        let inner = self.inner.clone();
        let outcome = run(py, async move {
            let mut t = inner.lock().await;
            let mut builder = t.optimize();
            if let Some(bytes) = target_size {
                builder = builder.with_target_file_size(bytes);
            }
            if let Some(f) = filter {
                builder = builder.filter(f);
            }
            if let Some(columns) = sort_by {
                builder = builder.with_sort_by(columns);
            }
            builder.execute().await.py_err()
        })?;
        records::optimize(py, &outcome)
    }

    /// Deletes data files no version within the retention reads (a dry run by default:
    /// it lists them and deletes nothing).
    #[pyo3(signature = (*, retention_hours=None, dry_run=true, enforce_retention=true))]
    fn vacuum<'py>(
        &self,
        py: Python<'py>,
        retention_hours: Option<f64>,
        dry_run: bool,
        enforce_retention: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        let retention = retention_hours
            .map(|h| {
                Duration::try_from_secs_f64(h * 3600.0)
                    .map_err(|e| InvalidArgument::new_err(format!("retention_hours {h}: {e}")))
            })
            .transpose()?;
        let table = self.handle(py)?;
        let outcome = run(py, async move {
            let mut builder = table
                .vacuum()
                .with_dry_run(dry_run)
                .with_enforce_retention(enforce_retention);
            if let Some(r) = retention {
                builder = builder.with_retention(r);
            }
            builder.execute().await.py_err()
        })?;
        records::vacuum(py, &outcome)
    }

    /// Restores the table to `version` or `timestamp` in a new commit; returns its version.
    #[pyo3(signature = (version=None, *, timestamp=None))]
    fn restore(
        &self,
        py: Python<'_>,
        version: Option<i64>,
        timestamp: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<i64> {
        let at = timestamp.map(timestamp_ms).transpose()?;
        let inner = self.inner.clone();
        run(py, async move {
            let mut t = inner.lock().await;
            let builder = match (version, at) {
                (Some(v), None) => t.restore().to_version(v),
                (None, Some(ms)) => t.restore().to_timestamp(ms),
                _ => {
                    return Err(InvalidArgument::new_err(
                        "restore: give exactly one of version and timestamp",
                    ));
                }
            };
            let outcome = builder.execute().await.py_err()?;
            Ok(outcome.commit.version)
        })
    }

    /// Writes a checkpoint of this version.
    fn checkpoint(&self, py: Python<'_>) -> PyResult<()> {
        let table = self.handle(py)?;
        run(py, async move {
            table.checkpoint().await.py_err()?;
            Ok(())
        })
    }

    /// Builds an index on `column`: `kind` is "btree", "bitmap" or "fulltext"; a
    /// `deferred` index is built by `optimize_indices` rather than by every commit.
    #[pyo3(signature = (column, kind="btree", *, name=None, deferred=false))]
    fn create_index<'py>(
        &self,
        py: Python<'py>,
        column: String,
        kind: &str,
        name: Option<String>,
        deferred: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        let kind = match kind {
            "btree" => IndexKind::BTree,
            "bitmap" => IndexKind::Bitmap,
            "fulltext" | "fts" => IndexKind::FullText,
            other => {
                return Err(InvalidArgument::new_err(format!(
                    "index kind {other:?}: expected \"btree\", \"bitmap\" or \"fulltext\""
                )));
            }
        };
        let mode = if deferred {
            IndexMode::Deferred
        } else {
            IndexMode::Inline
        };
        let inner = self.inner.clone();
        let info = run(py, async move {
            let mut t = inner.lock().await;
            let mut builder = t.create_index(column).with_kind(kind).with_mode(mode);
            if let Some(name) = name {
                builder = builder.with_name(name);
            }
            builder.execute().await.py_err()
        })?;
        records::index(py, &info)
    }

    /// The table's indices.
    fn indices<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        for info in self.handle(py)?.indices().py_err()? {
            list.append(records::index(py, &info)?)?;
        }
        Ok(list)
    }

    /// Drops the index `name`; returns the version of the commit.
    fn drop_index(&self, py: Python<'_>, name: String) -> PyResult<i64> {
        let inner = self.inner.clone();
        run(py, async move {
            let outcome = inner.lock().await.drop_index(&name).await.py_err()?;
            Ok(outcome.version)
        })
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let t = self.handle(py)?;
        Ok(format!(
            "Table({:?}, version={})",
            t.location().url().as_str(),
            t.version()
        ))
    }
}

impl PyTable {
    fn write<'py>(
        &self,
        py: Python<'py>,
        data: &Bound<'py, PyAny>,
        mode: WriteMode,
        replace_where: Option<Expr>,
        schema_mode: &str,
        app_transaction: Option<(String, i64)>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let schema_mode = self::schema_mode(schema_mode)?;
        let input = reader(data)?;
        let inner = self.inner.clone();
        let outcome = run(py, async move {
            let mut t = inner.lock().await;
            let mut builder = t
                .write_reader(input)
                .with_mode(mode)
                .with_schema_mode(schema_mode);
            if let Some(p) = replace_where {
                builder = builder.replace_where(p);
            }
            if let Some((app, version)) = app_transaction {
                builder = builder.with_app_transaction(app, version);
            }
            builder.execute().await.py_err()
        })?;
        records::write(py, &outcome)
    }
}
