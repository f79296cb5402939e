//! The bundle format: where each of tantivy's files sits in the object, the hot cache,
//! and the meta that records both.

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::options::FullTextOptions;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct FileEntry {
    pub(super) start: u64,
    pub(super) len: u64,
    pub(super) crc: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct HotCache {
    pub(super) start: u64,
    pub(super) len: u64,
    pub(super) crc: u32,
    /// `(start in the bundle, length)` of each packed slice, in order.
    pub(super) slices: Vec<(u64, u64)>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct BundleMeta {
    pub(super) version: u32,
    pub(super) files: BTreeMap<String, FileEntry>,
    pub(super) meta_json: String,
    pub(super) hot: HotCache,
    pub(super) options: FullTextOptions,
    pub(super) docs: u64,
}

pub(super) fn file_ranges(files: &BTreeMap<String, FileEntry>) -> HashMap<PathBuf, Range<u64>> {
    files
        .iter()
        .map(|(name, f)| (PathBuf::from(name), f.start..f.start + f.len))
        .collect()
}
