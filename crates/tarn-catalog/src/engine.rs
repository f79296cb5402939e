//! Applying mutations to the manifest: a batch of operations loads the pages their keys
//! and ranges fall in, runs each operation on a view of those rows, rewrites the pages
//! that changed (copy-on-write: new files, the old ones removed) with their index
//! segments built inline, and commits once with put-if-absent through Tarn's
//! transaction. Each operation declares what it read (keys and ranges, recorded as read
//! predicates, and the files holding them), so a concurrent change that matters is a
//! conflict Tarn's checker reports; the batch then re-reads the manifest and runs again,
//! and each operation decides anew (a create finds the name taken, a drop finds it gone).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::FutureExt;
use tarn::expr::{col, lit};
use tarn::{Error as TarnError, Snapshot, Table};

use crate::catalog::{COMPACT_AT, Stats};
use crate::error::{CatalogError, Result};
use crate::manifest::{Row, batch_of};
use crate::pages::{Layout, Page, PageCache, PageRows, pages, pages_for_key, split};

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

/// Work an operation started that the batch's commit must wait for (a new table's
/// version 0, so that its entry never points at nothing); it runs while the batch
/// writes its pages.
pub(crate) type Gate = tokio::task::JoinHandle<Result<()>>;

/// What an operation reads: exact keys, and key ranges `[from, to)`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Needs {
    pub(crate) keys: Vec<String>,
    pub(crate) ranges: Vec<(String, String)>,
}

/// The rows of the pages a batch loaded, and the edits of its operations so far.
#[derive(Debug)]
pub(crate) struct View {
    /// Every loaded row by key, edits applied; `None` for a deleted key.
    rows: BTreeMap<String, Option<Row>>,
    /// The page each key lives in (an index into `loaded`), or `None` for a new page.
    home: HashMap<String, Option<usize>>,
    /// How many keys each loaded page is home to.
    homed: HashMap<usize, usize>,
    loaded: Vec<Page>,
    pages: Vec<Page>,
    /// The position of each loaded key in its page's file.
    positions: HashMap<String, u64>,
    dirty: BTreeSet<Option<usize>>,
    /// Dirty pages whose rows change other than by deletion: they are rewritten, where a
    /// page that only loses rows takes a deletion vector.
    rewrites: BTreeSet<Option<usize>>,
    /// Pages the operations edited rows of (a compaction's moves are not theirs).
    edited: BTreeSet<Option<usize>>,
    /// Pages a compaction moved rows out of or into.
    moved: BTreeSet<Option<usize>>,
    /// Microseconds since the epoch, for created_at / updated_at.
    pub(crate) now_us: i64,
    layout: Layout,
    /// Other writers committed while this handle's last batch ran: a page losing rows
    /// takes a deletion vector however many it loses, since rewriting it would fail
    /// every writer deleting other rows of it meanwhile (a fold cleans it up later).
    crowded: bool,
    /// The operation running now (an index into the batch).
    current: usize,
    /// Gates the operations started, by operation.
    gates: Vec<(usize, Gate)>,
}

impl View {
    /// The row of `key`, if it exists.
    pub(crate) fn get(&self, key: &str) -> Option<&Row> {
        self.rows.get(key).and_then(Option::as_ref)
    }

    /// The rows whose keys are in `[from, to)`, in key order.
    pub(crate) fn range(&self, from: &str, to: &str) -> Vec<&Row> {
        self.rows
            .range(from.to_string()..to.to_string())
            .filter_map(|(_, r)| r.as_ref())
            .collect()
    }

    /// Makes the batch's commit wait for `gate`; when it fails, the running operation
    /// fails with its error and the batch commits without it.
    pub(crate) fn commit_after(&mut self, gate: Gate) {
        self.gates.push((self.current, gate));
    }

    /// Inserts or replaces a row.
    pub(crate) fn put(&mut self, row: Row) {
        let key = row.object_id.clone();
        let page = match self.home.get(&key) {
            Some(page) => *page,
            None => {
                let page = self
                    .page_of(&key)
                    .or_else(|| self.small_page_being_rewritten());
                self.set_home(key.clone(), page);
                page
            }
        };
        self.dirty.insert(page);
        self.rewrites.insert(page);
        self.edited.insert(page);
        self.rows.insert(key, Some(row));
    }

    /// Deletes a row.
    pub(crate) fn delete(&mut self, key: &str) {
        if let Some(page) = self.home.get(key).copied() {
            self.dirty.insert(page);
            self.edited.insert(page);
            self.rows.insert(key.to_string(), None);
        }
    }

    /// The loaded page a new key goes into: in the paged layout none (new keys go to a
    /// new file, or to a small page the batch rewrites anyway, so writers adding
    /// different keys never rewrite the same page); in the full-rewrite layout the one
    /// file.
    fn page_of(&self, key: &str) -> Option<usize> {
        if self.layout != Layout::FullRewrite {
            return None;
        }
        let target = pages_for_key(&self.pages, key)
            .first()
            .map(|p| p.add.path.clone())?;
        self.loaded.iter().position(|p| p.add.path == target)
    }

