//! Applying mutations to the manifest: a batch of operations loads the pages their keys
//! and ranges fall in, runs each operation on a view of those rows, rewrites the pages
//! that changed (copy-on-write: new files, the old ones removed) with their index
//! segments built inline, and commits once with put-if-absent through Tarn's
//! transaction. Each operation declares what it read (keys and ranges, recorded as read
//! predicates, and the files holding them), so a concurrent change that matters is a
//! conflict Tarn's checker reports; the batch then re-reads the manifest and runs again,
//! and each operation decides anew (a create finds the name taken, a drop finds it gone).

use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::FutureExt;
use tarn::expr::{col, lit};
use tarn::{Error as TarnError, Table};

use crate::error::{Error, Result};
use crate::manifest::{Row, batch_of};
use crate::pages::{Layout, PageCache, PageRows, split};
pub(crate) use crate::view::{Gate, Needs, View};
use crate::view::{deleted_positions, load, rows_in};

/// Small pages (new keys, shrunk pages) the manifest holds before a mutation folds them
/// into the base pages: between this and twice this, per handle.
pub(crate) const COMPACT_AT: usize = 8;

/// Counters of one handle's commits.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub(crate) commits: AtomicU64,
    pub(crate) reruns: AtomicU64,
    /// The versions other writers committed while this handle's last committed batch
    /// ran: how crowded the manifest is.
    pub(crate) crowd: AtomicU64,
}

/// Times a batch re-reads the manifest after a conflict before giving up. Writers that
/// all change one page (drops in a small catalog) win one at a time, so under hundreds of
/// writers a batch may lose many rounds before it wins; the backoff below spreads them.
const ATTEMPTS: u32 = 512;

/// The most a rerun waits before re-reading the manifest.
const MAX_RERUN_BACKOFF: Duration = Duration::from_millis(500);

/// The jittered wait before rerun `attempt` (1-based): none for the first (a lost race is
/// usually one winner), then a random share of a cap that doubles from 20 ms, so writers
/// that keep colliding on one page stop retrying in lockstep.
fn rerun_backoff(attempt: u32) -> Duration {
    if attempt < 2 {
        return Duration::ZERO;
    }
    let cap = Duration::from_millis(20)
        .saturating_mul(1u32 << (attempt - 2).min(10))
        .min(MAX_RERUN_BACKOFF);
    cap.mul_f64(draw())
}

/// Whether a batch that finds enough small pages folds them, given how many versions
/// other writers committed while this handle's last batch ran (`crowd`) and a random
/// draw in `[0, 1)`. Alone, it always folds; in a crowd of writers, all of whom see the
/// same small pages, about one batch per round tries (each fold removes the pages every
/// other fold would, so all but one lose and run again).
fn folds_in(crowd: u64, draw: f64) -> bool {
    draw * (crowd.saturating_add(1) as f64) < 1.0
}

/// When a batch folds the small pages it finds.
#[derive(Debug, Clone, Copy)]
struct Folding {
    /// Folds only above this many small pages.
    at: usize,
    /// The crowd this handle's last batch saw; `None` before its first commit.
    crowd: Option<u64>,
    /// This batch's draw for [`folds_in`].
    draw: f64,
}

impl Folding {
    /// Whether a batch that finds `small` small pages folds them. A handle that has not
    /// committed yet takes the small pages beyond every handle's threshold as its crowd:
    /// alone or in a few, writers fold before there are that many.
    fn folds(&self, small: usize) -> bool {
        let beyond = small.saturating_sub(2 * COMPACT_AT) as u64;
        small > self.at && folds_in(self.crowd.unwrap_or(beyond), self.draw)
    }
}

/// A draw in `[0, 1)`.
fn draw() -> f64 {
    let random = std::hash::RandomState::new().build_hasher().finish();
    (random % 1_000_000) as f64 / 1_000_000.0
}

/// One operation of a batch: what it reads, and what it does on the view.
pub(crate) struct Op {
    pub(crate) needs: Needs,
    pub(crate) run: Run,
}

/// What an operation does on the view.
pub(crate) type Run = Box<dyn FnMut(&mut View) -> Result<()> + Send + Sync>;

