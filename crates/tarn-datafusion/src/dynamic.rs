//! Files skipped at run time by the filters DataFusion fills while a query runs: a hash
//! join's build side bounds its probe side's keys (and a TopK its sort key), so once the
//! build side is read, a fact table's scan opens only the partitions those bounds allow
//! (TPC-DS's `store_sales` joined to a month of `date_dim`, say).

use std::collections::HashSet;
use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, StringArray, UInt64Array};
use arrow::compute::{CastOptions, cast_with_options};
use arrow::datatypes::SchemaRef;
use datafusion::common::pruning::PruningStatistics;
use datafusion::common::{Column, ScalarValue};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr_common::physical_expr::snapshot_physical_expr;
use datafusion::physical_optimizer::pruning::PruningPredicateBuilder;
use tarn::protocol::Add;

/// A partition column: its logical name (the scan's) and its key in `partitionValues`.
#[derive(Debug, Clone)]
pub(crate) struct PartitionKey {
    pub(crate) name: String,
    pub(crate) physical_name: String,
}

/// Which of `files` the `filters` (as they stand now) may match, judged by partition
/// values alone: `true` keeps a file. A filter that cannot be judged keeps every file.
pub(crate) fn keep(
    files: &[&Add],
    filters: &[Arc<dyn PhysicalExpr>],
    schema: &SchemaRef,
    partitions: &[PartitionKey],
) -> Vec<bool> {
    let mut kept = vec![true; files.len()];
    let statistics = PartitionStatistics {
        files,
        schema,
        partitions,
    };
    for filter in filters {
        // A dynamic filter's current expression; `true` until its producer fills it.
        let Ok(now) = snapshot_physical_expr(Arc::clone(filter)) else {
            continue;
        };
        // None when it cannot prune (always true, or not a form pruning understands).
        let Some(predicate) = PruningPredicateBuilder::new()
            .with_file_schema(Arc::clone(schema))
            .build(now)
        else {
            continue;
        };
        if let Ok(may_match) = predicate.prune(&statistics) {
            for (keep, may) in kept.iter_mut().zip(may_match) {
                *keep &= may;
            }
        }
    }
    kept
}

/// The rows in a file (deleted ones too), when its statistics say.
fn rows(add: &Add) -> Option<u64> {
    add.stats.as_ref()?.num_records()
}

/// Each file as a container whose partition columns hold one value (minimum = maximum);
/// other columns are unknown, so they never skip a file. A null partition value is a
/// file of nulls in that column.
struct PartitionStatistics<'a> {
    files: &'a [&'a Add],
    schema: &'a SchemaRef,
    partitions: &'a [PartitionKey],
}

impl PartitionStatistics<'_> {
    /// The column's partition value per file, in its Arrow type (null where missing or
    /// not parseable, which prunes nothing).
    fn values(&self, column: &Column) -> Option<ArrayRef> {
        let key = self.partitions.iter().find(|p| p.name == column.name)?;
        let field = self.schema.field_with_name(&column.name).ok()?;
        let text: StringArray = self
            .files
            .iter()
            .map(|add| {
                add.partition_values
                    .get(&key.physical_name)
                    .cloned()
                    .flatten()
            })
            .collect();
        let safe = CastOptions {
            safe: true,
            ..Default::default()
        };
        cast_with_options(&text, field.data_type(), &safe).ok()
    }
}

impl PruningStatistics for PartitionStatistics<'_> {
    fn min_values(&self, column: &Column) -> Option<ArrayRef> {
        self.values(column)
    }

    fn max_values(&self, column: &Column) -> Option<ArrayRef> {
        self.values(column)
    }

    fn num_containers(&self) -> usize {
        self.files.len()
    }

    /// A null partition value makes every row of its file null in that column, so a
    /// join key's bounds rule the file out.
    fn null_counts(&self, column: &Column) -> Option<ArrayRef> {
        let key = self.partitions.iter().find(|p| p.name == column.name)?;
        let counts: UInt64Array = self
            .files
            .iter()
            .map(|add| match add.partition_values.get(&key.physical_name) {
                Some(Some(_)) => Some(0),
                Some(None) => rows(add),
                None => None,
            })
            .collect();
        Some(Arc::new(counts))
    }

    fn row_counts(&self) -> Option<ArrayRef> {
        let counts: UInt64Array = self.files.iter().map(|add| rows(add)).collect();
        Some(Arc::new(counts))
    }

    fn contained(&self, _column: &Column, _values: &HashSet<ScalarValue>) -> Option<BooleanArray> {
        None
    }
}
