//! The manifest's files as pages: each data file holds a run of rows sorted by
//! `object_id`, and its statistics (`minValues` / `maxValues` of `object_id`) say which
//! keys it may hold: the upper level of a BTree whose leaves are the files.
//!
//! A mutation loads the pages its keys fall in, edits their rows, and rewrites them:
//! split when over the page size, merged with the next page when under a quarter of it;
//! one that only deletes rows marks them in the page's deletion vector instead. Pages
//! read are kept (files never change; a DV is applied as the page is read), so a warm
//! read of an unchanged catalog reads nothing but the log.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use tarn::Snapshot;
use tarn::protocol::Add;

use crate::error::Result;
use crate::manifest::{Row, rows_of};

/// Decoded pages kept per catalog handle.
const CACHED_PAGES: usize = 512;

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
    pub(crate) fn rows_per_page(self) -> usize {
        match self {
            Layout::FullRewrite => usize::MAX,
            Layout::Paged { rows_per_page } => rows_per_page.max(1),
        }
    }
}

/// One data file of the manifest, with the key range its statistics give.
#[derive(Debug, Clone)]
pub(crate) struct Page {
    pub(crate) add: Add,
    /// A lower bound of its keys (a prefix of the smallest when truncated).
    pub(crate) min: String,
    /// An upper bound of its keys.
    pub(crate) max: String,
    /// Its live rows (its statistics' count less its deletion vector's), when its
    /// statistics say.
    pub(crate) rows: Option<u64>,
}

impl Page {
    /// Whether the page may hold `key`.
    pub(crate) fn covers(&self, key: &str) -> bool {
        self.min.as_str() <= key && key <= self.max.as_str()
    }

    /// Whether the page is small in the paged layout (under a quarter of the page size,
    /// and at least under two rows): new keys and shrunk pages, which a compaction folds
    /// into the base pages.
    pub(crate) fn is_small(&self, layout: Layout) -> bool {
        match layout {
            Layout::FullRewrite => false,
            Layout::Paged { rows_per_page } => self
                .rows
                .is_some_and(|rows| rows < (rows_per_page / 4).max(2) as u64),
        }
    }

    /// Whether the page may hold keys in `[from, to)`.
    pub(crate) fn overlaps(&self, from: &str, to: &str) -> bool {
        self.max.as_str() >= from && self.min.as_str() < to
    }
}

/// A file's key range and row count from its statistics (`None` where they do not say).
#[derive(Debug, Clone)]
struct Bounds {
    min: Option<String>,
    max: Option<String>,
    records: Option<u64>,
}

impl Bounds {
    fn of(add: &Add) -> Self {
        let stats: Option<serde_json::Value> = add
            .stats
            .as_ref()
            .and_then(|s| serde_json::from_str(&s.json()).ok());
        let bound = |which: &str| {
            stats
                .as_ref()
                .and_then(|s| s[which]["object_id"].as_str())
                .map(str::to_string)
        };
        Bounds {
            min: bound("minValues"),
            max: bound("maxValues"),
            records: stats.as_ref().and_then(|s| s["numRecords"].as_u64()),
        }
    }
}

/// The pages that may hold `key`; when none does, the one it would be inserted into
/// (the last page starting at or before it, else the first page).
pub(crate) fn pages_for_key<'a>(pages: &'a [Page], key: &str) -> Vec<&'a Page> {
    let covering: Vec<&Page> = pages.iter().filter(|p| p.covers(key)).collect();
    if !covering.is_empty() {
        return covering;
    }
    pages
        .iter()
        .rev()
        .find(|p| p.min.as_str() <= key)
        .or_else(|| pages.first())
        .into_iter()
        .collect()
}

/// Decoded rows of manifest files, by path: every row a file holds with its position,
/// deleted ones included (a file never changes; its deletion vector may).
#[derive(Debug, Default)]
pub(crate) struct PageCache {
    entries: Mutex<Held>,
    /// The bounds of every file seen, by path.
    bounds: Mutex<HashMap<String, Bounds>>,
}

/// A page's rows, sorted by key, with each one's position in its file. Rows are shared, so
/// that a page's live rows (a new deletion vector on every drop) cost no copy of them.
#[derive(Debug, Clone, Default)]
pub(crate) struct PageRows {
    pub(crate) rows: Arc<Vec<Arc<Row>>>,
    pub(crate) positions: Arc<Vec<u64>>,
}

/// Pages by path, and the order they arrived in (the oldest go first).
type Held = (
    HashMap<String, PageRows>,
    std::collections::VecDeque<String>,
);

impl PageCache {
    /// The live rows of a page (those its deletion vector does not mark), sorted by key.
    ///
    /// Fails when the file or its DV cannot be read, or it does not hold manifest rows.
    pub(crate) async fn rows(&self, snapshot: &Snapshot, add: &Add) -> Result<Arc<Vec<Arc<Row>>>> {
        Ok(self.live(snapshot, add).await?.rows)
    }

