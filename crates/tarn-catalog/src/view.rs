//! The rows a batch of catalog operations works on: which manifest pages it loads (the
//! pages that may hold the keys its operations name, those overlapping their ranges, and
//! the pages a fold of small pages needs), the rows it takes out of them, and the edits
//! its operations make before the batch rewrites the pages that changed.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use futures::FutureExt;
use tarn::Snapshot;

use crate::error::{Error, Result};
use crate::manifest::Row;
use crate::pages::{Layout, Page, PageCache, PageRows, find, pages_for_key};

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
    /// The rows the operations need (their keys and ranges, and every row of a small
    /// page) by key, edits applied; `None` for a deleted key. The other rows of a loaded
    /// page stay in `contents`, uncopied: a drop in a page of 4,096 rows copies one.
    rows: BTreeMap<String, Option<Row>>,
    /// The page each key of `rows` lives in (an index into `loaded`), or `None` for a new
    /// page; a loaded page's other rows live in it.
    home: HashMap<String, Option<usize>>,
    /// How many keys each loaded page is home to.
    homed: HashMap<usize, usize>,
    pub(crate) loaded: Vec<Page>,
    /// The live rows of each loaded page, as read.
    contents: Vec<PageRows>,
    pages: Vec<Page>,
    /// The position of each loaded key in its page's file.
    positions: HashMap<String, u64>,
    pub(crate) dirty: BTreeSet<Option<usize>>,
    /// Dirty pages whose rows change other than by deletion: they are rewritten, where a
    /// page that only loses rows takes a deletion vector.
    pub(crate) rewrites: BTreeSet<Option<usize>>,
    /// Pages the operations edited rows of (a compaction's moves are not theirs).
    pub(crate) edited: BTreeSet<Option<usize>>,
    /// Pages a compaction moved rows out of or into.
    pub(crate) moved: BTreeSet<Option<usize>>,
    /// Microseconds since the epoch, for created_at / updated_at.
    pub(crate) now_us: i64,
    layout: Layout,
    /// Other writers committed while this handle's last batch ran: a page losing rows
    /// takes a deletion vector however many it loses, since rewriting it would fail
    /// every writer deleting other rows of it meanwhile (a fold cleans it up later).
    crowded: bool,
    /// The operation running now (an index into the batch).
    pub(crate) current: usize,
    /// Gates the operations started, by operation.
    pub(crate) gates: Vec<(usize, Gate)>,
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

    pub(crate) fn is_dirty(&self) -> bool {
        !self.dirty.is_empty()
    }
}

