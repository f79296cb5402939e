//! The `Transaction` API: what a unit of work read and what it writes, committed
//! atomically with put-if-absent, rebased over the commits that won the race.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use object_store::path::Path;
use roaring::RoaringTreemap;
use serde_json::{Map, Value};
use uuid::Uuid;

use super::checkpoint::maybe_checkpoint;
use super::commit_info::commit_timestamp;
use super::conflict::{Ours, ReadSet, WinningCommit, check};
use super::outcome::{CommitOutcome, unknown_while_out};
use super::put::{self, PutOutcome, commits_after, put_commit};
use super::rebase::{DvChange, merge_deletion_vectors};
use super::{IsolationLevel, RetryPolicy};
use super::{claim, group};
use crate::clock::{Clock, SystemClock};
use crate::error::{ConflictReason, Error, Result};
use crate::expr::Expr;
use crate::log::ProposalRef;
use crate::paths;
use crate::protocol::features::{ensure_appends_only, ensure_writable};
use crate::protocol::names::INDEX_SEGMENT_DOMAIN_PREFIX;
use crate::protocol::{Action, Add, DomainMetadata, Metadata, Remove, Txn};
use crate::scan::Scan;
use crate::snapshot::Snapshot;

mod delete_rows;
mod prepare;
mod read_only;

use prepare::Prepared;

