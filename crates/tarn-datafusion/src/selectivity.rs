//! How many rows a scan's pushed filters keep, estimated for the planner. Tarn takes the
//! filters it answers `Exact`, so no `FilterExec` is left above the scan to scale its row
//! count; without this, a dimension filtered down to a few rows looks as large as the
//! whole table and DataFusion repartitions the fact table to join it.

use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use datafusion::catalog::Session;
use datafusion::common::{Column, ColumnStatistics, DFSchema};
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::{Expr, Operator};
use datafusion::physical_expr::expressions::BinaryExpr;
use datafusion::physical_expr::intervals::utils::check_support;
use datafusion::physical_expr::{AnalysisContext, ExprBoundaries, PhysicalExpr, analyze};

use crate::dynamic::PartitionKey;

/// What share of a table's rows a scan's filters keep: a share of the whole table, which
/// the plan's files also bound, and a share of what is left.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Selectivity {
    /// The table's rows, live, when the log counts them.
    table_rows: Option<usize>,
    /// What the filters judged against the whole table's statistics keep of it: interval
    /// analysis over its bounds and null counts.
    of_table: f64,
    /// What the other filters keep of what is left.
    rest: f64,
}

impl Selectivity {
    /// The rows estimated to pass out of `planned` rows, those of the files the plan kept.
    /// The plan's pruning and the table's statistics each bound the rows, and the smaller
    /// counts: an upper bound, since the two may be independent. At least one row of a
    /// plan with rows, so an estimate is never mistaken for an empty input.
    pub(crate) fn rows(&self, planned: usize) -> usize {
        let planned = planned as f64;
        let of_table = self
            .table_rows
            .map_or(planned * self.of_table, |t| t as f64 * self.of_table);
        // Rounded, not ceiled: 400 x 0.2 x 0.2 is 16.000000000000004 in floats.
        let rows = (of_table.min(planned) * self.rest).round() as usize;
        rows.max(usize::from(planned > 0.0))
    }
}

/// What `filters` keep of a table whose columns' statistics are `columns`. Like
/// DataFusion's `FilterExec`: interval analysis over the table's bounds for the
/// comparisons it can analyse (numbers, dates, timestamps on columns with bounds), and
/// the session's `default_filter_selectivity` for the rest. Unlike it:
/// - `IS [NOT] NULL` on a column counts its share of rows from the null counts;
/// - the default counts once for each conjunct that pins a column to values (`=`, `IN`,
///   `OR`s of `=` on one column) and once for all other conjuncts together. `FilterExec`
///   counts it once for everything, which leaves three equalities on strings keeping a
///   fifth of a dimension's rows, too many for a join to broadcast it;
/// - a conjunct on partition columns alone that cannot be analysed counts for nothing:
///   the plan's files, which it narrowed, already bound the rows.
///
/// Never fails: what cannot be estimated otherwise counts as the default.
pub(crate) fn of(
    state: &dyn Session,
    schema: &SchemaRef,
    columns: &[ColumnStatistics],
    table_rows: Option<usize>,
    partitions: &[PartitionKey],
    filters: &[Expr],
) -> Selectivity {
    let mut selectivity = Selectivity {
        table_rows,
        of_table: 1.0,
        rest: 1.0,
    };
    let Ok(df_schema) = DFSchema::try_from(schema.as_ref().clone()) else {
        return selectivity;
    };
    let mut analysable: Vec<Arc<dyn PhysicalExpr>> = Vec::new();
    let mut pins = 0;
    let mut others = false;
    for conjunct in filters.iter().flat_map(split_conjunction) {
        if let Some(kept) = null_test_share(conjunct, schema, columns, table_rows) {
            selectivity.of_table *= kept;
            continue;
        }
        let physical = state.create_physical_expr(conjunct.clone(), &df_schema);
        match physical {
            Ok(physical)
                if check_support(&physical, schema) && bounded(conjunct, schema, columns) =>
            {
                analysable.push(physical)
            }
            _ if on_partitions_only(conjunct, partitions) => {}
            _ if pinned_column(conjunct).is_some() => pins += 1,
            _ => others = true,
        }
    }
    let predicate = analysable
        .into_iter()
        .reduce(|a, b| Arc::new(BinaryExpr::new(a, Operator::And, b)));
    if let Some(predicate) = predicate {
        match analysis_share(&predicate, schema, columns) {
            Some(kept) => selectivity.of_table *= kept.clamp(0.0, 1.0),
            None => others = true,
        }
    }
    selectivity.rest *= default_selectivity(state).powi(pins + i32::from(others));
    selectivity
}

