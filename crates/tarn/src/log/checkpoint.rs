//! Checkpoints: reading classic, multi-part and V2 (JSON or Parquet, with sidecars)
//! checkpoints, and writing classic ones with `_last_checkpoint`.

use std::sync::Arc;

use arrow::array::{AsArray, RecordBatch, UInt32Array};
use arrow::compute::take_record_batch;
use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef};
use bytes::Bytes;
use futures::{FutureExt, StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt, PutPayload};
use parquet::arrow::ArrowWriter;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ParquetRecordBatchReaderBuilder};
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use parquet::file::reader::ChunkReader;
use serde::Serialize;

use super::parsed_stats::CheckpointLayout;
use super::projected;
use super::{CheckpointFiles, LOG_READ_CONCURRENCY, file_actions, log_dir, parse_commit};
use crate::error::{Error, Result};
use crate::expr::Scalar;
use crate::protocol::names::{CheckpointKind, LAST_CHECKPOINT, SIDECARS_DIR, checkpoint_file_name};
use crate::protocol::{Action, Sidecar};

/// Top-level checkpoint columns Tarn skips: `commitInfo` and `cdc` never matter in a
/// checkpoint.
const SKIPPED_ROOTS: &[&str] = &["commitInfo", "cdc"];

/// Whether a checkpoint leaf column is read. Of an `add`'s statistics only one form is:
/// the typed `stats_parsed` when the checkpoint has it (no JSON to decode, copy or parse),
/// else the JSON `stats`. Other `*_parsed` columns duplicate what their text fields hold.
fn wanted_leaf(parts: &[String], typed_stats: bool) -> bool {
    let part = |i: usize| parts.get(i).map(String::as_str);
    if part(0).is_some_and(|root| SKIPPED_ROOTS.contains(&root)) {
        return false;
    }
    match (part(0), part(1)) {
        (Some("add"), Some("stats")) => !typed_stats,
        (Some("add"), Some("stats_parsed")) => typed_stats,
        (_, Some(field)) if field.ends_with("_parsed") => false,
        _ => true,
    }
}

/// Actions per row group of the checkpoints Tarn writes.
const CHECKPOINT_ROW_GROUP: usize = 16 * 1024;

/// Reads every action of a checkpoint, following V2 sidecars.
///
/// Fails with [`Error::InvalidCheckpoint`] naming the file when a part or sidecar is
/// missing, truncated or not a checkpoint.
pub(crate) async fn read_checkpoint(
    store: &dyn ObjectStore,
    root: &Path,
    checkpoint: &CheckpointFiles,
) -> Result<Vec<Action>> {
    let json = matches!(checkpoint.kind, CheckpointKind::V2 { json: true });
    let parts: Vec<Vec<Action>> = futures::stream::iter(checkpoint.files.iter().cloned())
        .map(|meta| {
            async move {
                if json {
                    let bytes = get_bytes(store, &meta.location).await?;
                    parse_commit(checkpoint.version, &bytes)
                        .map_err(|e| invalid(&meta.location, e.to_string()))
                } else {
                    read_parquet_part(store, &meta).await
                }
            }
            .boxed()
        })
        .buffered(LOG_READ_CONCURRENCY)
        .try_collect()
        .await?;
    let mut actions: Vec<Action> = parts.into_iter().flatten().collect();

    let sidecars: Vec<Sidecar> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Sidecar(s) => Some(s.clone()),
            _ => None,
        })
        .collect();
    if !sidecars.is_empty() {
        let sidecar_dir = log_dir(root).join(SIDECARS_DIR);
        let loaded: Vec<Vec<Action>> = futures::stream::iter(sidecars)
            .map(|s| {
                {
                    let path = sidecar_dir.clone().join(s.path.as_str());
                    async move {
                        let bytes = get_bytes(store, &path).await?;
                        crate::tasks::blocking("decoding a checkpoint sidecar", move || {
                            parse_checkpoint_parquet(bytes, &path)
                        })
                        .await
                    }
                }
                .boxed()
            })
            .buffered(LOG_READ_CONCURRENCY)
            .try_collect()
            .await?;
        actions.extend(loaded.into_iter().flatten());
    }
    Ok(actions)
}

fn invalid(path: &Path, reason: impl Into<String>) -> Error {
    Error::InvalidCheckpoint {
        path: path.to_string(),
        reason: reason.into(),
    }
}

