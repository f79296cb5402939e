//! Writing data files: checking batches against the table schema, splitting them into
//! Hive-style partitions, encoding Parquet files up to a target size (off the async
//! threads), uploading them, and describing them as `add` actions with statistics.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions};
use arrow::compute::{SortColumn, lexsort_to_indices, partition, take_record_batch};
use arrow::datatypes::{Schema, SchemaRef};
use bytes::Bytes;
use chrono::Utc;
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload, WriteMultipart};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use tarn_store::StoreLocation;
use uuid::Uuid;

use crate::conform::{Source, conform};
use crate::error::{Error, Result};
use crate::expr::{Expr, Scalar, evaluate_predicate};
use crate::paths::{NULL_PARTITION, hive_escape, uri_encode, validate_name};
use crate::protocol::{Add, DataType, PartitionValues, StructField, StructType};
use crate::snapshot::PartitionColumn;
use crate::stats::stats_json;

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
/// Files uploaded at once.
const UPLOAD_CONCURRENCY: usize = 8;
/// Above this size a file is uploaded in parts.
const MULTIPART_THRESHOLD: usize = 32 * 1024 * 1024;
/// Size of each part of a multipart upload.
const PART_SIZE: usize = 16 * 1024 * 1024;

/// How a write treats the data already in the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WriteMode {
    /// Add the new rows.
    #[default]
    Append,
    /// Replace the table's rows (or, with a predicate, the partitions it names).
    Overwrite,
}

/// Whether a write may change the table schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SchemaMode {
    /// Batches must fit the schema.
    #[default]
    Strict,
    /// Columns the batches have and the table lacks are added (nullable) to the schema.
    AddColumns,
}

/// Checks batches against the table schema (evolving it when allowed) and returns them
/// conformed to the resulting schema, with that schema if it changed.
///
/// Fails with [`Error::SchemaMismatch`] naming the column for unknown columns, types that
/// do not fit, missing non-nullable columns and nulls in non-nullable columns.
pub(crate) fn prepare_batches(
    table: &StructType,
    partition_columns: &[PartitionColumn],
    batches: &[RecordBatch],
    mode: SchemaMode,
) -> Result<(Vec<RecordBatch>, Option<StructType>)> {
    let mut schema = table.clone();
    let mut evolved = false;
    for batch in batches {
        let batch_schema = batch.schema();
        let mut seen = std::collections::HashSet::new();
        for field in batch_schema.fields() {
            if !seen.insert(field.name().as_str()) {
                return Err(Error::SchemaMismatch {
                    reason: format!("the batch has column {:?} twice", field.name()),
                });
            }
            if schema.field(field.name()).is_some() {
                continue;
            }
            match mode {
                SchemaMode::Strict => {
                    return Err(Error::SchemaMismatch {
                        reason: format!(
                            "column {:?} is not in the table (columns: {:?}); write with \
                             SchemaMode::AddColumns to add it",
                            field.name(),
                            schema.field_names()
                        ),
                    });
                }
                SchemaMode::AddColumns => {
                    validate_name("column", field.name())?;
                    let mut added =
                        StructType::try_from_arrow(&Schema::new(vec![field.as_ref().clone()]))?
                            .fields
                            .remove(0);
                    added.nullable = true;
                    schema.fields.push(added);
                    evolved = true;
                }
            }
        }
    }
    let arrow_schema: SchemaRef = Arc::new(schema.to_arrow());
    let partition_names: Vec<&str> = partition_columns.iter().map(|p| p.name.as_str()).collect();
    let conformed = batches
        .iter()
        .filter(|b| b.num_rows() > 0)
        .map(|batch| conform_batch(batch, &schema, &arrow_schema, &partition_names))
        .collect::<Result<Vec<_>>>()?;
    Ok((conformed, evolved.then_some(schema)))
}

