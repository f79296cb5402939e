//! What the log tells of a snapshot's columns with no data object read: bounds and null
//! counts gathered from every file's statistics and partition values, for query planners
//! (DataFusion's table statistics) to estimate with.

use std::cmp::Ordering;

use super::min_max::pick;
use super::plan_stats::file_partition_values;
use crate::error::Result;
use crate::expr::{ColumnName, Scalar, StatsView};
use crate::protocol::DataType;
use crate::snapshot::Snapshot;
use crate::stats::{AnyStats, FileStatsView, column_infos};

/// The log's statistics of one top-level column over a snapshot's live rows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ColumnStatistics {
    /// No live non-null value is below it; `None` when a file gives no bound (or the
    /// column is nested, or its type was widened).
    pub min: Option<Scalar>,
    /// No live non-null value is above it; `None` as for `min`.
    pub max: Option<Scalar>,
    /// Whether `min` and `max` are values some live row holds: for integer, decimal and
    /// date columns (whose bounds the writer does not truncate) of a snapshot with no
    /// deletion vector.
    pub exact_bounds: bool,
    /// How many live rows are null in the column; `None` when a file does not say.
    pub null_count: Option<u64>,
    /// Whether `null_count` is exact rather than an upper bound (it counts rows a
    /// deletion vector removed).
    pub exact_null_count: bool,
}

/// Bounds and null counts as files are added in.
struct Gathering {
    bounds: Option<(Scalar, Scalar)>,
    bounded: bool,
    nulls: Option<u64>,
}

impl Snapshot {
    /// Statistics of each top-level column, in schema order, from the log alone.
    ///
    /// Fails with [`crate::Error::InvalidPartitionValue`] when a file's partition value
    /// does not parse as its column's type.
    pub fn column_statistics(&self) -> Result<Vec<ColumnStatistics>> {
        let schema = self.schema();
        let names: Vec<ColumnName> = schema
            .fields
            .iter()
            .map(|f| ColumnName::new([f.name.clone()]))
            .collect();
        let infos = column_infos(schema, names.iter().cloned());
        let mut gathered: Vec<Gathering> = names
            .iter()
            .map(|_| Gathering {
                bounds: None,
                bounded: true,
                nulls: Some(0),
            })
            .collect();
        let mut deletions = false;
        for add in self.files() {
            deletions |= add.deletion_vector.is_some();
            let partitions = file_partition_values(self, add)?;
            let stats = AnyStats::of(add);
            let view = FileStatsView {
                stats: stats.as_ref(),
                columns: &infos,
                partitions: &partitions,
            };
            for (name, column) in names.iter().zip(&mut gathered) {
                column.nulls = column.nulls.zip(view.null_count(name)).map(|(a, b)| a + b);
                if !column.bounded || view.all_null(name) {
                    continue;
                }
                let (Some(low), Some(high)) = (view.min(name), view.max(name)) else {
                    column.bounded = false;
                    continue;
                };
                // A null bound of a file not shown to be all null says nothing.
                if low.is_null() || high.is_null() {
                    column.bounded = false;
                    continue;
                }
                column.bounds = Some(match column.bounds.take() {
                    None => (low, high),
                    Some((min, max)) => (
                        pick(min, low, Ordering::Greater),
                        pick(max, high, Ordering::Less),
                    ),
                });
            }
        }
        Ok(schema
            .fields
            .iter()
            .zip(gathered)
            .map(|(field, column)| {
                let exact_type = matches!(
                    field.data_type,
                    DataType::Primitive(ty) if ty.keeps_exact_bounds()
                );
                let (min, max) = match (column.bounded, column.bounds) {
                    (true, Some((min, max))) => (Some(min), Some(max)),
                    _ => (None, None),
                };
                ColumnStatistics {
                    exact_bounds: min.is_some() && exact_type && !deletions,
                    min,
                    max,
                    exact_null_count: column.nulls.is_some() && !deletions,
                    null_count: column.nulls,
                }
            })
            .collect())
    }
}