async fn get_bytes(store: &dyn ObjectStore, path: &Path) -> Result<Bytes> {
    match store.get(path).await {
        Ok(r) => r.bytes().await.map_err(Error::store("get", path)),
        Err(object_store::Error::NotFound { .. }) => Err(invalid(path, "the file is missing")),
        Err(e) => Err(Error::store("get", path)(e)),
    }
}

/// Reads one Parquet part of a checkpoint. A large one is read by its footer and then
/// only the column chunks Tarn decodes; a small one whole, in one request.
async fn read_parquet_part(store: &dyn ObjectStore, meta: &ObjectMeta) -> Result<Vec<Action>> {
    let path = meta.location.clone();
    if meta.size <= projected::WHOLE_BELOW {
        let bytes = get_bytes(store, &path).await?;
        return crate::tasks::blocking("decoding a checkpoint", move || {
            parse_checkpoint_parquet(bytes, &path)
        })
        .await;
    }
    let metadata = projected::footer(store, meta).await?;
    let leaves = leaves_read(&metadata);
    let file = projected::fetch_columns(store, meta, &metadata, &leaves).await?;
    crate::tasks::blocking("decoding a checkpoint", move || {
        guarded(&path, || decode_checkpoint(file, metadata, leaves, &path))
    })
    .await
}

/// Decodes a checkpoint Parquet file into actions: `add` and `remove` rows straight from
/// their columns, the few others by way of JSON.
pub(crate) fn parse_checkpoint_parquet(bytes: Bytes, path: &Path) -> Result<Vec<Action>> {
    guarded(path, || {
        let metadata = ArrowReaderMetadata::load(&bytes, Default::default())
            .map_err(|e| invalid(path, e.to_string()))?;
        let leaves = leaves_read(&metadata);
        decode_checkpoint(bytes, metadata, leaves, path)
    })
}

/// Runs a decode, turning a panic of the Parquet decoder (it panics on some corrupt
/// footers) into the error of a corrupt checkpoint.
fn guarded(path: &Path, decode: impl FnOnce() -> Result<Vec<Action>>) -> Result<Vec<Action>> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(decode)).unwrap_or_else(|panic| {
        Err(invalid(
            path,
            format!(
                "the Parquet decoder failed: {}",
                crate::reader::panic_message(&panic)
            ),
        ))
    })
}

/// The leaf columns of a checkpoint Tarn decodes.
fn leaves_read(metadata: &ArrowReaderMetadata) -> Vec<usize> {
    let descr = metadata.metadata().file_metadata().schema_descr();
    let typed_stats = (0..descr.num_columns()).any(|i| {
        let column = descr.column(i);
        let parts = column.path().parts();
        parts.len() > 2 && parts[0] == "add" && parts[1] == "stats_parsed"
    });
    (0..descr.num_columns())
        .filter(|i| wanted_leaf(descr.column(*i).path().parts(), typed_stats))
        .collect()
}

fn decode_checkpoint<R: ChunkReader + Clone + 'static>(
    file: R,
    metadata: ArrowReaderMetadata,
    leaves: Vec<usize>,
    path: &Path,
) -> Result<Vec<Action>> {
    let bad = |e: &dyn std::fmt::Display| invalid(path, e.to_string());
    let descr = metadata.metadata().file_metadata().schema_descr_ptr();
    let mask = ProjectionMask::leaves(&descr, leaves);
    // Row groups decode on one thread per core (a checkpoint of 100,000 files is most of
    // a cold open's work); the caller runs this off the async threads.
    let groups = metadata.metadata().num_row_groups();
    let threads = crate::tasks::cores().min(groups).max(1);
    let decode_groups = |row_groups: Vec<usize>| -> Result<Vec<Action>> {
        let reader =
            ParquetRecordBatchReaderBuilder::new_with_metadata(file.clone(), metadata.clone())
                .with_projection(mask.clone())
                .with_row_groups(row_groups)
                .with_batch_size(8192)
                .build()
                .map_err(|e| bad(&e))?;
        decode_batches(reader, path)
    };
    if threads <= 1 {
        return decode_groups((0..groups).collect());
    }
    let shares: Vec<Vec<usize>> = (0..threads)
        .map(|t| (t..groups).step_by(threads).collect())
        .collect();
    let decoded: Vec<Result<Vec<Action>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = shares
            .into_iter()
            .map(|share| scope.spawn(|| decode_groups(share)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|panic| {
                    Err(bad(&format!(
                        "the Parquet decoder failed: {}",
                        crate::reader::panic_message(&panic)
                    )))
                })
            })
            .collect()
    });
    let mut actions = Vec::new();
    for part in decoded {
        actions.extend(part?);
    }
    Ok(actions)
}

