//! The execution plan of a Tarn scan: planned once by Tarn (partition values, file
//! statistics, indices), read in parts, one per output partition, each part every n-th
//! planned file, so DataFusion's threads read files side by side.

use std::fmt;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use datafusion::common::stats::Precision;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{ColumnStatistics, Result, Statistics, internal_err};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
};
use futures::{StreamExt, TryStreamExt};
use tarn::{Scan, ScanPlan};

use crate::to_datafusion;

/// A planned Tarn scan as a DataFusion leaf.
#[derive(Debug)]
pub(crate) struct TarnScanExec {
    scan: Scan,
    plan: Arc<ScanPlan>,
    schema: SchemaRef,
    /// What EXPLAIN shows of the predicate pushed into the scan.
    predicate: Option<String>,
    limit: Option<usize>,
    /// Rows the planned files hold, exactly when no predicate narrows them.
    rows: Precision<usize>,
    /// The projected columns' statistics, exact only for a scan of every row.
    columns: Vec<ColumnStatistics>,
    properties: Arc<PlanProperties>,
}

impl TarnScanExec {
    /// A scan of `plan`'s files (made by `scan`) in up to `parts` output partitions.
    pub(crate) fn new(
        scan: Scan,
        plan: ScanPlan,
        predicate: Option<String>,
        limit: Option<usize>,
        parts: usize,
        columns: Vec<ColumnStatistics>,
    ) -> Self {
        let schema = Arc::clone(&plan.schema);
        let parts = parts.clamp(1, plan.files.len().max(1));
        let live: Option<usize> = plan
            .files
            .iter()
            .map(|add| usize::try_from(crate::live_rows(add)?).ok())
            .sum();
        let rows = match (live, &predicate, limit) {
            (Some(rows), None, None) => Precision::Exact(rows),
            // Each part applies the limit: DataFusion's own limit above makes it exact.
            (Some(rows), None, Some(limit)) => Precision::Inexact(rows.min(limit)),
            (Some(rows), _, _) => Precision::Inexact(rows),
            (None, _, _) => Precision::Absent,
        };
        // The table's bounds still bound part of it, and its null counts exceed a part's.
        let columns = match rows {
            Precision::Exact(_) => columns,
            _ => columns.into_iter().map(|c| c.to_inexact()).collect(),
        };
        let properties = PlanProperties::new(
            EquivalenceProperties::new(Arc::clone(&schema)),
            Partitioning::UnknownPartitioning(parts),
            EmissionType::Incremental,
            Boundedness::Bounded,
        );
        Self {
            scan,
            plan: Arc::new(plan),
            schema,
            predicate,
            limit,
            rows,
            columns,
            properties: Arc::new(properties),
        }
    }

    fn parts(&self) -> usize {
        self.properties.partitioning.partition_count()
    }
}

impl DisplayAs for TarnScanExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plan = &self.plan;
        let columns: Vec<&str> = self
            .schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        write!(
            f,
            "TarnScanExec: files={} of {} (skipped by partition {}, by statistics {}, by \
             index {}), columns=[{}]",
            plan.files.len(),
            plan.total_files,
            plan.skipped_by_partition,
            plan.skipped_by_stats,
            plan.skipped_by_index,
            columns.join(", ")
        )?;
        if let Some(predicate) = &self.predicate {
            write!(f, ", predicate={predicate}")?;
        }
        if let Some(limit) = self.limit {
            write!(f, ", limit={limit}")?;
        }
        if !plan.indices.is_empty() {
            let used: Vec<String> = plan.indices.iter().map(|u| u.index.clone()).collect();
            write!(f, ", indices=[{}]", used.join(", "))?;
        }
        Ok(())
    }
}

impl ExecutionPlan for TarnScanExec {
    fn name(&self) -> &str {
        "TarnScanExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        Vec::new()
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
        match children.is_empty() {
            true => Ok(self),
            false => internal_err!("a Tarn scan has no inputs"),
        }
    }

    fn execute(
        &self,
        partition: usize,
        _context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let (scan, plan, parts) = (self.scan.clone(), Arc::clone(&self.plan), self.parts());
        let batches = futures::stream::once(async move {
            scan.execute_part(&plan, partition, parts)
                .await
                .map(|s| s.map_err(to_datafusion))
                .map_err(to_datafusion)
        })
        .try_flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            Arc::clone(&self.schema),
            batches.boxed(),
        )))
    }

    fn partition_statistics(&self, partition: Option<usize>) -> Result<Arc<Statistics>> {
        let mut statistics = Statistics::new_unknown(&self.schema);
        if partition.is_none() {
            statistics.num_rows = self.rows;
            statistics.column_statistics = self.columns.clone();
        }
        Ok(Arc::new(statistics))
    }
}
