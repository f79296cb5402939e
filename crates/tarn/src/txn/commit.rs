//! A transaction's commit as a small state machine. Each turn plans one step at the next
//! version, takes it, and moves on from what the store answered:
//!
//! - the step is a **catch-up** (read the commits after the base, put nothing), a
//!   **claim** of the version (under a crowd of proposals, see `claim`), or a **put** of
//!   the commit with put-if-absent, a group-commit proposal published beside it after a
//!   lost race;
//! - **committed**: the commit is in place, and the outcome is returned;
//! - **lost race**: other writers hold the version. Each winning commit is read in
//!   order: one that carried this writer's proposal means it committed there; one that
//!   conflicts ends the commit with the conflict; the others are rebased over, and the
//!   loop goes on at the next version;
//! - a store **error** fails the commit, or leaves it unknown while a published proposal
//!   may still be carried.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use object_store::ObjectStore;
use object_store::path::Path;
use uuid::Uuid;

use super::checkpoint::maybe_checkpoint;
use super::commit_info::commit_timestamp;
use super::conflict::{Ours, WinningCommit, check};
use super::fence::{self, fenced_conflict};
use super::outcome::{CommitOutcome, unknown_while_out};
use super::put::{self, Listed, PutError, PutOutcome, Winner, commits_after, put_commit};
use super::rebase::{DvChange, merge_deletion_vectors};
use super::transaction::{LostRaces, Prepared, Transaction};
use super::{claim, group, proposal};
use crate::error::{ConflictReason, Error, Result};
use crate::log::{ListedProposals, ProposalRef};
use crate::protocol::Action;
use crate::protocol::features::{ensure_appends_only, ensure_writable};
use crate::protocol::names::INDEX_SEGMENT_DOMAIN_PREFIX;
use crate::snapshot::Snapshot;

/// Commits in a row that lost a race after which a commit publishes its group-commit
/// proposal beside its first PUT.
const CONTENDED_AFTER: u32 = 2;

impl Transaction {
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
    /// [`Error::AppendOnly`] when it removes data from an append-only table; [`Error::Store`]
    /// for other store failures. On failure nothing is committed; files the transaction
    /// wrote are left for `vacuum`.
    pub async fn commit(self) -> Result<CommitOutcome> {
        run(self).await
    }
}

/// Commits `txn`: the loop described in the module docs.
async fn run(txn: Transaction) -> Result<CommitOutcome> {
    if txn.actions.is_empty() && txn.fenced.is_empty() {
        return txn.validate_read_only().await;
    }
    super::kept::ensure_base_kept(&txn.snapshot, txn.clock.now_ms()).await?;
    let mut state = State::start(&txn)?;
    loop {
        let Some(step) = state.next_step(&txn).await else {
            return Err(Error::CommitRetriesExhausted {
                attempts: state.attempt - 1,
                version: state.base.version() + 1,
            });
        };
        let prepared = state.prepare(&txn, &step).await?;
        let (put, claimed) = state.take(&txn, &step, prepared.as_ref()).await;
        if step.proposal.is_some() {
            state.published = Some((state.base.version(), step.proposal_path.clone()));
        }
        if claimed {
            state.held = Some(step.version);
        }
        match put {
            // With a proposal out, another writer may still carry this work until the
            // window has passed: the outcome is unknown, never a failure.
            Err(e) => {
                let e = e.into_error(&state.root, step.version, &state.txn_id);
                return Err(state.unknown_while_out(e));
            }
            Ok(PutOutcome::Committed) => {
                // Only a PUT commits, and only a step that prepared a commit puts.
                if let Some(prepared) = prepared {
                    return state.committed(&txn, step.version, prepared);
                }
            }
            Ok(PutOutcome::Taken(winners, listed)) => {
                if let Some(outcome) = state.lost_race(&txn, &step, winners, listed).await? {
                    return Ok(outcome);
                }
            }
        }
    }
}

