//! Reading a table's change data feed (`delta.enableChangeDataFeed`), as Spark's
//! `table_changes` does: for each version in a range, the rows its change files
//! (`cdc` actions) hold when it has any, else the rows of the files it added (inserts)
//! and removed (deletes); each row with `_change_type`, `_commit_version` and
//! `_commit_timestamp`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanArray, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStoreExt;
use roaring::RoaringTreemap;

use crate::dv::deletion_vector_of;
use crate::error::{Error, Result};
use crate::log::versions::{in_commit_timestamp, list_versions};
use crate::log::{log_dir, parse_commit};
use crate::paths::canonical;
use crate::protocol::names::commit_file_name;
use crate::protocol::properties::TableProperties;
use crate::protocol::{
    Action, Add, Cdc, DataType as DeltaType, DeletionVectorDescriptor, PrimitiveType, Remove,
    StructField,
};
use crate::scan::{RecordBatchStream, read_file_rows, stream_file};
use crate::snapshot::Snapshot;
use crate::table::Table;

/// The column naming a change row's kind: `insert`, `delete`, `update_preimage` or
/// `update_postimage`.
pub const CHANGE_TYPE: &str = "_change_type";
/// The column naming the version a change row was committed in.
pub const COMMIT_VERSION: &str = "_commit_version";
/// The column holding when a change row was committed.
pub const COMMIT_TIMESTAMP: &str = "_commit_timestamp";

impl Table {
    /// The change rows of versions `from..=to` (`to`: the handle's version when `None`),
    /// in the current schema plus `_change_type`, `_commit_version` and
    /// `_commit_timestamp`, version by version, collected. [`stream_changes`] streams
    /// them for ranges that do not fit in memory.
    ///
    /// Fails as [`stream_changes`] does.
    ///
    /// [`stream_changes`]: Table::stream_changes
    pub async fn changes(&self, from: i64, to: Option<i64>) -> Result<Vec<RecordBatch>> {
        self.stream_changes(from, to).await?.try_collect().await
    }

    /// The change rows of versions `from..=to`, as [`changes`](Table::changes) gives
    /// them, as a stream that reads one version at a time (memory holds one commit's
    /// changes).
    ///
    /// Fails with [`Error::InvalidArgument`] for a range outside the handle's versions;
    /// the stream yields [`Error::ChangeDataFeedNotEnabled`] when a version of the range
    /// was committed while the table did not record its changes, [`Error::VersionNotFound`]
    /// when a commit of the range is gone, and what [`Snapshot::read_file`] fails with
    /// for files that cannot be read (a removed file already vacuumed among them).
    pub async fn stream_changes(&self, from: i64, to: Option<i64>) -> Result<RecordBatchStream> {
        let snapshot = self.snapshot().clone();
        let to = to.unwrap_or(snapshot.version());
        if from < 0 || from > to || to > snapshot.version() {
            return Err(Error::InvalidArgument {
                name: "versions",
                reason: format!(
                    "{from}..={to} is not a range of versions 0..={}",
                    snapshot.version()
                ),
            });
        }
        let times = list_versions(snapshot.location()).await?;
        // The properties in effect at `from`: those of the version before it.
        let enabled = match from {
            0 => false,
            _ => {
                let before = Snapshot::builder(snapshot.location().clone())
                    .at_version(from - 1)
                    .build()
                    .await?;
                before.properties().change_data_feed()
            }
        };
        let reader = Arc::new(Versions {
            schema: output_schema(&snapshot),
            snapshot,
            times,
        });
        let versions = futures::stream::try_unfold((from, enabled), move |(version, enabled)| {
            let reader = Arc::clone(&reader);
            async move {
                if version > to {
                    return Ok::<_, Error>(None);
                }
                let (batches, enabled) = reader.changes_of(version, enabled).await?;
                Ok(Some((batches, (version + 1, enabled))))
            }
        });
        Ok(versions
            .map_ok(|batches| futures::stream::iter(batches.into_iter().map(Ok)))
            .try_flatten()
            .boxed())
    }
}

/// What reading a range of versions' changes needs.
struct Versions {
    snapshot: Snapshot,
    schema: SchemaRef,
    /// Commit times by version.
    times: std::collections::BTreeMap<i64, i64>,
}

