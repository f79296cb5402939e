//! Reading one data file: as a stream of output batches for a scan, or whole with each
//! live row's position in the file for row-level changes. Deletion vectors become row
//! selections, so deleted rows are never decoded, and a scan's predicate runs in the
//! decoder on its own columns first (see `late`).

use std::collections::HashSet;
use std::sync::Arc;

use arrow::array::{BooleanArray, RecordBatch};
use arrow::compute::filter_record_batch;
use futures::{StreamExt, TryStreamExt};
use parquet::arrow::arrow_reader::{RowSelection, RowSelectionPolicy, RowSelector};
use parquet::arrow::{ParquetRecordBatchStreamBuilder, ProjectionMask};
use roaring::RoaringTreemap;

use super::late::{FilterFailure, row_filter};
use super::pages::{page_selections, share_selection};
use super::row_groups::matching_row_groups;
use super::views::{is_view, with_views};
use super::{PlannedFile, RecordBatchStream, Scan, ScanContext, StableIds, assemble};
use crate::conform::{Source, find_field};
use crate::dv::deletion_vector_of;
use crate::error::{Error, Result};
use crate::protocol::{Add, StructField};
use crate::reader::{decoder_panic, open_data_file};
use crate::snapshot::Snapshot;

/// The live rows of one data file (those its deletion vector does not mark), in the
/// table's logical schema, with each row's position in the file.
#[derive(Debug, Clone)]
pub(crate) struct FileRows {
    pub(crate) batch: RecordBatch,
    pub(crate) positions: Vec<u64>,
    /// Rows in the file, deleted ones included.
    pub(crate) physical_rows: u64,
    /// The file's deletion vector as read with the rows (empty without one), so a change
    /// that extends it need not load it again.
    pub(crate) deleted_before: RoaringTreemap,
    /// The rows' stable row ids, when the scan read the materialized row-id columns
    /// ([`Scan::with_row_ids`]) and the file has row ids.
    pub(crate) ids: Option<StableIds>,
}

impl Snapshot {
    /// The live rows of one data file of this snapshot (those its deletion vector does not
    /// mark), every column, in the table's logical schema.
    ///
    /// Fails with [`Error::DataFileNotFound`], [`Error::Parquet`],
    /// [`Error::InvalidDeletionVector`] or [`Error::Store`] when the file cannot be read.
    pub async fn read_file(&self, add: &Add) -> Result<RecordBatch> {
        Ok(read_file_rows(self, add).await?.batch)
    }

    /// [`read_file`](Self::read_file), with each live row's position in the file (0-based,
    /// deleted rows counted), as [`Transaction::delete_rows`](crate::Transaction::delete_rows)
    /// takes them.
    ///
    /// Fails as [`read_file`](Self::read_file) does.
    pub async fn read_file_positions(&self, add: &Add) -> Result<(RecordBatch, Vec<u64>)> {
        let rows = read_file_rows(self, add).await?;
        Ok((rows.batch, rows.positions))
    }

    /// The positions (0-based, in file order) of the rows `add`'s deletion vector marks
    /// deleted; empty for a file without one. A DV in a file is read once per table
    /// handle.
    ///
    /// Fails with [`Error::InvalidDeletionVector`] or [`Error::Store`] when the DV cannot
    /// be read.
    pub async fn deleted_rows(&self, add: &Add) -> Result<Vec<u64>> {
        Ok(load_deletion_vector_of(self, add)
            .await?
            .map(|dv| dv.iter().collect())
            .unwrap_or_default())
    }
}

/// Reads every live row of a file with its position (row groups in order, no pruning).
pub(crate) async fn read_file_rows(snapshot: &Snapshot, add: &Add) -> Result<FileRows> {
    read_file_rows_of(&snapshot.scan(), add, None, 1).await
}