/// What one turn of the loop does at `version`.
struct Step {
    version: i64,
    /// Only read the commits after the base (the first turn under contention).
    catch_up_only: bool,
    /// Put the commit of a version this writer claimed.
    finishing_claim: bool,
    /// The proposal to publish beside this step, if any.
    proposal: Option<Bytes>,
    proposal_path: Path,
    /// A writer whose proposal is out under a crowd stands aside: it claims the
    /// version, and reads others' proposals only when the claim is its own.
    standing: bool,
    /// Claim the version rather than put.
    claiming: bool,
}

/// Everything a commit carries from one turn to the next.
struct State {
    store: Arc<dyn ObjectStore>,
    root: Path,
    txn_id: String,
    /// Whether the commit only appends (index segments of the appended files allowed).
    blind: bool,
    /// The actions; they change only when a concurrent DV change to one of our files is
    /// united with ours.
    actions: Vec<Action>,
    dv_changes: Vec<DvChange>,
    dv_paths: BTreeSet<String>,
    /// The snapshot the next version is taken on: the transaction's, plus every commit
    /// rebased over.
    base: Snapshot,
    rebased_over: Vec<i64>,
    /// Group commit: the time that names this writer's proposals, the proposal it
    /// published (its base and path), what it read of other writers' commits and
    /// proposals, and the proposals last listed.
    stamp: i64,
    published: Option<(i64, Path)>,
    memory: group::Memory,
    listed: Vec<ProposalRef>,
    lost_races: Arc<LostRaces>,
    pending: Arc<ListedProposals>,
    contended: bool,
    catch_up_first: bool,
    saw_contention: bool,
    /// The version this writer claimed, and the claims last listed.
    held: Option<i64>,
    claims: Vec<(i64, Path)>,
    attempt: u32,
}