impl Versions {
    /// The change rows of one version, and whether the table records its changes after
    /// it (`enabled`: whether it did before).
    async fn changes_of(&self, version: i64, enabled: bool) -> Result<(Vec<RecordBatch>, bool)> {
        let (snapshot, schema) = (&self.snapshot, &self.schema);
        let actions = read_version(snapshot, version).await?;
        let enabled = actions
            .iter()
            .find_map(|a| match a {
                Action::Metadata(m) => Some(TableProperties::new(m).change_data_feed()),
                _ => None,
            })
            .unwrap_or(enabled);
        if !enabled {
            return Err(Error::ChangeDataFeedNotEnabled { version });
        }
        let timestamp = in_commit_timestamp(&actions)
            .or_else(|| self.times.get(&version).copied())
            .ok_or_else(|| gone(version))?;
        let stamp = Stamp {
            version,
            micros: timestamp.saturating_mul(1000),
        };
        let cdc: Vec<&Cdc> = actions
            .iter()
            .filter_map(|a| match a {
                Action::Cdc(c) => Some(c),
                _ => None,
            })
            .collect();
        let mut out = Vec::new();
        if !cdc.is_empty() {
            for file in cdc {
                let (rows, kinds) = read_change_file(snapshot, file).await?;
                out.push(with_change_columns(schema, rows, kinds, stamp)?);
            }
            return Ok((out, enabled));
        }
        for (rows, kind) in inferred_changes(snapshot, &actions).await? {
            let kinds = Arc::new(StringArray::from(vec![kind; rows.num_rows()]));
            out.push(with_change_columns(schema, rows, kinds, stamp)?);
        }
        Ok((out, enabled))
    }
}

/// The changes of a commit without change files: its added files' rows are inserts,
/// its removed files' rows deletes; a file removed and added again with another deletion
/// vector lost the rows the new vector adds (deletes) and regained those it drops.
async fn inferred_changes(
    snapshot: &Snapshot,
    actions: &[Action],
) -> Result<Vec<(RecordBatch, &'static str)>> {
    let location = snapshot.location();
    let removed: HashMap<String, &Remove> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Remove(r) if r.data_change => Some((canonical(location, &r.path), r)),
            _ => None,
        })
        .collect();
    let mut paired = HashSet::new();
    let mut out = Vec::new();
    for action in actions {
        let Action::Add(add) = action else {
            continue;
        };
        if !add.data_change {
            continue;
        }
        let key = canonical(location, &add.path);
        let Some(remove) = removed.get(&key) else {
            out.push((snapshot.read_file(add).await?, "insert"));
            continue;
        };
        paired.insert(key);
        let bitmap = |dv: &Option<DeletionVectorDescriptor>| {
            let dv = dv.clone();
            async move {
                match dv {
                    Some(dv) => {
                        deletion_vector_of(snapshot.location(), snapshot.caches(), &dv).await
                    }
                    None => Ok(RoaringTreemap::new()),
                }
            }
        };
        let (before, after) = (
            bitmap(&remove.deletion_vector).await?,
            bitmap(&add.deletion_vector).await?,
        );
        for (read, rows, kind) in [
            (as_read_file(remove), &after - &before, "delete"),
            (add.clone(), &before - &after, "insert"),
        ] {
            if rows.is_empty() {
                continue;
            }
            let live = read_file_rows(snapshot, &read).await?;
            let keep: BooleanArray = live
                .positions
                .iter()
                .map(|p| Some(rows.contains(*p)))
                .collect();
            let picked = arrow::compute::filter_record_batch(&live.batch, &keep)
                .map_err(Error::arrow("reading changes"))?;
            out.push((picked, kind));
        }
    }
    // Removed files not added again, in commit order.
    for action in actions {
        if let Action::Remove(remove) = action
            && remove.data_change
            && !paired.contains(&canonical(location, &remove.path))
        {
            out.push((snapshot.read_file(&as_read_file(remove)).await?, "delete"));
        }
    }
    Ok(out)
}

#[derive(Debug, Clone, Copy)]
struct Stamp {
    version: i64,
    micros: i64,
}

