//! Row-group and page pruning: the Parquet statistics of the predicate's columns in one
//! file (per row group) or in one row group (per page, from the column index), seen
//! through the same [`StatsView`] file statistics use.

use std::collections::HashMap;

use arrow::array::{Array, ArrayRef};
use arrow::datatypes::Schema;
use parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use parquet::basic::Type as PhysicalType;

use super::ScanContext;
use super::count::has_null_literal;
use crate::expr::{ColumnName, Expr, Scalar, StatsView, may_match};
use crate::stats::ColumnInfo;

/// The row groups of a file that may hold a row matching `predicate`, each with whether
/// its statistics show every row matches (no nulls in the predicate's columns, and the
/// negation cannot match), so the decoder need not filter it. Statistics the reader
/// panics on prune nothing.
pub(super) fn matching_row_groups(
    ctx: &ScanContext,
    predicate: &Expr,
    file_schema: &Schema,
    metadata: &parquet::file::metadata::ParquetMetaData,
    partitions: &HashMap<ColumnName, Scalar>,
) -> Vec<(usize, bool)> {
    let judged = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let stats = RowGroupStats::new(ctx, file_schema, metadata, partitions);
        let negation = predicate.clone().not();
        let columns = predicate.columns();
        let exact = !has_null_literal(predicate);
        (0..metadata.num_row_groups())
            .filter_map(|rg| {
                let view = stats.at(rg);
                may_match(predicate, &view).then(|| {
                    let every = exact
                        && columns.iter().all(|c| view.null_count(c) == Some(0))
                        && !may_match(&negation, &view);
                    (rg, every)
                })
            })
            .collect()
    }));
    judged.unwrap_or_else(|_| {
        (0..metadata.num_row_groups())
            .map(|rg| (rg, false))
            .collect()
    })
}

/// Statistics of the predicate's top-level columns in units of one file: its row groups,
/// or the pages of one row group.
pub(super) struct RowGroupStats<'a> {
    mins: HashMap<ColumnName, ArrayRef>,
    maxes: HashMap<ColumnName, ArrayRef>,
    nulls: HashMap<ColumnName, arrow::array::UInt64Array>,
    rows: Vec<u64>,
    columns: &'a HashMap<ColumnName, ColumnInfo>,
    partitions: &'a HashMap<ColumnName, Scalar>,
}

impl<'a> RowGroupStats<'a> {
    pub(super) fn new(
        ctx: &'a ScanContext,
        file_schema: &Schema,
        metadata: &parquet::file::metadata::ParquetMetaData,
        partitions: &'a HashMap<ColumnName, Scalar>,
    ) -> Self {
        let descr = metadata.file_metadata().schema_descr();
        let mut stats = Self {
            mins: HashMap::new(),
            maxes: HashMap::new(),
            nulls: HashMap::new(),
            rows: metadata
                .row_groups()
                .iter()
                .map(|rg| rg.num_rows() as u64)
                .collect(),
            columns: &ctx.columns,
            partitions,
        };
        for (column, info) in &ctx.columns {
            // Row-group statistics are read for top-level columns only.
            let [physical] = info.physical.as_slice() else {
                continue;
            };
            let Ok(converter) = StatisticsConverter::try_new(physical, file_schema, descr) else {
                continue;
            };
            // A row group without a null count has unknown nulls, not none.
            let converter = converter.with_missing_null_counts_as_zero(false);
            // INT96 statistics are not ordered by time in files written by Spark.
            if converter
                .parquet_column_index()
                .is_some_and(|i| descr.column(i).physical_type() == PhysicalType::INT96)
            {
                continue;
            }
            let groups = metadata.row_groups().iter();
            if let Ok(mins) = converter.row_group_mins(groups.clone()) {
                stats.mins.insert(column.clone(), mins);
            }
            if let Ok(maxes) = converter.row_group_maxes(groups.clone()) {
                stats.maxes.insert(column.clone(), maxes);
            }
            if let Ok(nulls) = converter.row_group_null_counts(groups) {
                stats.nulls.insert(column.clone(), nulls);
            }
        }
        stats
    }

    /// Statistics of the pages of `column` in one row group: their bounds, null counts
    /// and rows (`rows[i]` rows in page `i`).
    pub(super) fn of_pages(
        ctx: &'a ScanContext,
        partitions: &'a HashMap<ColumnName, Scalar>,
        column: &ColumnName,
        (mins, maxes, nulls): (ArrayRef, ArrayRef, arrow::array::UInt64Array),
        rows: Vec<u64>,
    ) -> Self {
        Self {
            mins: HashMap::from([(column.clone(), mins)]),
            maxes: HashMap::from([(column.clone(), maxes)]),
            nulls: HashMap::from([(column.clone(), nulls)]),
            rows,
            columns: &ctx.columns,
            partitions,
        }
    }

    /// The number of units (row groups or pages).
    pub(super) fn units(&self) -> usize {
        self.rows.len()
    }

    /// Rows in unit `i`.
    pub(super) fn rows_of(&self, unit: usize) -> u64 {
        self.rows[unit]
    }

    pub(super) fn at(&self, row_group: usize) -> RowGroupView<'_> {
        RowGroupView {
            stats: self,
            row_group,
        }
    }
}

pub(super) struct RowGroupView<'a> {
    stats: &'a RowGroupStats<'a>,
    row_group: usize,
}

impl RowGroupView<'_> {
    fn bound(&self, column: &ColumnName, arrays: &HashMap<ColumnName, ArrayRef>) -> Option<Scalar> {
        if let Some(v) = self.stats.partitions.get(column) {
            return Some(v.clone());
        }
        let info = self.stats.columns.get(column)?;
        let array = arrays.get(column)?;
        Scalar::from_array(array.as_ref(), self.row_group, info.ty).filter(|v| !v.is_null())
    }
}

impl StatsView for RowGroupView<'_> {
    fn min(&self, column: &ColumnName) -> Option<Scalar> {
        self.bound(column, &self.stats.mins)
    }

    fn max(&self, column: &ColumnName) -> Option<Scalar> {
        self.bound(column, &self.stats.maxes)
    }

    fn null_count(&self, column: &ColumnName) -> Option<u64> {
        if let Some(v) = self.stats.partitions.get(column) {
            return if v.is_null() {
                self.row_count()
            } else {
                Some(0)
            };
        }
        let nulls = self.stats.nulls.get(column)?;
        (!nulls.is_null(self.row_group)).then(|| nulls.value(self.row_group))
    }

    fn row_count(&self) -> Option<u64> {
        self.stats.rows.get(self.row_group).copied()
    }

    fn all_null(&self, column: &ColumnName) -> bool {
        match self.stats.partitions.get(column) {
            Some(v) => v.is_null(),
            None => {
                matches!((self.null_count(column), self.row_count()), (Some(n), Some(r)) if n == r)
            }
        }
    }
}