fn conform_batch(
    batch: &RecordBatch,
    schema: &StructType,
    arrow_schema: &SchemaRef,
    partitions: &[&str],
) -> Result<RecordBatch> {
    let rows = batch.num_rows();
    let mismatch = |reason: String| Error::SchemaMismatch { reason };
    let columns = schema
        .fields
        .iter()
        .map(|field| match batch.column_by_name(&field.name) {
            Some(column) => conform(column, field, Source::Input).map_err(mismatch),
            None if partitions.contains(&field.name.as_str()) => Err(mismatch(format!(
                "the batch lacks partition column {:?}",
                field.name
            ))),
            None if field.nullable => Ok(arrow::array::new_null_array(
                &field.data_type.to_arrow(),
                rows,
            )),
            None => Err(mismatch(format!(
                "the batch lacks non-nullable column {:?}",
                field.name
            ))),
        })
        .collect::<Result<Vec<ArrayRef>>>()?;
    for (field, column) in schema.fields.iter().zip(&columns) {
        if !field.nullable && column.null_count() > 0 {
            return Err(mismatch(format!(
                "column {:?} is not nullable but the batch holds {} nulls in it",
                field.name,
                column.null_count()
            )));
        }
    }
    RecordBatch::try_new_with_options(
        Arc::clone(arrow_schema),
        columns,
        &RecordBatchOptions::new().with_row_count(Some(rows)),
    )
    .map_err(|e| mismatch(e.to_string()))
}

/// Fails unless every row satisfies `predicate` (for overwrites of the partitions a
/// predicate names: data outside them would be lost on the next such overwrite).
pub(crate) fn ensure_rows_match(batches: &[RecordBatch], predicate: &Expr) -> Result<()> {
    for batch in batches {
        let mask = evaluate_predicate(predicate, batch)?;
        let matching = mask.true_count();
        if matching != batch.num_rows() {
            return Err(Error::InvalidArgument {
                name: "replace_where",
                reason: format!(
                    "{} of {} rows written do not satisfy the overwrite predicate {predicate}",
                    batch.num_rows() - matching,
                    batch.num_rows()
                ),
            });
        }
    }
    Ok(())
}

/// Settings of one data write.
#[derive(Debug, Clone)]
pub(crate) struct FileWriteOptions {
    pub(crate) target_file_size: u64,
    pub(crate) num_indexed_cols: i64,
    pub(crate) writer_properties: Option<WriterProperties>,
}

/// One encoded data file, ready to upload.
struct EncodedFile {
    relative: String,
    partition_values: PartitionValues,
    bytes: Bytes,
    stats: String,
    rows: usize,
}

/// What writing data files produced.
#[derive(Debug, Clone, Default)]
pub(crate) struct WrittenFiles {
    pub(crate) adds: Vec<Add>,
    pub(crate) rows: u64,
    pub(crate) bytes: u64,
}

/// Writes conformed batches as data files under the table root and returns their `add`
/// actions. Nothing is committed: files of a write that never commits are orphans that
/// `vacuum` removes.
pub(crate) async fn write_files(
    location: &StoreLocation,
    schema: &StructType,
    partition_columns: &[PartitionColumn],
    batches: Vec<RecordBatch>,
    options: &FileWriteOptions,
) -> Result<WrittenFiles> {
    if batches.is_empty() {
        return Ok(WrittenFiles::default());
    }
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<EncodedFile>>(UPLOAD_CONCURRENCY);
    let schema = schema.clone();
    let partition_columns = partition_columns.to_vec();
    let options = options.clone();
    let encoder = tokio::task::spawn_blocking(move || {
        let result = encode(&schema, &partition_columns, batches, &options, &tx);
        if let Err(e) = result {
            let _ = tx.blocking_send(Err(e));
        }
    });
    let store = Arc::clone(location.store());
    let root = location.root().clone();
    let now = Utc::now().timestamp_millis();
    let uploads: Vec<(Add, u64)> = tokio_stream_from(rx)
        .map(|file| {
            let store = Arc::clone(&store);
            let root = root.clone();
            async move {
                let file = file?;
                let path = crate::paths::join_relative(&root, &file.relative)?;
                let size = file.bytes.len();
                upload(store.as_ref(), &path, file.bytes).await?;
                let add = Add {
                    path: uri_encode(&file.relative),
                    partition_values: file.partition_values,
                    size: size as i64,
                    modification_time: now,
                    data_change: true,
                    stats: Some(file.stats),
                    tags: None,
                    deletion_vector: None,
                    base_row_id: None,
                    default_row_commit_version: None,
                    clustering_provider: None,
                };
                Ok::<_, Error>((add, file.rows as u64))
            }
        })
        .buffer_unordered(UPLOAD_CONCURRENCY)
        .try_collect()
        .await?;
    encoder.await.map_err(|e| Error::Task(e.to_string()))?;
    let mut written = WrittenFiles::default();
    for (add, rows) in uploads {
        written.rows += rows;
        written.bytes += add.size as u64;
        written.adds.push(add);
    }
    // Deterministic order in the commit, whatever order uploads finished in.
    written.adds.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(written)
}

