//! Transactions: optimistic concurrency on one table, with put-if-absent commits.
//!
//! A [`Transaction`] reads a snapshot at version `v`, records what it read, writes its
//! files under fresh names, and commits `_delta_log/<v+1>.json` with put-if-absent. When
//! another writer took that version, the transaction reads the winning commits (one GET
//! each) and runs the conflict checker for its [`IsolationLevel`]: no conflict rebases it
//! and it retries at the next version, with jittered exponential backoff; a conflict is
//! an [`Error::Conflict`] that names the winning version, its operation and the reason.
//!
//! Every commit carries a unique `commitInfo.txnId`. When a PUT's outcome is unknown (an
//! error after the object may have landed), the transaction reads the version back: its
//! own id means it committed; another id means it lost the race; when the version cannot
//! be read, it fails with [`Error::CommitStateUnknown`] and never commits the work twice.

mod conflict;

use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use chrono::Utc;
use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use roaring::RoaringTreemap;
use serde_json::{Map, Value};
use std::collections::BTreeSet;
use uuid::Uuid;

pub(crate) use conflict::ReadSet;
use conflict::{Ours, WinningCommit, check};

use crate::dv::{DvFileWriter, describe_bitmap};
use crate::error::{Error, Result};
use crate::expr::Expr;
use crate::log::checkpoint::{CheckpointWritten, write_checkpoint};
use crate::log::{CommitFile, list_log, log_dir, parse_commit, read_commits};
use crate::paths;
use crate::protocol::features::ensure_writable;
use crate::protocol::names::commit_file_name;
use crate::protocol::{Action, Add, CommitInfo, DomainMetadata, Metadata, Remove, Txn};
use crate::scan::{Scan, load_deletion_vector};
use crate::snapshot::Snapshot;

/// The engine name written into `commitInfo.engineInfo`.
pub const ENGINE_INFO: &str = concat!("tarn/", env!("CARGO_PKG_VERSION"));

/// How strictly a transaction is ordered against concurrent ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IsolationLevel {
    /// Write-write conflicts only: a transaction fails when a concurrent one removed a
    /// file it also removes. What it read may have changed.
    SnapshotIsolation,
    /// Delta's default: blind appends commute with everything; other files added
    /// concurrently that match what the transaction read, and files it read that were
    /// removed concurrently, conflict.
    WriteSerializable,
    /// Like `WriteSerializable`, and concurrent appends matching what the transaction read
    /// conflict too, blind or not. Tarn's default.
    #[default]
    Serializable,
    /// Serializable, with reads pinned to the newest version at the time of the first
    /// read, and read-only transactions validated at commit, so every transaction, reads
    /// included, is ordered as the log is.
    StrictSerializable,
}

impl IsolationLevel {
    /// The name written into `commitInfo.isolationLevel`.
    pub fn name(self) -> &'static str {
        match self {
            Self::SnapshotIsolation => "SnapshotIsolation",
            Self::WriteSerializable => "WriteSerializable",
            Self::Serializable => "Serializable",
            Self::StrictSerializable => "StrictSerializable",
        }
    }
}

/// Where commit timestamps come from.
pub trait Clock: Send + Sync + fmt::Debug {
    /// Milliseconds since the epoch.
    fn now_ms(&self) -> i64;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        Utc::now().timestamp_millis()
    }
}

/// The system clock shifted by a fixed offset: a writer whose clock is ahead or behind.
#[derive(Debug, Clone, Copy, Default)]
pub struct OffsetClock {
    /// Milliseconds added to the system clock (negative: behind).
    pub offset_ms: i64,
}

impl Clock for OffsetClock {
    fn now_ms(&self) -> i64 {
        Utc::now().timestamp_millis() + self.offset_ms
    }
}

/// How often and how patiently a commit retries after losing the race for a version,
/// or after a PUT whose outcome was unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included.
    pub max_attempts: u32,
    /// Backoff before the third attempt; it doubles after each further attempt.
    pub base_backoff: Duration,
    /// The most a backoff grows to.
    pub max_backoff: Duration,
    /// Reads of a version whose PUT had an unknown outcome before giving up with
    /// [`Error::CommitStateUnknown`].
    pub max_outcome_reads: u32,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 200,
            base_backoff: Duration::from_millis(5),
            max_backoff: Duration::from_millis(200),
            max_outcome_reads: 5,
        }
    }
}

