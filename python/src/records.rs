//! What Tarn's calls return, as plain Python dicts (the shape `deltalake`'s metrics and
//! history take), so they print, compare and serialise without more classes.

use pyo3::prelude::*;
use pyo3::types::PyDict;

/// A write's outcome: the version it made and what it wrote.
pub(crate) fn write<'py>(py: Python<'py>, o: &tarn::WriteOutcome) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("version", o.commit.version)?;
    d.set_item("skipped", o.skipped)?;
    d.set_item("rows_written", o.rows_written)?;
    d.set_item("files_added", o.files_added)?;
    d.set_item("files_removed", o.files_removed)?;
    d.set_item("bytes_written", o.bytes_written)?;
    Ok(d)
}

/// A DELETE, UPDATE or MERGE's outcome: the version and its metrics.
pub(crate) fn dml<'py>(py: Python<'py>, o: &tarn::DmlOutcome) -> PyResult<Bound<'py, PyDict>> {
    let m = &o.metrics;
    let d = PyDict::new(py);
    d.set_item("version", o.commit.version)?;
    d.set_item("rows_deleted", m.rows_deleted)?;
    d.set_item("rows_updated", m.rows_updated)?;
    d.set_item("rows_inserted", m.rows_inserted)?;
    d.set_item("files_scanned", m.files_scanned)?;
    d.set_item("files_skipped", m.files_skipped)?;
    d.set_item("files_added", m.files_added)?;
    d.set_item("files_removed", m.files_removed)?;
    d.set_item("deletion_vectors_written", m.deletion_vectors_written)?;
    d.set_item("bytes_written", m.bytes_written)?;
    d.set_item("duration_ms", m.duration.as_secs_f64() * 1e3)?;
    Ok(d)
}

/// An optimize's outcome.
pub(crate) fn optimize<'py>(
    py: Python<'py>,
    o: &tarn::OptimizeOutcome,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("version", o.commit.version)?;
    d.set_item("files_removed", o.files_removed)?;
    d.set_item("files_added", o.files_added)?;
    d.set_item("partitions_optimized", o.partitions_optimized)?;
    d.set_item("deletion_vectors_purged", o.deletion_vectors_purged)?;
    d.set_item("rows", o.rows)?;
    d.set_item("bytes_removed", o.bytes_removed)?;
    d.set_item("bytes_added", o.bytes_added)?;
    d.set_item("duration_ms", o.duration.as_secs_f64() * 1e3)?;
    Ok(d)
}

/// A vacuum's outcome: the files it deleted (or would, on a dry run).
pub(crate) fn vacuum<'py>(
    py: Python<'py>,
    o: &tarn::VacuumOutcome,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("files", o.files.clone())?;
    d.set_item("bytes", o.bytes)?;
    d.set_item("dry_run", o.dry_run)?;
    d.set_item("retention_hours", o.retention.as_secs_f64() / 3600.0)?;
    Ok(d)
}

/// One commit of the table's history.
pub(crate) fn commit<'py>(py: Python<'py>, c: &tarn::CommitRecord) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("version", c.version)?;
    d.set_item("timestamp", c.timestamp_ms)?;
    d.set_item("operation", c.operation.clone())?;
    d.set_item("operation_parameters", c.parameters.clone())?;
    d.set_item("operation_metrics", c.metrics.clone())?;
    d.set_item("engine_info", c.engine_info.clone())?;
    d.set_item("txn_id", c.txn_id.clone())?;
    d.set_item("read_version", c.read_version)?;
    d.set_item("isolation_level", c.isolation_level.clone())?;
    d.set_item("is_blind_append", c.is_blind_append)?;
    d.set_item("user_metadata", c.user_metadata.clone())?;
    d.set_item("group_members", c.group_members.clone())?;
    let apps: Vec<(String, i64)> = c
        .app_transactions
        .iter()
        .map(|t| (t.app_id.clone(), t.version))
        .collect();
    d.set_item("app_transactions", apps)?;
    Ok(d)
}

/// An index's description.
pub(crate) fn index<'py>(py: Python<'py>, i: &tarn::IndexInfo) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", i.name.clone())?;
    d.set_item("column", i.definition.column.clone())?;
    d.set_item("kind", i.definition.kind.name())?;
    d.set_item("segments", i.segments)?;
    d.set_item("files_covered", i.files_covered)?;
    d.set_item("files_total", i.files_total)?;
    d.set_item("rows", i.rows)?;
    d.set_item("bytes", i.bytes)?;
    Ok(d)
}