impl State {
    /// Checks what can be checked before any request (a writable table, an append-only
    /// table left whole, application transactions not yet committed) and sets out.
    fn start(txn: &Transaction) -> Result<Self> {
        let snapshot = &txn.snapshot;
        ensure_writable(snapshot.protocol(), snapshot.metadata(), snapshot.schema())?;
        ensure_appends_only(
            snapshot.location().url().as_str(),
            snapshot.metadata(),
            &txn.actions,
            &txn.operation,
        )?;
        // An earlier incarnation of a fenced writer commits nothing.
        if let Some(writer) = &txn.writer
            && let Some(epoch) = snapshot.app_transaction_version(&writer.app_id())
            && epoch > writer.epoch()
        {
            return Err(fenced_conflict(snapshot.version(), writer.id(), epoch));
        }
        for action in &txn.actions {
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
        // Index segments describe the appended files; they keep an append blind.
        let blind = txn.reads.is_empty()
            && txn.actions.iter().all(|a| match a {
                Action::Add(add) => add.data_change,
                Action::DomainMetadata(d) => {
                    !d.removed && d.domain.starts_with(INDEX_SEGMENT_DOMAIN_PREFIX)
                }
                _ => false,
            });
        // Under sustained contention (the last commits lost their races) a first PUT from
        // a stale snapshot is likely to lose: catch up first (one LIST, which also shows
        // the proposals to carry) while publishing, so the next winner can carry this.
        // So is a table whose last listing showed a crowd of proposals waiting.
        let lost_races = snapshot.caches().shared::<LostRaces>();
        let pending = snapshot.caches().shared::<ListedProposals>();
        let crowded_at_start = pending.0.load(Ordering::Relaxed) >= txn.retry.claim_at.max(1);
        let contended = lost_races.0.load(Ordering::Relaxed) >= CONTENDED_AFTER || crowded_at_start;
        Ok(Self {
            store: Arc::clone(snapshot.location().store()),
            root: snapshot.location().root().clone(),
            txn_id: Uuid::new_v4().to_string(),
            blind,
            actions: txn.actions.clone(),
            dv_changes: txn.dv_changes.clone(),
            dv_paths: txn.dv_changes.iter().map(|c| c.path.clone()).collect(),
            base: snapshot.clone(),
            rebased_over: Vec::new(),
            stamp: txn.clock.now_ms(),
            published: None,
            memory: group::Memory::default(),
            listed: Vec::new(),
            lost_races,
            pending,
            contended,
            // A policy of no attempts publishes nothing either.
            catch_up_first: contended && txn.retry.group_commit && txn.retry.max_attempts > 0,
            saw_contention: false,
            held: None,
            claims: Vec::new(),
            attempt: 0,
        })
    }

    /// Plans the next step, after the backoff it calls for; `None` once the attempts are
    /// spent and no published proposal can still be carried.
    async fn next_step(&mut self, txn: &Transaction) -> Option<Step> {
        let retry = &txn.retry;
        let version = self.base.version() + 1;
        // The catch-up pass puts nothing, and the PUT of a version just claimed finishes
        // the claim's attempt.
        let catch_up_only = std::mem::take(&mut self.catch_up_first);
        let finishing_claim = self.held == Some(version);
        if !catch_up_only && !finishing_claim {
            self.attempt += 1;
        }
        // A published proposal may still be carried until its window has passed: the
        // writer keeps reading (and racing) until then, so it never reports a failure
        // that a later commit would contradict. Each lost race moves the window on.
        let window_open = self
            .published
            .as_ref()
            .is_some_and(|(b, _)| self.base.version() < b + group::WINDOW);
        if self.attempt > retry.max_attempts && !window_open {
            return None;
        }
        // After a lost race, publish this commit for others to carry (once per window).
        let proposal = (retry.group_commit
            && (self.attempt > 1 || self.contended)
            && self.published.is_none()
            && self.attempt <= retry.max_attempts)
            .then(|| {
                proposal::Proposal {
                    txn_id: self.txn_id.clone(),
                    base: self.base.version(),
                    window: group::WINDOW,
                    isolation: txn.isolation,
                    operation: txn.operation.clone(),
                    blind_append: self.blind,
                    reads: txn.reads.clone(),
                    actions: self.actions.clone(),
                }
                .carriable()
            })
            .flatten();
        // With few proposals waiting, every contender reading them all costs less than a
        // claim's round trip.
        let crowded = self.pending.0.load(Ordering::Relaxed) >= retry.claim_at;
        let standing = (self.published.is_some() || proposal.is_some()) && crowded;
        let claiming = standing && !catch_up_only && !finishing_claim;
        if !standing && !catch_up_only {
            let wait = retry.backoff(self.attempt.min(retry.max_attempts));
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
        }
        let proposal_path =
            proposal::proposal_path(&self.root, self.base.version(), self.stamp, &self.txn_id);
        Some(Step {
            version,
            catch_up_only,
            finishing_claim,
            proposal,
            proposal_path,
            standing,
            claiming,
        })
    }

    /// The commit a putting step puts, with the proposals it carries; none for a catch-up
    /// or a claim, which would drop it.
    async fn prepare(&mut self, txn: &Transaction, step: &Step) -> Result<Option<Prepared>> {
        if step.catch_up_only || step.claiming {
            return Ok(None);
        }
        let own = group::Own {
            txn_id: &self.txn_id,
            operation: &txn.operation,
            blind_append: self.blind,
            actions: &self.actions,
        };
        let carried = if txn.retry.group_commit
            && !self.listed.is_empty()
            && group::may_carry(&self.actions)
            && (!step.standing || step.finishing_claim)
        {
            let now_ms = txn.clock.now_ms();
            let (base, listed) = (&self.base, &self.listed);
            group::gather(base, step.version, &own, listed, &mut self.memory, now_ms).await
        } else {
            group::Group::default()
        };
        let prepared = txn.prepare(&self.base, step.version, &own, &carried).await;
        match prepared {
            Ok(prepared) => Ok(Some(prepared)),
            Err(e) => Err(self.unknown_while_out(e)),
        }
    }

    /// Takes the step: claims the version, puts the commit, or catches up, with the
    /// proposal (if any) published beside it, off the critical path: should the PUT lose,
    /// the next winner may carry it. Returns what the store said and whether this writer
    /// now holds a claim on the version.
    async fn take(
        &self,
        txn: &Transaction,
        step: &Step,
        prepared: Option<&Prepared>,
    ) -> (std::result::Result<PutOutcome, PutError>, bool) {
        let store = self.store.as_ref();
        let (root, version, txn_id) = (&self.root, step.version, self.txn_id.as_str());
        // Proposals the catch-up after a lost race reads beside the winning commits.
        let caches = Arc::clone(self.base.caches());
        let wanted_proposals = |r: &ProposalRef, next: i64| {
            txn.retry.group_commit && group::wants(r, next, txn_id, &self.memory, &caches)
        };
        let all: put::Wanted<'_> = &wanted_proposals;
        let wanted: put::Wanted<'_> = if step.standing { &|_, _| false } else { all };
        let put_or_catch_up = async {
            if step.claiming {
                let pending = self.pending.0.load(Ordering::Relaxed);
                let (found, claimed) =
                    claim::claim_or_wait(store, root, version, txn_id, all, pending).await;
                return (Ok(found), claimed);
            }
            if let Some(prepared) = prepared {
                let body = prepared.body.clone();
                let put = put_commit(store, root, version, body, txn_id, &txn.retry, wanted);
                return (put.await, false);
            }
            // Nothing learnt when the catch-up fails: the PUT finds out.
            let most = txn.retry.read_at_most();
            let (winners, listed) = commits_after(store, root, self.base.version(), wanted, most)
                .await
                .unwrap_or_default();
            (Ok(PutOutcome::Taken(winners, listed)), false)
        };
        let ((put, claimed), ()) = futures::join!(put_or_catch_up, async {
            if let Some(body) = &step.proposal {
                group::publish(store, &step.proposal_path, body.clone()).await;
            }
        });
        (put, claimed)
    }

    /// The outcome of a commit that landed at `version`.
    fn committed(
        mut self,
        txn: &Transaction,
        version: i64,
        prepared: Prepared,
    ) -> Result<CommitOutcome> {
        let Prepared {
            info,
            actions,
            timestamp,
            ..
        } = prepared;
        let mut all = vec![info];
        all.extend(actions);
        let mut committed = self.base.with_commit(version, timestamp, all)?;
        let checkpoint = maybe_checkpoint(&committed, &txn.clock);
        if checkpoint.is_some() {
            committed.note_checkpoint(version);
        }
        self.forget_decided(txn, version);
        if self.attempt == 1 && !self.saw_contention {
            self.lost_races.0.store(0, Ordering::Relaxed);
        } else {
            self.lost_races.0.fetch_add(1, Ordering::Relaxed);
        }
        Ok(CommitOutcome {
            version,
            attempts: self.attempt,
            txn_id: std::mem::take(&mut self.txn_id),
            rebased_over: std::mem::take(&mut self.rebased_over),
            checkpoint,
            snapshot: committed,
        })
    }

    /// Reads what a lost race found: the listed proposals, then each winning commit in
    /// order. Returns the outcome when a winner carried this writer's proposal, fails on
    /// a conflict, and otherwise rebases over every winner and returns `None`.
    async fn lost_race(
        &mut self,
        txn: &Transaction,
        step: &Step,
        winners: Vec<Winner>,
        listed: Listed,
    ) -> Result<Option<CommitOutcome>> {
        // Only new versions mean contention: a listed proposal may be this handle's own,
        // still being deleted.
        self.saw_contention |= !step.catch_up_only || !winners.is_empty();
        group::remember(listed.bodies, &mut self.memory, self.base.caches());
        if listed.complete {
            self.pending.0.store(listed.refs.len(), Ordering::Relaxed);
            self.claims = listed.claims;
        }
        self.listed = listed.refs;
        for winner in winners {
            let ts = commit_timestamp(&winner.actions)
                .unwrap_or(winner.file_time)
                .max(self.base.latest_commit_timestamp_ms() + 1);
            self.memory
                .commits
                .insert(winner.version, winner.actions.clone());
            // Carried by another writer's commit: committed there.
            if group::names(&winner.actions, &self.txn_id) {
                let committed = self.base.with_commit(winner.version, ts, winner.actions)?;
                self.forget_decided(txn, winner.version);
                self.lost_races.0.fetch_add(1, Ordering::Relaxed);
                return Ok(Some(CommitOutcome {
                    version: winner.version,
                    // Carried while catching up: its proposal was its attempt.
                    attempts: self.attempt.max(1),
                    txn_id: self.txn_id.clone(),
                    rebased_over: std::mem::take(&mut self.rebased_over),
                    checkpoint: None,
                    snapshot: committed,
                }));
            }
            // Fenced by a resolution of its outcome: it never commits.
            if fence::fences(&winner.actions, &self.txn_id) {
                self.forget_decided(txn, winner.version);
                return Err(Error::Conflict {
                    winning_version: winner.version,
                    operation: fence::FENCE_COMMIT.into(),
                    reason: ConflictReason::CommitFenced {
                        txn_id: self.txn_id.clone(),
                    },
                });
            }
            let winning = WinningCommit {
                version: winner.version,
                actions: winner.actions,
            };
            self.rebase_over(txn, winning, ts).await?;
        }
        // A window that has passed without this commit: nothing will carry the proposal
        // any more; a later attempt may publish a new one.
        if self
            .published
            .as_ref()
            .is_some_and(|(b, _)| self.base.version() >= b + group::WINDOW)
        {
            self.published = None;
        }
        Ok(None)
    }

    /// Checks `winning` against this commit and rebases over it (uniting deletion vectors
    /// where both changed a file's). A conflict is final: every committer runs the same
    /// check on this writer's proposal against that commit, so none will carry it past
    /// there.
    async fn rebase_over(
        &mut self,
        txn: &Transaction,
        winning: WinningCommit,
        ts: i64,
    ) -> Result<()> {
        let ours = Ours {
            isolation: txn.isolation,
            reads: &txn.reads,
            actions: &self.actions,
            dv_paths: &self.dv_paths,
        };
        let rebases = match check(&ours, &self.base, &winning) {
            Ok(rebases) => rebases,
            Err(e) => {
                self.forget_decided(txn, winning.version);
                return Err(e);
            }
        };
        for rebase in rebases {
            let merged = merge_deletion_vectors(
                &self.base,
                &winning,
                rebase,
                &mut self.actions,
                &mut self.dv_changes,
                txn.clock.now_ms(),
            )
            .await;
            if let Err(e) = merged {
                return Err(self.unknown_while_out(e));
            }
        }
        self.base = self
            .base
            .with_commit(winning.version, ts, winning.actions)?;
        self.rebased_over.push(winning.version);
        Ok(())
    }

    /// Deletes what a decided version leaves behind: this writer's proposal and claim,
    /// and the lapsed proposals it listed.
    fn forget_decided(&self, txn: &Transaction, version: i64) {
        claim::forget_decided(
            &txn.snapshot,
            &self.published,
            &self.listed,
            (self.held, &self.claims),
            version,
        );
    }

    /// `e`, or [`Error::CommitStateUnknown`] while a published proposal may still be
    /// carried.
    fn unknown_while_out(&self, e: Error) -> Error {
        unknown_while_out(e, &self.published, &self.base, &self.txn_id)
    }
}