fn decode_batches(
    reader: parquet::arrow::arrow_reader::ParquetRecordBatchReader,
    path: &Path,
) -> Result<Vec<Action>> {
    let bad = |e: &dyn std::fmt::Display| invalid(path, e.to_string());
    let mut actions = Vec::new();
    for batch in reader {
        let batch = batch.map_err(|e| bad(&e))?;
        let column = |name: &str| batch.column_by_name(name).and_then(|c| c.as_struct_opt());
        match file_actions::decode(column("add"), column("remove"), batch.num_rows()) {
            Some((files, others)) => {
                actions.extend(files);
                if !others.is_empty() {
                    let rest: Vec<usize> = (0..batch.num_columns())
                        .filter(|&i| {
                            !matches!(batch.schema().field(i).name().as_str(), "add" | "remove")
                        })
                        .collect();
                    let rest = batch.project(&rest).map_err(|e| bad(&e))?;
                    let rows = UInt32Array::from(others);
                    let rest = take_record_batch(&rest, &rows).map_err(|e| bad(&e))?;
                    actions.extend(actions_via_json(&rest).map_err(|e| bad(&e))?);
                }
            }
            None => actions.extend(actions_via_json(&batch).map_err(|e| bad(&e))?),
        }
    }
    Ok(actions)
}

/// Decodes the actions of a checkpoint batch by way of JSON: each row holds one non-null
/// top-level struct, which serializes to exactly the action's JSON form.
fn actions_via_json(batch: &RecordBatch) -> Result<Vec<Action>> {
    let mut json = Vec::new();
    {
        let mut writer = arrow::json::LineDelimitedWriter::new(&mut json);
        writer
            .write(batch)
            .map_err(Error::arrow("writing checkpoint rows as JSON"))?;
        writer
            .finish()
            .map_err(Error::arrow("writing checkpoint rows as JSON"))?;
    }
    match parse_commit(0, &Bytes::from(json)) {
        Ok(actions) => Ok(actions),
        // A batch of rows that are all null serializes to nothing at all.
        Err(Error::InvalidCommit { reason, .. }) if reason == "the commit is empty" => Ok(vec![]),
        Err(e) => Err(e),
    }
}

fn string_map(name: &str) -> Field {
    Field::new(
        name,
        DataType::Map(
            Arc::new(Field::new(
                "key_value",
                DataType::Struct(Fields::from(vec![
                    Field::new("key", DataType::Utf8, false),
                    Field::new("value", DataType::Utf8, true),
                ])),
                false,
            )),
            false,
        ),
        true,
    )
}

fn deletion_vector() -> Field {
    Field::new(
        "deletionVector",
        DataType::Struct(Fields::from(vec![
            Field::new("storageType", DataType::Utf8, true),
            Field::new("pathOrInlineDv", DataType::Utf8, true),
            Field::new("offset", DataType::Int32, true),
            Field::new("sizeInBytes", DataType::Int32, true),
            Field::new("cardinality", DataType::Int64, true),
        ])),
        true,
    )
}

fn strings(name: &str) -> Field {
    Field::new(
        name,
        DataType::List(Arc::new(Field::new("element", DataType::Utf8, true))),
        true,
    )
}

