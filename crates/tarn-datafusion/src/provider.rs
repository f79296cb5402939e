//! [`TarnTableProvider`]: a Tarn table as a DataFusion table. Scans push their
//! projection, limit and filters into Tarn's planner; INSERT, DELETE, UPDATE, MERGE and
//! TRUNCATE run as Tarn operations, one commit per statement.

use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::tree_node::TreeNode;
use datafusion::common::{DFSchemaRef, Result, Statistics, not_impl_err, plan_err};
use datafusion::datasource::TableType;
use datafusion::logical_expr::dml::{InsertOp, MergeIntoClause};
use datafusion::logical_expr::{Expr, Operator, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;
use tarn::expr::Expr as TarnExpr;
use tarn::{Snapshot, Table, WriteMode};

use crate::dml::{Change, ChangeExec, left_out_columns};
use crate::dynamic::PartitionKey;
use crate::expr::to_tarn;
use crate::merge::SqlMerge;
use crate::scan::TarnScanExec;
use crate::selectivity;
use crate::shared::SharedTable;
use crate::to_datafusion;

/// A Tarn table as a DataFusion [`TableProvider`].
///
/// Each query reads the handle's snapshot as of planning; statements that change the
/// table commit through the handle, so later queries see them. Other writers' commits
/// are seen after [`refresh`](Self::refresh).
#[derive(Debug, Clone)]
pub struct TarnTableProvider {
    table: Arc<SharedTable>,
    schema: SchemaRef,
    /// Read as of a past version (time travel): statements that change it are refused.
    read_only: bool,
}

impl TarnTableProvider {
    /// The provider of an open table.
    pub fn new(table: Table) -> Self {
        let schema = Arc::clone(table.snapshot().arrow_schema());
        Self {
            table: SharedTable::new(table),
            schema,
            read_only: false,
        }
    }

    /// The provider of a table read as of its current version, which stays there:
    /// [`refresh`](Self::refresh) leaves it, and INSERT, DELETE, UPDATE, MERGE and
    /// TRUNCATE are refused (they would start from a past version). Time travel
    /// (`tarn_table(url, version)`, `CREATE EXTERNAL TABLE ... OPTIONS ('version' ..)`)
    /// makes these.
    pub fn read_only(table: Table) -> Self {
        Self {
            read_only: true,
            ..Self::new(table)
        }
    }

    /// Fails when the provider is read-only: `statement` would change a past version.
    fn writable(&self, statement: &str) -> Result<()> {
        match self.read_only {
            true => plan_err!(
                "{statement} on a Tarn table read as of version {}: a past version cannot \
                 be changed; register the table at its latest version to change it",
                self.table.snapshot().version()
            ),
            false => Ok(()),
        }
    }

    /// Opens the table at `url` (a path, `memory://name` or `s3://bucket/prefix`).
    ///
    /// Fails as [`Table::open`] does.
    pub async fn open(url: &str) -> tarn::Result<Self> {
        Ok(Self::new(Table::open(url).await?))
    }

    /// The snapshot queries read now.
    pub fn snapshot(&self) -> Snapshot {
        self.table.snapshot()
    }

    /// Catches up with other writers' commits (a [`read_only`](Self::read_only) provider
    /// stays where it is).
    ///
    /// Fails as [`Table::refresh`] does.
    pub async fn refresh(&self) -> tarn::Result<()> {
        if self.read_only {
            return Ok(());
        }
        let mut table = self.table.lock().await;
        table.refresh().await?;
        self.table.publish(&table);
        Ok(())
    }

    /// The filter's Tarn form when it has one that fits the table's schema and that
    /// Tarn evaluates as DataFusion does.
    fn pushable(&self, snapshot: &Snapshot, filter: &Expr) -> Option<TarnExpr> {
        match same_answers(&self.schema, filter) {
            true => translated(snapshot, filter),
            false => None,
        }
    }

    /// Rows, bounds and null counts of `snapshot` from the log, computed once a version.
    fn table_statistics(&self, snapshot: &Snapshot) -> Option<Arc<Statistics>> {
        // After a schema change, the snapshot's columns are not the provider's.
        if snapshot.arrow_schema().as_ref() != self.schema.as_ref() {
            return None;
        }
        self.table
            .statistics(snapshot, |s| crate::statistics::of(s, &self.schema))
    }

    /// The Tarn predicate of a DELETE or UPDATE: every filter must translate, and one
    /// must name a column (DataFusion passes none, or a constant `true`, for a WHERE of
    /// `IN` or `EXISTS` subqueries, which must not become "every row").
    async fn statement_predicate(
        &self,
        state: &dyn Session,
        statement: &str,
        filters: &[Expr],
    ) -> Result<TarnExpr> {
        if !crate::guard::installed(state) {
            return plan_err!(
                "{statement} on a Tarn table needs a session set up by \
                 tarn_datafusion::register, which refuses statements DataFusion would hand \
                 over without their subqueries"
            );
        }
        let snapshot = self.snapshot();
        // A subquery's decorrelation can leave a constant `true` on the table: that is no
        // predicate either.
        if filters.iter().all(|f| f.column_refs().is_empty()) {
            return plan_err!(
                "{statement} on a Tarn table needs a WHERE clause on the table's columns \
                 (a WHERE of IN or EXISTS subqueries reaches the table as no predicate, and \
                 is refused rather than run on every row); TRUNCATE empties the table"
            );
        }
        let mut predicate: Option<TarnExpr> = None;
        for filter in filters {
            // A statement's condition is Tarn's to evaluate, as the same call through
            // Tarn's API would.
            let Some(part) = translated(&snapshot, filter) else {
                return plan_err!(
                    "{statement} on a Tarn table: the condition {filter} has no Tarn \
                     equivalent (Tarn takes comparisons, AND, OR, NOT, IS NULL, IN lists, \
                     BETWEEN and arithmetic on the table's columns)"
                );
            };
            predicate = Some(match predicate {
                Some(p) => p.and(part),
                None => part,
            });
        }
        predicate.map_or_else(|| plan_err!("{statement}: no predicate"), Ok)
    }
}

/// `filter` in Tarn's terms, when it has them and they fit the table's schema.
fn translated(snapshot: &Snapshot, filter: &Expr) -> Option<TarnExpr> {
    let translated = to_tarn(filter)?;
    translated.bind(snapshot.schema()).ok()?;
    Some(translated)
}

/// Whether Tarn answers `filter` as DataFusion would. Not for floating-point columns
/// (file statistics leave NaN out, so pruning could drop a NaN row DataFusion keeps) nor
/// arithmetic (Tarn's is checked where DataFusion's wraps, and its decimal scales
/// differ).
fn same_answers(schema: &SchemaRef, filter: &Expr) -> bool {
    let floats = filter.column_refs().iter().any(|c| {
        schema
            .field_with_name(&c.name)
            .is_ok_and(|f| f.data_type().is_floating())
    });
    let arithmetic = filter
        .exists(|e| {
            Ok(matches!(
                e,
                Expr::BinaryExpr(b) if matches!(
                    b.op,
                    Operator::Plus | Operator::Minus | Operator::Multiply | Operator::Divide
                )
            ))
        })
        .unwrap_or(true);
    !floats && !arithmetic
}

#[async_trait]
impl TableProvider for TarnTableProvider {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let snapshot = self.snapshot();
        if snapshot.arrow_schema().as_ref() != self.schema.as_ref() {
            return plan_err!(
                "the Tarn table's schema changed at version {} since the provider was \
                 made; register a new TarnTableProvider to query it",
                snapshot.version()
            );
        }
        let mut scan = snapshot.scan();
        if let Some(projection) = projection {
            let names: Vec<String> = projection
                .iter()
                .map(|i| self.schema.field(*i).name().clone())
                .collect();
            scan = scan.select(names);
        }
        // DataFusion passes the filters this provider took: each must still translate.
        let mut predicate: Option<TarnExpr> = None;
        for filter in filters {
            let Some(part) = self.pushable(&snapshot, filter) else {
                return plan_err!("the filter {filter} no longer fits the Tarn table");
            };
            predicate = Some(match predicate {
                Some(p) => p.and(part),
                None => part,
            });
        }
        if let Some(predicate) = &predicate {
            scan = scan.filter(predicate.clone());
        }
        if let Some(limit) = limit {
            scan = scan.with_limit(limit);
        }
        let plan = scan.plan().await.map_err(to_datafusion)?;
        let parts = state.config().target_partitions();
        let statistics = self.table_statistics(&snapshot);
        let mut columns = match &statistics {
            Some(statistics) => statistics.column_statistics.clone(),
            None => Statistics::unknown_column(&self.schema),
        };
        let partitions = partition_keys(&snapshot);
        let selectivity = predicate.is_some().then(|| {
            let rows = statistics
                .as_ref()
                .and_then(|s| s.num_rows.get_value().copied());
            selectivity::of(state, &self.schema, &columns, rows, &partitions, filters)
        });
        if let Some(projection) = projection {
            columns = projection.iter().map(|i| columns[*i].clone()).collect();
        }
        Ok(Arc::new(TarnScanExec::new(
            scan,
            plan,
            predicate.map(|p| p.to_string()),
            selectivity,
            limit,
            parts,
            columns,
            partitions,
        )))
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        // Tarn applies a pushed predicate row by row, so what it takes is exact.
        let snapshot = self.snapshot();
        Ok(filters
            .iter()
            .map(|f| match self.pushable(&snapshot, f) {
                Some(_) => TableProviderFilterPushDown::Exact,
                None => TableProviderFilterPushDown::Unsupported,
            })
            .collect())
    }

    fn statistics(&self) -> Option<Statistics> {
        let statistics = self.table_statistics(&self.snapshot())?;
        Some(Statistics::clone(&statistics))
    }

    async fn insert_into(
        &self,
        _state: &dyn Session,
        input: Arc<dyn ExecutionPlan>,
        insert_op: InsertOp,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        self.writable("INSERT")?;
        let mode = match insert_op {
            InsertOp::Append => WriteMode::Append,
            InsertOp::Overwrite => WriteMode::Overwrite,
            InsertOp::Replace => return not_impl_err!("REPLACE INTO a Tarn table"),
        };
        // Identity and generated columns: Tarn draws or computes those the statement
        // leaves out; one it gives, NULLs and all, is checked like any value.
        let left_out = left_out_columns(&input);
        let drawn: Arc<[String]> = self
            .snapshot()
            .schema()
            .fields
            .iter()
            .filter(|f| f.is_identity() || f.is_generated())
            .filter(|f| left_out.contains(&f.name))
            .map(|f| f.name.clone())
            .collect();
        let change = Change::Insert { input, mode, drawn };
        Ok(Arc::new(ChangeExec::new(Arc::clone(&self.table), change)))
    }

    async fn delete_from(
        &self,
        state: &dyn Session,
        filters: Vec<Expr>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        self.writable("DELETE")?;
        let predicate = self.statement_predicate(state, "DELETE", &filters).await?;
        let change = Change::Delete { predicate };
        Ok(Arc::new(ChangeExec::new(Arc::clone(&self.table), change)))
    }

    async fn update(
        &self,
        state: &dyn Session,
        assignments: Vec<(String, Expr)>,
        filters: Vec<Expr>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        self.writable("UPDATE")?;
        let predicate = self.statement_predicate(state, "UPDATE", &filters).await?;
        let mut sets = Vec::new();
        for (column, value) in assignments {
            let Some(value) = to_tarn(&value) else {
                return plan_err!(
                    "UPDATE on a Tarn table: the value {value} of {column} has no Tarn \
                     equivalent (Tarn takes constants, columns and arithmetic)"
                );
            };
            sets.push((column, value));
        }
        let change = Change::Update { predicate, sets };
        Ok(Arc::new(ChangeExec::new(Arc::clone(&self.table), change)))
    }

    async fn merge_into(
        &self,
        _state: &dyn Session,
        source: Arc<dyn ExecutionPlan>,
        merge_schema: DFSchemaRef,
        on: Expr,
        clauses: Vec<MergeIntoClause>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        self.writable("MERGE INTO")?;
        let merge = SqlMerge::new(&merge_schema, self.schema.fields().len(), &on, &clauses)?;
        let change = Change::Merge { source, merge };
        Ok(Arc::new(ChangeExec::new(Arc::clone(&self.table), change)))
    }

    async fn truncate(&self, _state: &dyn Session) -> Result<Arc<dyn ExecutionPlan>> {
        self.writable("TRUNCATE")?;
        let predicate = tarn::expr::lit(true);
        let change = Change::Delete { predicate };
        Ok(Arc::new(ChangeExec::new(Arc::clone(&self.table), change)))
    }
}

/// The snapshot's partition columns, by logical name and `partitionValues` key.
fn partition_keys(snapshot: &Snapshot) -> Arc<[PartitionKey]> {
    snapshot
        .partition_columns()
        .iter()
        .map(|p| PartitionKey {
            name: p.name.clone(),
            physical_name: p.physical_name.clone(),
            data_type: p.data_type,
        })
        .collect()
}
