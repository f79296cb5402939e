//! Checkpoints: reading classic, multi-part and V2 (JSON or Parquet, with sidecars)
//! checkpoints, and writing classic ones with `_last_checkpoint`.

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef};
use bytes::Bytes;
use futures::{FutureExt, StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use parquet::arrow::ArrowWriter;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use serde::Serialize;

use super::{CheckpointFiles, LOG_READ_CONCURRENCY, log_dir, parse_commit};
use crate::error::{Error, Result};
use crate::protocol::names::{CheckpointKind, LAST_CHECKPOINT, SIDECARS_DIR, checkpoint_file_name};
use crate::protocol::{Action, Sidecar};

/// Top-level checkpoint columns Tarn reads. `commitInfo` and `cdc` never matter in a
/// checkpoint; `*_parsed` columns duplicate what the JSON fields hold.
const SKIPPED_LEAVES: &[&str] = &["stats_parsed", "partitionValues_parsed"];
const SKIPPED_ROOTS: &[&str] = &["commitInfo", "cdc"];

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
                let bytes = get_bytes(store, &meta.location).await?;
                if json {
                    parse_commit(checkpoint.version, &bytes)
                        .map_err(|e| invalid(&meta.location, e.to_string()))
                } else {
                    parse_checkpoint_parquet(bytes, &meta.location)
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
                        parse_checkpoint_parquet(bytes, &path)
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

/// Decodes a checkpoint Parquet file into actions, by way of JSON: each row holds one
/// non-null top-level struct, which serializes to exactly the action's JSON form.
pub(crate) fn parse_checkpoint_parquet(bytes: Bytes, path: &Path) -> Result<Vec<Action>> {
    // The Parquet decoder panics on some corrupt footers; a corrupt checkpoint is an
    // error like any other.
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        decode_checkpoint(bytes, path)
    }))
    .unwrap_or_else(|panic| {
        Err(invalid(
            path,
            format!(
                "the Parquet decoder failed: {}",
                crate::reader::panic_message(&panic)
            ),
        ))
    })
}

fn decode_checkpoint(bytes: Bytes, path: &Path) -> Result<Vec<Action>> {
    let bad = |e: &dyn std::fmt::Display| invalid(path, e.to_string());
    let builder = ParquetRecordBatchReaderBuilder::try_new(bytes).map_err(|e| bad(&e))?;
    let descr = builder.parquet_schema();
    let leaves: Vec<usize> = (0..descr.num_columns())
        .filter(|i| {
            let column = descr.column(*i);
            let parts = column.path().parts();
            !parts.iter().any(|p| SKIPPED_LEAVES.contains(&p.as_str()))
                && !parts
                    .first()
                    .is_some_and(|p| SKIPPED_ROOTS.contains(&p.as_str()))
        })
        .collect();
    let mask = ProjectionMask::leaves(descr, leaves);
    let reader = builder
        .with_projection(mask)
        .with_batch_size(8192)
        .build()
        .map_err(|e| bad(&e))?;
    let mut actions = Vec::new();
    for batch in reader {
        let batch = batch.map_err(|e| bad(&e))?;
        let mut json = Vec::new();
        {
            let mut writer = arrow::json::LineDelimitedWriter::new(&mut json);
            writer.write(&batch).map_err(|e| bad(&e))?;
            writer.finish().map_err(|e| bad(&e))?;
        }
        let parsed = parse_commit(0, &Bytes::from(json));
        match parsed {
            Ok(a) => actions.extend(a),
            // A batch of rows that are all null serializes to nothing at all.
            Err(Error::InvalidCommit { reason, .. }) if reason == "the commit is empty" => {}
            Err(e) => return Err(bad(&e)),
        }
    }
    Ok(actions)
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

/// The schema of the classic checkpoints Tarn writes, as Spark writes them.
pub(crate) fn checkpoint_schema() -> SchemaRef {
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
            ]),
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

/// Encodes actions as a classic checkpoint Parquet file.
pub(crate) fn encode_checkpoint(actions: &[Action]) -> Result<Bytes> {
    let schema = checkpoint_schema();
    let context = "encoding a checkpoint";
    let mut decoder = arrow::json::ReaderBuilder::new(Arc::clone(&schema))
        .with_batch_size(8192)
        .build_decoder()
        .map_err(Error::arrow(context))?;
    let mut batches: Vec<RecordBatch> = Vec::new();
    for chunk in actions.chunks(8192) {
        let mut json = Vec::new();
        for action in chunk {
            serde_json::to_writer(&mut json, action).map_err(|source| Error::Serialize {
                what: "a checkpoint action".into(),
                source,
            })?;
            json.push(b'\n');
        }
        let mut rest: &[u8] = &json;
        while !rest.is_empty() {
            let read = decoder.decode(rest).map_err(Error::arrow(context))?;
            rest = &rest[read..];
            if let Some(batch) = decoder.flush().map_err(Error::arrow(context))? {
                batches.push(batch);
            }
        }
    }
    if let Some(batch) = decoder.flush().map_err(Error::arrow(context))? {
        batches.push(batch);
    }
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
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
) -> Result<CheckpointWritten> {
    let adds = actions
        .iter()
        .filter(|a| matches!(a, Action::Add(_)))
        .count() as i64;
    let count = actions.len();
    let bytes = tokio::task::spawn_blocking(move || encode_checkpoint(&actions))
        .await
        .map_err(|source| Error::TaskFailed {
            task: "encoding a checkpoint",
            source,
        })??;
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
        let bytes = encode_checkpoint(&actions).unwrap();
        let mut read = parse_checkpoint_parquet(bytes, &Path::from("cp")).unwrap();
        // A null partition value comes back as an absent key; both mean null.
        if let Action::Add(add) = &mut read[3] {
            add.partition_values.entry("q".into()).or_insert(None);
        }
        assert_eq!(read, actions);
    }

    #[test]
    fn garbage_is_an_invalid_checkpoint() {
        let err = parse_checkpoint_parquet(Bytes::from_static(b"PAR1"), &Path::from("x.parquet"))
            .unwrap_err();
        assert!(matches!(err, Error::InvalidCheckpoint { .. }), "{err}");
    }
}
