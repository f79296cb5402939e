//! The `Transaction` API: what a unit of work read and what it writes, committed
//! atomically with put-if-absent, rebased over the commits that won the race.

use std::sync::Arc;

use roaring::RoaringTreemap;
use serde_json::{Map, Value};

use super::conflict::ReadSet;
use super::fence::Writer;
use super::outcome::CommitOutcome;
use super::rebase::DvChange;
use super::{IsolationLevel, RetryPolicy};
use crate::clock::{Clock, SystemClock};
use crate::error::{Error, Result};
use crate::expr::Expr;
use crate::paths;
use crate::protocol::{Action, Add, DomainMetadata, Metadata, Remove, Txn};
use crate::scan::Scan;
use crate::snapshot::Snapshot;

mod delete_rows;
mod prepare;
mod read_only;

pub(super) use prepare::Prepared;

/// How many commits in a row from one handle's snapshots lost a race, kept with the
/// handle's caches: under sustained contention a commit publishes its group-commit
/// proposal beside its first PUT.
#[derive(Debug, Default)]
pub(super) struct LostRaces(pub(super) std::sync::atomic::AtomicU32);

/// A unit of work on one table: what it read and what it writes, committed atomically.
///
/// ```no_run
/// # async fn f(table: tarn::Table) -> tarn::Result<()> {
/// use tarn::expr::{col, lit};
/// let mut txn = table.transaction().with_isolation(tarn::IsolationLevel::Serializable);
/// let rows = txn.read(Some(col("country").eq(lit("NL")))).await?.collect().await?;
/// // ... decide what to write from `rows` ...
/// let outcome = txn.commit().await?;
/// println!("committed version {}", outcome.version);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a transaction does nothing until it is committed"]
pub struct Transaction {
    pub(super) snapshot: Snapshot,
    pub(super) isolation: IsolationLevel,
    pub(super) reads: ReadSet,
    pinned: bool,
    pub(super) actions: Vec<Action>,
    pub(super) operation: String,
    parameters: Map<String, Value>,
    metrics: Map<String, Value>,
    pub(super) retry: RetryPolicy,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) dv_changes: Vec<DvChange>,
    /// Whether the rows this transaction copies or updates keep their row ids (`None`:
    /// it did not say).
    row_ids_kept: Option<bool>,
    /// The writer committing, whose fence this transaction must not be older than.
    pub(super) writer: Option<Writer>,
    /// The `txnId`s this commit fences (a commit fence's only content).
    pub(super) fenced: Vec<String>,
}

impl Transaction {
    /// A transaction reading `snapshot`, Serializable, with the default retry policy.
    pub fn new(snapshot: Snapshot) -> Self {
        Self {
            snapshot,
            isolation: IsolationLevel::default(),
            reads: ReadSet::default(),
            pinned: false,
            actions: Vec::new(),
            operation: "WRITE".into(),
            parameters: Map::new(),
            metrics: Map::new(),
            retry: RetryPolicy::default(),
            clock: Arc::new(SystemClock),
            dv_changes: Vec::new(),
            row_ids_kept: None,
            writer: None,
            fenced: Vec::new(),
        }
    }

    /// Records whether the rows this transaction copies or updates keep their stable row
    /// ids (row tracking's `delta.rowTracking.preserved` tag); all must, for it to say so.
    pub(crate) fn note_row_ids_kept(&mut self, kept: bool) {
        self.row_ids_kept = Some(self.row_ids_kept.unwrap_or(true) && kept);
    }

    /// Records that this transaction changes `add` through a deletion vector: `before` is
    /// what its DV held, `rows` what this transaction deletes. A concurrent DV change to
    /// the same file then rebases when the rows are disjoint, and conflicts when not.
    pub(crate) fn record_dv_change(
        &mut self,
        add: &Add,
        before: RoaringTreemap,
        rows: RoaringTreemap,
        physical_rows: u64,
    ) {
        let change = DvChange::new(&self.snapshot, add, before, rows, physical_rows);
        self.dv_changes.push(change);
    }