/// Loads the pages the operations need into a view: the pages that may hold their keys
/// (in the full-rewrite layout, the page a new key goes into), the pages overlapping their
/// ranges, and, when `folds` says so for the manifest's number of small pages, those and
/// the base pages their keys belong to, with the small pages' rows moved into them.
pub(crate) async fn load(
    snapshot: Snapshot,
    cache: Arc<PageCache>,
    needs: Vec<Needs>,
    now_us: i64,
    layout: Layout,
    crowded: bool,
    folds: impl Fn(usize) -> bool,
) -> Result<View> {
    let pages = cache.pages(&snapshot);
    let position = |page: &Page| pages.iter().position(|q| q.add.path == page.add.path);
    let mut wanted: Vec<usize> = Vec::new();
    // Pages already read on the way, by index into `pages`: not read again below.
    let mut read: HashMap<usize, PageRows> = HashMap::new();
    for need in &needs {
        for key in &need.keys {
            let found = pages_for_key(&pages, key);
            let holding: Vec<&Page> = found
                .into_iter()
                .filter(|p| p.covers(key) || layout == Layout::FullRewrite)
                .collect();
            // A key is live in one page at most: when a page in the cache has it, the
            // others whose ranges span it (a base page beside a small page of new keys)
            // need not be read.
            let held = match holding.len() {
                0 | 1 => None,
                _ => live_in_cached(&cache, &snapshot, &holding, key).await?,
            };
            match held {
                Some((page, rows)) => {
                    if let Some(i) = position(page) {
                        wanted.push(i);
                        read.insert(i, rows);
                    }
                }
                None => wanted.extend(holding.into_iter().filter_map(&position)),
            }
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
    let compact = folds(small.len());
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
        for (&i, reading) in small.iter().zip(reads) {
            wanted.push(i);
            let rows = reading.await.map_err(|_| Error::Stopped)??;
            for row in rows.rows.iter() {
                let target = pages_for_key(&bases, &row.object_id).into_iter().next();
                wanted.extend(target.and_then(&position));
            }
            read.insert(i, rows);
        }
    }
    wanted.sort_unstable();
    wanted.dedup();
    let loaded: Vec<Page> = wanted.iter().map(|i| pages[*i].clone()).collect();
    // Spawned, so the reads run at once.
    let reads: Vec<_> = wanted
        .iter()
        .map(|i| match read.remove(i) {
            Some(rows) => Ok(rows),
            None => Err(spawn_page(&cache, &snapshot, &pages[*i].add)),
        })
        .collect();
    let mut contents = Vec::with_capacity(reads.len());
    for reading in reads {
        contents.push(match reading {
            Ok(rows) => rows,
            Err(task) => task.await.map_err(|_| Error::Stopped)??,
        });
    }
    let mut view = View {
        rows: BTreeMap::new(),
        home: HashMap::new(),
        homed: HashMap::new(),
        loaded,
        contents: Vec::new(),
        pages,
        positions: HashMap::new(),
        dirty: BTreeSet::new(),
        rewrites: BTreeSet::new(),
        edited: BTreeSet::new(),
        moved: BTreeSet::new(),
        now_us,
        layout,
        crowded,
        current: 0,
        gates: Vec::new(),
    };
    for (i, page) in contents.iter().enumerate() {
        view.homed.insert(i, page.rows.len());
        // A fold moves every row of a small page; of the others, only the rows the
        // operations need are taken out.
        let picks = if view.loaded[i].is_small(layout) {
            (0..page.rows.len()).collect()
        } else {
            needed(&page.rows, &needs)
        };
        for j in picks {
            let row = &page.rows[j];
            view.home.insert(row.object_id.clone(), Some(i));
            view.positions
                .insert(row.object_id.clone(), page.positions[j]);
            view.rows
                .insert(row.object_id.clone(), Some(Row::clone(row)));
        }
    }
    view.contents = contents;
    if compact {
        view.compact();
    }
    Ok(view)
}

/// The first of `pages` the cache holds with `key` live in it, with its live rows
/// (reading at most its deletion vector).
async fn live_in_cached<'p>(
    cache: &PageCache,
    snapshot: &Snapshot,
    pages: &[&'p Page],
    key: &str,
) -> Result<Option<(&'p Page, PageRows)>> {
    for page in pages {
        if cache.holds(&page.add.path, key) {
            let live = cache.live(snapshot, &page.add).boxed().await?;
            if find(&live.rows, key).is_some() {
                return Ok(Some((page, live)));
            }
        }
    }
    Ok(None)
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
pub(crate) fn deleted_positions(view: &View, i: usize) -> Option<Vec<u64>> {
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

/// The positions in `rows` (sorted by key) of the keys and ranges the operations need.
fn needed(rows: &[Arc<Row>], needs: &[Needs]) -> BTreeSet<usize> {
    let mut out = BTreeSet::new();
    for need in needs {
        for key in &need.keys {
            out.extend(find(rows, key));
        }
        for (from, to) in &need.ranges {
            let lo = rows.partition_point(|r| r.object_id.as_str() < from.as_str());
            let hi = rows.partition_point(|r| r.object_id.as_str() < to.as_str());
            out.extend(lo..hi.max(lo));
        }
    }
    out
}

/// The live rows of one page of the view (`None`: rows new to the catalog): the rows of
/// the page the operations did not take out, and those of the view that live in it now.
pub(crate) fn rows_in(view: &View, page: Option<usize>) -> Vec<Arc<Row>> {
    let mut out: Vec<Arc<Row>> = match page {
        Some(i) => view.contents[i]
            .rows
            .iter()
            .filter(|r| !view.home.contains_key(&r.object_id))
            .cloned()
            .collect(),
        None => Vec::new(),
    };
    out.extend(
        view.rows
            .iter()
            .filter(|(k, _)| view.home.get(*k).copied() == Some(page))
            .filter_map(|(_, r)| r.clone().map(Arc::new)),
    );
    out
}
