//! Encoding and uploading data files: batches split into Hive-style partitions, Parquet
//! files rolled at a target size (encoded off the async threads), uploaded while the next
//! ones encode, and described as `add` actions with statistics.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::SchemaRef;
use futures::{FutureExt, StreamExt, TryStreamExt};
use object_store::ObjectStore;
use object_store::path::Path;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use parquet::schema::types::ColumnPath;
use tarn_store::StoreLocation;

use crate::error::{Error, Result};
use crate::paths::uri_encode;
use crate::protocol::{Add, PartitionValues, StructField, StructType};
use crate::snapshot::PartitionColumn;
use crate::stats::stats_json;

use super::encoding::{FileSettings, Input};
use super::partitions::{file_name, split_partitions};
use super::physical::physical_schema;
use super::upload::{Body, FileSink, UPLOAD_CONCURRENCY, tokio_stream_from};

/// Most rows handed to the Parquet writer at a time.
const SLICE_ROWS: usize = 8 * 1024;
/// Rows of the first slice of a file, before its bytes per row are known.
const PROBE_ROWS: usize = 256;

/// How many rows to write next into `file` so that it lands near `target` bytes: a probe
/// slice for a new file, then what the bytes per row so far say still fits.
fn slice_rows(file: Option<&OpenFile>, target: u64) -> usize {
    let Some(file) = file.filter(|f| f.rows > 0) else {
        return PROBE_ROWS;
    };
    let size = (file.writer.bytes_written() + file.writer.in_progress_size()) as f64;
    let per_row = (size / file.rows as f64).max(1e-3);
    let room = (target as f64 - size).max(0.0);
    ((room / per_row).ceil() as usize).clamp(1, SLICE_ROWS)
}

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
    relative: String,
    partition_values: PartitionValues,
    body: Body,
    size: u64,
    stats: String,
    rows: usize,
    captured: Vec<ArrayRef>,
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
    let encoders: Vec<_> = split_rows(batches, encoder_count(&options))
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
        let result = encode(&schema, &partition_columns, batches, &options, None, &tx);
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

/// An open data file of one partition.
struct OpenFile {
    writer: ArrowWriter<FileSink>,
    relative: String,
    partition_values: PartitionValues,
    rows: usize,
    /// Per captured column, the slices written so far.
    captured: Vec<Vec<ArrayRef>>,
}

/// Where large files stream to while they encode: the table's store and root.
pub(super) struct Destination {
    store: Arc<dyn ObjectStore>,
    root: Path,
}

impl Destination {
    pub(super) fn of(location: &StoreLocation) -> Destination {
        Destination {
            store: Arc::clone(location.store()),
            root: location.root().clone(),
        }
    }
}

/// Encodes batches into Parquet files, partition by partition, sending each finished file
/// to the uploader; with a destination, a file that grows large uploads in parts while it
/// encodes. Runs on a blocking thread.
pub(super) fn encode(
    schema: &StructType,
    partition_columns: &[PartitionColumn],
    batches: impl IntoIterator<Item = RecordBatch>,
    options: &FileWriteOptions,
    destination: Option<&Destination>,
    tx: &tokio::sync::mpsc::Sender<Result<EncodedFile>>,
) -> Result<()> {
    let partition_names: Vec<String> = partition_columns.iter().map(|p| p.name.clone()).collect();
    let data_fields: Vec<StructField> = schema
        .fields
        .iter()
        .filter(|f| !partition_names.contains(&f.name))
        .cloned()
        .collect();
    let data_struct = StructType::new(data_fields);
    let file_struct = StructType::new(
        data_struct
            .fields
            .iter()
            .chain(&options.hidden)
            .cloned()
            .collect(),
    );
    // Under column mapping, files hold physical names (and field ids).
    let data_schema: SchemaRef = Arc::new(physical_schema(&file_struct));
    let capture: Vec<String> = options
        .capture
        .iter()
        .map(|name| match schema.field(name) {
            Some(field) => field.physical_name().to_string(),
            None => name.clone(),
        })
        .collect();
    let mut files = Files {
        partition_columns,
        file_struct,
        data_schema,
        data_struct,
        capture,
        options,
        destination,
        tx,
        open: HashMap::new(),
        counter: 0,
        settings: FileSettings::new(options.compression),
    };
    let mut waiting: HashMap<Vec<Option<String>>, Waiting> = HashMap::new();
    // Gathered rows are far below a file's target, so gathering never moves where a
    // file rolls over.
    let gather =
        !partition_columns.is_empty() && options.target_file_size >= 2 * WAITING_BYTES as u64;
    let (file_struct, data_schema) = (files.file_struct.clone(), Arc::clone(&files.data_schema));
    let mut input = Input::new(batches);
    while let Some(batch) = input.next() {
        options.checks.verify(&batch)?;
        for (key, values, part) in
            split_partitions(&batch, partition_columns, &file_struct, &data_schema)?
        {
            // A partition without an open file gathers rows before it opens one.
            let part = if !gather || files.open.contains_key(&key) {
                part
            } else {
                let entry = waiting.entry(key.clone()).or_insert_with(|| Waiting {
                    values: values.clone(),
                    parts: Vec::new(),
                    bytes: 0,
                });
                let part = own_rows(&part)?;
                entry.bytes += part.get_array_memory_size();
                entry.parts.push(part);
                if entry.bytes < WAITING_BYTES {
                    continue;
                }
                match waiting.remove(&key) {
                    Some(entry) => entry.rows(&data_schema)?,
                    None => continue,
                }
            };
            let after = || {
                let split = |b| split_partitions(b, partition_columns, &file_struct, &data_schema);
                input
                    .peek()
                    .iter()
                    .filter_map(|b| split(b).ok())
                    .flatten()
                    .filter(|(k, _, _)| *k == key)
                    .map(|(_, _, part)| part)
                    .collect()
            };
            let props = if files.open.contains_key(&key) {
                None
            } else {
                files.properties(&part, after)
            };
            files.write(&key, &values, &part, props)?;
        }
        if options.file_per_batch {
            // Every file of the batch finishes in the order of its name, as before.
            files.write_waiting(std::mem::take(&mut waiting), false)?;
            files.finish_open()?;
        }
    }
    files.write_waiting(waiting, true)?;
    files.finish_open()
}