/// The schema of the checkpoints Tarn writes, as Spark writes them: the classic columns,
/// plus the typed ones `layout` asks for at the end of `add`.
pub(crate) fn checkpoint_schema(layout: &CheckpointLayout) -> SchemaRef {
    let s = |fields: Vec<Field>| DataType::Struct(Fields::from(fields));
    Arc::new(Schema::new(vec![
        Field::new(
            "txn",
            s(vec![
                Field::new("appId", DataType::Utf8, true),
                Field::new("version", DataType::Int64, true),
                Field::new("lastUpdated", DataType::Int64, true),
            ]),
            true,
        ),
        Field::new(
            "add",
            s(vec![
                Field::new("path", DataType::Utf8, true),
                string_map("partitionValues"),
                Field::new("size", DataType::Int64, true),
                Field::new("modificationTime", DataType::Int64, true),
                Field::new("dataChange", DataType::Boolean, true),
                string_map("tags"),
                deletion_vector(),
                Field::new("baseRowId", DataType::Int64, true),
                Field::new("defaultRowCommitVersion", DataType::Int64, true),
                Field::new("clusteringProvider", DataType::Utf8, true),
                Field::new("stats", DataType::Utf8, true),
            ]
            .into_iter()
            .chain(layout.add_fields())
            .collect()),
            true,
        ),
        Field::new(
            "remove",
            s(vec![
                Field::new("path", DataType::Utf8, true),
                Field::new("deletionTimestamp", DataType::Int64, true),
                Field::new("dataChange", DataType::Boolean, true),
                Field::new("extendedFileMetadata", DataType::Boolean, true),
                string_map("partitionValues"),
                Field::new("size", DataType::Int64, true),
                string_map("tags"),
                deletion_vector(),
                Field::new("baseRowId", DataType::Int64, true),
                Field::new("defaultRowCommitVersion", DataType::Int64, true),
            ]),
            true,
        ),
        Field::new(
            "metaData",
            s(vec![
                Field::new("id", DataType::Utf8, true),
                Field::new("name", DataType::Utf8, true),
                Field::new("description", DataType::Utf8, true),
                Field::new(
                    "format",
                    s(vec![
                        Field::new("provider", DataType::Utf8, true),
                        string_map("options"),
                    ]),
                    true,
                ),
                Field::new("schemaString", DataType::Utf8, true),
                strings("partitionColumns"),
                string_map("configuration"),
                Field::new("createdTime", DataType::Int64, true),
            ]),
            true,
        ),
        Field::new(
            "protocol",
            s(vec![
                Field::new("minReaderVersion", DataType::Int32, true),
                Field::new("minWriterVersion", DataType::Int32, true),
                strings("readerFeatures"),
                strings("writerFeatures"),
            ]),
            true,
        ),
        Field::new(
            "domainMetadata",
            s(vec![
                Field::new("domain", DataType::Utf8, true),
                Field::new("configuration", DataType::Utf8, true),
                Field::new("removed", DataType::Boolean, true),
            ]),
            true,
        ),
    ]))
}

/// Encodes actions as a checkpoint Parquet file with the columns `layout` asks for.
///
/// When some file's statistics do not fit their typed columns (a value of another type
/// than its column's), the checkpoint is written with JSON statistics only: typed ones
/// only speed reading up.
pub(crate) fn encode_checkpoint(actions: &[Action], layout: &CheckpointLayout) -> Result<Bytes> {
    match encode_with(actions, layout) {
        Err(Error::Arrow { .. }) if layout.stats_parsed.is_some() => {
            encode_with(actions, &CheckpointLayout::classic())
        }
        other => other,
    }
}

/// One action as a JSON line of the checkpoint schema, typed columns included.
fn action_line(action: &Action, layout: &CheckpointLayout, out: &mut Vec<u8>) -> Result<()> {
    let serialize = |source| Error::Serialize {
        what: "a checkpoint action".into(),
        source,
    };
    let Action::Add(add) = action else {
        serde_json::to_writer(&mut *out, action).map_err(serialize)?;
        out.push(b'\n');
        return Ok(());
    };
    let mut bare = add.clone();
    let stats = bare.stats.take().map(|s| s.json().into_owned());
    let body = serde_json::to_string(&bare).map_err(serialize)?;
    // `body` is a JSON object: the typed fields go before its closing brace.
    out.extend_from_slice(b"{\"add\":");
    out.extend_from_slice(&body.as_bytes()[..body.len() - 1]);
    if let Some(stats) = &stats {
        if layout.stats_as_json {
            out.extend_from_slice(b",\"stats\":");
            serde_json::to_writer(&mut *out, stats).map_err(serialize)?;
        }
        if layout.stats_parsed.is_some() && stats.trim_start().starts_with('{') {
            out.extend_from_slice(b",\"stats_parsed\":");
            out.extend_from_slice(stats.as_bytes());
        }
    }
    if !layout.partitions.is_empty() {
        out.extend_from_slice(b",\"partitionValues_parsed\":{");
        for (i, (name, ty)) in layout.partitions.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            serde_json::to_writer(&mut *out, name).map_err(serialize)?;
            out.push(b':');
            let value = add
                .partition_values
                .get(name)
                .and_then(|v| Scalar::parse_partition(v.as_deref(), *ty).ok())
                .and_then(|v| v.to_stats_json());
            out.extend_from_slice(value.as_deref().unwrap_or("null").as_bytes());
        }
        out.push(b'}');
    }
    out.extend_from_slice(b"}}\n");
    Ok(())
}

