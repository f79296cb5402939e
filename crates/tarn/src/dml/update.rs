//! UPDATE: set columns of the rows a predicate matches, and the assignment machinery
//! MERGE shares.

use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, RecordBatch};
use arrow::compute::{CastOptions, cast_with_options, filter_record_batch};

use super::rewrite::{ChunkChange, Decide};
use super::{
    ChangeKind, ChangeStrategy, DmlMetrics, DmlOutcome, Feed, FileChange, apply_changes, finish,
    now, positions_of, read_planned, records_feed, refuse_if_append_only, resolve_strategy,
    rewrite_in_place, start, true_mask,
};
use crate::error::{Error, Result};
use crate::expr::{
    Expr, Scalar, arithmetic_type, evaluate_predicate, evaluate_value, resolve_column,
};
use crate::protocol::{DataType, StructType};
use crate::scan::bind_predicate;
use crate::snapshot::Snapshot;
use crate::table::Table;
use crate::write::Identity;

/// A bound assignment: the target column's index in the table schema and the value.
#[derive(Debug, Clone)]
pub(crate) struct Assignment {
    pub(crate) index: usize,
    pub(crate) value: Expr,
}

/// Checks `column = value` against the table schema (for the column) and `values` (the
/// schema the value expression reads). A literal is converted to the column's type; any
/// other value must have it, or a narrower number type.
pub(crate) fn bind_assignment(
    table: &StructType,
    values: &StructType,
    column: &str,
    value: &Expr,
) -> Result<Assignment> {
    let index = table
        .fields
        .iter()
        .position(|f| f.name == column)
        .ok_or_else(|| Error::UnknownColumn {
            column: column.to_string(),
            available: table.field_names(),
        })?;
    let field = &table.fields[index];
    let Some(target) = field.data_type.as_primitive() else {
        return bind_whole(&field.data_type, values, column, value)
            .map(|value| Assignment { index, value });
    };
    let (bound, ty) = value.bind_value(values)?;
    let mismatch = |found: String| Error::TypeMismatch {
        column: column.to_string(),
        expected: target.to_string(),
        found,
    };
    let value = match (&bound, ty) {
        (Expr::Literal(v), _) => Expr::Literal(
            v.coerce_to(target)
                .ok_or_else(|| mismatch(format!("{v}")))?,
        ),
        (_, None) => Expr::Literal(Scalar::Null),
        (_, Some(t)) if t == target || arithmetic_type(Some(t), Some(target)) == Some(target) => {
            bound
        }
        (_, Some(t)) => return Err(mismatch(format!("{value} of type {t}"))),
    };
    Ok(Assignment { index, value })
}

/// A nested column (struct, array, map) takes another column's value whole, when Arrow
/// converts one type to the other, or null.
fn bind_whole(target: &DataType, values: &StructType, column: &str, value: &Expr) -> Result<Expr> {
    let mismatch = |found: String| Error::TypeMismatch {
        column: column.to_string(),
        expected: format!("a column of type {target} (nested columns are assigned whole)"),
        found,
    };
    match value {
        Expr::Literal(Scalar::Null) => Ok(value.clone()),
        Expr::Column(name) => {
            let found = resolve_column(values, name)?;
            match arrow::compute::can_cast_types(&found.to_arrow(), &target.to_arrow()) {
                true => Ok(value.clone()),
                false => Err(mismatch(format!("{name} of type {found}"))),
            }
        }
        other => Err(mismatch(other.to_string())),
    }
}

/// The rows with assigned columns replaced; values are computed on `inputs`, a batch with
/// one row per row of `rows`.
pub(crate) fn assign(
    rows: &RecordBatch,
    inputs: &RecordBatch,
    assignments: &[Assignment],
) -> Result<RecordBatch> {
    let mut columns: Vec<ArrayRef> = rows.columns().to_vec();
    let schema = rows.schema();
    for a in assignments {
        let target = schema.field(a.index).data_type();
        let value = evaluate_value(&a.value, inputs)?;
        let options = CastOptions {
            safe: false,
            ..Default::default()
        };
        columns[a.index] = cast_with_options(&value, target, &options).map_err(Error::arrow(
            format!("assigning column {}", schema.field(a.index).name()),
        ))?;
    }
    RecordBatch::try_new(Arc::clone(&schema), columns).map_err(|e| Error::SchemaMismatch {
        reason: format!("updated rows do not fit the table: {e}"),
    })
}

