//! Applying mutations to the manifest: a batch of operations loads the pages their keys
//! and ranges fall in, runs each operation on a view of those rows, rewrites the pages
//! that changed (copy-on-write: new files, the old ones removed) with their index
//! segments built inline, and commits once with put-if-absent through Tarn's
//! transaction. Each operation declares what it read (keys and ranges, recorded as read
//! predicates, and the files holding them), so a concurrent change that matters is a
//! conflict Tarn's checker reports; the batch then re-reads the manifest and runs again,
//! and each operation decides anew (a create finds the name taken, a drop finds it gone).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use futures::FutureExt;
use tarn::expr::{col, lit};
use tarn::{Error as TarnError, Snapshot, Table};

use crate::error::{CatalogError, Result};
use crate::manifest::{Row, batch_of};
use crate::pages::{Page, PageCache, pages, pages_for_key, split};

/// Times a batch re-reads the manifest after a conflict before giving up.
const ATTEMPTS: u32 = 64;

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
    loaded: Vec<Page>,
    pages: Vec<Page>,
    dirty: BTreeSet<Option<usize>>,
    /// Microseconds since the epoch, for created_at / updated_at.
    pub(crate) now_us: i64,
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

    /// Inserts or replaces a row.
    pub(crate) fn put(&mut self, row: Row) {
        let key = row.object_id.clone();
        let page = match self.home.get(&key) {
            Some(page) => *page,
            None => {
                let page = self.page_of(&key);
                self.home.insert(key.clone(), page);
                page
            }
        };
        self.dirty.insert(page);
        self.rows.insert(key, Some(row));
    }

    /// Deletes a row.
    pub(crate) fn delete(&mut self, key: &str) {
        if let Some(page) = self.home.get(key).copied() {
            self.dirty.insert(page);
            self.rows.insert(key.to_string(), None);
        }
    }

    /// The loaded page a new key goes into.
    fn page_of(&self, key: &str) -> Option<usize> {
        let target = pages_for_key(&self.pages, key)
            .first()
            .map(|p| p.add.path.clone())?;
        self.loaded.iter().position(|p| p.add.path == target)
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

/// How the manifest is cut into files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// The whole manifest is one file, rewritten on every mutation with its indices
    /// (Lance's directory namespace; the reference point).
    FullRewrite,
    /// Files of at most this many rows sorted by `object_id`; a mutation rewrites the file
    /// holding its key (the default, 4,096 rows).
    Paged {
        /// Rows per file.
        rows_per_page: usize,
    },
}

impl Default for Layout {
    fn default() -> Self {
        Layout::Paged {
            rows_per_page: 4096,
        }
    }
}