fn encode_with(actions: &[Action], layout: &CheckpointLayout) -> Result<Bytes> {
    let schema = checkpoint_schema(layout);
    let context = "encoding a checkpoint";
    let mut decoder = arrow::json::ReaderBuilder::new(Arc::clone(&schema))
        .with_batch_size(8192)
        .build_decoder()
        .map_err(Error::arrow(context))?;
    let mut batches: Vec<RecordBatch> = Vec::new();
    // A window of actions at a time (bounded memory), its JSON lines rendered on every
    // core (typed statistics render their JSON text here).
    for window in actions.chunks(CHECKPOINT_ROW_GROUP) {
        let parts = crate::tasks::on_cores(window, 1024, |run| {
            let mut json = Vec::new();
            for action in run {
                action_line(action, layout, &mut json)?;
            }
            Ok::<_, Error>(json)
        });
        for json in parts {
            let json = json?;
            let mut rest: &[u8] = &json;
            while !rest.is_empty() {
                let read = decoder.decode(rest).map_err(Error::arrow(context))?;
                rest = &rest[read..];
                if let Some(batch) = decoder.flush().map_err(Error::arrow(context))? {
                    batches.push(batch);
                }
            }
        }
    }
    if let Some(batch) = decoder.flush().map_err(Error::arrow(context))? {
        batches.push(batch);
    }
    // Row groups of 16K actions let readers decode a large checkpoint on every core.
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_row_count(Some(CHECKPOINT_ROW_GROUP))
        .build();
    let mut buffer = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut buffer, schema, Some(props))
        .map_err(Error::parquet("checkpoint"))?;
    for batch in &batches {
        writer.write(batch).map_err(Error::parquet("checkpoint"))?;
    }
    writer.close().map_err(Error::parquet("checkpoint"))?;
    Ok(Bytes::from(buffer))
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LastCheckpoint {
    version: i64,
    size: i64,
    size_in_bytes: i64,
    num_of_add_files: i64,
}

/// What writing a checkpoint produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckpointWritten {
    /// The version checkpointed.
    pub version: i64,
    /// Actions in it.
    pub actions: usize,
    /// Its size in bytes.
    pub size_in_bytes: u64,
}

