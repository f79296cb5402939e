//! The execution plan of a Tarn scan: planned once by Tarn (partition values, file
//! statistics, indices), read in parts, one per output partition, the parts sharing the
//! planned files by their bytes (`Scan::execute_part`), so DataFusion's threads read
//! files side by side. Filters a join or a
//! TopK fills at run time skip further files by partition value ([`crate::dynamic`]).

use std::fmt;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use datafusion::common::config::ConfigOptions;
use datafusion::common::stats::Precision;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{ColumnStatistics, Result, Statistics, internal_err};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::filter_pushdown::{
    ChildPushdownResult, FilterPushdownPhase, FilterPushdownPropagation, PushedDown,
};
use datafusion::physical_plan::metrics::{
    Count, ExecutionPlanMetricsSet, MetricBuilder, MetricsSet,
};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
};
use futures::{StreamExt, TryStreamExt};
use tarn::{Scan, ScanPlan};

use crate::dynamic::{self, PartitionKey};
use crate::selectivity::Selectivity;
use crate::to_datafusion;

/// A planned Tarn scan as a DataFusion leaf.
#[derive(Debug, Clone)]
pub(crate) struct TarnScanExec {
    scan: Scan,
    plan: Arc<ScanPlan>,
    schema: SchemaRef,
    /// What EXPLAIN shows of the predicate pushed into the scan.
    predicate: Option<String>,
    limit: Option<usize>,
    /// Rows the planned files hold, exactly when no predicate narrows them; with one,
    /// an estimate of those it keeps.
    rows: Precision<usize>,
    /// The projected columns' statistics, exact only for a scan of every row.
    columns: Vec<ColumnStatistics>,
    properties: Arc<PlanProperties>,
    /// The table's partition columns, by which run-time filters skip files.
    partitions: Arc<[PartitionKey]>,
    /// Filters DataFusion fills while the query runs (a join's build-side bounds).
    dynamic: Vec<Arc<dyn PhysicalExpr>>,
    metrics: ExecutionPlanMetricsSet,
}

impl TarnScanExec {
    /// A scan of `plan`'s files (made by `scan`) in up to `parts` output partitions;
    /// `selectivity` estimates what the predicate keeps of them.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        scan: Scan,
        plan: ScanPlan,
        predicate: Option<String>,
        selectivity: Option<Selectivity>,
        limit: Option<usize>,
        parts: usize,
        columns: Vec<ColumnStatistics>,
        partitions: Arc<[PartitionKey]>,
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
            (Some(rows), _, limit) => {
                let kept = selectivity.map_or(rows, |s| s.rows(rows));
                // Each part applies the limit: DataFusion's own limit above makes it exact.
                Precision::Inexact(kept.min(limit.unwrap_or(usize::MAX)))
            }
            (None, _, _) => Precision::Absent,
        };
        // The table's bounds still bound part of it, and its null counts exceed a part's.
        // An estimate of rows also bounds the null counts.
        let columns = match rows {
            Precision::Exact(_) => columns,
            Precision::Inexact(_) => columns
                .into_iter()
                .map(|c| {
                    let mut c = c.to_inexact();
                    c.null_count = c.null_count.min(&rows);
                    c
                })
                .collect(),
            Precision::Absent => columns.into_iter().map(|c| c.to_inexact()).collect(),
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
            partitions,
            dynamic: Vec::new(),
            metrics: ExecutionPlanMetricsSet::new(),
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
        if !self.dynamic.is_empty() {
            let filters: Vec<String> = self.dynamic.iter().map(|f| f.to_string()).collect();
            write!(f, ", run-time filters=[{}]", filters.join(", "))?;
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
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        // A join fills its dynamic filter only when a plan below it holds the filter.
        for filter in &self.dynamic {
            if f(filter)? == TreeNodeRecursion::Stop {
                return Ok(TreeNodeRecursion::Stop);
            }
        }
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
        let skipper = match self.dynamic.is_empty() || self.partitions.is_empty() {
            true => None,
            false => Some(Skipper {
                filters: self.dynamic.clone(),
                schema: Arc::clone(&self.schema),
                partitions: Arc::clone(&self.partitions),
                skipped: MetricBuilder::new(&self.metrics)
                    .global_counter("files_skipped_at_run_time"),
            }),
        };
        // Run when first polled: a join polls its probe side once its build side is read,
        // so the filters it fills are complete by then.
        let batches = futures::stream::once(async move {
            let read = match skipper {
                Some(skipper) => {
                    scan.execute_part_where(&plan, partition, parts, |mine| skipper.keep(mine))
                        .await
                }
                None => scan.execute_part(&plan, partition, parts).await,
            };
            read.map(|s| s.map_err(to_datafusion))
                .map_err(to_datafusion)
        })
        .try_flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            Arc::clone(&self.schema),
            batches.boxed(),
        )))
    }

    fn handle_child_pushdown_result(
        &self,
        phase: FilterPushdownPhase,
        child_pushdown_result: ChildPushdownResult,
        config: &ConfigOptions,
    ) -> Result<FilterPushdownPropagation<Arc<dyn ExecutionPlan>>> {
        let filters: Vec<Arc<dyn PhysicalExpr>> = child_pushdown_result
            .parent_filters
            .into_iter()
            .map(|f| f.filter)
            .collect();
        // Files are skipped, rows not filtered: every filter stays with its parent.
        let answer = vec![PushedDown::No; filters.len()];
        let propagation = FilterPushdownPropagation::with_parent_pushdown_result(answer);
        // Static filters reached the provider at planning; run-time ones come after it.
        // DataFusion 55.2's MIN/MAX aggregate filter can rule out rows an aggregate still
        // needs (apache/datafusion#24816), and it stays in the plan only when a scan
        // takes it: so none is taken in a session that makes them (`register` turns
        // them off).
        let aggregates = config.optimizer.enable_aggregate_dynamic_filter_pushdown;
        if phase != FilterPushdownPhase::Post
            || filters.is_empty()
            || self.partitions.is_empty()
            || aggregates
        {
            return Ok(propagation);
        }
        let mut with_filters = self.clone();
        with_filters.dynamic.extend(filters);
        Ok(propagation.with_updated_node(Arc::new(with_filters)))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
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

/// What skips one part's files at run time: the filters, and where it counts the files.
struct Skipper {
    filters: Vec<Arc<dyn PhysicalExpr>>,
    schema: SchemaRef,
    partitions: Arc<[PartitionKey]>,
    skipped: Count,
}

impl Skipper {
    /// Which of one part's files the filters still let through, counting the others.
    fn keep(&self, mine: &[tarn::PartFile<'_>]) -> Vec<bool> {
        let files: Vec<&tarn::protocol::Add> = mine.iter().map(|f| f.add).collect();
        let kept = dynamic::keep(&files, &self.filters, &self.schema, &self.partitions);
        // A file split between parts is counted by the part that reads its start.
        let skipped = mine.iter().zip(&kept).filter(|(f, k)| f.first && !**k);
        self.skipped.add(skipped.count());
        kept
    }
}
