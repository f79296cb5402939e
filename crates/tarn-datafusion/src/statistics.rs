//! A snapshot's statistics in DataFusion's terms: live rows and, per column, bounds and
//! null counts from the log, each exact only where Tarn says it is (no deletion vector,
//! bounds the writer does not truncate), so the planner never answers from a guess.

use arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::stats::Precision;
use datafusion::common::{ScalarValue, Statistics};
use tarn::Snapshot;
use tarn::expr::Scalar;

/// The statistics of `snapshot`, whose columns are `schema`'s; `None` when a partition
/// value does not parse (the scan will say so).
pub(crate) fn of(snapshot: &Snapshot, schema: &SchemaRef) -> Option<Statistics> {
    let mut statistics = Statistics::new_unknown(schema);
    let rows: Option<u64> = snapshot.files().map(crate::live_rows).sum();
    statistics.num_rows = rows
        .and_then(|r| usize::try_from(r).ok())
        .map_or(Precision::Absent, Precision::Exact);
    let columns = snapshot.column_statistics().ok()?;
    for ((field, column), out) in schema
        .fields()
        .iter()
        .zip(columns)
        .zip(statistics.column_statistics.iter_mut())
    {
        out.null_count = match (
            column.null_count.map(usize::try_from),
            column.exact_null_count,
        ) {
            (Some(Ok(n)), true) => Precision::Exact(n),
            (Some(Ok(n)), false) => Precision::Inexact(n),
            _ => Precision::Absent,
        };
        let bound = |value: Option<Scalar>| {
            let value = value.and_then(|v| scalar_value(&v, field.data_type()));
            match (value, column.exact_bounds) {
                (Some(v), true) => Precision::Exact(v),
                (Some(v), false) => Precision::Inexact(v),
                (None, _) => Precision::Absent,
            }
        };
        out.min_value = bound(column.min);
        out.max_value = bound(column.max);
    }
    Some(statistics)
}

/// A Tarn constant as DataFusion's, in the column's Arrow type.
fn scalar_value(value: &Scalar, ty: &DataType) -> Option<ScalarValue> {
    let array = value.to_array(ty, 1).ok()?;
    ScalarValue::try_from_array(&array, 0).ok()
}