/// Reads the live rows of a file with their positions: the columns `scan` selects and, when
/// `only` is given, only the rows at those positions (decoded through a row selection, so
/// the rest of each page is skipped). With `shares` above 1, runs of row groups decode on
/// tasks of their own at once (for changes that read fewer files than there are cores).
pub(crate) async fn read_file_rows_of(
    scan: &Scan,
    add: &Add,
    only: Option<&RoaringTreemap>,
    shares: usize,
) -> Result<FileRows> {
    let snapshot = &scan.snapshot;
    let ctx = Arc::new(scan.context()?);
    let location = snapshot.location();
    let (file, deleted) = futures::join!(
        open_data_file(location, add, snapshot.caches()),
        load_deletion_vector_of(snapshot, add)
    );
    let (file, deleted) = (file?, deleted?);
    let (builder, errors) = (file.builder, file.errors.clone());
    let mode = snapshot.column_mapping_mode();
    let file_schema = Arc::clone(builder.schema());
    let mut roots: Vec<usize> = ctx
        .read_fields
        .iter()
        .filter_map(|f| find_field(file_schema.fields(), f, Source::File(mode)))
        .collect();
    roots.sort_unstable();
    roots.dedup();
    let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
    let metadata = Arc::clone(builder.metadata());
    let physical_rows = metadata.file_metadata().num_rows().max(0) as u64;
    // The file positions the batches hold, in order.
    let read_positions: Vec<u64> = match only {
        Some(wanted) => wanted.iter().filter(|p| *p < physical_rows).collect(),
        None => (0..physical_rows).collect(),
    };
    let groups = metadata.num_row_groups();
    let shares = shares.clamp(1, groups.max(1));
    let partitions = Arc::new(ctx.partition_values(add)?);
    let batches: Vec<RecordBatch> = if shares == 1 {
        let mut builder = builder.with_projection(mask).with_batch_size(64 * 1024);
        if only.is_some() {
            builder = builder.with_row_selection(selection_of(&read_positions, physical_rows));
        }
        let stream = builder.build().map_err(|e| errors.error(e))?;
        decode_all(stream, &ctx, &partitions, &errors).await?
    } else {
        drop(builder);
        let mut starts = Vec::with_capacity(groups);
        let mut next = 0u64;
        for rg in metadata.row_groups() {
            starts.push((next, rg.num_rows() as u64));
            next += rg.num_rows() as u64;
        }
        // Contiguous runs, so their batches concatenate in file order.
        let all: Vec<usize> = (0..groups).collect();
        let runs = all.chunks(groups.div_ceil(shares)).map(|run| {
            let kept: Vec<(u64, u64)> = run.iter().map(|rg| starts[*rg]).collect();
            let mut builder = ParquetRecordBatchStreamBuilder::new_with_metadata(
                file.reader.clone(),
                file.metadata.clone(),
            )
            .with_projection(mask.clone())
            .with_batch_size(64 * 1024)
            .with_row_groups(run.to_vec());
            if only.is_some() {
                builder = builder.with_row_selection(wanted_selection(&read_positions, &kept));
            }
            let (ctx, partitions, errors) =
                (Arc::clone(&ctx), Arc::clone(&partitions), errors.clone());
            crate::tasks::spawn("decoding row groups", async move {
                let stream = builder.build().map_err(|e| errors.error(e))?;
                decode_all(stream, &ctx, &partitions, &errors).await
            })
        });
        futures::future::try_join_all(runs)
            .await?
            .into_iter()
            .flatten()
            .collect()
    };
    let all = arrow::compute::concat_batches(&ctx.output_schema, &batches)
        .map_err(|e| Error::arrow(format!("reading {}", errors.url()))(e))?;
    if all.num_rows() != read_positions.len() {
        return Err(errors.error(parquet::errors::ParquetError::General(format!(
            "read {} rows where {} were selected",
            all.num_rows(),
            read_positions.len()
        ))));
    }
    let deleted_before = deleted.clone().unwrap_or_default();
    let (batch, positions) = match deleted {
        None => (all, read_positions),
        Some(bitmap) => {
            let keep: BooleanArray = read_positions
                .iter()
                .map(|p| Some(!bitmap.contains(*p)))
                .collect();
            let positions = read_positions
                .into_iter()
                .filter(|p| !bitmap.contains(*p))
                .collect();
            let kept = filter_record_batch(&all, &keep)
                .map_err(Error::arrow("applying a deletion vector"))?;
            (kept, positions)
        }
    };
    let (batch, ids) = match scan.row_ids {
        false => (batch, None),
        true => StableIds::split(batch, add, positions.iter().copied())?,
    };
    Ok(FileRows {
        batch,
        positions,
        physical_rows,
        deleted_before,
        ids,
    })
}