/// Arrow bytes a partition's rows gather before its file opens. An open Parquet writer
/// holds encoder state for every column (a dictionary's hash table alone is 72 KiB), and
/// a write met thousands of small partitions in every run of its input: TPC-DS's
/// `store_sales`, 2.9M rows over 1,824 dates in 8 Ki-row batches, took 19 GiB. Their
/// rows wait here, and each file opens, takes them and closes in turn at the end.
const WAITING_BYTES: usize = 1024 * 1024;

/// A copy of `part` holding only its own rows. Parts are slices of one sorted copy of
/// their batch, so a slice kept waiting would keep the whole batch alive (and a
/// single encoder's stream whole), and would be sized by all of it.
fn own_rows(part: &RecordBatch) -> Result<RecordBatch> {
    let all = arrow::array::UInt32Array::from_iter_values(0..part.num_rows() as u32);
    arrow::compute::take_record_batch(part, &all)
        .map_err(Error::arrow("copying a partition's waiting rows"))
}

/// Rows of one partition waiting for its file.
struct Waiting {
    values: PartitionValues,
    parts: Vec<RecordBatch>,
    bytes: usize,
}

impl Waiting {
    /// The waiting rows as one batch (of `schema` when none wait).
    fn rows(self, schema: &SchemaRef) -> Result<RecordBatch> {
        match self.parts.as_slice() {
            [only] => Ok(only.clone()),
            parts => {
                let schema = parts
                    .first()
                    .map_or_else(|| Arc::clone(schema), RecordBatch::schema);
                arrow::compute::concat_batches(&schema, parts)
                    .map_err(Error::arrow("gathering a partition's rows"))
            }
        }
    }
}

/// The files one encoder has open, one per partition, and what opening more takes.
struct Files<'a> {
    partition_columns: &'a [PartitionColumn],
    file_struct: StructType,
    data_schema: SchemaRef,
    data_struct: StructType,
    capture: Vec<String>,
    options: &'a FileWriteOptions,
    destination: Option<&'a Destination>,
    tx: &'a tokio::sync::mpsc::Sender<Result<EncodedFile>>,
    open: HashMap<Vec<Option<String>>, OpenFile>,
    counter: usize,
    settings: FileSettings,
}