/// Fails when assignments move rows between partitions without leave: a partition
/// column of an updated row that ends with another value.
pub(crate) fn check_partition_moves(
    snapshot: &Snapshot,
    old: &RecordBatch,
    new: &RecordBatch,
    assignments: &[Assignment],
    allowed: bool,
) -> Result<()> {
    if allowed {
        return Ok(());
    }
    let schema = snapshot.schema();
    for a in assignments {
        let name = &schema.fields[a.index].name;
        if !snapshot.partition_columns().iter().any(|p| &p.name == name) {
            continue;
        }
        let same =
            arrow::compute::kernels::cmp::not_distinct(old.column(a.index), new.column(a.index))
                .map_err(Error::arrow("comparing partition values"))?;
        if same.true_count() != same.len() {
            return Err(Error::InvalidArgument {
                name: "assignments",
                reason: format!(
                    "{name:?} is a partition column: the update moves rows to other partitions; \
                     say so with with_partition_moves(true)"
                ),
            });
        }
    }
    Ok(())
}

/// An UPDATE being configured; run it with [`execute`](Self::execute).
#[derive(Debug)]
#[must_use]
pub struct UpdateBuilder<'a> {
    table: &'a mut Table,
    predicate: Option<Expr>,
    assignments: Vec<(String, Expr)>,
    strategy: Option<ChangeStrategy>,
    allow_partition_moves: bool,
}

impl Table {
    /// Starts an update: `table.update().filter(p).set("col", value).execute()`.
    pub fn update(&mut self) -> UpdateBuilder<'_> {
        UpdateBuilder {
            table: self,
            predicate: None,
            assignments: Vec::new(),
            strategy: None,
            allow_partition_moves: false,
        }
    }
}