/// Runs a batch of operations and commits their changes at once.
///
/// Operations' own errors (a name taken, a namespace not empty) are their results; the
/// batch fails only when the manifest cannot be read or written, or keeps conflicting.
pub(crate) async fn run_batch(
    table: &mut Table,
    cache: &Arc<PageCache>,
    layout: Layout,
    ops: &mut [Op],
    clock: Arc<dyn tarn::Clock>,
    stats: &Stats,
    compact_at: usize,
) -> Result<Vec<Result<()>>> {
    let mut attempt = 0;
    let mut refreshed = false;
    // How crowded the manifest is, as this handle's last batch saw it (unknown before
    // its first commit), and this batch's draw for whether it folds in that crowd.
    let crowd =
        (stats.commits.load(Ordering::Relaxed) > 0).then(|| stats.crowd.load(Ordering::Relaxed));
    let fold_draw = draw();
    let started_at = table.version();
    // Folding small pages is upkeep: once a batch that folded lost to a conflict, it runs
    // again without folding, so the operations never wait on it under contention (the
    // next uncontended batch folds).
    let mut compact_at = compact_at;
    // Operations whose gate failed: they are left out of the reruns.
    let mut gate_errors: Vec<Option<Error>> = ops.iter().map(|_| None).collect();
    loop {
        attempt += 1;
        let snapshot = table.snapshot().clone();
        let needs: Vec<Needs> = ops.iter().map(|op| op.needs.clone()).collect();
        let mut view = load(
            snapshot.clone(),
            Arc::clone(cache),
            needs.clone(),
            clock.now_ms() * 1000,
            layout,
            crowd.is_some_and(|c| c > 0),
            move |small| {
                Folding {
                    at: compact_at,
                    crowd,
                    draw: fold_draw,
                }
                .folds(small)
            },
        )
        .boxed()
        .await?;
        let compacting = view.is_dirty();
        let mut results = Vec::with_capacity(ops.len());
        for (i, op) in ops.iter_mut().enumerate() {
            view.current = i;
            let skipped = gate_errors[i].is_some();
            results.push(if skipped { Ok(()) } else { (op.run)(&mut view) });
        }
        let gates = std::mem::take(&mut view.gates);
        // A batch whose operations change nothing commits no compaction either: it would
        // turn a read into a write.
        if compacting && view.edited.is_empty() {
            view.dirty.clear();
            view.rewrites.clear();
        }
        if !view.is_dirty() {
            settle(gates, &mut gate_errors).await;
            // Nothing to commit, so no commit checks the state the results rest on: they
            // stand only if they were decided on the latest manifest (a namespace another
            // process just created must not be reported missing).
            if refreshed {
                return Ok(with_gate_errors(results, gate_errors));
            }
            let before = table.version();
            table.refresh().boxed().await?;
            refreshed = true;
            if table.version() == before {
                return Ok(with_gate_errors(results, gate_errors));
            }
            continue;
        }
        // Boxed as `Send` here, where the lifetimes are concrete (rustc cannot prove the
        // committer's future `Send` through the nested futures otherwise).
        let prepared = prepare(table, &mut view, &needs, layout).boxed().await;
        if !settle(gates, &mut gate_errors).await {
            // What an operation waited on failed: run the batch again without it (the
            // pages written are left for vacuum).
            if let Err(e) = prepared {
                return Err(e);
            }
            continue;
        }
        let (txn, written) = prepared?;
        match table.commit(txn).boxed().await {
            Ok(outcome) => {
                stats.commits.fetch_add(1, Ordering::Relaxed);
                // Rebased over or carried, the versions before this one that other
                // writers committed while the batch ran.
                let others = outcome.version.saturating_sub(started_at + 1);
                stats
                    .crowd
                    .store(u64::try_from(others).unwrap_or(0), Ordering::Relaxed);
                // The pages just written are known: the next batch need not read them.
                for (path, rows) in written {
                    // Written sorted by key: each row's position is its index.
                    let positions = Arc::new((0..rows.len() as u64).collect());
                    cache.insert(path, PageRows { rows, positions });
                }
                return Ok(with_gate_errors(results, gate_errors));
            }
            // A fenced writer's work never commits: rerunning cannot help.
            Err(TarnError::Conflict { reason, .. })
                if attempt < ATTEMPTS
                    && !matches!(reason, tarn::ConflictReason::WriterFenced { .. }) =>
            {
                stats.reruns.fetch_add(1, Ordering::Relaxed);
                if compacting {
                    compact_at = usize::MAX;
                }
                tokio::time::sleep(rerun_backoff(attempt)).await;
                table.refresh().boxed().await?;
                refreshed = true;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Waits for every gate, recording each failure against its operation; whether all
/// succeeded.
async fn settle(gates: Vec<(usize, Gate)>, errors: &mut [Option<Error>]) -> bool {
    let mut all = true;
    for (i, gate) in gates {
        if let Err(e) = gate.await.unwrap_or(Err(Error::Stopped)) {
            errors[i] = Some(e);
            all = false;
        }
    }
    all
}

/// The operations' results, with a failed gate's error in place of its operation's.
fn with_gate_errors(mut results: Vec<Result<()>>, errors: Vec<Option<Error>>) -> Vec<Result<()>> {
    for (result, error) in results.iter_mut().zip(errors) {
        if let Some(e) = error {
            *result = Err(e);
        }
    }
    results
}

/// The transaction rewriting the dirty pages of a view, and the new pages' paths and rows.
async fn prepare(
    table: &Table,
    view: &mut View,
    needs: &[Needs],
    layout: Layout,
) -> Result<(tarn::Transaction, Vec<(String, Arc<Vec<Arc<Row>>>)>)> {
    let rows_per_page = layout.rows_per_page();
    let mut txn = table
        .transaction()
        .with_isolation(tarn::IsolationLevel::Serializable)
        .with_operation("CATALOG");
    // What the operations read: a concurrent change to any of it conflicts.
    for need in needs {
        for key in &need.keys {
            txn.record_read_predicate(&col("object_id").eq(lit(key.clone())))?;
        }
        for (from, to) in &need.ranges {
            txn.record_read_predicate(
                &col("object_id")
                    .gt_eq(lit(from.clone()))
                    .and(col("object_id").lt(lit(to.clone()))),
            )?;
        }
    }
    let loaded_adds: Vec<tarn::protocol::Add> = view.loaded.iter().map(|p| p.add.clone()).collect();
    txn.record_read_files(&loaded_adds);
    // Each dirty page is rewritten on its own (split when over the page size), so base
    // pages never overlap; new keys go to new files (or a small page rewritten anyway),
    // small ones the next compaction folds into the base pages.
    let now_ms = view.now_us / 1000;
    let mut batches = Vec::new();
    let mut written: Vec<Arc<Vec<Arc<Row>>>> = Vec::new();
    // A compaction whose pages no operation edited only moves rows: its files go in as
    // `dataChange: false`, so writers that merely read the folded pages (a create checking
    // its name is free) keep their reads instead of conflicting.
    let rearranging = !view.moved.is_empty() && view.moved.is_disjoint(&view.edited);
    let mut rearranged: Vec<String> = Vec::new();
    let mut rearranged_batches: Vec<usize> = Vec::new();
    // A page that only loses rows takes a deletion vector, while its deleted rows stay
    // under half its rows: no page is written, and writers deleting other rows of the
    // page unite their DVs instead of conflicting.
    let dvs = layout != Layout::FullRewrite
        && table
            .snapshot()
            .protocol()
            .has_writer_feature("deletionVectors");
    for page in view.dirty.clone() {
        if let Some(i) = page
            && dvs
            && !view.rewrites.contains(&page)
            && let Some(gone) = deleted_positions(view, i)
        {
            txn.delete_rows(&view.loaded[i].add, &gone).await?;
            continue;
        }
        let mut rows = rows_in(view, page);
        let moved = rearranging && view.moved.contains(&page);
        if let Some(i) = page {
            txn.remove_file(view.loaded[i].add.clone().into_remove(now_ms));
            if moved {
                rearranged.push(view.loaded[i].add.path.clone());
            }
        }
        rows.sort_by(|a, b| a.object_id.cmp(&b.object_id));
        for page_rows in split(rows, rows_per_page) {
            if moved {
                rearranged_batches.push(batches.len());
            }
            batches.push(batch_of(&page_rows)?);
            written.push(Arc::new(page_rows));
        }
    }
    let adds = txn.write_files(batches).boxed().await?;
    // The manifest is unpartitioned: one file per batch, in order.
    rearranged.extend(
        rearranged_batches
            .iter()
            .filter_map(|&b| adds.get(b).map(|a| a.path.clone())),
    );
    txn.mark_rearranged(rearranged.iter().map(String::as_str));
    let written = adds.into_iter().map(|a| a.path).zip(written).collect();
    Ok((txn, written))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rerun_backoff_starts_at_zero_and_stays_under_its_cap() {
        assert_eq!(rerun_backoff(1), Duration::ZERO);
        for attempt in 2..ATTEMPTS {
            assert!(rerun_backoff(attempt) <= MAX_RERUN_BACKOFF);
        }
        assert!(rerun_backoff(2) <= Duration::from_millis(20));
    }

    #[test]
    fn alone_a_batch_always_folds_and_in_a_crowd_about_one_in_the_crowd_does() {
        assert!(folds_in(0, 0.0));
        assert!(folds_in(0, 0.999_999));
        assert!(folds_in(9, 0.05));
        assert!(!folds_in(9, 0.1));
        let folding = (0..1000)
            .filter(|i| folds_in(19, f64::from(*i) / 1000.0))
            .count();
        assert_eq!(folding, 50);
    }

    #[test]
    fn a_new_handle_takes_the_small_pages_beyond_every_threshold_as_its_crowd() {
        let new = |draw| Folding {
            at: 10,
            crowd: None,
            draw,
        };
        assert!(!new(0.0).folds(10));
        assert!(new(0.999).folds(11));
        assert!(new(0.999).folds(2 * COMPACT_AT));
        // 20 pages beyond: about one new handle in 21 folds.
        assert!(new(0.04).folds(2 * COMPACT_AT + 20));
        assert!(!new(0.05).folds(2 * COMPACT_AT + 20));
        let known = Folding {
            at: 10,
            crowd: Some(0),
            draw: 0.999,
        };
        assert!(known.folds(2 * COMPACT_AT + 20));
    }
}