impl RetryPolicy {
    /// The jittered wait before `attempt` (1-based): none for the first two attempts (a
    /// rebase is usually enough), then a random share of an exponentially growing cap.
    fn backoff(&self, attempt: u32) -> Duration {
        if attempt <= 2 {
            return Duration::ZERO;
        }
        let cap = self
            .base_backoff
            .saturating_mul(1u32 << (attempt - 3).min(20))
            .min(self.max_backoff);
        let random = std::hash::RandomState::new().build_hasher().finish();
        cap.mul_f64((random % 10_000) as f64 / 10_000.0)
    }
}

/// What a commit did.
#[derive(Debug, Clone)]
#[must_use = "the outcome holds the snapshot after the commit"]
pub struct CommitOutcome {
    /// The version committed (for a read-only transaction, the version it read).
    pub version: i64,
    /// Commit attempts (0 for a read-only transaction, 1 when no writer won a race).
    pub attempts: u32,
    /// The commit's `commitInfo.txnId` (empty for a read-only transaction).
    pub txn_id: String,
    /// The versions other writers committed first, which this commit was rebased over.
    pub rebased_over: Vec<i64>,
    /// The checkpoint being written after the commit, when one was due. It is written in
    /// the background, off the commit's critical path; its failure never fails the
    /// commit.
    pub checkpoint: Option<CheckpointTask>,
    /// The table after the commit.
    pub snapshot: Snapshot,
}

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
    snapshot: Snapshot,
    isolation: IsolationLevel,
    reads: ReadSet,
    pinned: bool,
    actions: Vec<Action>,
    operation: String,
    parameters: Map<String, Value>,
    metrics: Map<String, Value>,
    retry: RetryPolicy,
    clock: Arc<dyn Clock>,
    dv_changes: Vec<DvChange>,
}

