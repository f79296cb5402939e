//! Encoding and uploading data files: batches split into Hive-style partitions, Parquet
//! files rolled at a target size (encoded off the async threads), uploaded while the next
//! ones encode, and described as `add` actions with statistics.

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch};
use futures::{FutureExt, StreamExt, TryStreamExt};
use object_store::ObjectStore;
use object_store::path::Path;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use tarn_store::StoreLocation;

use crate::error::{Error, Result};
use crate::paths::uri_encode;
use crate::protocol::{Add, PartitionValues, StructField, StructType};
use crate::snapshot::PartitionColumn;

pub(super) use super::encoder::{Destination, WAITING_BUDGET, encode};
use super::lanes::{LANE_PARTITIONS, Lanes};
use super::upload::{Body, UPLOAD_CONCURRENCY, tokio_stream_from};

/// Settings of one data write.
#[derive(Debug, Clone)]
pub(crate) struct FileWriteOptions {
    pub(crate) target_file_size: u64,
    /// Which columns get statistics.
    pub(crate) stats_columns: super::StatsColumns,
    pub(crate) writer_properties: Option<WriterProperties>,
    /// The codec of the files, unless `writer_properties` are given.
    pub(crate) compression: Compression,
    /// The `modificationTime` of the files' `add` actions, ms since the epoch.
    pub(crate) modification_time: i64,
    /// Columns whose values each file keeps, in row order, for indices built inline.
    pub(crate) capture: Vec<String>,
    /// Whether each input batch ends its files (one file per batch and partition), rather
    /// than files filling up to the target size.
    pub(crate) file_per_batch: bool,
    /// The constraints every row written must meet.
    pub(crate) checks: super::Checks,
    /// Whether the files are change data (`_change_data/cdc-...`), not data files.
    pub(crate) change_data: bool,
    /// Columns outside the table's schema written after its columns, without statistics
    /// (row tracking's materialized row ids); null where a batch lacks them.
    pub(crate) hidden: Vec<StructField>,
}

/// One encoded data file, ready to upload.
pub(super) struct EncodedFile {
    pub(super) relative: String,
    pub(super) partition_values: PartitionValues,
    pub(super) body: Body,
    pub(super) size: u64,
    pub(super) stats: String,
    pub(super) rows: usize,
    pub(super) captured: Vec<ArrayRef>,
}

/// What writing data files produced.
#[derive(Debug, Clone, Default)]
pub(crate) struct WrittenFiles {
    pub(crate) adds: Vec<Add>,
    pub(crate) rows: u64,
    pub(crate) bytes: u64,
    /// For each file of `adds`: the captured columns, in `capture` order, every row.
    pub(crate) captured: Vec<Vec<ArrayRef>>,
}

/// Writes conformed batches as data files under the table root and returns their `add`
/// actions. Nothing is committed: files of a write that never commits are orphans that
/// `vacuum` removes.
///
/// With `encoded`, the files are also sent there, sorted by path, once the last one is
/// encoded and the uploader has room to notice (before the last uploads finish): index
/// segments over them can then be built and uploaded beside the data. A write that fails
/// sends nothing.
pub(crate) async fn write_files(
    location: &StoreLocation,
    schema: &StructType,
    partition_columns: &[PartitionColumn],
    batches: Vec<RecordBatch>,
    options: &FileWriteOptions,
    encoded: Option<Encoded>,
) -> Result<WrittenFiles> {
    if batches.is_empty() {
        return Ok(WrittenFiles::default());
    }
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<EncodedFile>>(UPLOAD_CONCURRENCY);
    let schema = Arc::new(schema.clone());
    let partition_columns: Arc<[PartitionColumn]> = partition_columns.into();
    let options = Arc::new(options.clone());
    // Several encoders on blocking threads, each over its share of the rows, so a large
    // write uses every core; they feed one uploader.
    let shares = shares_of(batches, &partition_columns, encoder_count(&options))?;
    let budget = WAITING_BUDGET / shares.len().max(1);
    let encoders: Vec<_> = shares
        .into_iter()
        .map(|share| {
            let (schema, partition_columns) = (Arc::clone(&schema), Arc::clone(&partition_columns));
            let (options, tx) = (Arc::clone(&options), tx.clone());
            let destination = Destination::of(location);
            tokio::task::spawn_blocking(move || {
                let result = encode(
                    &schema,
                    &partition_columns,
                    share,
                    &options,
                    Some(&destination),
                    &tx,
                    budget,
                );
                if let Err(e) = result {
                    let _ = tx.blocking_send(Err(e));
                }
            })
        })
        .collect();
    drop(tx);
    upload_all(location, options.modification_time, rx, encoders, encoded).await
}

/// Where [`write_files`] sends the files of a write once they are all encoded.
pub(crate) type Encoded = tokio::sync::oneshot::Sender<WrittenFiles>;