impl Files<'_> {
    /// Writer settings for a file whose first rows are `part`, unless the options fix them
    /// or the partition already has a file.
    fn properties(
        &mut self,
        part: &RecordBatch,
        after: impl FnOnce() -> Vec<RecordBatch>,
    ) -> Option<WriterProperties> {
        if self.options.writer_properties.is_some() || part.num_rows() == 0 {
            return None;
        }
        Some(self.settings.of(part, after))
    }

    /// Writes `part` into its partition's file, opening one when there is none and
    /// finishing each that reaches the target size.
    fn write(
        &mut self,
        key: &Vec<Option<String>>,
        values: &PartitionValues,
        part: &RecordBatch,
        mut props: Option<WriterProperties>,
    ) -> Result<()> {
        let options = self.options;
        let mut offset = 0;
        while offset < part.num_rows() {
            let len = slice_rows(self.open.get(key), options.target_file_size)
                .min(part.num_rows() - offset);
            let slice = part.slice(offset, len);
            let rest = part.slice(offset, part.num_rows() - offset);
            offset += len;
            if !self.open.contains_key(key) {
                let props = match (&options.writer_properties, props.take()) {
                    (Some(fixed), _) => fixed.clone(),
                    (None, Some(first)) => first,
                    // A file the target size closed: its successor is judged by what is left.
                    (None, None) => self.settings.of(&rest, Vec::new),
                };
                let file = self.open_file(key, values, props)?;
                self.open.insert(key.clone(), file);
            }
            let Some(file) = self.open.get_mut(key) else {
                continue;
            };
            if let Err(e) = file.writer.write(&slice) {
                return Err(file
                    .writer
                    .inner_mut()
                    .upload_error()
                    .unwrap_or_else(|| Error::parquet(&file.relative)(e)));
            }
            file.rows += slice.num_rows();
            for (name, slices) in self.capture.iter().zip(&mut file.captured) {
                if let Some(column) = slice.column_by_name(name) {
                    slices.push(Arc::clone(column));
                }
            }
            let size = (file.writer.bytes_written() + file.writer.in_progress_size()) as u64;
            if size >= options.target_file_size
                && let Some(full) = self.open.remove(key)
            {
                finish(full, &self.data_schema, &self.data_struct, options, self.tx)?;
            }
        }
        Ok(())
    }

    fn open_file(
        &mut self,
        key: &[Option<String>],
        values: &PartitionValues,
        props: WriterProperties,
    ) -> Result<OpenFile> {
        // Named after the codec the file is written with, as Spark does.
        let codec = props.compression(&ColumnPath::new(Vec::new()));
        let relative = file_name(
            self.partition_columns,
            key,
            self.counter,
            self.options.change_data,
            codec,
        );
        self.counter += 1;
        let sink = FileSink::new(match self.destination {
            Some(d) => Some((
                Arc::clone(&d.store),
                crate::paths::join_relative(&d.root, &relative)?,
            )),
            None => None,
        });
        let writer = ArrowWriter::try_new(sink, Arc::clone(&self.data_schema), Some(props))
            .map_err(Error::parquet(&relative))?;
        Ok(OpenFile {
            writer,
            relative,
            partition_values: values.clone(),
            rows: 0,
            captured: vec![Vec::new(); self.capture.len()],
        })
    }

    /// Writes each waiting partition's rows into a file of its own, in the order of their
    /// keys; with `close`, each file closes before the next opens.
    fn write_waiting(
        &mut self,
        waiting: HashMap<Vec<Option<String>>, Waiting>,
        close: bool,
    ) -> Result<()> {
        let mut waiting: Vec<_> = waiting.into_iter().collect();
        waiting.sort_by(|a, b| a.0.cmp(&b.0));
        for (key, entry) in waiting {
            let values = entry.values.clone();
            let rows = entry.rows(&self.data_schema)?;
            let props = self.properties(&rows, Vec::new);
            self.write(&key, &values, &rows, props)?;
            if close && let Some(file) = self.open.remove(&key) {
                finish(
                    file,
                    &self.data_schema,
                    &self.data_struct,
                    self.options,
                    self.tx,
                )?;
            }
        }
        Ok(())
    }

    /// Finishes every open file, in the order of their names.
    fn finish_open(&mut self) -> Result<()> {
        let mut rest: Vec<_> = self.open.drain().map(|(_, f)| f).collect();
        rest.sort_by(|a, b| a.relative.cmp(&b.relative));
        for file in rest {
            finish(
                file,
                &self.data_schema,
                &self.data_struct,
                self.options,
                self.tx,
            )?;
        }
        Ok(())
    }
}

fn finish(
    file: OpenFile,
    data_schema: &SchemaRef,
    data_struct: &StructType,
    options: &FileWriteOptions,
    tx: &tokio::sync::mpsc::Sender<Result<EncodedFile>>,
) -> Result<()> {
    let OpenFile {
        writer,
        relative,
        partition_values,
        rows,
        captured,
    } = file;
    let captured = captured
        .into_iter()
        .map(|slices| {
            let refs: Vec<&dyn arrow::array::Array> = slices.iter().map(|a| a.as_ref()).collect();
            arrow::compute::concat(&refs).map_err(Error::arrow("capturing indexed columns"))
        })
        .collect::<Result<Vec<ArrayRef>>>()?;
    let mut writer = writer;
    let metadata = match writer.finish() {
        Ok(metadata) => metadata,
        Err(e) => {
            return Err(writer
                .inner_mut()
                .upload_error()
                .unwrap_or_else(|| Error::parquet(&relative)(e)));
        }
    };
    // `finish` has written the footer: the sink has the whole file.
    let sink = std::mem::replace(writer.inner_mut(), FileSink::new(None));
    let size = sink.len();
    let body = sink.finish();
    let stats = stats_json(
        &metadata,
        data_schema,
        data_struct,
        &[],
        options.stats_columns.budget,
        &options.stats_columns.always,
    );
    // A closed channel means the uploader failed; its error is the one reported.
    let _ = tx.blocking_send(Ok(EncodedFile {
        relative,
        partition_values,
        body,
        size,
        stats,
        rows,
        captured,
    }));
    Ok(())
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
    fn a_waiting_part_holds_its_own_rows_not_its_batchs() {
        let whole = ids(0..100_000);
        let slice = whole.slice(10, 100);
        assert!(slice.get_array_memory_size() >= 100_000 * 8);
        let own = own_rows(&slice).unwrap();
        assert!(own.get_array_memory_size() < 100 * 8 * 2);
        assert_eq!(
            own.column(0).as_primitive::<Int64Type>().values().to_vec(),
            (10..110).collect::<Vec<i64>>()
        );
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