fn tokio_stream_from<T: Send + 'static>(
    mut rx: tokio::sync::mpsc::Receiver<T>,
) -> futures::stream::BoxStream<'static, T> {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx)).boxed()
}

async fn upload(store: &dyn ObjectStore, path: &Path, bytes: Bytes) -> Result<()> {
    if bytes.len() <= MULTIPART_THRESHOLD {
        store
            .put(path, PutPayload::from_bytes(bytes))
            .await
            .map_err(Error::store("put", path))?;
        return Ok(());
    }
    let upload = store
        .put_multipart(path)
        .await
        .map_err(Error::store("put_multipart", path))?;
    let mut writer = WriteMultipart::new_with_chunk_size(upload, PART_SIZE);
    writer.put(bytes);
    writer
        .finish()
        .await
        .map_err(Error::store("put_multipart", path))?;
    Ok(())
}

/// An open data file of one partition.
struct OpenFile {
    writer: ArrowWriter<Vec<u8>>,
    relative: String,
    partition_values: PartitionValues,
    rows: usize,
}

/// Encodes batches into Parquet files, partition by partition, sending each finished file
/// to the uploader. Runs on a blocking thread.
fn encode(
    schema: &StructType,
    partition_columns: &[PartitionColumn],
    batches: Vec<RecordBatch>,
    options: &FileWriteOptions,
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
    let data_schema: SchemaRef = Arc::new(data_struct.to_arrow());
    let props = options.writer_properties.clone().unwrap_or_else(|| {
        WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .build()
    });
    let mut open: HashMap<Vec<Option<String>>, OpenFile> = HashMap::new();
    let mut counter = 0usize;
    for batch in batches {
        for (key, values, part) in split_partitions(&batch, partition_columns, &data_schema)? {
            let mut offset = 0;
            while offset < part.num_rows() {
                let len = slice_rows(open.get(&key), options.target_file_size)
                    .min(part.num_rows() - offset);
                let slice = part.slice(offset, len);
                offset += len;
                let file = match open.get_mut(&key) {
                    Some(f) => f,
                    None => {
                        let relative = file_name(partition_columns, &key, counter);
                        counter += 1;
                        let writer = ArrowWriter::try_new(
                            Vec::new(),
                            Arc::clone(&data_schema),
                            Some(props.clone()),
                        )
                        .map_err(Error::parquet(&relative))?;
                        open.entry(key.clone()).or_insert(OpenFile {
                            writer,
                            relative,
                            partition_values: values.clone(),
                            rows: 0,
                        })
                    }
                };
                file.writer
                    .write(&slice)
                    .map_err(Error::parquet(&file.relative))?;
                file.rows += slice.num_rows();
                let size = (file.writer.bytes_written() + file.writer.in_progress_size()) as u64;
                if size >= options.target_file_size
                    && let Some(full) = open.remove(&key)
                {
                    finish(full, &data_schema, &data_struct, options, tx)?;
                }
            }
        }
    }
    let mut rest: Vec<_> = open.into_values().collect();
    rest.sort_by(|a, b| a.relative.cmp(&b.relative));
    for file in rest {
        finish(file, &data_schema, &data_struct, options, tx)?;
    }
    Ok(())
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
    } = file;
    let mut writer = writer;
    let metadata = writer.finish().map_err(Error::parquet(&relative))?;
    // `finish` has written the footer; the buffer now holds the whole file.
    let bytes = Bytes::from(std::mem::take(writer.inner_mut()));
    let stats = stats_json(
        &metadata,
        data_schema,
        data_struct,
        &[],
        options.num_indexed_cols,
    );
    tx.blocking_send(Ok(EncodedFile {
        relative,
        partition_values,
        bytes,
        stats,
        rows,
    }))
    .map_err(|_| Error::Task("the upload of data files stopped".into()))
}