/// Uploads the files the encoders send, a few at once, until every encoder is done, and
/// returns what was written (sorted by path, whatever order the uploads finished in).
/// With `encoded`, what will have been written is sent there once the encoders are done,
/// before the last uploads finish.
pub(super) async fn upload_all(
    location: &StoreLocation,
    now: i64,
    rx: tokio::sync::mpsc::Receiver<Result<EncodedFile>>,
    encoders: Vec<tokio::task::JoinHandle<()>>,
    mut encoded: Option<Encoded>,
) -> Result<WrittenFiles> {
    let store = Arc::clone(location.store());
    let root = location.root().clone();
    let mut seen: Vec<(Add, u64, Vec<ArrayRef>)> = Vec::new();
    // `None` marks the end of the encoders' output.
    let files = tokio_stream_from(rx)
        .map(Some)
        .chain(futures::stream::once(async { None }));
    let uploads: Vec<(Add, u64, Vec<ArrayRef>)> = files
        .map(|file| {
            let Some(file) = file else {
                if let Some(tx) = encoded.take() {
                    // The receiver may be gone (its build failed): the write goes on.
                    let _ = tx.send(written_of(std::mem::take(&mut seen)));
                }
                return futures::future::ready(Ok(None)).boxed();
            };
            let add = file.as_ref().ok().map(|f| add_of(f, now));
            match (&add, &file) {
                (Some(add), Ok(f)) if encoded.is_some() => {
                    seen.push((add.clone(), f.rows as u64, f.captured.clone()));
                }
                // A failed encoder: the write fails, so no segments are built for it.
                (_, Err(_)) => drop(encoded.take()),
                _ => {}
            }
            let store = Arc::clone(&store);
            let root = root.clone();
            async move {
                let file = file?;
                let path = crate::paths::join_relative(&root, &file.relative)?;
                let add = add.unwrap_or_else(|| add_of(&file, now));
                file.body.upload_to(store.as_ref(), &path).await?;
                Ok::<_, Error>(Some((add, file.rows as u64, file.captured)))
            }
            .boxed()
        })
        .buffer_unordered(UPLOAD_CONCURRENCY)
        .try_filter_map(|done| futures::future::ready(Ok(done)))
        .try_collect()
        .await?;
    for encoder in encoders {
        encoder.await.map_err(|source| Error::TaskFailed {
            task: "encoding data files",
            source,
        })?;
    }
    Ok(written_of(uploads))
}

/// What was written, sorted by path.
fn written_of(mut files: Vec<(Add, u64, Vec<ArrayRef>)>) -> WrittenFiles {
    files.sort_by(|a, b| a.0.path.cmp(&b.0.path));
    let mut written = WrittenFiles::default();
    for (add, rows, captured) in files {
        written.rows += rows;
        written.bytes += add.size as u64;
        written.adds.push(add);
        written.captured.push(captured);
    }
    written
}

/// Fewest rows worth an encoder of their own: below this a write stays one file (per
/// partition and target size) on one thread.
const ROWS_PER_ENCODER: usize = 256 * 1024;

/// Encoders for one write: one per core, or one when each input batch must end its files.
fn encoder_count(options: &FileWriteOptions) -> usize {
    if options.file_per_batch {
        return 1;
    }
    crate::tasks::cores()
}

/// The rows each of at most `encoders` encoders takes: of a partitioned table whose first
/// batch spans many partitions, by partition ([`Lanes`]), so each partition's rows meet in
/// one encoder; otherwise runs of consecutive rows ([`split_rows`]).
fn shares_of(
    batches: Vec<RecordBatch>,
    partition_columns: &[PartitionColumn],
    encoders: usize,
) -> Result<Vec<Vec<RecordBatch>>> {
    let total: usize = batches.iter().map(RecordBatch::num_rows).sum();
    let lanes = encoders.min(total / ROWS_PER_ENCODER).max(1);
    let Some(first) = batches
        .first()
        .filter(|_| !partition_columns.is_empty() && lanes > 1)
    else {
        return Ok(split_rows(batches, encoders));
    };
    let splitter = Lanes::new(lanes, partition_columns, first)?;
    if splitter.partitions_in(first)? < LANE_PARTITIONS * lanes {
        return Ok(split_rows(batches, encoders));
    }
    let mut shares: Vec<Vec<RecordBatch>> = vec![Vec::new(); lanes];
    for batch in &batches {
        for (lane, rows) in splitter.split(batch)? {
            shares[lane].push(rows);
        }
    }
    shares.retain(|share| !share.is_empty());
    Ok(shares)
}