/// A file this transaction changes through a deletion vector: the rows it had deleted
/// before, and the rows this transaction deletes.
#[derive(Debug, Clone)]
pub(crate) struct DvChange {
    path: String,
    before: RoaringTreemap,
    rows: RoaringTreemap,
    physical_rows: u64,
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
        }
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
        self.dv_changes.push(DvChange {
            path: paths::canonical(self.snapshot.location(), &add.path),
            rows: &rows - &before,
            before,
            physical_rows,
        });
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
        let plan = scan.plan()?;
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

    /// The actions so far.
    pub fn actions(&self) -> &[Action] {
        &self.actions
    }

    /// Commits the transaction.
    ///
    /// A read-only transaction writes nothing; under `StrictSerializable` it is validated
    /// against the commits made since it read, and fails with [`Error::Conflict`] when one
    /// of them invalidates its reads.
    ///
    /// Fails with [`Error::Conflict`] naming the winning version, its operation and the
    /// reason; [`Error::CommitRetriesExhausted`] after `max_attempts`;
    /// [`Error::CommitStateUnknown`] when a PUT's outcome cannot be read back;
    /// [`Error::UnsupportedWriterFeature`] for tables Tarn cannot write; [`Error::Store`]
    /// for other store failures. On failure nothing is committed; files the transaction
    /// wrote are left for `vacuum`.
    pub async fn commit(self) -> Result<CommitOutcome> {
        if self.actions.is_empty() {
            return self.validate_read_only().await;
        }
        let snapshot = &self.snapshot;
        ensure_writable(snapshot.protocol(), snapshot.metadata(), snapshot.schema())?;
        for action in &self.actions {
            if let Action::Txn(t) = action
                && let Some(done) = snapshot.app_transaction_version(&t.app_id)
                && done >= t.version
            {
                return Err(Error::Conflict {
                    winning_version: snapshot.version(),
                    operation: "APP TRANSACTION".into(),
                    reason: crate::error::ConflictReason::AppTransactionCommitted {
                        app_id: t.app_id.clone(),
                        version: done,
                    },
                });
            }
        }
        let store = Arc::clone(snapshot.location().store());
        let dir = log_dir(snapshot.location().root());
        let txn_id = Uuid::new_v4().to_string();
        let blind = self.reads.is_empty()
            && self
                .actions
                .iter()
                .all(|a| matches!(a, Action::Add(add) if add.data_change));
        // Actions change only when a concurrent DV change to one of our files is merged in.
        let mut actions = self.actions.clone();
        let mut dv_changes = self.dv_changes.clone();
        let dv_paths: BTreeSet<String> = dv_changes.iter().map(|c| c.path.clone()).collect();
        let mut base = snapshot.clone();
        let mut rebased_over = Vec::new();
        for attempt in 1..=self.retry.max_attempts {
            let wait = self.retry.backoff(attempt);
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
            let version = base.version() + 1;
            // Commit timestamps never go backwards, whatever this machine's clock says.
            let timestamp = self
                .clock
                .now_ms()
                .max(base.latest_commit_timestamp_ms() + 1);
            let info = self.commit_info(timestamp, blind, &txn_id);
            let body = encode_commit(&info, &actions)?;
            let root = snapshot.location().root();
            match put_commit(store.as_ref(), root, version, body, &txn_id, &self.retry).await {
                Err(e) => {
                    return Err(match e {
                        PutError::Unknown(reason) => Error::CommitStateUnknown {
                            version,
                            txn_id: txn_id.clone(),
                            reason,
                        },
                        PutError::Store(e) => {
                            Error::store("put", dir.clone().join(commit_file_name(version)))(e)
                        }
                    });
                }
                Ok(PutOutcome::Committed) => {
                    let mut all = vec![info];
                    all.extend(actions);
                    let committed = base.with_commit(version, timestamp, all)?;
                    let checkpoint = maybe_checkpoint(&committed);
                    return Ok(CommitOutcome {
                        version,
                        attempts: attempt,
                        txn_id: txn_id.clone(),
                        rebased_over,
                        checkpoint,
                        snapshot: committed,
                    });
                }
                Ok(PutOutcome::Taken(winners)) => {
                    // Other writers won: check each against what we did, then rebase.
                    for winner in winners {
                        let ts = commit_timestamp(&winner.actions)
                            .unwrap_or(winner.file_time)
                            .max(base.latest_commit_timestamp_ms() + 1);
                        let winning = WinningCommit {
                            version: winner.version,
                            actions: winner.actions,
                        };
                        let ours = Ours {
                            isolation: self.isolation,
                            reads: &self.reads,
                            actions: &actions,
                            dv_paths: &dv_paths,
                        };
                        let rebases = check(&ours, &base, &winning)?;
                        for rebase in rebases {
                            merge_deletion_vectors(
                                &base,
                                &winning,
                                rebase,
                                &mut actions,
                                &mut dv_changes,
                            )
                            .await?;
                        }
                        base = base.with_commit(winning.version, ts, winning.actions)?;
                        rebased_over.push(winning.version);
                    }
                }
            }
        }
        Err(Error::CommitRetriesExhausted {
            attempts: self.retry.max_attempts,
            version: base.version() + 1,
        })
    }

    /// A read-only transaction: under `StrictSerializable`, its reads must still hold at
    /// the newest version.
    async fn validate_read_only(self) -> Result<CommitOutcome> {
        let mut snapshot = self.snapshot.clone();
        if self.isolation == IsolationLevel::StrictSerializable && !self.reads.is_empty() {
            let location = snapshot.location();
            let listing = list_log(
                location.store().as_ref(),
                location.root(),
                snapshot.version() + 1,
            )
            .await?;
            let commits: Vec<CommitFile> = listing
                .commits
                .iter()
                .map(|(v, meta)| CommitFile {
                    version: *v,
                    meta: meta.clone(),
                })
                .collect();
            let no_paths = BTreeSet::new();
            let ours = Ours {
                isolation: self.isolation,
                reads: &self.reads,
                actions: &[],
                dv_paths: &no_paths,
            };
            let bodies = read_commits(location.store().as_ref(), &commits).await?;
            for (commit, actions) in commits.iter().zip(bodies) {
                let winner = WinningCommit {
                    version: commit.version,
                    actions,
                };
                check(&ours, &snapshot, &winner)?;
                let ts = commit_timestamp(&winner.actions)
                    .unwrap_or_else(|| commit.meta.last_modified.timestamp_millis());
                snapshot = snapshot.with_commit(commit.version, ts, winner.actions)?;
            }
        }
        Ok(CommitOutcome {
            version: self.snapshot.version(),
            attempts: 0,
            txn_id: String::new(),
            rebased_over: Vec::new(),
            checkpoint: None,
            snapshot,
        })
    }

    fn commit_info(&self, timestamp: i64, blind: bool, txn_id: &str) -> Action {
        let mut other = Map::new();
        other.insert(
            "operationParameters".into(),
            Value::Object(self.parameters.clone()),
        );
        other.insert(
            "operationMetrics".into(),
            Value::Object(self.metrics.clone()),
        );
        other.insert("readVersion".into(), Value::from(self.snapshot.version()));
        other.insert("isolationLevel".into(), Value::from(self.isolation.name()));
        other.insert("isBlindAppend".into(), Value::from(blind));
        other.insert("engineInfo".into(), Value::from(ENGINE_INFO));
        Action::CommitInfo(CommitInfo {
            timestamp: Some(timestamp),
            in_commit_timestamp: None,
            operation: Some(self.operation.clone()),
            txn_id: Some(txn_id.to_string()),
            other,
        })
    }
}