/// Every output batch of a decode stream, in order; a decoder panic is an error.
async fn decode_all<S>(
    stream: S,
    ctx: &ScanContext,
    partitions: &std::collections::HashMap<crate::expr::ColumnName, crate::expr::Scalar>,
    errors: &crate::reader::DataFileErrors,
) -> Result<Vec<RecordBatch>>
where
    S: futures::Stream<Item = parquet::errors::Result<RecordBatch>>,
{
    let mode = ctx.snapshot.column_mapping_mode();
    std::panic::AssertUnwindSafe(stream)
        .catch_unwind()
        .map(|r| r.unwrap_or_else(|panic| Err(decoder_panic(&panic))))
        .map(|b| {
            let b = b.map_err(|e| errors.error(e))?;
            assemble(ctx, &b, partitions, mode, errors)
        })
        .try_collect()
        .await
}

/// A row selection reading exactly `wanted` (sorted, distinct) of `rows` rows.
fn selection_of(wanted: &[u64], rows: u64) -> RowSelection {
    let mut selectors = Vec::new();
    let mut at = 0u64;
    let mut i = 0;
    while i < wanted.len() {
        let start = wanted[i];
        let mut end = start + 1;
        while i + 1 < wanted.len() && wanted[i + 1] == end {
            i += 1;
            end += 1;
        }
        if start > at {
            selectors.push(RowSelector::skip((start - at) as usize));
        }
        selectors.push(RowSelector::select((end - start) as usize));
        at = end;
        i += 1;
    }
    if rows > at {
        selectors.push(RowSelector::skip((rows - at) as usize));
    }
    RowSelection::from(selectors)
}

/// How a deletion vector's selection is read: as a mask over decoded rows unless its runs
/// average more than 1,024 rows. Deletions are mostly a few scattered rows, and skipping
/// each short gap costs more than decoding it and filtering it out.
const DELETION_POLICY: RowSelectionPolicy = RowSelectionPolicy::Auto { threshold: 1024 };

/// How many runs of row groups each of the files of `sizes` (bytes) decodes in at once on
/// `cores` cores: the cores split evenly over the files, and for a file more than a tenth
/// above the average size, runs in proportion to its share of the bytes, so that one
/// large file does not keep a single core busy after the smaller files are done (a
/// writer's last file is often much smaller than the others).
fn shares_for(sizes: &[u64], cores: usize) -> Vec<usize> {
    let even = (cores / sizes.len().max(1)).max(1);
    let total = sizes.iter().sum::<u64>().max(1) as f64;
    let files = sizes.len() as f64;
    sizes
        .iter()
        .map(|size| {
            let size = *size as f64;
            // Files of about the same size keep the even split, whatever the cores.
            if size * files <= 1.1 * total {
                return even;
            }
            even.max((size * cores as f64 / total).ceil() as usize)
        })
        .collect()
}

/// [`shares_for`] the files `adds` by their sizes: the runs each is read in on `cores`
/// cores, by a scan or by a change reading the files it rewrites.
pub(crate) fn shares_of<'a>(adds: impl IntoIterator<Item = &'a Add>, cores: usize) -> Vec<usize> {
    let sizes: Vec<u64> = adds.into_iter().map(|a| a.size.max(1) as u64).collect();
    shares_for(&sizes, cores)
}

