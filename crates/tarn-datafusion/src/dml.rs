//! SQL statements that change a table (INSERT, DELETE, UPDATE, TRUNCATE, MERGE) as one
//! execution plan each: it runs the Tarn operation (one commit) when executed and
//! returns the one-row `count` DataFusion expects.

use std::fmt;
use std::sync::Arc;

use arrow::array::{RecordBatch, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{DataFusionError, Result, internal_err};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::expressions::{CastExpr, Literal};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties, execute_stream,
};
use futures::TryStreamExt;
use tarn::expr::Expr;
use tarn::{Table, WriteMode};

use crate::merge::SqlMerge;
use crate::shared::SharedTable;
use crate::to_datafusion;

/// What a statement does to the table.
#[derive(Debug, Clone)]
pub(crate) enum Change {
    /// INSERT INTO (append) or INSERT OVERWRITE: the rows of `input`, without the
    /// identity and generated columns the statement leaves out (`drawn`), which Tarn
    /// draws or computes.
    Insert {
        input: Arc<dyn ExecutionPlan>,
        mode: WriteMode,
        drawn: Arc<[String]>,
    },
    /// DELETE FROM ... WHERE `predicate`, or TRUNCATE (every row).
    Delete { predicate: Expr },
    /// UPDATE ... SET `sets` WHERE `predicate`.
    Update {
        predicate: Expr,
        sets: Vec<(String, Expr)>,
    },
    /// MERGE INTO ... USING the rows of `source`.
    Merge {
        source: Arc<dyn ExecutionPlan>,
        merge: SqlMerge,
    },
}

/// The plan of one changing statement.
#[derive(Debug)]
pub(crate) struct ChangeExec {
    table: Arc<SharedTable>,
    change: Change,
    properties: Arc<PlanProperties>,
}

/// `count UInt64`, the one column a changing statement returns.
fn count_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new(
        "count",
        DataType::UInt64,
        false,
    )]))
}

impl ChangeExec {
    pub(crate) fn new(table: Arc<SharedTable>, change: Change) -> Self {
        let properties = PlanProperties::new(
            EquivalenceProperties::new(count_schema()),
            Partitioning::UnknownPartitioning(1),
            EmissionType::Final,
            Boundedness::Bounded,
        );
        Self {
            table,
            change,
            properties: Arc::new(properties),
        }
    }
}

impl DisplayAs for ChangeExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.change {
            Change::Insert { mode, .. } => write!(f, "TarnInsertExec: mode={mode:?}"),
            Change::Delete { predicate } => write!(f, "TarnDeleteExec: predicate={predicate}"),
            Change::Update { predicate, sets } => {
                let sets: Vec<String> = sets.iter().map(|(c, e)| format!("{c} = {e}")).collect();
                write!(
                    f,
                    "TarnUpdateExec: set=[{}], predicate={predicate}",
                    sets.join(", ")
                )
            }
            Change::Merge { merge, .. } => write!(f, "TarnMergeExec: {merge}"),
        }
    }
}

impl ExecutionPlan for ChangeExec {
    fn name(&self) -> &str {
        "TarnChangeExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        match &self.change {
            Change::Insert { input, .. } => vec![input],
            Change::Merge { source, .. } => vec![source],
            _ => Vec::new(),
        }
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let change = match (&self.change, children.as_slice()) {
            (Change::Insert { mode, drawn, .. }, [input]) => Change::Insert {
                input: Arc::clone(input),
                mode: *mode,
                drawn: Arc::clone(drawn),
            },
            (Change::Merge { merge, .. }, [source]) => Change::Merge {
                source: Arc::clone(source),
                merge: merge.clone(),
            },
            (Change::Insert { .. } | Change::Merge { .. }, _) => {
                return internal_err!("an INSERT or MERGE plan takes exactly one input");
            }
            (other, []) => other.clone(),
            _ => return internal_err!("a DELETE or UPDATE plan takes no input"),
        };
        Ok(Arc::new(Self::new(Arc::clone(&self.table), change)))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        if partition != 0 {
            return internal_err!("a changing statement has one partition, not {partition}");
        }
        let (table, change) = (Arc::clone(&self.table), self.change.clone());
        let run = async move {
            let count = run(table, change, context).await?;
            RecordBatch::try_new(
                count_schema(),
                vec![Arc::new(UInt64Array::from(vec![count]))],
            )
            .map_err(DataFusionError::from)
        };
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            count_schema(),
            futures::stream::once(run),
        )))
    }
}