/// Splits `batches` into at most `shares` runs of consecutive rows, of about equal rows
/// each and none under [`ROWS_PER_ENCODER`] (batches are sliced, not copied).
fn split_rows(batches: Vec<RecordBatch>, shares: usize) -> Vec<Vec<RecordBatch>> {
    let total: usize = batches.iter().map(RecordBatch::num_rows).sum();
    let shares = shares.min(total / ROWS_PER_ENCODER).max(1);
    if shares == 1 {
        return vec![batches];
    }
    let per_share = total.div_ceil(shares);
    let (mut out, mut current) = (Vec::with_capacity(shares), Vec::new());
    let mut room = per_share;
    for batch in batches {
        let mut offset = 0;
        while offset < batch.num_rows() {
            let len = room.min(batch.num_rows() - offset);
            current.push(batch.slice(offset, len));
            offset += len;
            room -= len;
            if room == 0 {
                out.push(std::mem::take(&mut current));
                room = per_share;
            }
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// The `add` action of an encoded file.
fn add_of(file: &EncodedFile, modification_time: i64) -> Add {
    Add {
        path: uri_encode(&file.relative),
        partition_values: file.partition_values.clone(),
        size: file.size as i64,
        modification_time,
        data_change: true,
        stats: Some(file.stats.clone().into()),
        tags: None,
        deletion_vector: None,
        base_row_id: None,
        default_row_commit_version: None,
        clustering_provider: None,
    }
}

/// Data files encoded in memory but not uploaded yet: their `add` actions are final, so
/// what depends on them (index segments) can be made while they upload.
pub(crate) struct EncodedFiles {
    pub(crate) written: WrittenFiles,
    uploads: Vec<(Path, Body)>,
}

impl EncodedFiles {
    /// Uploads the files, a few at once.
    ///
    /// Fails with [`Error::Store`] when an upload fails.
    pub(crate) async fn upload(self, store: Arc<dyn ObjectStore>) -> Result<()> {
        futures::stream::iter(self.uploads)
            .map(|(path, body)| {
                let store = Arc::clone(&store);
                async move { body.upload_to(store.as_ref(), &path).await }.boxed()
            })
            .buffer_unordered(UPLOAD_CONCURRENCY)
            .try_collect::<Vec<()>>()
            .await?;
        Ok(())
    }
}

/// Encodes conformed batches as data files in memory (off the async threads), for a
/// caller whose batches are in memory anyway, in the order of the batches;
/// [`EncodedFiles::upload`] writes them.
pub(crate) async fn encode_files(
    location: &StoreLocation,
    schema: &StructType,
    partition_columns: &[PartitionColumn],
    batches: Vec<RecordBatch>,
    options: &FileWriteOptions,
) -> Result<EncodedFiles> {
    let mut encoded = EncodedFiles {
        written: WrittenFiles::default(),
        uploads: Vec::new(),
    };
    if batches.is_empty() {
        return Ok(encoded);
    }
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<EncodedFile>>(UPLOAD_CONCURRENCY);
    let schema = schema.clone();
    let partition_columns = partition_columns.to_vec();
    let now = options.modification_time;
    let options = options.clone();
    // In memory: the files' actions must be final before any of them uploads.
    let encoder = tokio::task::spawn_blocking(move || {
        let result = encode(
            &schema,
            &partition_columns,
            batches,
            &options,
            None,
            &tx,
            WAITING_BUDGET,
        );
        if let Err(e) = result {
            let _ = tx.blocking_send(Err(e));
        }
    });
    let files: Vec<EncodedFile> = tokio_stream_from(rx).try_collect().await?;
    encoder.await.map_err(|source| Error::TaskFailed {
        task: "encoding data files",
        source,
    })?;
    // In the order encoded: batch by batch.
    for file in files {
        let path = crate::paths::join_relative(location.root(), &file.relative)?;
        let add = add_of(&file, now);
        encoded.written.rows += file.rows as u64;
        encoded.written.bytes += add.size as u64;
        encoded.written.adds.push(add);
        encoded.written.captured.push(file.captured);
        encoded.uploads.push((path, file.body));
    }
    Ok(encoded)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{AsArray, Int64Array};
    use arrow::datatypes::{DataType, Field, Int64Type, Schema};

    fn ids(range: std::ops::Range<i64>) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
        RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from_iter_values(range))]).unwrap()
    }

    fn flatten(shares: &[Vec<RecordBatch>]) -> Vec<i64> {
        shares
            .iter()
            .flatten()
            .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
            .collect()
    }

    #[test]
    fn rows_split_into_equal_runs_in_order_and_small_writes_stay_whole() {
        let batches = vec![
            ids(0..300_000),
            ids(300_000..700_000),
            ids(700_000..900_000),
        ];
        let shares = split_rows(batches, 3);
        assert_eq!(shares.len(), 3);
        for share in &shares {
            let rows: usize = share.iter().map(RecordBatch::num_rows).sum();
            assert_eq!(rows, 300_000);
        }
        assert_eq!(flatten(&shares), (0..900_000).collect::<Vec<_>>());

        // Fewer rows than two encoders' worth: one share, untouched.
        let small = split_rows(vec![ids(0..1000), ids(1000..2000)], 8);
        assert_eq!(small.len(), 1);
        assert_eq!(small[0].len(), 2);
        // Never a share under the minimum.
        let two = split_rows(vec![ids(0..(2 * ROWS_PER_ENCODER as i64 + 5))], 8);
        assert_eq!(two.len(), 2);
    }
}