/// `[p1=v1/p2=v2/]part-<n>-<uuid>-c000.snappy.parquet`
fn file_name(
    partition_columns: &[PartitionColumn],
    key: &[Option<String>],
    counter: usize,
) -> String {
    let mut path = String::new();
    for (column, value) in partition_columns.iter().zip(key) {
        let value = match value {
            Some(v) => hive_escape(v),
            None => NULL_PARTITION.to_string(),
        };
        path.push_str(&format!("{}={value}/", hive_escape(&column.physical_name)));
    }
    path.push_str(&format!(
        "part-{counter:05}-{}-c000.snappy.parquet",
        Uuid::new_v4()
    ));
    path
}

type PartitionGroup = (Vec<Option<String>>, PartitionValues, RecordBatch);

/// Splits a batch (in table schema) into one batch per partition, each without the
/// partition columns, with the partition's serialized values.
fn split_partitions(
    batch: &RecordBatch,
    partition_columns: &[PartitionColumn],
    data_schema: &SchemaRef,
) -> Result<Vec<PartitionGroup>> {
    let data_indices: Vec<usize> = data_schema
        .fields()
        .iter()
        .filter_map(|f| batch.schema().index_of(f.name()).ok())
        .collect();
    let project = |b: &RecordBatch| -> Result<RecordBatch> {
        let projected = b
            .project(&data_indices)
            .map_err(Error::arrow("splitting partitions"))?;
        RecordBatch::try_new_with_options(
            Arc::clone(data_schema),
            projected.columns().to_vec(),
            &RecordBatchOptions::new().with_row_count(Some(b.num_rows())),
        )
        .map_err(Error::arrow("splitting partitions"))
    };
    if partition_columns.is_empty() {
        return Ok(vec![(Vec::new(), PartitionValues::new(), project(batch)?)]);
    }
    let keys: Vec<ArrayRef> = partition_columns
        .iter()
        .map(|p| {
            batch
                .column_by_name(&p.name)
                .cloned()
                .ok_or_else(|| Error::SchemaMismatch {
                    reason: format!("the batch lacks partition column {:?}", p.name),
                })
        })
        .collect::<Result<_>>()?;
    let sort: Vec<SortColumn> = keys
        .iter()
        .map(|values| SortColumn {
            values: Arc::clone(values),
            options: None,
        })
        .collect();
    let indices = lexsort_to_indices(&sort, None).map_err(Error::arrow("sorting by partition"))?;
    let sorted =
        take_record_batch(batch, &indices).map_err(Error::arrow("sorting by partition"))?;
    let sorted_keys: Vec<ArrayRef> = partition_columns
        .iter()
        .filter_map(|p| sorted.column_by_name(&p.name).cloned())
        .collect();
    let ranges = partition(&sorted_keys).map_err(Error::arrow("splitting partitions"))?;
    let mut groups = Vec::new();
    for range in ranges.ranges() {
        let part = sorted.slice(range.start, range.end - range.start);
        let mut key = Vec::with_capacity(partition_columns.len());
        let mut values = PartitionValues::new();
        for (column, array) in partition_columns.iter().zip(&sorted_keys) {
            let value = Scalar::from_array(array.as_ref(), range.start, column.data_type)
                .unwrap_or(Scalar::Null)
                .to_partition_string()
                // Spark writes an empty string partition as null.
                .filter(|s| !s.is_empty());
            key.push(value.clone());
            values.insert(column.physical_name.clone(), value);
        }
        groups.push((key, values, project(&part)?));
    }
    Ok(groups)
}

/// Validates the partition columns given at create: each must be a primitive column of
/// the schema, named once.
pub(crate) fn validate_partition_columns(schema: &StructType, columns: &[String]) -> Result<()> {
    for (i, name) in columns.iter().enumerate() {
        validate_name("partition column", name)?;
        let field = schema.field(name).ok_or_else(|| Error::UnknownColumn {
            column: name.clone(),
            available: schema.field_names(),
        })?;
        if !matches!(field.data_type, DataType::Primitive(_)) {
            return Err(Error::InvalidArgument {
                name: "partition_columns",
                reason: format!(
                    "{name:?} has type {}, partition columns must be primitive",
                    field.data_type
                ),
            });
        }
        if columns[..i].contains(name) {
            return Err(Error::InvalidArgument {
                name: "partition_columns",
                reason: format!("{name:?} is listed twice"),
            });
        }
    }
    if !columns.is_empty() && columns.len() == schema.fields.len() {
        return Err(Error::InvalidArgument {
            name: "partition_columns",
            reason: "at least one column must not be a partition column".into(),
        });
    }
    Ok(())
}