/// Unites a concurrent deletion-vector change to a file with ours: conflicts when both
/// deleted one row, otherwise rewrites our actions to replace the winner's version of the
/// file with one whose DV holds both sets of rows.
async fn merge_deletion_vectors(
    base: &Snapshot,
    winner: &WinningCommit,
    rebase: conflict::DvRebase,
    actions: &mut Vec<Action>,
    dv_changes: &mut [DvChange],
) -> Result<()> {
    let location = base.location();
    let Some(change) = dv_changes.iter_mut().find(|c| c.path == rebase.path) else {
        return Ok(());
    };
    let winner_dv = rebase
        .winner_add
        .deletion_vector
        .clone()
        .ok_or_else(|| Error::Task("internal: a DV rebase without a DV".into()))?;
    let theirs = load_deletion_vector(location, &winner_dv).await?;
    let overlap = &(&theirs - &change.before) & &change.rows;
    if !overlap.is_empty() {
        return Err(Error::Conflict {
            winning_version: winner.version,
            operation: winner.operation(),
            reason: crate::error::ConflictReason::ConcurrentDeletionVectorOverlap {
                file: rebase.winner_add.path.clone(),
                rows: overlap.len(),
            },
        });
    }
    let united = &theirs | &change.rows;
    let threshold = base
        .metadata()
        .property(crate::dml::INLINE_DV_PROPERTY)
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    let now = Utc::now().timestamp_millis();
    // Our remove now takes out the winner's version of the file.
    let same = |p: &str| paths::canonical(location, p) == rebase.path;
    actions.retain(|a| !matches!(a, Action::Remove(r) if same(&r.path)));
    actions.push(Action::Remove(crate::table::remove_of(
        rebase.winner_add.clone(),
        now,
    )));
    let had_add = actions
        .iter()
        .any(|a| matches!(a, Action::Add(add) if same(&add.path)));
    actions.retain(|a| !matches!(a, Action::Add(add) if same(&add.path)));
    if had_add && united.len() < change.physical_rows {
        let mut file = DvFileWriter::new();
        let descriptor = describe_bitmap(&united, threshold, &mut file);
        if !file.is_empty() {
            let path = paths::join_relative(location.root(), &file.relative_path())?;
            location
                .store()
                .put(&path, PutPayload::from_bytes(file.into_bytes()))
                .await
                .map_err(Error::store("put", &path))?;
        }
        actions.push(Action::Add(crate::dml::with_deletion_vector(
            rebase.winner_add.clone(),
            descriptor,
        )));
    }
    change.before = theirs;
    Ok(())
}

fn commit_timestamp(actions: &[Action]) -> Option<i64> {
    actions.iter().find_map(|a| match a {
        Action::CommitInfo(c) => c.in_commit_timestamp.or(c.timestamp),
        _ => None,
    })
}

fn txn_id_of(actions: &[Action]) -> Option<&str> {
    actions.iter().find_map(|a| match a {
        Action::CommitInfo(c) => c.txn_id.as_deref(),
        _ => None,
    })
}

fn encode_commit(info: &Action, actions: &[Action]) -> Result<Bytes> {
    let mut body = Vec::new();
    for action in std::iter::once(info).chain(actions) {
        serde_json::to_writer(&mut body, action).map_err(|e| Error::Task(e.to_string()))?;
        body.push(b'\n');
    }
    Ok(Bytes::from(body))
}

/// A commit another writer made, as read back.
struct Winner {
    version: i64,
    actions: Vec<Action>,
    file_time: i64,
}