/// Opens one file and returns the stream of its output batches, in file order, or with its
/// row groups split into `shares` runs decoded each on a task of its own (batches then
/// arrive in no particular order).
pub(super) async fn read_file(
    ctx: Arc<ScanContext>,
    file: PlannedFile,
    shares: usize,
) -> Result<RecordBatchStream> {
    let location = ctx.snapshot.location();
    let (data, deleted) = futures::join!(
        open_data_file(location, &file.add, ctx.snapshot.caches()),
        load_deletion_vector_of(&ctx.snapshot, &file.add)
    );
    let (data, deleted) = (data?, deleted?);
    let (builder, errors) = (data.builder, data.errors.clone());
    let file_schema = Arc::clone(builder.schema());
    let mode = ctx.snapshot.column_mapping_mode();
    let partition_names: Vec<&str> = ctx
        .snapshot
        .partition_columns()
        .iter()
        .map(|p| p.name.as_str())
        .collect();

    // Data columns to read, by their root index in the file, and those decoded as views.
    let mut roots = Vec::new();
    let mut view_roots = Vec::new();
    for (field, read) in ctx
        .read_fields
        .iter()
        .zip(ctx.read_schema.fields())
        .filter(|(f, _)| !partition_names.contains(&f.name.as_str()))
    {
        if let Some(i) = find_field(file_schema.fields(), field, Source::File(mode)) {
            roots.push(i);
            if is_view(read.data_type()) {
                view_roots.push(i);
            }
        }
    }
    let reader_metadata = match view_roots.is_empty() {
        true => data.metadata.clone(),
        // A file the reader will not decode into views is read as written, then cast.
        false => with_views(&data.metadata, &errors, &view_roots)
            .unwrap_or_else(|_| data.metadata.clone()),
    };
    roots.sort_unstable();
    roots.dedup();
    let parquet_schema = builder.metadata().file_metadata().schema_descr_ptr();
    let mask = ProjectionMask::roots(&parquet_schema, roots.iter().copied());

    let metadata = Arc::clone(builder.metadata());
    // The row groups that may match, and which of them match in every row.
    let judged = match &ctx.predicate {
        Some(p) => matching_row_groups(&ctx, p, &file_schema, &metadata, &file.partitions),
        None => (0..metadata.num_row_groups())
            .map(|rg| (rg, true))
            .collect(),
    };
    let every_row: HashSet<usize> = judged.iter().filter(|j| j.1).map(|j| j.0).collect();
    let mut row_groups: Vec<usize> = judged.into_iter().map(|j| j.0).collect();
    let mut starts = Vec::with_capacity(metadata.num_row_groups());
    let mut next = 0u64;
    for rg in metadata.row_groups() {
        starts.push((next, rg.num_rows() as u64));
        next += rg.num_rows() as u64;
    }
    // The rows an index allows, minus deleted ones, read through the offset index.
    let wanted: Option<Vec<u64>> = file.rows.as_ref().map(|rows| {
        rows.iter()
            .filter(|r| deleted.as_ref().is_none_or(|d| !d.contains(*r)))
            .collect()
    });
    if let Some(wanted) = &wanted {
        row_groups.retain(|rg| {
            let (start, rows) = starts[*rg];
            let first = wanted.partition_point(|r| *r < start);
            wanted.get(first).is_some_and(|r| *r < start + rows)
        });
    }
    let pages = match &ctx.predicate {
        Some(p) => page_selections(
            &ctx,
            p,
            &file_schema,
            &metadata,
            &file.partitions,
            &row_groups,
        ),
        None => Default::default(),
    };
    row_groups.retain(|rg| pages.get(rg).is_none_or(|s| s.selects_any()));
    if let Some(span) = file.span {
        let mine = in_span(&metadata, super::parts::extent(&file.add), span);
        row_groups.retain(|rg| mine[*rg]);
    }
    if row_groups.is_empty() {
        return Ok(futures::stream::empty().boxed());
    }
    let shares = shares.clamp(1, row_groups.len());
    let per_share = row_groups.len().div_ceil(shares);
    let mut streams = Vec::with_capacity(shares);
    let partitions = file.partitions;
    for share in row_groups.chunks(per_share) {
        // Each share's own, so an error is reported by the run it stopped.
        let failure = FilterFailure::default();
        let kept: Vec<(u64, u64)> = share.iter().map(|rg| starts[*rg]).collect();
        let mut share_builder = ParquetRecordBatchStreamBuilder::new_with_metadata(
            data.reader.clone(),
            reader_metadata.clone(),
        )
        .with_projection(mask.clone())
        .with_batch_size(ctx.batch_size)
        .with_row_groups(share.to_vec());
        let rows = match (&wanted, &deleted) {
            (Some(wanted), _) => Some(wanted_selection(wanted, &kept)),
            (None, Some(deleted)) => Some(deletion_selection(deleted, &kept)),
            (None, None) => None,
        };
        let selection = match (rows, share_selection(&pages, share, &kept)) {
            (Some(rows), Some(pages)) => Some(rows.intersection(&pages)),
            (rows, pages) => rows.or(pages),
        };
        let filter = match share.iter().all(|rg| every_row.contains(rg)) {
            true => None,
            false => row_filter(
                &ctx,
                &roots,
                &file_schema,
                &metadata,
                share,
                &partitions,
                &errors,
                &failure,
            ),
        };
        // A deletion vector's selection alone reads best as a mask; once a filter
        // narrows it to a few rows in long gaps, as runs to skip (the default).
        if wanted.is_none() && deleted.is_some() && filter.is_none() {
            share_builder = share_builder.with_row_selection_policy(DELETION_POLICY);
        }
        if let Some(selection) = selection {
            share_builder = share_builder.with_row_selection(selection);
        }
        if let Some(filter) = filter {
            share_builder = share_builder.with_row_filter(filter);
        }
        let stream = share_builder.build().map_err(|e| errors.error(e))?;
        // A corrupt page can make the decoder panic: the scan gets an error for this file.
        let stream = std::panic::AssertUnwindSafe(stream)
            .catch_unwind()
            .map(|r| r.unwrap_or_else(|panic| Err(decoder_panic(&panic))));
        let (ctx, errors, partitions, failure) = (
            Arc::clone(&ctx),
            errors.clone(),
            Arc::clone(&partitions),
            failure.clone(),
        );
        let batches = stream
            .map(move |batch| {
                // A predicate that failed in the decoder left its own error.
                let batch = batch.map_err(|e| failure.take().unwrap_or_else(|| errors.error(e)))?;
                assemble(&ctx, &batch, &partitions, mode, &errors)
            })
            .try_filter(|b| futures::future::ready(b.num_rows() > 0))
            .boxed();
        streams.push(batches);
    }
    drop(builder);
    if streams.len() == 1 {
        return Ok(streams.remove(0));
    }
    // Each share decodes on a task of its own, a couple of batches ahead.
    Ok(futures::stream::select_all(
        streams
            .into_iter()
            .map(|s| crate::tasks::spawn_stream("decoding row groups", async move { Ok(s) })),
    )
    .boxed())
}

