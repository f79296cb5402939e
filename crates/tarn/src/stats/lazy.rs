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
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder,
};
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
        let decode = move |wanted: &[usize]| -> Option<StructArray> {
            let run = || {
                let descr = metadata.metadata().file_metadata().schema_descr_ptr();
                let mask = ProjectionMask::leaves(&descr, wanted.iter().copied());
                let batch = group_reader(file.clone(), &metadata, mask, group)
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
            .get_or_init(|| descend(&self.decode_section(section, &[leaf])?, path).cloned())
            .as_ref()
    }

    /// Section `section` of the row group, holding the leaves `wanted` only.
    fn decode_section(&self, section: usize, wanted: &[usize]) -> Option<StructArray> {
        let stats = (self.decode)(wanted)?;
        stats
            .column_by_name(SECTIONS[section])?
            .as_struct_opt()
            .cloned()
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
                self.decode_section(section, &wanted)
            })
            .as_ref()
    }
}

/// A reader of the `mask` columns of row group `group`, as one batch: a checkpoint's row
/// group and the lazy statistics pointing into it line up row for row.
pub(crate) fn group_reader<R: ChunkReader + Clone + 'static>(
    file: R,
    metadata: &ArrowReaderMetadata,
    mask: ProjectionMask,
    group: usize,
) -> parquet::errors::Result<ParquetRecordBatchReader> {
    let rows = metadata.metadata().row_group(group).num_rows();
    ParquetRecordBatchReaderBuilder::new_with_metadata(file, metadata.clone())
        .with_projection(mask)
        .with_row_groups(vec![group])
        .with_batch_size(usize::try_from(rows).unwrap_or(0).max(1))
        .build()
}

/// The column at `path` (physical names) under a statistics section.
pub(crate) fn descend<'a>(section: &'a StructArray, path: &[String]) -> Option<&'a ArrayRef> {
    let (first, rest) = path.split_first()?;
    let column = section.column_by_name(first)?;
    if rest.is_empty() {
        Some(column)
    } else {
        descend(column.as_struct_opt()?, rest)
    }
}