    /// Sets the isolation level.
    pub fn with_isolation(mut self, isolation: IsolationLevel) -> Self {
        self.isolation = isolation;
        self
    }

    /// Sets the retry policy.
    pub fn with_retry_policy(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Commits as `writer`: the transaction reads the writer's epoch, so a newer fence of
    /// the same writer (`Table::fence_writer`) makes its commit fail with
    /// [`ConflictReason::WriterFenced`](crate::ConflictReason::WriterFenced), and none of
    /// its group-commit proposals is carried past that fence.
    pub fn with_writer(mut self, writer: Writer) -> Self {
        self.reads.writer = Some(writer.app_id());
        self.writer = Some(writer);
        self
    }

    /// The writer this transaction commits as, if any.
    pub fn writer(&self) -> Option<&Writer> {
        self.writer.as_ref()
    }

    /// Sets the clock commit timestamps come from.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Sets `commitInfo.operation` (default `WRITE`).
    pub fn with_operation(mut self, operation: impl Into<String>) -> Self {
        self.operation = operation.into();
        self
    }

    /// The `commitInfo.operation` the commit will record.
    pub fn operation(&self) -> &str {
        &self.operation
    }

    /// Adds an entry to `commitInfo.operationParameters`.
    pub fn with_parameter(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.parameters.insert(key.into(), value.into());
        self
    }

    /// Adds an entry to `commitInfo.operationMetrics`.
    pub fn with_metric(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.metrics.insert(key.into(), value.into());
        self
    }

    /// The time now on the transaction's clock, in milliseconds since the epoch.
    pub(crate) fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// The snapshot the transaction reads.
    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    /// The isolation level.
    pub fn isolation(&self) -> IsolationLevel {
        self.isolation
    }

    /// A scan of the rows matching `predicate` (all rows without one), recorded as read:
    /// the predicate (or the whole table) and the files the scan will read. Under
    /// [`IsolationLevel::StrictSerializable`] the first read moves the transaction to the
    /// newest version first.
    ///
    /// Fails like [`Scan::plan`] for a predicate that does not fit the schema, and when the
    /// newest version cannot be read.
    pub async fn read(&mut self, predicate: Option<Expr>) -> Result<Scan> {
        if self.isolation == IsolationLevel::StrictSerializable && !self.pinned {
            if !self.actions.is_empty() {
                return Err(Error::InvalidArgument {
                    name: "read",
                    reason: "a strictly serializable transaction reads before it writes".into(),
                });
            }
            self.snapshot = self.snapshot.refresh().await?;
        }
        self.pinned = true;
        let scan = match &predicate {
            Some(p) => self.snapshot.scan().filter(p.clone()),
            None => self.snapshot.scan(),
        };
        let plan = scan.plan().await?;
        match &predicate {
            Some(p) => self.record_read_predicate(p)?,
            None => self.record_read_whole_table(),
        }
        self.record_read_files(&plan.files);
        Ok(scan)
    }

    /// Records that the transaction read the rows matching `predicate`: files added
    /// concurrently that may hold such rows conflict (as the isolation level says).
    ///
    /// Fails with [`Error::UnknownColumn`] / [`Error::TypeMismatch`] for a predicate that
    /// does not fit the schema.
    pub fn record_read_predicate(&mut self, predicate: &Expr) -> Result<()> {
        let bound = predicate.bind(self.snapshot.schema())?;
        self.reads.predicates.push(bound);
        Ok(())
    }

    /// Records that the transaction read the whole table.
    pub fn record_read_whole_table(&mut self) {
        self.reads.whole_table = true;
    }

    /// Records that the transaction read these files: their concurrent removal conflicts.
    pub fn record_read_files<'a>(&mut self, files: impl IntoIterator<Item = &'a Add>) {
        let location = self.snapshot.location().clone();
        self.reads.files.extend(
            files
                .into_iter()
                .map(|a| paths::canonical(&location, &a.path)),
        );
    }