/// Which row groups of a file of `metadata` fall in `span` of its `extent`: those whose
/// middle does, each row group's place in proportion to its compressed bytes. The spans
/// of a file's parts tile its extent, so each row group is in exactly one of them.
fn in_span(
    metadata: &parquet::file::metadata::ParquetMetaData,
    extent: u64,
    (from, to): (u64, u64),
) -> Vec<bool> {
    let sizes: Vec<u128> = metadata
        .row_groups()
        .iter()
        .map(|rg| rg.compressed_size().max(1) as u128)
        .collect();
    let total: u128 = sizes.iter().sum::<u128>().max(1);
    let mut before = 0u128;
    sizes
        .iter()
        .map(|size| {
            let middle = (u128::from(extent) * (2 * before + size) / (2 * total)) as u64;
            before += size;
            from <= middle && middle < to
        })
        .collect()
}

/// The deletion vector of `add`, loaded and checked, if it has one.
///
/// Fails when the vector cannot be read or is corrupt.
pub(crate) async fn load_deletion_vector_of(
    snapshot: &Snapshot,
    add: &Add,
) -> Result<Option<RoaringTreemap>> {
    match &add.deletion_vector {
        Some(dv) => deletion_vector_of(snapshot.location(), snapshot.caches(), dv)
            .await
            .map(Some),
        None => Ok(None),
    }
}

/// A selection over the kept row groups (each `(first row, rows)` in file order) reading
/// exactly the `wanted` rows (sorted, distinct).
fn wanted_selection(wanted: &[u64], kept: &[(u64, u64)]) -> RowSelection {
    let mut selectors = Vec::new();
    for &(start, rows) in kept {
        let end = start + rows;
        let mut position = start;
        let from = wanted.partition_point(|r| *r < start);
        let mut i = from;
        while i < wanted.len() && wanted[i] < end {
            let run_start = wanted[i];
            let mut run_end = run_start + 1;
            while i + 1 < wanted.len() && wanted[i + 1] == run_end && run_end < end {
                i += 1;
                run_end += 1;
            }
            if run_start > position {
                selectors.push(RowSelector::skip((run_start - position) as usize));
            }
            selectors.push(RowSelector::select((run_end - run_start) as usize));
            position = run_end;
            i += 1;
        }
        if end > position {
            selectors.push(RowSelector::skip((end - position) as usize));
        }
    }
    RowSelection::from(selectors)
}