    /// The live rows of a page with their positions in its file.
    ///
    /// Fails as [`rows`](Self::rows) does.
    pub(crate) async fn live(&self, snapshot: &Snapshot, add: &Add) -> Result<PageRows> {
        let held = self
            .entries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .0
            .get(&add.path)
            .cloned();
        let all = match held {
            Some(all) => all,
            None => {
                // Every row: the DV is applied below, so the cached rows serve any DV.
                let mut whole = add.clone();
                whole.deletion_vector = None;
                let (batch, positions) =
                    futures::FutureExt::boxed(snapshot.read_file_positions(&whole)).await?;
                let mut pairs: Vec<(Arc<Row>, u64)> = rows_of(&batch)?
                    .into_iter()
                    .map(Arc::new)
                    .zip(positions)
                    .collect();
                pairs.sort_by(|a, b| a.0.object_id.cmp(&b.0.object_id));
                let (rows, positions): (Vec<Arc<Row>>, Vec<u64>) = pairs.into_iter().unzip();
                let all = PageRows {
                    rows: Arc::new(rows),
                    positions: Arc::new(positions),
                };
                self.insert(add.path.clone(), all.clone());
                all
            }
        };
        if add.deletion_vector.is_none() {
            return Ok(all);
        }
        let deleted: HashSet<u64> = snapshot.deleted_rows(add).await?.into_iter().collect();
        let (rows, positions): (Vec<Arc<Row>>, Vec<u64>) = all
            .rows
            .iter()
            .zip(all.positions.iter())
            .filter(|(_, p)| !deleted.contains(p))
            .map(|(r, p)| (Arc::clone(r), *p))
            .unzip();
        Ok(PageRows {
            rows: Arc::new(rows),
            positions: Arc::new(positions),
        })
    }

    /// The pages of a snapshot, sorted by their lower bound. A file's bounds are worked
    /// out from its statistics once per handle (files never change; only the DV's count
    /// is applied anew): at 1M entries, rendering and parsing the statistics of 245 files
    /// on every mutation was most of its CPU.
    pub(crate) fn pages(&self, snapshot: &Snapshot) -> Vec<Page> {
        let mut memo = self.bounds.lock().unwrap_or_else(|p| p.into_inner());
        let mut out: Vec<Page> = snapshot
            .files()
            .map(|add| {
                let bounds = memo
                    .entry(add.path.clone())
                    .or_insert_with(|| Bounds::of(add));
                Page {
                    add: add.clone(),
                    // Without statistics a file may hold any key.
                    min: bounds.min.clone().unwrap_or_default(),
                    max: bounds.max.clone().unwrap_or_else(|| char::MAX.to_string()),
                    rows: bounds.records.map(|n| {
                        let deleted = add.deletion_vector.as_ref().map_or(0, |dv| dv.cardinality);
                        n.saturating_sub(u64::try_from(deleted).unwrap_or(0))
                    }),
                }
            })
            .collect();
        // Files removed since are forgotten once they outnumber the live ones.
        if memo.len() > 2 * out.len() + 64 {
            let live: HashSet<&str> = out.iter().map(|p| p.add.path.as_str()).collect();
            memo.retain(|path, _| live.contains(path.as_str()));
        }
        drop(memo);
        out.sort_by(|a, b| a.min.cmp(&b.min).then_with(|| a.add.path.cmp(&b.add.path)));
        out
    }

    /// Whether the page at `path` is held and has a row of `key` (live or not), with no
    /// read.
    pub(crate) fn holds(&self, path: &str, key: &str) -> bool {
        let held = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        held.0
            .get(path)
            .is_some_and(|page| find(&page.rows, key).is_some())
    }

    /// Keeps the rows of a page (every row of its file, sorted by key), dropping the oldest
    /// pages beyond the cache's size.
    pub(crate) fn insert(&self, path: String, rows: PageRows) {
        let mut held = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if held.0.insert(path.clone(), rows).is_none() {
            held.1.push_back(path);
        }
        while held.1.len() > CACHED_PAGES {
            if let Some(old) = held.1.pop_front() {
                held.0.remove(&old);
            }
        }
    }
}

/// The index of `key` in rows sorted by key, if it is there.
pub(crate) fn find(rows: &[Arc<Row>], key: &str) -> Option<usize> {
    rows.binary_search_by(|r| r.object_id.as_str().cmp(key))
        .ok()
}

/// Cuts sorted rows into pages of at most `rows_per_page` rows, as even as possible.
pub(crate) fn split<T>(rows: Vec<T>, rows_per_page: usize) -> Vec<Vec<T>> {
    if rows.is_empty() {
        return Vec::new();
    }
    let pages = rows.len().div_ceil(rows_per_page.max(1));
    let per = rows.len().div_ceil(pages);
    let mut out = Vec::with_capacity(pages);
    let mut rest = rows;
    while !rest.is_empty() {
        let tail = rest.split_off(per.min(rest.len()));
        out.push(rest);
        rest = tail;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::ObjectMetadata;

    fn row(key: &str) -> Row {
        Row {
            object_id: key.into(),
            object_type: "namespace".into(),
            location: None,
            metadata: ObjectMetadata::default(),
            created_at: 0,
            updated_at: 0,
        }
    }

    #[test]
    fn rows_split_into_even_pages() {
        let rows: Vec<Row> = (0..10).map(|i| row(&format!("k{i}"))).collect();
        let pages = split(rows, 4);
        assert_eq!(
            pages.iter().map(Vec::len).collect::<Vec<_>>(),
            vec![4, 4, 2]
        );
        assert!(split(Vec::<Row>::new(), 4).is_empty());
    }
}