    /// The version an application last committed, recorded as read: a concurrent commit
    /// of the same application conflicts.
    pub fn read_app_transaction(&mut self, app_id: &str) -> Option<i64> {
        self.reads.app_ids.insert(app_id.to_string());
        self.snapshot.app_transaction_version(app_id)
    }

    /// A metadata domain's configuration, recorded as read.
    pub fn read_domain_metadata(&mut self, domain: &str) -> Option<String> {
        self.reads.domains.insert(domain.to_string());
        self.snapshot.domain_metadata(domain).map(str::to_string)
    }

    /// Adds a data file.
    pub fn add_file(&mut self, add: Add) {
        self.actions.push(Action::Add(add));
    }

    /// Removes a data file.
    pub fn remove_file(&mut self, remove: Remove) {
        self.actions.push(Action::Remove(remove));
    }

    /// Replaces the table metadata (schema, properties).
    pub fn set_metadata(&mut self, metadata: Metadata) {
        self.actions.push(Action::Metadata(metadata));
    }

    /// Records that application `app_id` committed its `version` in this commit, for
    /// exactly-once writes.
    pub fn set_app_transaction(&mut self, app_id: impl Into<String>, version: i64) {
        let app_id = app_id.into();
        self.reads.app_ids.insert(app_id.clone());
        self.actions.push(Action::Txn(Txn {
            app_id,
            version,
            last_updated: Some(self.clock.now_ms()),
        }));
    }

    /// Records that the transaction keeps state derived from its data in step with
    /// `domain` (the index registry): a concurrent change of the domain conflicts, but the
    /// read does not make the transaction less blind.
    pub(crate) fn record_read_index_registry(&mut self, domain: &str) {
        self.reads.meta_domains.insert(domain.to_string());
    }

    /// Removes a metadata domain, keeping its last configuration in the tombstone (so a
    /// vacuum can tell what it referenced).
    pub fn remove_domain_metadata(
        &mut self,
        domain: impl Into<String>,
        configuration: impl Into<String>,
    ) {
        self.actions.push(Action::DomainMetadata(DomainMetadata {
            domain: domain.into(),
            configuration: configuration.into(),
            removed: true,
        }));
    }

    /// Sets a metadata domain's configuration, upgrading the protocol with the
    /// `domainMetadata` writer feature when the table lacks it.
    pub fn set_domain_metadata(
        &mut self,
        domain: impl Into<String>,
        configuration: impl Into<String>,
    ) {
        let protocol = self.snapshot.protocol();
        let upgrading = self
            .actions
            .iter()
            .any(|a| matches!(a, Action::Protocol(p) if p.has_writer_feature("domainMetadata")));
        if !protocol.has_writer_feature("domainMetadata") && !upgrading {
            let upgraded = protocol.with_writer_feature("domainMetadata");
            self.actions.push(Action::Protocol(upgraded));
        }
        self.actions.push(Action::DomainMetadata(DomainMetadata {
            domain: domain.into(),
            configuration: configuration.into(),
            removed: false,
        }));
    }

    /// Adds any action (files, metadata, protocol). `commitInfo` is written by the commit.
    pub fn add_action(&mut self, action: Action) {
        self.actions.push(action);
    }

    /// Marks the files at `paths` (as in their actions) that this transaction adds or
    /// removes as rows moved, not changed (`dataChange: false`, as a compaction writes
    /// them): the caller vouches that the marked adds hold exactly the live rows of the
    /// marked removes. Transactions racing this one that only read the removed files keep
    /// their reads (the README's "Compaction against readers").
    pub fn mark_rearranged<'a>(&mut self, paths: impl IntoIterator<Item = &'a str>) {
        let paths: std::collections::BTreeSet<&str> = paths.into_iter().collect();
        for action in &mut self.actions {
            match action {
                Action::Add(add) if paths.contains(add.path.as_str()) => add.data_change = false,
                Action::Remove(r) if paths.contains(r.path.as_str()) => r.data_change = false,
                _ => {}
            }
        }
    }

    /// The actions so far.
    pub fn actions(&self) -> &[Action] {
        &self.actions
    }
}
