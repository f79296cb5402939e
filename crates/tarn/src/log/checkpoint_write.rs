//! Writing classic checkpoints as Spark writes them (typed statistics and partition
//! values beside the JSON, as the table's layout asks), then `_last_checkpoint`.

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef};
use bytes::Bytes;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use serde::Serialize;

use super::log_dir;
use crate::error::{Error, Result};
use crate::expr::Scalar;
use crate::protocol::Action;
use crate::protocol::names::{LAST_CHECKPOINT, checkpoint_file_name};
use crate::stats::parsed::CheckpointLayout;

/// Actions per row group of the checkpoints Tarn writes.
pub(crate) const CHECKPOINT_ROW_GROUP: usize = 16 * 1024;

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
    let mut fields = vec![
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
    ];
    if layout.v2 {
        fields.push(Field::new(
            "checkpointMetadata",
            s(vec![
                Field::new("version", DataType::Int64, true),
                string_map("tags"),
            ]),
            true,
        ));
    }
    Arc::new(Schema::new(fields))
}

/// Encodes actions as a checkpoint Parquet file with the columns `layout` asks for.
///
/// When some file's statistics do not fit their typed columns (a value of another type
/// than its column's), the checkpoint is written with JSON statistics only: typed ones
/// only speed reading up.
pub(crate) fn encode_checkpoint(actions: &[Action], layout: &CheckpointLayout) -> Result<Bytes> {
    match encode_with(actions, layout) {
        Err(Error::Arrow { .. }) if layout.stats_parsed.is_some() => {
            encode_with(actions, &CheckpointLayout::classic().with_v2(layout.v2))
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
/// partial file. Encoding runs off the async threads. A V2 layout writes the V2 spec
/// under the classic name: a `checkpointMetadata` row first, every action inline.
pub(crate) async fn write_checkpoint(
    store: &dyn ObjectStore,
    root: &Path,
    version: i64,
    mut actions: Vec<Action>,
    layout: CheckpointLayout,
) -> Result<CheckpointWritten> {
    if layout.v2 {
        actions.insert(
            0,
            Action::CheckpointMetadata(crate::protocol::CheckpointMetadata { version }),
        );
    }
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
        .map_err(Error::store(tarn_store::StoreOp::Put, &path))?;
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
        .map_err(Error::store(tarn_store::StoreOp::Put, &hint_path))?;
    Ok(CheckpointWritten {
        version,
        actions: count,
        size_in_bytes: size,
    })
}