/// Commits in a row that lost a race after which a commit publishes its group-commit
/// proposal beside its first PUT.
const CONTENDED_AFTER: u32 = 2;

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
    /// Whether the rows this transaction copies or updates keep their row ids (`None`:
    /// it did not say).
    row_ids_kept: Option<bool>,
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

    /// Commits the transaction.
    ///
    /// A read-only transaction writes nothing; under `StrictSerializable` it is validated
    /// against the commits made since it read, and fails with [`Error::Conflict`] when one
    /// of them invalidates its reads.
    ///
    /// Fails with [`Error::Conflict`] naming the winning version, its operation and the
    /// reason; [`Error::CommitRetriesExhausted`] after `max_attempts`;
    /// [`Error::CommitStateUnknown`] when a PUT's outcome cannot be read back;
    /// [`Error::UnsupportedWriterFeature`] for tables Tarn cannot write;
    /// [`Error::InvalidArgument`] when it removes data from an append-only table; [`Error::Store`]
    /// for other store failures. On failure nothing is committed; files the transaction
    /// wrote are left for `vacuum`.
    pub async fn commit(self) -> Result<CommitOutcome> {
        if self.actions.is_empty() {
            return self.validate_read_only().await;
        }
        let snapshot = &self.snapshot;
        ensure_writable(snapshot.protocol(), snapshot.metadata(), snapshot.schema())?;
        ensure_appends_only(snapshot.metadata(), &self.actions, &self.operation)?;
        for action in &self.actions {
            if let Action::Txn(t) = action
                && let Some(done) = snapshot.app_transaction_version(&t.app_id)
                && done >= t.version
            {
                return Err(Error::Conflict {
                    winning_version: snapshot.version(),
                    operation: "APP TRANSACTION".into(),
                    reason: ConflictReason::AppTransactionCommitted {
                        app_id: t.app_id.clone(),
                        version: done,
                    },
                });
            }
        }
        let store = Arc::clone(snapshot.location().store());
        let txn_id = Uuid::new_v4().to_string();
        // Index segments describe the appended files; they keep an append blind.
        let blind = self.reads.is_empty()
            && self.actions.iter().all(|a| match a {
                Action::Add(add) => add.data_change,
                Action::DomainMetadata(d) => {
                    !d.removed && d.domain.starts_with(INDEX_SEGMENT_DOMAIN_PREFIX)
                }
                _ => false,
            });
        // Actions change only when a concurrent DV change to one of our files is merged in.
        let mut actions = self.actions.clone();
        let mut dv_changes = self.dv_changes.clone();
        let dv_paths: BTreeSet<String> = dv_changes.iter().map(|c| c.path.clone()).collect();
        let mut base = snapshot.clone();
        let mut rebased_over = Vec::new();
        let root = snapshot.location().root();
        // Group commit: the proposal this writer published (its base and path), what it
        // read of other writers' commits and proposals, and the proposals last listed.
        let stamp = self.clock.now_ms();
        let mut published: Option<(i64, Path)> = None;
        let mut memory = group::Memory::default();
        let mut listed: Vec<ProposalRef> = Vec::new();
        // Under sustained contention (the last commits lost their races) a first PUT from
        // a stale snapshot is likely to lose: catch up first (one LIST, which also shows
        // the proposals to carry) while publishing, so the next winner can carry this.
        // So is a table whose last listing showed a crowd of proposals waiting.
        let lost_races = &snapshot.caches().lost_races;
        let pending = &snapshot.caches().pending_proposals;
        let crowded_at_start = pending.load(Ordering::Relaxed) >= self.retry.claim_at.max(1);
        let contended = lost_races.load(Ordering::Relaxed) >= CONTENDED_AFTER || crowded_at_start;
        // A policy of no attempts publishes nothing either.
        let mut catch_up_first =
            contended && self.retry.group_commit && self.retry.max_attempts > 0;
        let mut saw_contention = false;
        // The version this writer claimed (see `claim`), and the claims last listed.
        let mut held: Option<i64> = None;
        let mut claims: Vec<(i64, Path)> = Vec::new();
        let mut attempt = 0;
        loop {
            let version = base.version() + 1;
            // The catch-up pass puts nothing, and the PUT of a version just claimed
            // finishes the claim's attempt.
            let catch_up_only = std::mem::take(&mut catch_up_first);
            let finishing_claim = held == Some(version);
            if !catch_up_only && !finishing_claim {
                attempt += 1;
            }
            // A published proposal may still be carried until its window has passed: the
            // writer keeps reading (and racing) until then, so it never reports a failure
            // that a later commit would contradict. Each lost race moves the window on.
            let window_open = published
                .as_ref()
                .is_some_and(|(b, _)| base.version() < b + group::WINDOW);
            if attempt > self.retry.max_attempts && !window_open {
                break;
            }
            // After a lost race, publish this commit for others to carry (once per window).
            let proposal = (self.retry.group_commit
                && (attempt > 1 || contended)
                && published.is_none()
                && attempt <= self.retry.max_attempts)
                .then(|| {
                    group::Proposal {
                        txn_id: txn_id.clone(),
                        base: base.version(),
                        window: group::WINDOW,
                        isolation: self.isolation,
                        operation: self.operation.clone(),
                        blind_append: blind,
                        reads: self.reads.clone(),
                        actions: actions.clone(),
                    }
                    .carriable()
                })
                .flatten();
            // A writer whose proposal is out stands aside: it claims the version, and
            // reads and carries the other proposals only when the claim is its own.
            // With few proposals waiting, every contender reading them all costs less
            // than a claim's round trip.
            let crowded = pending.load(Ordering::Relaxed) >= self.retry.claim_at;
            let standing = (published.is_some() || proposal.is_some()) && crowded;
            let claiming = standing && !catch_up_only && !finishing_claim;
            if !standing && !catch_up_only {
                let wait = self.retry.backoff(attempt.min(self.retry.max_attempts));
                if !wait.is_zero() {
                    tokio::time::sleep(wait).await;
                }
            }
            let proposal_path = group::proposal_path(root, base.version(), stamp, &txn_id);
            // Only a step that puts builds the commit: a catch-up or a claim would drop it.
            let prepared = if catch_up_only || claiming {
                None
            } else {
                let own = group::Own {
                    txn_id: &txn_id,
                    operation: &self.operation,
                    blind_append: blind,
                    actions: &actions,
                };
                let carried = if self.retry.group_commit
                    && !listed.is_empty()
                    && group::may_carry(&actions)
                    && (!standing || finishing_claim)
                {
                    let now_ms = self.clock.now_ms();
                    group::gather(&base, version, &own, &listed, &mut memory, now_ms).await
                } else {
                    group::Group::default()
                };
                let prepared = self.prepare(&base, version, &own, &carried).await;
                Some(prepared.map_err(|e| unknown_while_out(e, &published, &base, &txn_id))?)
            };
            // The proposal goes up beside the commit's PUT, off the critical path: should
            // the PUT lose, the next winner may carry it.
            // Proposals the catch-up after a lost race reads beside the winning commits.
            let caches = Arc::clone(base.caches());
            let wanted_proposals = |r: &ProposalRef, next: i64| {
                self.retry.group_commit && group::wants(r, next, &txn_id, &memory, &caches)
            };
            let all: put::Wanted<'_> = &wanted_proposals;
            let wanted: put::Wanted<'_> = if standing { &|_, _| false } else { all };
            let put_or_catch_up = async {
                if claiming {
                    let (found, claimed) = claim::claim_or_wait(
                        store.as_ref(),
                        root,
                        version,
                        &txn_id,
                        all,
                        pending.load(Ordering::Relaxed),
                    )
                    .await;
                    return (Ok(found), claimed);
                }
                if let Some(prepared) = &prepared {
                    let put = put_commit(
                        store.as_ref(),
                        root,
                        version,
                        prepared.body.clone(),
                        &txn_id,
                        &self.retry,
                        wanted,
                    )
                    .await;
                    return (put, false);
                }
                // Nothing learnt when the catch-up fails: the PUT finds out.
                let (winners, listed) = commits_after(
                    store.as_ref(),
                    root,
                    base.version(),
                    wanted,
                    self.retry.read_at_most(),
                )
                .await
                .unwrap_or_default();
                (Ok(PutOutcome::Taken(winners, listed)), false)
            };
            let ((put, claimed), ()) = futures::join!(put_or_catch_up, async {
                if let Some(body) = &proposal {
                    group::publish(store.as_ref(), &proposal_path, body.clone()).await;
                }
            });
            if proposal.is_some() {
                published = Some((base.version(), proposal_path));
            }
            if claimed {
                held = Some(version);
            }
            match put {
                // With a proposal out, another writer may still carry this work until the
                // window has passed: the outcome is unknown, never a failure.
                Err(e) => {
                    let e = e.into_error(root, version, &txn_id);
                    return Err(unknown_while_out(e, &published, &base, &txn_id));
                }
                Ok(PutOutcome::Committed) => {
                    // Only a PUT commits, and only a step that prepared a commit puts.
                    let Some(Prepared {
                        info,
                        actions: all_actions,
                        timestamp,
                        ..
                    }) = prepared
                    else {
                        continue;
                    };
                    let mut all = vec![info];
                    all.extend(all_actions);
                    let mut committed = base.with_commit(version, timestamp, all)?;
                    let checkpoint = maybe_checkpoint(&committed, &self.clock);
                    if checkpoint.is_some() {
                        committed.note_checkpoint(version);
                    }
                    claim::forget_decided(
                        &self.snapshot,
                        &published,
                        &listed,
                        (held, &claims),
                        version,
                    );
                    if attempt == 1 && !saw_contention {
                        lost_races.store(0, Ordering::Relaxed);
                    } else {
                        lost_races.fetch_add(1, Ordering::Relaxed);
                    }
                    return Ok(CommitOutcome {
                        version,
                        attempts: attempt,
                        txn_id: txn_id.clone(),
                        rebased_over,
                        checkpoint,
                        snapshot: committed,
                    });
                }
                Ok(PutOutcome::Taken(winners, proposals)) => {
                    // Only new versions mean contention: a listed proposal may be this
                    // handle's own, still being deleted.
                    saw_contention |= !catch_up_only || !winners.is_empty();
                    group::remember(proposals.bodies, &mut memory, base.caches());
                    if proposals.complete {
                        pending.store(proposals.refs.len(), Ordering::Relaxed);
                        claims = proposals.claims;
                    }
                    listed = proposals.refs;
                    // Other writers won: check each against what we did, then rebase.
                    for winner in winners {
                        let ts = commit_timestamp(&winner.actions)
                            .unwrap_or(winner.file_time)
                            .max(base.latest_commit_timestamp_ms() + 1);
                        memory
                            .commits
                            .insert(winner.version, winner.actions.clone());
                        // Carried by another writer's commit: committed there.
                        if group::names(&winner.actions, &txn_id) {
                            let committed = base.with_commit(winner.version, ts, winner.actions)?;
                            claim::forget_decided(
                                &self.snapshot,
                                &published,
                                &listed,
                                (held, &claims),
                                winner.version,
                            );
                            lost_races.fetch_add(1, Ordering::Relaxed);
                            return Ok(CommitOutcome {
                                version: winner.version,
                                // Carried while catching up: its proposal was its attempt.
                                attempts: attempt.max(1),
                                txn_id: txn_id.clone(),
                                rebased_over,
                                checkpoint: None,
                                snapshot: committed,
                            });
                        }
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
                        // A conflict is final: every committer runs the same check on our
                        // proposal against this commit, so none will carry it past here.
                        let rebases = match check(&ours, &base, &winning) {
                            Ok(rebases) => rebases,
                            Err(e) => {
                                claim::forget_decided(
                                    &self.snapshot,
                                    &published,
                                    &listed,
                                    (held, &claims),
                                    winning.version,
                                );
                                return Err(e);
                            }
                        };
                        for rebase in rebases {
                            merge_deletion_vectors(
                                &base,
                                &winning,
                                rebase,
                                &mut actions,
                                &mut dv_changes,
                                self.clock.now_ms(),
                            )
                            .await
                            .map_err(|e| unknown_while_out(e, &published, &base, &txn_id))?;
                        }
                        base = base.with_commit(winning.version, ts, winning.actions)?;
                        rebased_over.push(winning.version);
                    }
                    // A window that has passed without this commit: nothing will carry
                    // the proposal any more; a later attempt may publish a new one.
                    if published
                        .as_ref()
                        .is_some_and(|(b, _)| base.version() >= b + group::WINDOW)
                    {
                        published = None;
                    }
                }
            }
        }
        Err(Error::CommitRetriesExhausted {
            attempts: attempt - 1,
            version: base.version() + 1,
        })
    }
}
