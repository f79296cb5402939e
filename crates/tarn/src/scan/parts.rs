//! A planned scan read in parts, for an engine that runs a scan on threads of its own (a
//! DataFusion plan's output partitions): the scan is planned once, and the parts share
//! its files by their bytes, each a run of consecutive files; a large file at a border
//! is split between the parts it reaches by row groups, so a table of a few uneven files
//! does not leave one part with most of the work.

use std::sync::Arc;

use super::{PlannedFile, RecordBatchStream, Scan, ScanPlan};
use crate::error::{Error, Result};
use crate::protocol::Add;

/// What one file costs a part beyond its bytes (opening it, reading its footer, building
/// its decoders), counted as bytes: without it a part could get most of a table's small
/// files.
const FILE_COST: u64 = 64 * 1024;

/// A file of one part of a scan, as [`Scan::execute_part_where`] hands it to `keep`.
#[derive(Debug, Clone, Copy)]
pub struct PartFile<'a> {
    /// The file's `add` action.
    pub add: &'a Add,
    /// Whether this part reads the file's start. A file split between parts is handed to
    /// each of them, and is first in exactly one: count files where this holds to count
    /// each once.
    pub first: bool,
}

/// One part's share of a planned file: its position in the plan and, when the file is
/// split between parts, the span of its extent this part reads ([`PlannedFile::span`]).
type Unit = (usize, Option<(u64, u64)>);

impl Scan {
    /// Reads part `part` of `parts` of `plan`, which [`plan`](Self::plan) made for this
    /// scan, as [`execute`](Self::execute) reads files (deleted rows skipped, the
    /// predicate applied, at most the scan's limit of rows per part). The parts together
    /// return what `execute` returns. The parts share the files by their sizes, so that
    /// each has about as much to read: a part reads a run of consecutive files, and a
    /// file at a border that is larger than half a part's share is split by row groups
    /// between the parts it reaches.
    ///
    /// Fails with [`Error::InvalidArgument`] when `part` is not below `parts`, and as
    /// `execute` does.
    pub async fn execute_part(
        &self,
        plan: &ScanPlan,
        part: usize,
        parts: usize,
    ) -> Result<RecordBatchStream> {
        self.execute_part_where(plan, part, parts, |files| vec![true; files.len()])
            .await
    }

