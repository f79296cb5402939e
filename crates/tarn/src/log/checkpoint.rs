//! Reading checkpoints: classic, multi-part and V2 (JSON or Parquet, with sidecars),
//! decoding only the columns Tarn uses. Writing them is in `checkpoint_write`.

use std::sync::Arc;

use arrow::array::{AsArray, RecordBatch, UInt32Array};
use arrow::compute::take_record_batch;
use bytes::Bytes;
use futures::{FutureExt, StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt};
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ArrowReaderMetadata;
use parquet::file::reader::ChunkReader;

use super::projected::{self, invalid};
use super::{CheckpointFiles, LOG_READ_CONCURRENCY, file_actions, log_dir, parse_commit};
use crate::error::{Error, Result};
use crate::protocol::names::{CheckpointKind, SIDECARS_DIR};
use crate::protocol::{Action, Sidecar};
use crate::stats::lazy::{LazySections, StatsLeaves, group_reader};

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

/// A checkpoint's actions as decoded, batch by batch: a 100,000-file checkpoint is some
/// 25 MB of `add`s, and each flattening into one vector moved all of it.
pub(crate) type Batches = Vec<Vec<Action>>;

/// Reads every action of a checkpoint, following V2 sidecars.
///
/// Fails with [`Error::InvalidCheckpoint`] naming the file when a part or sidecar is
/// missing, truncated or not a checkpoint.
pub(crate) async fn read_checkpoint(
    store: &dyn ObjectStore,
    root: &Path,
    checkpoint: &CheckpointFiles,
) -> Result<Batches> {
    let json = matches!(checkpoint.kind, CheckpointKind::V2 { json: true });
    let parts: Vec<Batches> = futures::stream::iter(checkpoint.files.iter().cloned())
        .map(|meta| {
            async move {
                if json {
                    let bytes = get_bytes(store, &meta.location).await?;
                    parse_commit(checkpoint.version, &bytes)
                        .map(|actions| vec![actions])
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
    let mut batches: Batches = parts.into_iter().flatten().collect();

    let sidecars: Vec<Sidecar> = batches
        .iter()
        .flatten()
        .filter_map(|a| match a {
            Action::Sidecar(s) => Some(s.clone()),
            _ => None,
        })
        .collect();
    if !sidecars.is_empty() {
        let sidecar_dir = log_dir(root).join(SIDECARS_DIR);
        let loaded: Vec<Batches> = futures::stream::iter(sidecars)
            .map(|s| {
                {
                    let path = sidecar_dir.clone().join(s.path.as_str());
                    async move {
                        // A large sidecar is read by its columns, at the size the
                        // checkpoint records; if that fails (a wrong size reads past the
                        // end or finds no footer there), it is read whole, which reports
                        // any real problem.
                        if let Ok(size) = u64::try_from(s.size_in_bytes)
                            && size > projected::WHOLE_BELOW
                        {
                            let meta = ObjectMeta {
                                location: path.clone(),
                                last_modified: Default::default(),
                                size,
                                e_tag: None,
                                version: None,
                            };
                            if let Ok(actions) = read_parquet_part(store, &meta).await {
                                return Ok(actions);
                            }
                        }
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
        batches.extend(loaded.into_iter().flatten());
    }
    Ok(batches)
}

async fn get_bytes(store: &dyn ObjectStore, path: &Path) -> Result<Bytes> {
    match store.get(path).await {
        Ok(r) => r
            .bytes()
            .await
            .map_err(Error::store(tarn_store::StoreOp::Get, path)),
        Err(object_store::Error::NotFound { .. }) => Err(invalid(path, "the file is missing")),
        Err(e) => Err(Error::store(tarn_store::StoreOp::Get, path)(e)),
    }
}

/// Reads one Parquet part of a checkpoint. A large one is read by its footer and then
/// only the column chunks Tarn decodes; a small one whole, in one request.
async fn read_parquet_part(store: &dyn ObjectStore, meta: &ObjectMeta) -> Result<Batches> {
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
pub(crate) fn parse_checkpoint_parquet(bytes: Bytes, path: &Path) -> Result<Batches> {
    guarded(path, || {
        let metadata = ArrowReaderMetadata::load(&bytes, Default::default())
            .map_err(|e| invalid(path, e.to_string()))?;
        let leaves = leaves_read(&metadata);
        decode_checkpoint(bytes, metadata, leaves, path)
    })
}

/// Runs a decode, turning a panic of the Parquet decoder (it panics on some corrupt
/// footers) into the error of a corrupt checkpoint.
fn guarded(path: &Path, decode: impl FnOnce() -> Result<Batches>) -> Result<Batches> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(decode)).unwrap_or_else(|panic| {
        Err(invalid(
            path,
            format!(
                "the Parquet decoder failed: {}",
                crate::tasks::panic_message(&panic)
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
) -> Result<Batches> {
    let bad = |e: &dyn std::fmt::Display| invalid(path, e.to_string());
    let descr = metadata.metadata().file_metadata().schema_descr_ptr();
    // Statistics sections decode when first read; the rest now.
    let lazy = Arc::new(StatsLeaves::of(&descr, &leaves));
    let eager: Vec<usize> = leaves
        .iter()
        .copied()
        .filter(|leaf| !lazy.contains(*leaf))
        .collect();
    let mask = ProjectionMask::leaves(&descr, eager);
    // Row groups decode on one thread per core (a checkpoint of 100,000 files is most of
    // a cold open's work); the caller runs this off the async threads. A row group is one
    // batch, so its lazy statistics and the batch's rows line up.
    let groups = metadata.metadata().num_row_groups();
    let threads = crate::tasks::cores().min(groups).max(1);
    let decode_groups = |row_groups: Vec<usize>| -> Result<Batches> {
        let mut batches = Vec::new();
        for group in row_groups {
            if metadata.metadata().row_group(group).num_rows() <= 0 {
                continue;
            }
            let reader =
                group_reader(file.clone(), &metadata, mask.clone(), group).map_err(|e| bad(&e))?;
            let sections = (!lazy.is_empty()).then(|| {
                LazySections::new(file.clone(), metadata.clone(), group, Arc::clone(&lazy))
            });
            batches.extend(decode_batches(reader, path, sections)?);
        }
        Ok(batches)
    };
    if threads <= 1 {
        return decode_groups((0..groups).collect());
    }
    let shares: Vec<Vec<usize>> = (0..threads)
        .map(|t| (t..groups).step_by(threads).collect())
        .collect();
    let decoded: Vec<Result<Batches>> = std::thread::scope(|scope| {
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
                        crate::tasks::panic_message(&panic)
                    )))
                })
            })
            .collect()
    });
    let mut batches = Vec::new();
    for part in decoded {
        batches.extend(part?);
    }
    Ok(batches)
}

fn decode_batches(
    reader: parquet::arrow::arrow_reader::ParquetRecordBatchReader,
    path: &Path,
    mut sections: Option<LazySections>,
) -> Result<Batches> {
    let bad = |e: &dyn std::fmt::Display| invalid(path, e.to_string());
    let mut batches = Vec::new();
    for batch in reader {
        let batch = batch.map_err(|e| bad(&e))?;
        let column = |name: &str| batch.column_by_name(name).and_then(|c| c.as_struct_opt());
        // Only the first batch lines up with the row group's lazy statistics (a row group
        // is one batch); any other keeps its row counts and no bounds.
        let lazy = sections.take();
        let actions =
            match file_actions::decode(column("add"), column("remove"), batch.num_rows(), lazy) {
                Some((mut files, others)) => {
                    if !others.is_empty() {
                        let rest: Vec<usize> = (0..batch.num_columns())
                            .filter(|&i| {
                                !matches!(batch.schema().field(i).name().as_str(), "add" | "remove")
                            })
                            .collect();
                        let rest = batch.project(&rest).map_err(|e| bad(&e))?;
                        let rows = UInt32Array::from(others);
                        let rest = take_record_batch(&rest, &rows).map_err(|e| bad(&e))?;
                        files.extend(actions_via_json(&rest).map_err(|e| bad(&e))?);
                    }
                    files
                }
                None => actions_via_json(&batch).map_err(|e| bad(&e))?,
            };
        batches.push(actions);
    }
    Ok(batches)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::checkpoint_write::encode_checkpoint;
    use crate::protocol::{Add, DeletionVectorDescriptor, Metadata, Protocol, Remove, Txn};
    use crate::stats::parsed::CheckpointLayout;

    fn decode_batches_of(batch: &RecordBatch) -> Vec<Action> {
        let column = |name: &str| batch.column_by_name(name).and_then(|c| c.as_struct_opt());
        let (mut files, others) =
            file_actions::decode(column("add"), column("remove"), batch.num_rows(), None).unwrap();
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
        let read = parse_checkpoint_parquet(bytes, &Path::from("cp"))
            .unwrap()
            .concat();
        // Files decode from their columns and the rest by way of JSON: the order of a
        // checkpoint's actions carries no meaning. A null partition value may come back
        // as an absent key (by way of JSON); both mean null.
        let sorted = |actions: &[Action]| {
            let mut text: Vec<String> = actions
                .iter()
                .cloned()
                .map(|mut a| {
                    if let Action::Add(add) = &mut a
                        && !add.partition_values.contains_key("q")
                    {
                        add.partition_values.insert("q".into(), None);
                    }
                    format!("{a:?}")
                })
                .collect();
            text.sort();
            text
        };
        assert_eq!(sorted(&read), sorted(&actions));
        // The column decoder and the JSON one agree on every row.
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
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

    use std::sync::Arc;

    /// A V2 checkpoint (JSON top level) whose one sidecar holds `files` adds with
    /// statistics that compress badly, the sidecar's size recorded as `recorded`
    /// (`None`: its true size).
    async fn v2_checkpoint(
        files: i64,
        recorded: Option<i64>,
    ) -> (tarn_store::CountingStore<Arc<dyn ObjectStore>>, u64) {
        let store: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
        let hash = |i: i64, salt: u64| {
            format!(
                "{:016x}",
                (i as u64 ^ salt).wrapping_mul(0x9E37_79B9_7F4A_7C15)
            )
        };
        let adds: Vec<Action> = (0..files)
            .map(|i| {
                Action::Add(Add {
                    path: format!("part-{i:06}.parquet"),
                    partition_values: Default::default(),
                    size: 1,
                    modification_time: 0,
                    data_change: false,
                    stats: Some(
                        format!(
                            r#"{{"numRecords":1,"minValues":{{"s":"{}{}"}},"maxValues":{{"s":"{}{}"}}}}"#,
                            hash(i, 1),
                            hash(i, 2),
                            hash(i, 3),
                            hash(i, 4)
                        )
                        .into(),
                    ),
                    tags: None,
                    deletion_vector: None,
                    base_row_id: None,
                    default_row_commit_version: None,
                    clustering_provider: None,
                })
            })
            .collect();
        let schema = crate::protocol::StructType::from_json(
            r#"{"type":"struct","fields":[{"name":"s","type":"string","nullable":true,"metadata":{}}]}"#,
        )
        .unwrap();
        let layout = CheckpointLayout::of(&schema, &[], 32, true, true);
        let sidecar = encode_checkpoint(&adds, &layout).unwrap();
        let size = sidecar.len() as u64;
        let root = Path::from("t");
        let sidecar_path = log_dir(&root).join(SIDECARS_DIR).join("one.parquet");
        store.put(&sidecar_path, sidecar.into()).await.unwrap();
        let top = format!(
            "{}\n{}\n",
            r#"{"checkpointMetadata":{"version":1}}"#,
            serde_json::json!({"sidecar": {"path": "one.parquet", "sizeInBytes": recorded.unwrap_or(size as i64), "modificationTime": 0}})
        );
        let top_path = log_dir(&root).join("00000000000000000001.checkpoint.x.json");
        store.put(&top_path, Bytes::from(top).into()).await.unwrap();
        (tarn_store::CountingStore::new(store), size)
    }

    async fn read_v2(store: &dyn ObjectStore) -> Vec<Action> {
        let root = Path::from("t");
        let top_path = log_dir(&root).join("00000000000000000001.checkpoint.x.json");
        let meta = store.head(&top_path).await.unwrap();
        let files = CheckpointFiles {
            version: 1,
            kind: CheckpointKind::V2 { json: true },
            files: vec![meta],
        };
        read_checkpoint(store, &root, &files)
            .await
            .unwrap()
            .concat()
    }

    #[tokio::test]
    async fn large_sidecars_are_read_by_their_columns_and_wrong_sizes_whole() {
        let (store, size) = v2_checkpoint(60_000, None).await;
        assert!(size > projected::WHOLE_BELOW, "{size} bytes");
        let counter = store.counter();
        let read = read_v2(&store).await;
        let adds = read.iter().filter(|a| matches!(a, Action::Add(_))).count();
        assert_eq!(adds, 60_000);
        // The JSON statistics beside the typed ones are not fetched.
        let counts = counter.take();
        assert!(
            counts.bytes_read < size * 2 / 3,
            "read {} of a {size}-byte sidecar",
            counts.bytes_read
        );
        let Some(Action::Add(first)) = read.iter().find(|a| matches!(a, Action::Add(_))) else {
            panic!("no add");
        };
        assert!(first.stats.as_ref().and_then(|s| s.typed()).is_some());

        // A sidecar whose recorded size is wrong reads whole, with the same actions.
        for wrong in [size as i64 - 100, size as i64 * 2] {
            let (store, _) = v2_checkpoint(60_000, Some(wrong)).await;
            let again = read_v2(&store).await;
            assert_eq!(again.len(), read.len(), "recorded size {wrong}");
        }
    }
}