impl UpdateBuilder<'_> {
    /// Only rows matching `predicate` (default: every row).
    pub fn filter(mut self, predicate: Expr) -> Self {
        self.predicate = Some(predicate);
        self
    }

    /// Sets `column` to `value`: a literal, another column, or arithmetic on columns
    /// (all computed from the row's values before the update).
    pub fn set(mut self, column: impl Into<String>, value: Expr) -> Self {
        self.assignments.push((column.into(), value));
        self
    }

    /// Copy-on-write or merge-on-read, overriding the table's choice.
    pub fn with_strategy(mut self, strategy: ChangeStrategy) -> Self {
        self.strategy = Some(strategy);
        self
    }

    /// Whether assigning partition columns (moving rows between partitions) is allowed.
    pub fn with_partition_moves(mut self, allow: bool) -> Self {
        self.allow_partition_moves = allow;
        self
    }

    /// Updates the rows and commits.
    ///
    /// Fails with [`Error::UnknownColumn`] / [`Error::TypeMismatch`] for predicates or
    /// assignments that do not fit the schema, [`Error::InvalidArgument`] for no or
    /// duplicate assignments, partition columns assigned without
    /// `with_partition_moves`, or a `GENERATED ALWAYS` identity column assigned,
    /// [`Error::FeatureNotEnabled`] for merge-on-read without deletion vectors,
    /// [`Error::AppendOnly`] on an append-only table,
    /// [`Error::SchemaMismatch`] when a non-nullable column would become null, and as
    /// [`crate::Transaction::commit`] does. Nothing is committed on failure.
    // Long by design: the statement's steps in order (bind, plan, each strategy's
    // rewrite, commit), each step a call of its own.
    pub async fn execute(self) -> Result<DmlOutcome> {
        let UpdateBuilder {
            table,
            predicate,
            assignments,
            strategy,
            allow_partition_moves,
        } = self;
        let (started, mut txn) = start(table, "UPDATE");
        let snapshot = txn.snapshot().clone();
        let strategy = resolve_strategy(&snapshot, strategy)?;
        refuse_if_append_only(&snapshot, "update")?;
        if assignments.is_empty() {
            return Err(Error::InvalidArgument {
                name: "assignments",
                reason: "an update sets at least one column".into(),
            });
        }
        let schema = snapshot.schema();
        let mut bound = Vec::new();
        for (i, (column, value)) in assignments.iter().enumerate() {
            if assignments[..i].iter().any(|(c, _)| c == column) {
                return Err(Error::InvalidArgument {
                    name: "assignments",
                    reason: format!("column {column:?} is assigned twice"),
                });
            }
            if let Some(field) = schema.field(column)
                && field.metadata.contains_key("delta.generationExpression")
            {
                return Err(Error::InvalidArgument {
                    name: "assignments",
                    reason: format!(
                        "column {column:?} is generated: assign the columns it is computed from"
                    ),
                });
            }
            if let Some(field) = schema.field(column)
                && Identity::of(field)?.is_some_and(|i| !i.allows_explicit_insert())
            {
                return Err(Error::InvalidArgument {
                    name: "assignments",
                    reason: format!(
                        "column {column:?} is GENERATED ALWAYS AS IDENTITY: its values cannot change"
                    ),
                });
            }
            bound.push(bind_assignment(schema, schema, column, value)?);
        }
        let bound_predicate = predicate
            .as_ref()
            .map(|p| bind_predicate(&snapshot, p))
            .transpose()?;
        let scan = match &predicate {
            Some(p) => snapshot.scan().filter(p.clone()),
            None => snapshot.scan(),
        };
        let plan = scan.plan().await?;
        let mut metrics = DmlMetrics {
            files_skipped: plan.total_files - plan.files.len(),
            ..Default::default()
        };
        match &predicate {
            Some(p) => {
                txn.record_read_predicate(p)?;
                txn = txn.with_parameter("predicate", p.to_string());
            }
            None => txn.record_read_whole_table(),
        }
        txn.record_read_files(&plan.files);
        txn = txn.with_parameter("strategy", format!("{strategy:?}"));

        let now = now(table);
        let cdf = records_feed(&snapshot);
        if strategy == ChangeStrategy::CopyOnWrite {
            // Updated rows take their old rows' place in the file's new version.
            let snap = snapshot.clone();
            let decide: Arc<Decide> = Arc::new(move |chunk: &RecordBatch| {
                let mask = match &bound_predicate {
                    Some(p) => true_mask(evaluate_predicate(p, chunk)?),
                    None => BooleanArray::from(vec![true; chunk.num_rows()]),
                };
                let matched =
                    filter_record_batch(chunk, &mask).map_err(Error::arrow("selecting rows"))?;
                let new = assign(&matched, &matched, &bound)?;
                check_partition_moves(&snap, &matched, &new, &bound, allow_partition_moves)?;
                let feed = match cdf {
                    true => vec![
                        (matched.clone(), ChangeKind::UpdatePreimage),
                        (new.clone(), ChangeKind::UpdatePostimage),
                    ],
                    false => Feed::new(),
                };
                let replaced = (0..chunk.num_rows() as u32)
                    .filter(|i| mask.value(*i as usize))
                    .collect();
                Ok(ChunkChange {
                    rows_updated: matched.num_rows() as u64,
                    deleted: Some(mask),
                    replacement: vec![new],
                    replaced,
                    feed,
                    ..Default::default()
                })
            });
            rewrite_in_place(&mut txn, &snapshot, plan.files, decide, now, &mut metrics).await?;
            return finish(table, txn, started, metrics).await;
        }
        let files = read_planned(&snapshot, &plan, true, None).await?;
        let hidden = super::row_ids::hidden_fields(&snapshot);
        metrics.files_scanned = files.len();
        let mut changes = Vec::new();
        let mut updated = Vec::new();
        let mut feed = Feed::new();
        for (add, rows) in files {
            let mask: BooleanArray = match &bound_predicate {
                Some(p) => true_mask(evaluate_predicate(p, &rows.batch)?),
                None => BooleanArray::from(vec![true; rows.batch.num_rows()]),
            };
            let deleted = positions_of(&rows, &mask);
            if deleted.is_empty() {
                continue;
            }
            let matched =
                filter_record_batch(&rows.batch, &mask).map_err(Error::arrow("selecting rows"))?;
            let new = assign(&matched, &matched, &bound)?;
            check_partition_moves(&snapshot, &matched, &new, &bound, allow_partition_moves)?;
            if cdf {
                feed.push((matched, ChangeKind::UpdatePreimage));
                feed.push((new.clone(), ChangeKind::UpdatePostimage));
            }
            // Updated rows keep their row ids when the table keeps them.
            let new = match &rows.ids {
                Some(ids) => {
                    let order: Vec<u32> = (0..new.num_rows() as u32).collect();
                    ids.filter(&mask)?.updated(&new, &order, &hidden)?
                }
                None => new,
            };
            txn.note_row_ids_kept(rows.ids.is_some());
            updated.push(new);
            metrics.rows_updated += deleted.len();
            changes.push(FileChange { add, rows, deleted });
        }
        apply_changes(
            &mut txn,
            &snapshot,
            changes,
            updated,
            feed,
            now,
            &mut metrics,
        )
        .await?;
        finish(table, txn, started, metrics).await
    }
}
