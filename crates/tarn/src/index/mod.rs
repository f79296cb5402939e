//! Table indices on the read path: BTree, Bitmap and full-text indices (from
//! `tarn-index`) kept on a Delta table, in segments that each cover a known set of data
//! files, their records in the log, and the lookups a scan makes. Building segments,
//! creating and dropping indices and catching them up are the operations of
//! `crate::indexing`.
//!
//! An index is recorded in domain metadata (see [`meta`]), so Spark and delta-rs carry it
//! along and otherwise ignore it. Each segment is one immutable object under
//! `_tarn_index/<name>/`. An `inline` index gets a segment for the data files of every
//! commit that adds some, in the same commit; a `deferred` one is caught up by
//! [`Table::optimize_indices`](crate::Table::optimize_indices). Indices never change the
//! rows a scan returns: hits in files no longer live are dropped, deletion vectors apply
//! after the lookup, files no segment covers fall back to statistics, and the whole
//! predicate is still evaluated on the rows read.

mod lookup;
pub(crate) mod meta;

use std::sync::Arc;

use serde::{Deserialize, Serialize};
pub use tarn_index::IndexKind;
use tarn_index::fts::FullTextOptions;
use tarn_index::{BTreeIndex, BitmapIndex, RoaringTreemap, ScalarQuery};

pub use lookup::IndexUse;
pub(crate) use lookup::{select_rows, table_indices};
pub use meta::{IndexDefinition, IndexSegment};

use crate::error::{Error, Result};
use crate::paths;
use crate::snapshot::Snapshot;

/// When an index's segments are built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IndexMode {
    /// Every commit that adds data files adds a segment for them: the index is always
    /// complete.
    #[default]
    Inline,
    /// Segments are built by [`crate::Table::optimize_indices`]; files written since are
    /// read with statistics pruning only.
    Deferred,
}

/// Options of an index kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IndexOptions {
    /// BTree: rows per page (default 4,096).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_rows: Option<usize>,
    /// Full-text: how text is analyzed (default: simple words, lowercased).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_text: Option<FullTextOptions>,
}

/// An index object, opened.
#[derive(Debug)]
pub(crate) enum OpenedIndex {
    BTree(BTreeIndex),
    Bitmap(BitmapIndex),
    FullText(tarn_index::fts::FullTextIndex),
}

impl OpenedIndex {
    /// Opens the object of a segment (from the table's caches when opened before).
    pub(crate) async fn open(
        snapshot: &Snapshot,
        index: &str,
        kind: IndexKind,
        object: &str,
    ) -> Result<Arc<OpenedIndex>> {
        let location = snapshot.location();
        let path = paths::join_relative(location.root(), object)?;
        let key = path.to_string();
        if let Some(opened) = snapshot.caches().object::<OpenedIndex>(&key) {
            return Ok(opened);
        }
        // A symbolic link under the index folder may point out of the table.
        let path = paths::confine_on_disk(location, object, path)?;
        let store = Arc::clone(location.store());
        let wrap = |source: tarn_index::Error| Error::Index {
            index: index.to_string(),
            source: Box::new(source),
        };
        let opened = match kind {
            IndexKind::BTree => {
                OpenedIndex::BTree(BTreeIndex::open(store, &path).await.map_err(wrap)?)
            }
            IndexKind::Bitmap => {
                OpenedIndex::Bitmap(BitmapIndex::open(store, &path).await.map_err(wrap)?)
            }
            IndexKind::FullText => OpenedIndex::FullText(
                tarn_index::fts::FullTextIndex::open(store, &path)
                    .await
                    .map_err(wrap)?,
            ),
        };
        let opened = Arc::new(opened);
        snapshot.caches().keep_object(&key, Arc::clone(&opened));
        Ok(opened)
    }

    /// The addresses a scalar query selects.
    pub(crate) async fn query(&self, query: &ScalarQuery) -> tarn_index::Result<RoaringTreemap> {
        match self {
            OpenedIndex::BTree(i) => i.query(query).await,
            OpenedIndex::Bitmap(i) => i.query(query).await,
            OpenedIndex::FullText(_) => Err(tarn_index::Error::InvalidInput {
                reason: "a full-text index answers text_match, not comparisons".into(),
            }),
        }
    }

    /// The addresses a full-text query matches.
    pub(crate) async fn search(
        &self,
        query: &tarn_index::fts::TextQuery,
    ) -> tarn_index::Result<RoaringTreemap> {
        match self {
            OpenedIndex::FullText(i) => i.search(query).await,
            _ => Err(tarn_index::Error::InvalidInput {
                reason: "only a full-text index answers text_match".into(),
            }),
        }
    }
}
