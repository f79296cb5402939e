//! Typed statistics decoded when first asked for, one leaf column at a time.
//!
//! A checkpoint's `add.stats_parsed` holds a minimum, a maximum and a null count for every
//! column of the table: at 100,000 files of a 23-column table, some 70 of the 90 leaf
//! columns a cold open decoded, and most of its time, for statistics a query uses two or
//! three of. A row group's column chunks are fetched with the rest of the checkpoint (one
//! round trip, as before), but only `numRecords` and `tightBounds` decode at open; a
//! `minValues`, `maxValues` or `nullCount` leaf decodes, for its whole row group, the first
//! time planning or rendering asks for it.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, OnceLock};

use arrow::array::{ArrayRef, AsArray, StructArray};
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ParquetRecordBatchReaderBuilder};
use parquet::file::reader::ChunkReader;
use parquet::schema::types::SchemaDescriptor;

/// The sections of `stats_parsed` decoded lazily, in the order their index names them.
pub(crate) const SECTIONS: [&str; 3] = ["minValues", "maxValues", "nullCount"];

/// Where the lazy leaves of a checkpoint file are: leaf column index by section and column
/// path. Shared by the row groups of the file.
#[derive(Debug, Default)]
pub(crate) struct StatsLeaves {
    /// `(section, path below it, leaf index)`.
    entries: Vec<(usize, Vec<String>, usize)>,
    /// Entries by section and the path's first segment.
    index: [HashMap<String, Vec<usize>>; 3],
}

impl StatsLeaves {
    /// The lazy leaves among `leaves` (the columns read) of a checkpoint with this schema:
    /// `add.stats_parsed.{minValues,maxValues,nullCount}.*`. Empty (nothing lazy) unless
    /// `add.stats_parsed.numRecords` is read too, which gives each row's validity at open.
    pub(crate) fn of(descr: &SchemaDescriptor, leaves: &[usize]) -> Self {
        let mut out = Self::default();
        let parts = |i: usize| descr.column(i).path().parts().to_vec();
        let has_rows = leaves
            .iter()
            .any(|&i| parts(i) == ["add", "stats_parsed", "numRecords"]);
        if !has_rows {
            return out;
        }
        for &leaf in leaves {
            let parts = parts(leaf);
            let [add, stats, section, rest @ ..] = parts.as_slice() else {
                continue;
            };
            let Some(s) = SECTIONS.iter().position(|n| n == section) else {
                continue;
            };
            if add != "add" || stats != "stats_parsed" || rest.is_empty() {
                continue;
            }
            out.index[s]
                .entry(rest[0].clone())
                .or_default()
                .push(out.entries.len());
            out.entries.push((s, rest.to_vec(), leaf));
        }
        out
    }

    /// Whether leaf `leaf` decodes lazily.
    pub(crate) fn contains(&self, leaf: usize) -> bool {
        self.entries.iter().any(|(_, _, l)| *l == leaf)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn find(&self, section: usize, path: &[String]) -> Option<usize> {
        let first = path.first()?;
        self.index[section]
            .get(first)?
            .iter()
            .copied()
            .find(|&e| self.entries[e].1 == path)
    }
}

/// Decodes chosen leaves of one row group and returns its `add.stats_parsed` struct.
type Decode = dyn Fn(&[usize]) -> Option<StructArray> + Send + Sync;

/// The lazy statistics of one row group: its leaves, decoded once each when first read.
pub(crate) struct LazySections {
    decode: Box<Decode>,
    leaves: Arc<StatsLeaves>,
    cells: Vec<OnceLock<Option<ArrayRef>>>,
    whole: [OnceLock<Option<StructArray>>; 3],
}

impl fmt::Debug for LazySections {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LazySections")
            .field("leaves", &self.leaves.entries.len())
            .finish_non_exhaustive()
    }
}

impl LazySections {
    /// The lazy statistics of row group `group` of a checkpoint file, read from `file`.
    pub(crate) fn new<R: ChunkReader + Clone + 'static>(
        file: R,
        metadata: ArrowReaderMetadata,
        group: usize,
        leaves: Arc<StatsLeaves>,
    ) -> Self {
        let rows = metadata
            .metadata()
            .row_group(group)
            .num_rows()
            .clamp(1, i64::from(u32::MAX)) as usize;
        let decode = move |wanted: &[usize]| -> Option<StructArray> {
            let run = || {
                let descr = metadata.metadata().file_metadata().schema_descr_ptr();
                let mask = ProjectionMask::leaves(&descr, wanted.iter().copied());
                let batch = ParquetRecordBatchReaderBuilder::new_with_metadata(
                    file.clone(),
                    metadata.clone(),
                )
                .with_projection(mask)
                .with_row_groups(vec![group])
                .with_batch_size(rows)
                .build()
                .ok()?
                .next()?
                .ok()?;
                let add = batch.column_by_name("add")?.as_struct_opt()?;
                add.column_by_name("stats_parsed")?.as_struct_opt().cloned()
            };
            // The decoder panics on some corrupt pages: those statistics are then absent,
            // which costs pruning, never a wrong answer.
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(run))
                .ok()
                .flatten()
        };
        Self {
            decode: Box::new(decode),
            cells: (0..leaves.entries.len()).map(|_| OnceLock::new()).collect(),
            leaves,
            whole: Default::default(),
        }
    }

    /// The array of the column at `path` in section `section` (an index of [`SECTIONS`]).
    pub(crate) fn leaf(&self, section: usize, path: &[String]) -> Option<&ArrayRef> {
        let entry = self.leaves.find(section, path)?;
        let leaf = self.leaves.entries[entry].2;
        self.cells[entry]
            .get_or_init(|| {
                let stats = (self.decode)(&[leaf])?;
                let section = stats.column_by_name(SECTIONS[section])?.as_struct_opt()?;
                super::parsed_stats::descend(section, path).cloned()
            })
            .as_ref()
    }

    /// How many leaves have been decoded.
    #[cfg(test)]
    pub(crate) fn decoded(&self) -> usize {
        self.cells.iter().filter(|c| c.get().is_some()).count()
    }

    /// Section `section` whole (every column's leaf), for rendering a row as JSON.
    pub(crate) fn section(&self, section: usize) -> Option<&StructArray> {
        self.whole[section]
            .get_or_init(|| {
                let wanted: Vec<usize> = self
                    .leaves
                    .entries
                    .iter()
                    .filter(|(s, _, _)| *s == section)
                    .map(|(_, _, leaf)| *leaf)
                    .collect();
                if wanted.is_empty() {
                    return None;
                }
                let stats = (self.decode)(&wanted)?;
                stats
                    .column_by_name(SECTIONS[section])?
                    .as_struct_opt()
                    .cloned()
            })
            .as_ref()
    }
}