    /// Records that `key` lives in `page` (`None`: a new file).
    fn set_home(&mut self, key: String, page: Option<usize>) {
        if let Some(Some(old)) = self.home.insert(key, page)
            && let Some(n) = self.homed.get_mut(&old)
        {
            *n = n.saturating_sub(1);
        }
        if let Some(page) = page {
            *self.homed.entry(page).or_default() += 1;
        }
    }

    /// A loaded small page this batch rewrites anyway, that is home to keys (so it is not
    /// being folded away) and stays small with one more: a new key goes there rather than into a file of its own
    /// (a rename writes one page, not two). Small pages may overlap any other, and no
    /// other writer's new keys go into a page they would not rewrite anyway.
    fn small_page_being_rewritten(&self) -> Option<usize> {
        let Layout::Paged { rows_per_page } = self.layout else {
            return None;
        };
        let limit = (rows_per_page / 4).max(2);
        self.rewrites.iter().flatten().copied().find(|&i| {
            let homed = self.homed.get(&i).copied().unwrap_or(0);
            // A fold's target stays a file of moved rows only.
            let folding_into = self.moved.contains(&Some(i));
            self.loaded[i].is_small(self.layout) && homed > 0 && homed + 1 < limit && !folding_into
        })
    }

    /// Moves the rows of the loaded small pages into the loaded base pages their keys
    /// belong to (or, when there is none, into the largest small page), so the small
    /// pages go. The operations' new keys never join a page rows are moved into, so a
    /// fold stays a move.
    fn compact(&mut self) {
        let small: BTreeSet<usize> = (0..self.loaded.len())
            .filter(|i| self.loaded[*i].is_small(self.layout))
            .collect();
        let largest = small.iter().copied().max_by_key(|i| {
            (
                self.homed.get(i).copied().unwrap_or(0),
                std::cmp::Reverse(*i),
            )
        });
        let bases: Vec<Page> = self
            .pages
            .iter()
            .filter(|p| !p.is_small(self.layout))
            .cloned()
            .collect();
        let moves: Vec<(String, usize, Option<usize>)> = self
            .home
            .iter()
            .filter_map(|(key, home)| {
                let from = (*home).filter(|h| small.contains(h))?;
                let target = pages_for_key(&bases, key)
                    .first()
                    .map(|p| p.add.path.clone());
                let to = match target {
                    Some(t) => self.loaded.iter().position(|p| p.add.path == t),
                    None => largest,
                };
                (to != Some(from)).then(|| (key.clone(), from, to))
            })
            .collect();
        for (key, from, to) in moves {
            self.dirty.extend([Some(from), to]);
            self.rewrites.extend([Some(from), to]);
            self.moved.extend([Some(from), to]);
            self.set_home(key, to);
        }
    }