/// The columns an INSERT leaves out, read from its `input`: DataFusion puts a projection
/// on top of the statement's source that fills each of them with a (cast) NULL literal.
/// Decided once per statement, so a column given as NULL in some rows stays given.
pub(crate) fn left_out_columns(input: &Arc<dyn ExecutionPlan>) -> Vec<String> {
    let mut plan = Arc::clone(input);
    loop {
        if let Some(projection) = plan.downcast_ref::<ProjectionExec>() {
            return projection
                .expr()
                .iter()
                .filter(|p| is_null_literal(&p.expr))
                .map(|p| p.alias.clone())
                .collect();
        }
        // Only through nodes that pass the projection's columns on unchanged.
        let child = match plan.children().as_slice() {
            [child] if child.schema().fields() == plan.schema().fields() => Arc::clone(child),
            _ => return Vec::new(),
        };
        plan = child;
    }
}

fn is_null_literal(expr: &Arc<dyn PhysicalExpr>) -> bool {
    match expr.downcast_ref::<CastExpr>() {
        Some(cast) => is_null_literal(cast.expr()),
        None => expr
            .downcast_ref::<Literal>()
            .is_some_and(|literal| literal.value().is_null()),
    }
}

/// `batch` without the `drawn` columns.
fn without_columns(batch: RecordBatch, drawn: &[String]) -> Result<RecordBatch> {
    let schema = batch.schema();
    let kept: Vec<usize> = (0..batch.num_columns())
        .filter(|i| !drawn.contains(schema.field(*i).name()))
        .collect();
    match kept.len() == batch.num_columns() {
        true => Ok(batch),
        false => Ok(batch.project(&kept)?),
    }
}

/// Runs `change` as one Tarn operation and returns the rows it inserted, deleted or
/// updated (for a MERGE, all three).
async fn run(shared: Arc<SharedTable>, change: Change, context: Arc<TaskContext>) -> Result<u64> {
    let mut table = shared.lock().await;
    let count = apply(&mut table, change, context).await;
    // Later queries read what the statement committed.
    shared.publish(&table);
    count
}

/// Runs `change` on `table`.
async fn apply(table: &mut Table, change: Change, context: Arc<TaskContext>) -> Result<u64> {
    match change {
        Change::Insert { input, mode, drawn } => {
            let rows = execute_stream(input, context)?
                .map_err(|e| DataFusionError::Context("the INSERT's input".into(), Box::new(e)))
                .and_then(move |batch| {
                    let batch = without_columns(batch, &drawn);
                    async move { batch }
                });
            let outcome = table
                .write_stream(rows)
                .with_mode(mode)
                .execute()
                .await
                .map_err(to_datafusion)?;
            Ok(outcome.rows_written)
        }
        Change::Delete { predicate } => {
            let outcome = table
                .delete(predicate)
                .execute()
                .await
                .map_err(to_datafusion)?;
            Ok(outcome.metrics.rows_deleted)
        }
        Change::Update { predicate, sets } => {
            let mut update = table.update().filter(predicate);
            for (column, value) in sets {
                update = update.set(column, value);
            }
            let outcome = update.execute().await.map_err(to_datafusion)?;
            Ok(outcome.metrics.rows_updated)
        }
        Change::Merge { source, merge } => {
            let rows = execute_stream(source, context)?
                .map_err(|e| DataFusionError::Context("the MERGE's source".into(), Box::new(e)));
            let outcome = merge
                .execute(table.merge_stream(rows))
                .await
                .map_err(to_datafusion)?;
            let m = outcome.metrics;
            Ok(m.rows_inserted + m.rows_updated + m.rows_deleted)
        }
    }
}