/// The session's selectivity for a filter it cannot analyse.
fn default_selectivity(state: &dyn Session) -> f64 {
    f64::from(state.config_options().optimizer.default_filter_selectivity) / 100.0
}

/// Whether every column `conjunct` reads has both bounds: analysis counts an unbounded
/// column as keeping every row.
fn bounded(conjunct: &Expr, schema: &SchemaRef, columns: &[ColumnStatistics]) -> bool {
    conjunct.column_refs().iter().all(|c| {
        let Some(column) = schema.index_of(&c.name).ok().and_then(|i| columns.get(i)) else {
            return false;
        };
        column.min_value.get_value().is_some() && column.max_value.get_value().is_some()
    })
}

/// What interval analysis of `predicate` over the columns' bounds keeps, when it can say.
fn analysis_share(
    predicate: &Arc<dyn PhysicalExpr>,
    schema: &SchemaRef,
    columns: &[ColumnStatistics],
) -> Option<f64> {
    // A column whose bounds make no interval (a type analysis lacks) counts as unbounded.
    let boundaries = columns
        .iter()
        .enumerate()
        .map(|(i, column)| {
            ExprBoundaries::try_from_column(schema, column, i).or_else(|_| {
                ExprBoundaries::try_from_column(schema, &ColumnStatistics::new_unknown(), i)
            })
        })
        .collect::<datafusion::common::Result<Vec<_>>>()
        .ok()?;
    let analysis = analyze(predicate, AnalysisContext::new(boundaries), schema).ok()?;
    analysis.selectivity
}

/// The share of the table's rows an `IS NULL` or `IS NOT NULL` on a column keeps, from
/// its null count.
fn null_test_share(
    conjunct: &Expr,
    schema: &SchemaRef,
    columns: &[ColumnStatistics],
    rows: Option<usize>,
) -> Option<f64> {
    let (column, keeps_nulls) = match conjunct {
        Expr::IsNull(inner) => (inner.as_ref(), true),
        Expr::IsNotNull(inner) => (inner.as_ref(), false),
        _ => return None,
    };
    let Expr::Column(column) = column else {
        return None;
    };
    let index = schema.index_of(&column.name).ok()?;
    let nulls = *columns.get(index)?.null_count.get_value()?;
    let rows = rows.filter(|r| *r > 0)?;
    let null_share = (nulls as f64 / rows as f64).min(1.0);
    Some(match keeps_nulls {
        true => null_share,
        false => 1.0 - null_share,
    })
}

/// The column `conjunct` pins to some values (`=` a literal, `IN` a list, or `OR`s of
/// those on one column, as DataFusion rewrites short `IN` lists), if it does.
fn pinned_column(conjunct: &Expr) -> Option<&Column> {
    match conjunct {
        Expr::BinaryExpr(b) if b.op == Operator::Eq => match (b.left.as_ref(), b.right.as_ref()) {
            (Expr::Column(c), Expr::Literal(..)) | (Expr::Literal(..), Expr::Column(c)) => Some(c),
            _ => None,
        },
        Expr::BinaryExpr(b) if b.op == Operator::Or => {
            let left = pinned_column(&b.left)?;
            (pinned_column(&b.right)? == left).then_some(left)
        }
        Expr::InList(list) if !list.negated => match list.expr.as_ref() {
            Expr::Column(c) => Some(c),
            _ => None,
        },
        _ => None,
    }
}

/// Whether `conjunct` reads partition columns and nothing else.
fn on_partitions_only(conjunct: &Expr, partitions: &[PartitionKey]) -> bool {
    let columns = conjunct.column_refs();
    !columns.is_empty()
        && columns
            .iter()
            .all(|c| partitions.iter().any(|p| p.name == c.name))
}