    fn is_dirty(&self) -> bool {
        !self.dirty.is_empty()
    }
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
    let mut gate_errors: Vec<Option<CatalogError>> = ops.iter().map(|_| None).collect();
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
            Folding {
                at: compact_at,
                crowd,
                draw: fold_draw,
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
            Err(TarnError::Conflict { .. }) if attempt < ATTEMPTS => {
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
async fn settle(gates: Vec<(usize, Gate)>, errors: &mut [Option<CatalogError>]) -> bool {
    let mut all = true;
    for (i, gate) in gates {
        if let Err(e) = gate.await.unwrap_or(Err(CatalogError::Stopped)) {
            errors[i] = Some(e);
            all = false;
        }
    }
    all
}

/// The operations' results, with a failed gate's error in place of its operation's.
fn with_gate_errors(
    mut results: Vec<Result<()>>,
    errors: Vec<Option<CatalogError>>,
) -> Vec<Result<()>> {
    for (result, error) in results.iter_mut().zip(errors) {
        if let Some(e) = error {
            *result = Err(e);
        }
    }
    results
}

/// Loads the pages the operations need into a view: the pages that may hold their keys
/// (in the full-rewrite layout, the page a new key goes into), the pages overlapping their
/// ranges, and, when the manifest holds more than `compact_at` small pages, those and the
/// base pages their keys belong to, with the small pages' rows moved into them.
async fn load(
    snapshot: Snapshot,
    cache: Arc<PageCache>,
    needs: Vec<Needs>,
    now_us: i64,
    layout: Layout,
    folding: Folding,
) -> Result<View> {
    let pages = pages(&snapshot);
    let position = |page: &Page| pages.iter().position(|q| q.add.path == page.add.path);
    let mut wanted: Vec<usize> = Vec::new();
    for need in &needs {
        for key in &need.keys {
            let found = pages_for_key(&pages, key);
            let holding = found
                .iter()
                .filter(|p| p.covers(key) || layout == Layout::FullRewrite);
            wanted.extend(holding.filter_map(|p| position(p)));
        }
        for (from, to) in &need.ranges {
            wanted.extend(
                pages
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| p.overlaps(from, to))
                    .map(|(i, _)| i),
            );
        }
    }
    let small: Vec<usize> = (0..pages.len())
        .filter(|i| pages[*i].is_small(layout))
        .collect();
    let compact = folding.folds(small.len());
    if compact {
        let bases: Vec<Page> = pages
            .iter()
            .filter(|p| !p.is_small(layout))
            .cloned()
            .collect();
        // The small pages are read first, so a fold loads the base pages their keys go to
        // (as `View::compact` picks them), not every base page their key ranges span: a
        // small page of names from every namespace spans nearly the whole manifest.
        let reads: Vec<_> = small
            .iter()
            .map(|&i| spawn_page(&cache, &snapshot, &pages[i].add))
            .collect();
        for (&i, read) in small.iter().zip(reads) {
            wanted.push(i);
            let rows = read.await.map_err(|_| CatalogError::Stopped)??;
            for row in rows.rows.iter() {
                let target = pages_for_key(&bases, &row.object_id).into_iter().next();
                wanted.extend(target.and_then(&position));
            }
        }
    }
    wanted.sort_unstable();
    wanted.dedup();
    let loaded: Vec<Page> = wanted.iter().map(|i| pages[*i].clone()).collect();
    // Spawned, so the reads run at once.
    let mut reads = Vec::with_capacity(loaded.len());
    for page in &loaded {
        reads.push(spawn_page(&cache, &snapshot, &page.add));
    }
    let mut contents = Vec::with_capacity(reads.len());
    for read in reads {
        contents.push(read.await.map_err(|_| CatalogError::Stopped)??);
    }
    let mut view = View {
        rows: BTreeMap::new(),
        home: HashMap::new(),
        homed: HashMap::new(),
        loaded,
        pages,
        positions: HashMap::new(),
        dirty: BTreeSet::new(),
        rewrites: BTreeSet::new(),
        edited: BTreeSet::new(),
        moved: BTreeSet::new(),
        now_us,
        layout,
        crowded: folding.crowd.is_some_and(|c| c > 0),
        current: 0,
        gates: Vec::new(),
    };
    for (i, page) in contents.iter().enumerate() {
        for (row, position) in page.rows.iter().zip(page.positions.iter()) {
            view.set_home(row.object_id.clone(), Some(i));
            view.positions.insert(row.object_id.clone(), *position);
            view.rows.insert(row.object_id.clone(), Some(row.clone()));
        }
    }
    if compact {
        view.compact();
    }
    Ok(view)
}

/// The transaction rewriting the dirty pages of a view, and the new pages' paths and rows.
async fn prepare(
    table: &Table,
    view: &mut View,
    needs: &[Needs],
    layout: Layout,
) -> Result<(tarn::Transaction, Vec<(String, Arc<Vec<Row>>)>)> {
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
    let mut written: Vec<Arc<Vec<Row>>> = Vec::new();
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

/// Reads a page on a task of its own (owning what it needs, so the caller's future holds
/// no borrow of the cache or snapshot across the await).
fn spawn_page(
    cache: &Arc<PageCache>,
    snapshot: &Snapshot,
    add: &tarn::protocol::Add,
) -> tokio::task::JoinHandle<Result<PageRows>> {
    let (cache, snapshot, add) = (Arc::clone(cache), snapshot.clone(), add.clone());
    tokio::spawn(async move { cache.live(&snapshot, &add).await })
}

/// The positions of the rows page `i` of the view lost, when a deletion vector should take
/// them: the page keeps at least half its rows, or loses all of them, or other writers
/// are changing the manifest too.
fn deleted_positions(view: &View, i: usize) -> Option<Vec<u64>> {
    let mut gone: Vec<u64> = view
        .home
        .iter()
        .filter(|(key, home)| **home == Some(i) && matches!(view.rows.get(*key), Some(None)))
        .filter_map(|(key, _)| view.positions.get(key).copied())
        .collect();
    gone.sort_unstable();
    let add = &view.loaded[i].add;
    let physical = add.stats.as_ref().and_then(|s| s.num_records())?;
    let before = add
        .deletion_vector
        .as_ref()
        .map_or(0, |dv| u64::try_from(dv.cardinality).unwrap_or(0));
    let after = before + gone.len() as u64;
    let takes_dv = view.crowded || after * 2 <= physical || after == physical;
    (!gone.is_empty() && takes_dv).then_some(gone)
}

/// The live rows of one page of the view (`None`: rows new to the catalog).
fn rows_in(view: &View, page: Option<usize>) -> Vec<Row> {
    view.rows
        .iter()
        .filter(|(k, _)| view.home.get(*k).copied() == Some(page))
        .filter_map(|(_, r)| r.clone())
        .collect()
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