impl Layout {
    fn rows_per_page(self) -> usize {
        match self {
            Layout::FullRewrite => usize::MAX,
            Layout::Paged { rows_per_page } => rows_per_page.max(1),
        }
    }
}

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
) -> Result<Vec<Result<()>>> {
    let mut attempt = 0;
    let mut refreshed = false;
    loop {
        attempt += 1;
        let snapshot = table.snapshot().clone();
        let needs: Vec<Needs> = ops.iter().map(|op| op.needs.clone()).collect();
        let mut view = load(
            snapshot.clone(),
            Arc::clone(cache),
            needs.clone(),
            clock.now_ms() * 1000,
        )
        .boxed()
        .await?;
        let mut results = Vec::with_capacity(ops.len());
        for op in ops.iter_mut() {
            results.push((op.run)(&mut view));
        }
        if !view.is_dirty() {
            // Nothing to commit, so no commit checks the state the results rest on: they
            // stand only if they were decided on the latest manifest (a namespace another
            // process just created must not be reported missing).
            if refreshed {
                return Ok(results);
            }
            let before = table.version();
            table.refresh().boxed().await?;
            refreshed = true;
            if table.version() == before {
                return Ok(results);
            }
            continue;
        }
        // Boxed as `Send` here, where the lifetimes are concrete (rustc cannot prove the
        // committer's future `Send` through the nested futures otherwise).
        let txn = prepare(table, &snapshot, cache, &mut view, &needs, layout)
            .boxed()
            .await?;
        match table.commit(txn).boxed().await {
            Ok(_) => return Ok(results),
            Err(TarnError::Conflict { .. }) if attempt < ATTEMPTS => {
                table.refresh().boxed().await?;
                refreshed = true;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Loads the pages the operations need into a view.
async fn load(
    snapshot: Snapshot,
    cache: Arc<PageCache>,
    needs: Vec<Needs>,
    now_us: i64,
) -> Result<View> {
    let pages = pages(&snapshot);
    let mut wanted: Vec<usize> = Vec::new();
    for need in &needs {
        for key in &need.keys {
            for p in pages_for_key(&pages, key) {
                if let Some(i) = pages.iter().position(|q| q.add.path == p.add.path) {
                    wanted.push(i);
                }
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
        loaded,
        pages,
        dirty: BTreeSet::new(),
        now_us,
    };
    for (i, rows) in contents.iter().enumerate() {
        for row in rows.iter() {
            view.home.insert(row.object_id.clone(), Some(i));
            view.rows.insert(row.object_id.clone(), Some(row.clone()));
        }
    }
    Ok(view)
}

/// The transaction rewriting the dirty pages of a view.
async fn prepare(
    table: &Table,
    snapshot: &Snapshot,
    cache: &Arc<PageCache>,
    view: &mut View,
    needs: &[Needs],
    layout: Layout,
) -> Result<tarn::Transaction> {
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
    // Each dirty page is rewritten on its own, so pages never overlap; one shrinking
    // under a quarter of the page size takes the next page in, when there is one, so
    // pages stay between a quarter and the whole of the page size.
    let now_ms = view.now_us / 1000;
    let mut batches = Vec::new();
    let mut taken: BTreeSet<String> = BTreeSet::new();
    for page in view.dirty.clone() {
        let mut rows = rows_in(view, page);
        if let Some(i) = page {
            if !taken.insert(view.loaded[i].add.path.clone()) {
                continue;
            }
            txn.remove_file(view.loaded[i].add.clone().into_remove(now_ms));
            let path = view.loaded[i].add.path.clone();
            let next = view
                .pages
                .iter()
                .position(|p| p.add.path == path)
                .and_then(|k| view.pages.get(k + 1))
                .cloned();
            if layout != Layout::FullRewrite
                && rows.len() < rows_per_page / 4
                && let Some(next) = next
                && !taken.contains(&next.add.path)
            {
                // The next page's rows, with the edits of this batch applied if loaded.
                let loaded = view.loaded.iter().position(|p| p.add.path == next.add.path);
                let next_rows = match loaded {
                    Some(k) => {
                        view.dirty.remove(&Some(k));
                        rows_in(view, Some(k))
                    }
                    None => {
                        let read = spawn_page(cache, snapshot, &next.add);
                        read.await
                            .map_err(|_| CatalogError::Stopped)??
                            .as_ref()
                            .clone()
                    }
                };
                txn.record_read_files(std::slice::from_ref(&next.add));
                txn.remove_file(next.add.clone().into_remove(now_ms));
                taken.insert(next.add.path.clone());
                rows.extend(next_rows);
            }
        }
        rows.sort_by(|a, b| a.object_id.cmp(&b.object_id));
        for page_rows in split(rows, rows_per_page) {
            batches.push(batch_of(&page_rows)?);
        }
    }
    txn.write_files(batches).boxed().await?;
    Ok(txn)
}

/// Reads a page on a task of its own (owning what it needs, so the caller's future holds
/// no borrow of the cache or snapshot across the await).
fn spawn_page(
    cache: &Arc<PageCache>,
    snapshot: &Snapshot,
    add: &tarn::protocol::Add,
) -> tokio::task::JoinHandle<Result<Arc<Vec<Row>>>> {
    let (cache, snapshot, add) = (Arc::clone(cache), snapshot.clone(), add.clone());
    tokio::spawn(async move { cache.rows(&snapshot, &add).await })
}

/// The live rows of one page of the view (`None`: rows new to the catalog).
fn rows_in(view: &View, page: Option<usize>) -> Vec<Row> {
    view.rows
        .iter()
        .filter(|(k, _)| view.home.get(*k).copied() == Some(page))
        .filter_map(|(_, r)| r.clone())
        .collect()
}

/// A shared handle on the manifest's latest snapshot.
pub(crate) type Manifest = Arc<tokio::sync::Mutex<Table>>;
