//! `MIN(column), MAX(column)` from the log: where every file the scan plans has exact
//! statistics for the column and no deletion vector (deleted rows may have held the
//! extremes), the answer comes from `minValues` / `maxValues` with no data object read.
//! Otherwise the column is read (only it, and what the predicate needs).

use std::cmp::Ordering;
use std::sync::Arc;

use arrow::array::Array;
use arrow::compute::{SortOptions, sort_limit};
use futures::TryStreamExt;

use super::{PlannedFile, Scan, ScanContext};
use crate::error::{Error, Result};
use crate::expr::{ColumnName, Scalar, StatsView};
use crate::protocol::{DataType, PrimitiveType};
use crate::stats::{AnyStats, FileStatsView};

/// The smallest and largest non-null values of a column, and how they were found.
#[derive(Debug, Clone, PartialEq)]
pub struct MinMaxOutcome {
    /// `(min, max)`; `None` when the rows hold no non-null value.
    pub bounds: Option<(Scalar, Scalar)>,
    /// Whether the statistics in the log answered, with no data object read.
    pub from_log: bool,
}

impl Scan {
    /// The smallest and largest non-null values of `column` over the rows the scan would
    /// return (`SELECT MIN(c), MAX(c)`). From the log when the predicate is absent or
    /// names partition columns only and every planned file has statistics for the
    /// column, no deletion vector, and the column's type keeps exact bounds (integers,
    /// decimals, dates); otherwise the column is read.
    ///
    /// Fails with [`Error::UnknownColumn`] for a column the table lacks,
    /// [`Error::TypeMismatch`] for a nested one, and as [`Scan::execute`] does.
    pub async fn min_max(self, column: &str) -> Result<MinMaxOutcome> {
        let scan = self.select([column]);
        let ctx = Arc::new(scan.context()?);
        let field = ctx
            .snapshot
            .schema()
            .field(column)
            .cloned()
            .ok_or_else(|| Error::UnknownColumn {
                column: column.to_string(),
                available: ctx.snapshot.schema().field_names(),
            })?;
        let DataType::Primitive(ty) = field.data_type else {
            return Err(Error::TypeMismatch {
                column: column.to_string(),
                expected: "a primitive type".into(),
                found: field.data_type.to_string(),
            });
        };
        let (files, _) = scan.plan_files(&ctx).await?;
        if scan.limit.is_none()
            && let Some(bounds) = from_log(&ctx, &files, column, ty)?
        {
            return Ok(MinMaxOutcome {
                bounds,
                from_log: true,
            });
        }
        let mut bounds: Option<(Scalar, Scalar)> = None;
        let mut stream = scan.execute().await?;
        while let Some(batch) = stream.try_next().await? {
            let array = batch.column(0);
            if array.null_count() == array.len() {
                continue;
            }
            let (Some(low), Some(high)) = (extreme(array, false, ty)?, extreme(array, true, ty)?)
            else {
                continue;
            };
            bounds = Some(match bounds {
                None => (low, high),
                Some((min, max)) => (
                    pick(min, low, Ordering::Greater),
                    pick(max, high, Ordering::Less),
                ),
            });
        }
        Ok(MinMaxOutcome {
            bounds,
            from_log: false,
        })
    }
}

/// `current`, or `candidate` when `current` compares to it as `replace_when`.
pub(super) fn pick(current: Scalar, candidate: Scalar, replace_when: Ordering) -> Scalar {
    if current.compare(&candidate) == Some(replace_when) {
        candidate
    } else {
        current
    }
}

/// The smallest (or largest) non-null value of an array.
fn extreme(array: &dyn Array, largest: bool, ty: PrimitiveType) -> Result<Option<Scalar>> {
    let options = SortOptions {
        descending: largest,
        nulls_first: false,
    };
    let top = sort_limit(array, Some(options), Some(1))
        .map_err(Error::arrow("finding a column's extremes"))?;
    Ok((top.len() == 1 && top.is_valid(0))
        .then(|| Scalar::from_array(top.as_ref(), 0, ty))
        .flatten())
}

/// The bounds from statistics, when they are exact for every planned file: `Some(None)`
/// when every planned file holds only nulls in the column (or none is planned), `None`
/// when the files must be read.
#[allow(clippy::option_option)]
fn from_log(
    ctx: &ScanContext,
    files: &[PlannedFile],
    column: &str,
    ty: PrimitiveType,
) -> Result<Option<Option<(Scalar, Scalar)>>> {
    let exact = ty.keeps_exact_bounds();
    let partition_only = ctx
        .predicate
        .as_ref()
        .is_none_or(|p| super::names_partitions_only(&ctx.snapshot, p));
    let is_partition = ctx
        .snapshot
        .partition_columns()
        .iter()
        .any(|p| p.name == column);
    if !exact || !partition_only || is_partition {
        return Ok(None);
    }
    let name = ColumnName::new([column.to_string()]);
    let columns = crate::stats::column_infos(ctx.snapshot.schema(), [name.clone()]);
    let mut bounds: Option<(Scalar, Scalar)> = None;
    for planned in files {
        if planned.add.deletion_vector.is_some() || planned.rows.is_some() {
            return Ok(None);
        }
        if let Some(p) = &ctx.predicate
            && !super::count::partitions_match(ctx, p, &planned.partitions)?
        {
            continue;
        }
        let Some(stats) = AnyStats::of(&planned.add) else {
            return Ok(None);
        };
        let view = FileStatsView {
            stats: Some(&stats),
            columns: &columns,
            partitions: &planned.partitions,
        };
        if view.all_null(&name) {
            continue;
        }
        let (Some(low), Some(high)) = (view.min(&name), view.max(&name)) else {
            return Ok(None);
        };
        bounds = Some(match bounds {
            None => (low, high),
            Some((min, max)) => (
                pick(min, low, Ordering::Greater),
                pick(max, high, Ordering::Less),
            ),
        });
    }
    Ok(Some(bounds))
}