/// The rows to read of the kept row groups (each `(first row, rows)` in file order),
/// skipping those the deletion vector marks.
fn deletion_selection(deleted: &RoaringTreemap, kept: &[(u64, u64)]) -> RowSelection {
    let mut selectors = Vec::new();
    let mut rows_deleted = deleted.iter().peekable();
    for &(start, rows) in kept {
        let end = start + rows;
        let mut position = start;
        while let Some(row) = rows_deleted.next_if(|r| *r < end) {
            if row < start {
                continue;
            }
            if row > position {
                selectors.push(RowSelector::select((row - position) as usize));
            }
            selectors.push(RowSelector::skip(1));
            position = row + 1;
        }
        if end > position {
            selectors.push(RowSelector::select((end - position) as usize));
        }
    }
    RowSelection::from(selectors)
}

/// Every live row of one data file, all columns in the table's logical schema and then
/// the `hidden` columns (outside the schema, read by name; null where the file lacks
/// them), as a stream of batches decoded as it is polled (deleted rows skipped, the
/// rest in file order): what a copy-on-write rewrite streams through.
///
/// Fails as [`Scan::execute`] does for one file.
pub(crate) async fn stream_file(
    snapshot: &Snapshot,
    add: &Add,
    hidden: &[StructField],
) -> Result<RecordBatchStream> {
    let ctx = snapshot
        .scan()
        .with_batch_size(64 * 1024)
        .with_hidden(hidden.to_vec())
        .context()?;
    let ctx = Arc::new(ctx);
    let partitions = ctx.partition_values(add)?;
    let planned = PlannedFile {
        add: Arc::new(add.clone()),
        partitions: Arc::new(partitions),
        rows: None,
        span: None,
    };
    // One run of row groups: a rewrite keeps the file's row order.
    read_file(ctx, planned, 1).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_well_above_its_share_of_the_bytes_decodes_in_more_runs() {
        // Files of about the same size: one run each, or the cores split evenly.
        assert_eq!(shares_for(&[56_104_009, 55_855_131], 2), vec![1, 1]);
        assert_eq!(shares_for(&[100, 100], 8), vec![4, 4]);
        assert_eq!(shares_for(&[100; 3], 8), vec![2; 3]);
        assert_eq!(shares_for(&[100; 3], 4), vec![1; 3]);
        assert_eq!(shares_for(&[100; 7], 8), vec![1; 7]);
        // delta-rs's 10M-row load: 7 row groups and 4, in files of 105 and 53 MB.
        assert_eq!(shares_for(&[104_722_994, 53_310_209], 2), vec![2, 1]);
        assert_eq!(shares_for(&[900, 50, 50], 4), vec![4, 1, 1]);
        // More files than cores, and odd input: at least one run each.
        assert_eq!(shares_for(&[10; 6], 2), vec![1; 6]);
        assert_eq!(shares_for(&[0, 0], 2), vec![1, 1]);
        assert!(shares_for(&[], 2).is_empty());
    }

    #[test]
    fn deletion_vectors_become_row_selections_over_kept_row_groups() {
        let deleted: RoaringTreemap = [0u64, 7, 14, 25].into_iter().collect();
        // Row groups of 10 rows; the second one (rows 10..20) is pruned.
        let selection = deletion_selection(&deleted, &[(0, 10), (20, 10)]);
        let selectors: Vec<RowSelector> = selection.into();
        assert_eq!(
            selectors,
            vec![
                RowSelector::skip(1),
                RowSelector::select(6),
                RowSelector::skip(1),
                RowSelector::select(2),
                RowSelector::select(5),
                RowSelector::skip(1),
                RowSelector::select(4),
            ]
            .into_iter()
            .fold(Vec::new(), |mut acc: Vec<RowSelector>, s| {
                // RowSelection merges adjacent selectors of the same kind.
                match acc.last_mut() {
                    Some(last) if last.skip == s.skip => last.row_count += s.row_count,
                    _ => acc.push(s),
                }
                acc
            })
        );
    }
}