/// Writes `<version>.checkpoint.parquet` and then `_last_checkpoint`. The checkpoint is
/// written whole before the hint names it, so a reader never follows the hint to a
/// partial file. Encoding runs off the async threads.
pub(crate) async fn write_checkpoint(
    store: &dyn ObjectStore,
    root: &Path,
    version: i64,
    actions: Vec<Action>,
    layout: CheckpointLayout,
) -> Result<CheckpointWritten> {
    let adds = actions
        .iter()
        .filter(|a| matches!(a, Action::Add(_)))
        .count() as i64;
    let count = actions.len();
    let bytes = crate::tasks::blocking("encoding a checkpoint", move || {
        encode_checkpoint(&actions, &layout)
    })
    .await?;
    let size = bytes.len() as u64;
    let dir = log_dir(root);
    let path = dir.clone().join(checkpoint_file_name(version));
    store
        .put(&path, PutPayload::from_bytes(bytes))
        .await
        .map_err(Error::store("put", &path))?;
    let hint = LastCheckpoint {
        version,
        size: count as i64,
        size_in_bytes: size as i64,
        num_of_add_files: adds,
    };
    let hint_path = dir.clone().join(LAST_CHECKPOINT);
    let json = serde_json::to_vec(&hint).map_err(|source| Error::Serialize {
        what: "_last_checkpoint".into(),
        source,
    })?;
    store
        .put(&hint_path, PutPayload::from(json))
        .await
        .map_err(Error::store("put", &hint_path))?;
    Ok(CheckpointWritten {
        version,
        actions: count,
        size_in_bytes: size,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Add, DeletionVectorDescriptor, Metadata, Protocol, Remove, Txn};

    fn decode_batches_of(batch: &RecordBatch) -> Vec<Action> {
        let column = |name: &str| batch.column_by_name(name).and_then(|c| c.as_struct_opt());
        let (mut files, others) =
            file_actions::decode(column("add"), column("remove"), batch.num_rows()).unwrap();
        assert_eq!(
            others.len(),
            3,
            "protocol, metaData and txn rows go by way of JSON"
        );
        let rest: Vec<usize> = (0..batch.num_columns())
            .filter(|&i| !matches!(batch.schema().field(i).name().as_str(), "add" | "remove"))
            .collect();
        let rest =
            take_record_batch(&batch.project(&rest).unwrap(), &UInt32Array::from(others)).unwrap();
        files.extend(actions_via_json(&rest).unwrap());
        files
    }

    #[test]
    fn checkpoints_round_trip_every_action_kind() {
        let mut partition_values = crate::protocol::PartitionValues::new();
        partition_values.insert("p".into(), Some("a b".into()));
        partition_values.insert("q".into(), None);
        let actions = vec![
            Action::Protocol(Protocol {
                min_reader_version: 3,
                min_writer_version: 7,
                reader_features: Some(vec!["deletionVectors".into()]),
                writer_features: Some(vec!["deletionVectors".into()]),
            }),
            Action::Metadata(Metadata {
                id: "id".into(),
                name: None,
                description: None,
                format: Default::default(),
                schema_string: r#"{"type":"struct","fields":[]}"#.into(),
                partition_columns: vec!["p".into(), "q".into()],
                configuration: [(
                    "delta.checkpointInterval".to_string(),
                    Some("5".to_string()),
                )]
                .into_iter()
                .collect(),
                created_time: Some(1),
            }),
            Action::Txn(Txn {
                app_id: "app".into(),
                version: 9,
                last_updated: None,
            }),
            Action::Add(Add {
                path: "p=a%20b/q=__HIVE_DEFAULT_PARTITION__/f.parquet".into(),
                partition_values,
                size: 10,
                modification_time: 2,
                data_change: false,
                stats: Some(r#"{"numRecords":3}"#.into()),
                tags: None,
                deletion_vector: Some(DeletionVectorDescriptor {
                    storage_type: "u".into(),
                    path_or_inline_dv: "h{&8fAg]=QYJvl-}c!yH".into(),
                    offset: Some(1),
                    size_in_bytes: 34,
                    cardinality: 1,
                }),
                base_row_id: None,
                default_row_commit_version: None,
                clustering_provider: None,
            }),
            Action::Remove(Remove {
                path: "old.parquet".into(),
                deletion_timestamp: Some(5),
                data_change: true,
                extended_file_metadata: None,
                partition_values: None,
                size: Some(3),
                stats: None,
                tags: None,
                deletion_vector: None,
                base_row_id: None,
                default_row_commit_version: None,
            }),
        ];
        let bytes = encode_checkpoint(&actions, &CheckpointLayout::classic()).unwrap();
        let read = parse_checkpoint_parquet(bytes, &Path::from("cp")).unwrap();
        // Files decode from their columns and the rest by way of JSON: the order of a
        // checkpoint's actions carries no meaning. A null partition value may come back
        // as an absent key (by way of JSON); both mean null.
        let sorted = |actions: &[Action]| {
            let mut text: Vec<String> = actions
                .iter()
                .cloned()
                .map(|mut a| {
                    if let Action::Add(add) = &mut a {
                        add.partition_values.entry("q".into()).or_insert(None);
                    }
                    format!("{a:?}")
                })
                .collect();
            text.sort();
            text
        };
        assert_eq!(sorted(&read), sorted(&actions));
        // The column decoder and the JSON one agree on every row.
        let reader = ParquetRecordBatchReaderBuilder::try_new(
            encode_checkpoint(&actions, &CheckpointLayout::classic()).unwrap(),
        )
        .unwrap()
        .build()
        .unwrap();
        for batch in reader {
            let batch = batch.unwrap();
            let direct = decode_batches_of(&batch);
            assert_eq!(sorted(&direct), sorted(&actions_via_json(&batch).unwrap()));
        }
    }

    #[test]
    fn garbage_is_an_invalid_checkpoint() {
        let err = parse_checkpoint_parquet(Bytes::from_static(b"PAR1"), &Path::from("x.parquet"))
            .unwrap_err();
        assert!(matches!(err, Error::InvalidCheckpoint { .. }), "{err}");
    }
}