/// The table's schema with the three change columns after it.
fn output_schema(snapshot: &Snapshot) -> SchemaRef {
    let mut fields: Vec<Field> = snapshot
        .arrow_schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.push(Field::new(CHANGE_TYPE, DataType::Utf8, false));
    fields.push(Field::new(COMMIT_VERSION, DataType::Int64, false));
    fields.push(Field::new(
        COMMIT_TIMESTAMP,
        DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
        false,
    ));
    Arc::new(Schema::new(fields))
}

fn with_change_columns(
    schema: &SchemaRef,
    rows: RecordBatch,
    kinds: ArrayRef,
    stamp: Stamp,
) -> Result<RecordBatch> {
    let n = rows.num_rows();
    let mut columns = rows.columns().to_vec();
    columns.push(kinds);
    columns.push(Arc::new(Int64Array::from(vec![stamp.version; n])));
    columns.push(Arc::new(
        TimestampMicrosecondArray::from(vec![stamp.micros; n]).with_timezone("UTC"),
    ));
    RecordBatch::try_new(Arc::clone(schema), columns).map_err(Error::arrow("reading changes"))
}

/// The actions of the commit of `version`.
async fn read_version(snapshot: &Snapshot, version: i64) -> Result<Vec<Action>> {
    let path = log_dir(snapshot.location().root()).join(commit_file_name(version));
    let body = match snapshot.location().store().get(&path).await {
        Ok(found) => found
            .bytes()
            .await
            .map_err(Error::store(tarn_store::StoreOp::Get, &path))?,
        Err(object_store::Error::NotFound { .. }) => {
            return Err(gone(version));
        }
        Err(e) => return Err(Error::store(tarn_store::StoreOp::Get, &path)(e)),
    };
    parse_commit(version, &body)
}

fn gone(version: i64) -> Error {
    Error::VersionNotFound {
        version,
        reason: "its commit is no longer in the log".into(),
    }
}

/// A removed file as it was: its rows minus those its deletion vector then marked.
fn as_read_file(remove: &Remove) -> Add {
    Add {
        path: remove.path.clone(),
        partition_values: remove.partition_values.clone().unwrap_or_default(),
        size: remove.size.unwrap_or_default(),
        modification_time: 0,
        data_change: true,
        stats: None,
        tags: None,
        deletion_vector: remove.deletion_vector.clone(),
        base_row_id: None,
        default_row_commit_version: None,
        clustering_provider: None,
    }
}

/// A change file's rows (in the table's schema) and their `_change_type`s.
async fn read_change_file(snapshot: &Snapshot, file: &Cdc) -> Result<(RecordBatch, ArrayRef)> {
    let add = Add {
        path: file.path.clone(),
        partition_values: file.partition_values.clone(),
        size: file.size,
        modification_time: 0,
        data_change: false,
        stats: None,
        tags: None,
        deletion_vector: None,
        base_row_id: None,
        default_row_commit_version: None,
        clustering_provider: None,
    };
    // One pass: the change type is read beside the table's columns, by name.
    let change_type = StructField::new(
        CHANGE_TYPE,
        DeltaType::Primitive(PrimitiveType::String),
        true,
    );
    let batches: Vec<RecordBatch> = stream_file(snapshot, &add, &[change_type])
        .await?
        .try_collect()
        .await?;
    let width = snapshot.schema().fields.len();
    let schema = Arc::clone(snapshot.arrow_schema());
    let mut rows = Vec::with_capacity(batches.len());
    let mut kinds: Vec<ArrayRef> = Vec::with_capacity(batches.len());
    for batch in &batches {
        if batch.column(width).null_count() > 0 {
            return Err(Error::InvalidSchema {
                reason: format!("change file {} has rows without a {CHANGE_TYPE}", file.path),
            });
        }
        rows.push(
            batch
                .project(&(0..width).collect::<Vec<_>>())
                .map_err(Error::arrow("reading a change file"))?,
        );
        kinds.push(Arc::clone(batch.column(width)));
    }
    let rows = arrow::compute::concat_batches(&schema, &rows)
        .map_err(Error::arrow("reading a change file"))?;
    let refs: Vec<&dyn arrow::array::Array> = kinds.iter().map(|a| a.as_ref()).collect();
    let kinds = match refs.is_empty() {
        true => arrow::array::new_empty_array(&DataType::Utf8),
        false => arrow::compute::concat(&refs).map_err(Error::arrow("reading a change file"))?,
    };
    Ok((rows, kinds))
}