    /// [`execute_part`](Self::execute_part), reading only the files of the part that
    /// `keep` keeps: it is given the part's files (each once, in plan order) and returns
    /// whether to read each, for an engine that skips files at run time. A file split
    /// between parts is given to the `keep` of each ([`PartFile::first`] says which
    /// reads its start).
    ///
    /// Fails as `execute_part` does, and with [`Error::InvalidArgument`] when `keep`
    /// returns a different number of answers than it was given files.
    pub async fn execute_part_where(
        &self,
        plan: &ScanPlan,
        part: usize,
        parts: usize,
        keep: impl FnOnce(&[PartFile<'_>]) -> Vec<bool>,
    ) -> Result<RecordBatchStream> {
        if part >= parts {
            return Err(Error::InvalidArgument {
                name: "part",
                reason: format!("part {part} of {parts}: parts count from 0"),
            });
        }
        let extents: Vec<u64> = plan.files.iter().map(extent).collect();
        let units = units_of(&extents, part, parts);
        // A file is one unit of a part: its whole extent, or the part's span of it.
        let mine: Vec<PartFile<'_>> = units
            .iter()
            .map(|(i, span)| PartFile {
                add: &plan.files[*i],
                first: span.is_none_or(|(from, _)| from == 0),
            })
            .collect();
        let kept = keep(&mine);
        if kept.len() != mine.len() {
            return Err(Error::InvalidArgument {
                name: "keep",
                reason: format!("{} answers for {} files", kept.len(), mine.len()),
            });
        }
        let ctx = Arc::new(self.context()?);
        let files = units
            .into_iter()
            .zip(kept)
            .filter(|(_, kept)| *kept)
            .map(|((i, span), _)| {
                let add = &plan.files[i];
                Ok(PlannedFile {
                    partitions: match plan.partitions_of(i, add) {
                        Some(parsed) => parsed,
                        None => Arc::new(ctx.partition_values(add)?),
                    },
                    rows: plan.rows_of(&self.snapshot, add).cloned(),
                    add: Arc::new(add.clone()),
                    span,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let concurrency = self.concurrency_of(&files, plan);
        // The parts run at once: each has its part of the cores.
        let cores = (crate::tasks::cores() / parts).max(1);
        Ok(self.read_files(ctx, files, concurrency, cores))
    }
}

/// How far a file reaches on the line of a plan's files laid end to end: its bytes and
/// what opening it costs.
pub(super) fn extent(add: &Add) -> u64 {
    add.size.max(0) as u64 + FILE_COST
}

/// The units of part `part` of `parts` over files of `extents`, in plan order. The files
/// are laid end to end and the line cut into `parts` equal spans; a part reads the files
/// inside its span whole. A file cut by a boundary goes whole to the part holding its
/// middle when it is at most half the average span; a larger one is split, each part
/// reading the row groups whose middle falls in its span. Every part computes the same cuts, so each row
/// group is read once.
fn units_of(extents: &[u64], part: usize, parts: usize) -> Vec<Unit> {
    // In u128: a corrupt log's sizes near i64::MAX must not wrap the line.
    let total: u128 = extents.iter().map(|e| u128::from(*e)).sum();
    let cut = |b: usize| total * b as u128 / parts.max(1) as u128;
    let (from, to) = (cut(part), cut(part + 1));
    let share = total / parts.max(1) as u128;
    let mut units = Vec::new();
    let mut start = 0u128;
    for (i, extent) in extents.iter().enumerate() {
        let extent = u128::from(*extent);
        let end = start + extent;
        if start >= from && end <= to {
            units.push((i, None));
        } else if start < to && end > from {
            // A file of at most half a share goes whole to the part holding its middle.
            if extent * 2 <= share {
                let middle = start + extent / 2;
                if from <= middle && middle < to {
                    units.push((i, None));
                }
            } else {
                // Both ends are within the file's extent, a u64.
                let span = (from.max(start) - start, to.min(end) - start);
                units.push((i, Some((span.0 as u64, span.1 as u64))));
            }
        }
        start = end;
    }
    units
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_units(extents: &[u64], parts: usize) -> Vec<Vec<Unit>> {
        (0..parts).map(|p| units_of(extents, p, parts)).collect()
    }

    #[test]
    fn equal_files_go_whole_to_the_parts_in_order() {
        let parts = all_units(&[100; 4], 2);
        assert_eq!(parts[0], vec![(0, None), (1, None)]);
        assert_eq!(parts[1], vec![(2, None), (3, None)]);
    }

    #[test]
    fn a_file_cut_by_a_boundary_is_shared_by_span() {
        let parts = all_units(&[105, 53], 2);
        // The line is 158 long, cut at 79.
        assert_eq!(parts[0], vec![(0, Some((0, 79)))]);
        assert_eq!(parts[1], vec![(0, Some((79, 105))), (1, None)]);
        // A file under half a part's share is not split: it goes where its middle is.
        let small = all_units(&[100, 30, 100], 2);
        assert_eq!(small[0], vec![(0, None)]);
        assert_eq!(small[1], vec![(1, None), (2, None)]);
        let one = all_units(&[56], 4);
        assert_eq!(one[0], vec![(0, Some((0, 14)))]);
        assert_eq!(one[3], vec![(0, Some((42, 56)))]);
    }

    #[test]
    fn the_spans_cover_every_file_exactly_once() {
        for (extents, parts) in [
            (vec![100u64; 10], 3),
            (vec![7, 1, 1, 1, 90, 3], 4),
            (vec![10, 30, 25, 5, 30], 3),
            (vec![1, 2, 3], 8),
            (vec![], 2),
        ] {
            let mut covered = vec![0u64; extents.len()];
            for units in all_units(&extents, parts) {
                for (i, span) in units {
                    covered[i] += span.map_or(extents[i], |(lo, hi)| hi - lo);
                }
            }
            assert_eq!(covered, extents, "{extents:?} in {parts} parts");
        }
    }
}