/// What putting a commit found.
enum PutOutcome {
    /// Our commit is in place (written now, or by an earlier attempt whose answer was
    /// lost).
    Committed,
    /// Other writers hold the version: their commits from it up to the newest, in order.
    Taken(Vec<Winner>),
}

enum PutError {
    Unknown(String),
    Store(object_store::Error),
}

/// Reads one commit back; `Ok(None)` when it is not there.
async fn read_back(
    store: &dyn ObjectStore,
    path: &Path,
    version: i64,
) -> std::result::Result<Option<Winner>, String> {
    match store.get(path).await {
        Ok(found) => {
            let file_time = found.meta.last_modified.timestamp_millis();
            let bytes = found.bytes().await.map_err(|e| e.to_string())?;
            // A short or garbled read fails like any failed read, and is retried.
            let actions = parse_commit(version, &bytes).map_err(|e| e.to_string())?;
            Ok(Some(Winner {
                version,
                actions,
                file_time,
            }))
        }
        Err(object_store::Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

/// The commits after `version`, read in parallel after one LIST, so a writer that fell
/// behind catches up in one round trip rather than one lost race per version.
async fn commits_after(store: &dyn ObjectStore, root: &Path, version: i64) -> Result<Vec<Winner>> {
    let listing = list_log(store, root, version + 1).await?;
    let files: Vec<CommitFile> = (version + 1..)
        .map_while(|v| {
            listing.commits.get(&v).map(|meta| CommitFile {
                version: v,
                meta: meta.clone(),
            })
        })
        .collect();
    let bodies = read_commits(store, &files).await?;
    Ok(files
        .into_iter()
        .zip(bodies)
        .map(|(f, actions)| Winner {
            version: f.version,
            file_time: f.meta.last_modified.timestamp_millis(),
            actions,
        })
        .collect())
}

/// Writes a commit with put-if-absent and finds out what happened, whatever the PUT
/// answered. A lost race reads the winning commit and, in parallel, lists the ones after
/// it; an unknown outcome is resolved by reading the version back, up to
/// `retry.max_outcome_reads` times.
async fn put_commit(
    store: &dyn ObjectStore,
    root: &Path,
    version: i64,
    body: Bytes,
    txn_id: &str,
    retry: &RetryPolicy,
) -> std::result::Result<PutOutcome, PutError> {
    let path = log_dir(root).join(commit_file_name(version));
    let mut last_error = String::new();
    let mut unknown_before = false;
    for round in 0..retry.max_outcome_reads.max(1) {
        if round > 0 {
            let wait = retry.base_backoff.saturating_mul(1 << round.min(10));
            tokio::time::sleep(wait.min(retry.max_backoff)).await;
        }
        let put = store
            .put_opts(
                &path,
                PutPayload::from_bytes(body.clone()),
                PutOptions::from(PutMode::Create),
            )
            .await;
        let taken = match put {
            Ok(_) => return Ok(PutOutcome::Committed),
            Err(object_store::Error::AlreadyExists { .. }) => true,
            Err(
                e @ (object_store::Error::NotImplemented { .. }
                | object_store::Error::PermissionDenied { .. }
                | object_store::Error::Unauthenticated { .. }),
            ) => return Err(PutError::Store(e)),
            Err(e) => {
                last_error = e.to_string();
                unknown_before = true;
                false
            }
        };
        // Read what holds the version: after a plain lost race it cannot be ours, so the
        // commits after it are listed at the same time.
        let plain_loss = taken && !unknown_before;
        let (found, later) = if plain_loss {
            let (found, later) = futures::join!(
                read_back(store, &path, version),
                commits_after(store, root, version)
            );
            (found, Some(later))
        } else {
            (read_back(store, &path, version).await, None)
        };
        let winner = match found {
            Ok(Some(w)) => w,
            // Not there: the PUT did not land; the next round puts again.
            Ok(None) => continue,
            Err(e) => {
                last_error = e;
                unknown_before = true;
                continue;
            }
        };
        if txn_id_of(&winner.actions) == Some(txn_id) {
            return Ok(PutOutcome::Committed);
        }
        let later = match later {
            Some(later) => later,
            None => commits_after(store, root, version).await,
        };
        let mut winners = vec![winner];
        // The first winner is enough to rebase on; should the listing fail, the next
        // attempt finds the rest.
        if let Ok(later) = later {
            winners.extend(later);
        }
        return Ok(PutOutcome::Taken(winners));
    }
    Err(PutError::Unknown(last_error))
}

/// A checkpoint being written in the background after a commit.
#[derive(Clone)]
pub struct CheckpointTask {
    version: i64,
    result: Shared<BoxFuture<'static, std::result::Result<CheckpointWritten, String>>>,
}

impl CheckpointTask {
    /// The version being checkpointed.
    pub fn version(&self) -> i64 {
        self.version
    }

    /// Waits for the checkpoint. Fails with why it could not be written (the commit
    /// stands regardless; readers replay the commits instead).
    pub async fn wait(&self) -> std::result::Result<CheckpointWritten, String> {
        self.result.clone().await
    }
}

impl fmt::Debug for CheckpointTask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CheckpointTask")
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

/// Starts writing a checkpoint when the table's interval says one is due.
fn maybe_checkpoint(snapshot: &Snapshot) -> Option<CheckpointTask> {
    let interval = snapshot.properties().checkpoint_interval() as i64;
    let version = snapshot.version();
    // V2 checkpoints are read but not written yet; such tables stay readable from commits.
    if version == 0
        || version % interval != 0
        || snapshot.protocol().has_writer_feature("v2Checkpoint")
    {
        return None;
    }
    let snapshot = snapshot.clone();
    let task = tokio::spawn(async move { checkpoint(&snapshot).await.map_err(|e| e.to_string()) });
    let result = async move {
        match task.await {
            Ok(result) => result,
            Err(e) => Err(format!("the checkpoint task failed: {e}")),
        }
    }
    .boxed()
    .shared();
    Some(CheckpointTask { version, result })
}

/// Writes a classic checkpoint of `snapshot` and points `_last_checkpoint` at it.
pub(crate) async fn checkpoint(snapshot: &Snapshot) -> Result<CheckpointWritten> {
    let location = snapshot.location();
    write_checkpoint(
        location.store().as_ref(),
        location.root(),
        snapshot.version(),
        snapshot.checkpoint_actions(),
    )
    .await
}

/// Writes version 0 of a new table and returns its timestamp and actions (commitInfo
/// included). Fails with [`Error::TableAlreadyExists`] when another writer created it
/// first.
pub(crate) async fn commit_create(
    location: &tarn_store::StoreLocation,
    actions: &[Action],
    parameters: Map<String, Value>,
    clock: &dyn Clock,
) -> Result<(i64, Vec<Action>)> {
    let txn_id = Uuid::new_v4().to_string();
    let timestamp = clock.now_ms();
    let mut other = Map::new();
    other.insert("operationParameters".into(), Value::Object(parameters));
    other.insert("isBlindAppend".into(), Value::from(false));
    other.insert("engineInfo".into(), Value::from(ENGINE_INFO));
    let info = Action::CommitInfo(CommitInfo {
        timestamp: Some(timestamp),
        in_commit_timestamp: None,
        operation: Some("CREATE TABLE".into()),
        txn_id: Some(txn_id.clone()),
        other,
    });
    let body = encode_commit(&info, actions)?;
    let path = log_dir(location.root()).join(commit_file_name(0));
    match put_commit(
        location.store().as_ref(),
        location.root(),
        0,
        body,
        &txn_id,
        &RetryPolicy::default(),
    )
    .await
    {
        Ok(PutOutcome::Committed) => {
            let mut all = vec![info];
            all.extend_from_slice(actions);
            Ok((timestamp, all))
        }
        Ok(PutOutcome::Taken(_)) => Err(Error::TableAlreadyExists {
            url: location.url().to_string(),
            version: 0,
        }),
        Err(PutError::Unknown(reason)) => Err(Error::CommitStateUnknown {
            version: 0,
            txn_id,
            reason,
        }),
        Err(PutError::Store(e)) => Err(Error::store("put", &path)(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_stays_under_its_cap() {
        let policy = RetryPolicy::default();
        assert_eq!(policy.backoff(1), Duration::ZERO);
        assert_eq!(policy.backoff(2), Duration::ZERO);
        for attempt in 3..60 {
            assert!(policy.backoff(attempt) <= policy.max_backoff);
        }
    }

    #[test]
    fn isolation_levels_name_themselves_as_delta_does() {
        assert_eq!(IsolationLevel::default(), IsolationLevel::Serializable);
        assert_eq!(
            IsolationLevel::WriteSerializable.name(),
            "WriteSerializable"
        );
    }
}
