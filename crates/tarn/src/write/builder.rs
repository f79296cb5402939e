//! Appends and overwrites: [`WriteBuilder`], started by [`Table::write`].

use arrow::array::RecordBatch;
use parquet::file::properties::WriterProperties;

use super::streamed::{Conformer, Input, from_reader, from_stream, write_stream};
use super::{
    Checks, FileWriteOptions, SchemaMode, StatsColumns, WriteMode, WrittenFiles, ensure_rows_match,
    fill_identity, prepare_batches, write_files,
};
use crate::error::{ConflictReason, Error, Result};
use crate::expr::Expr;
use crate::index::meta::REGISTRY_DOMAIN;
use crate::indexing::{BuiltSegments, InlineSegments};
use crate::protocol::features::ensure_writable;
use crate::protocol::mapping;
use crate::protocol::properties::DEFAULT_TARGET_FILE_SIZE;
use crate::protocol::{Add, Metadata, StructType};
use crate::snapshot::Snapshot;
use crate::table::Table;
use crate::txn::{CommitOutcome, IsolationLevel, Transaction};
use futures::StreamExt;

/// Times a plain append retries after racing an index's creation or drop.
const INDEX_RACE_ATTEMPTS: u32 = 5;

impl Table {
    /// Starts a write of `batches` (append by default).
    pub fn write(&mut self, batches: impl IntoIterator<Item = RecordBatch>) -> WriteBuilder<'_> {
        self.write_input(Input::Batches(batches.into_iter().collect()))
    }

    /// Starts a write of a stream of batches (append by default), written as they arrive:
    /// memory holds a couple of batches and the files being encoded, however long the
    /// stream. The write takes its schema from the first batch; a stream error fails the
    /// write with [`Error::InputStream`] and commits nothing.
    pub fn write_stream<S, E>(&mut self, stream: S) -> WriteBuilder<'_>
    where
        S: futures::Stream<Item = std::result::Result<RecordBatch, E>> + Send + 'static,
        E: std::error::Error + Send + Sync + 'static,
    {
        self.write_input(Input::Stream(from_stream(stream)))
    }

    /// Starts a write of the batches of `reader` (an Arrow `RecordBatchReader`, such as an
    /// FFI stream from another engine), read on a blocking thread and written as they
    /// arrive, as [`write_stream`](Self::write_stream) does.
    pub fn write_reader<R>(&mut self, reader: R) -> WriteBuilder<'_>
    where
        R: arrow::array::RecordBatchReader + Send + 'static,
    {
        self.write_input(Input::Stream(from_reader(reader)))
    }

    fn write_input(&mut self, input: Input) -> WriteBuilder<'_> {
        WriteBuilder {
            table: self,
            input,
            mode: WriteMode::Append,
            replace_where: None,
            schema_mode: SchemaMode::Strict,
            target_file_size: None,
            writer_properties: None,
            isolation: None,
            app_transaction: None,
        }
    }

    /// Appends `batches` in one commit.
    pub async fn append(
        &mut self,
        batches: impl IntoIterator<Item = RecordBatch>,
    ) -> Result<WriteOutcome> {
        self.write(batches).execute().await
    }

    /// Replaces all rows with `batches` in one commit.
    pub async fn overwrite(
        &mut self,
        batches: impl IntoIterator<Item = RecordBatch>,
    ) -> Result<WriteOutcome> {
        self.write(batches)
            .with_mode(WriteMode::Overwrite)
            .execute()
            .await
    }

    /// Removes the partitions `predicate` (on partition columns only) names, without
    /// reading any data: a metadata-only delete.
    ///
    /// Fails with [`Error::InvalidArgument`] for a predicate on other columns,
    /// [`Error::AppendOnly`] on an append-only table, and as [`Transaction::commit`](crate::Transaction::commit) does.
    pub async fn delete_partitions(&mut self, predicate: Expr) -> Result<WriteOutcome> {
        self.write(Vec::new())
            .with_mode(WriteMode::Overwrite)
            .replace_where(predicate)
            .execute()
            .await
    }
}

/// What a write did.
#[derive(Debug, Clone)]
pub struct WriteOutcome {
    /// The commit (with no attempts when nothing was committed).
    pub commit: CommitOutcome,
    /// Whether the write was skipped because its application transaction had already
    /// committed that version.
    pub skipped: bool,
    /// Data files added.
    pub files_added: usize,
    /// Data files removed (overwrites).
    pub files_removed: usize,
    /// Rows written.
    pub rows_written: u64,
    /// Bytes of data files written.
    pub bytes_written: u64,
}

impl WriteOutcome {
    fn nothing(snapshot: &Snapshot, skipped: bool) -> Self {
        WriteOutcome {
            commit: CommitOutcome::unchanged(snapshot),
            skipped,
            files_added: 0,
            files_removed: 0,
            rows_written: 0,
            bytes_written: 0,
        }
    }
}

/// A write being configured; run it with [`execute`](Self::execute).
#[derive(Debug)]
#[must_use]
pub struct WriteBuilder<'a> {
    table: &'a mut Table,
    input: Input,
    mode: WriteMode,
    replace_where: Option<Expr>,
    schema_mode: SchemaMode,
    target_file_size: Option<u64>,
    writer_properties: Option<WriterProperties>,
    isolation: Option<IsolationLevel>,
    app_transaction: Option<(String, i64)>,
}

impl WriteBuilder<'_> {
    /// Append (default) or overwrite.
    pub fn with_mode(mut self, mode: WriteMode) -> Self {
        self.mode = mode;
        self
    }

    /// With [`WriteMode::Overwrite`], replace only the partitions this predicate (on
    /// partition columns) names; every row written must satisfy it.
    pub fn replace_where(mut self, predicate: Expr) -> Self {
        self.replace_where = Some(predicate);
        self
    }

    /// Whether columns the table lacks may be added.
    pub fn with_schema_mode(mut self, mode: SchemaMode) -> Self {
        self.schema_mode = mode;
        self
    }

    /// Target size of data files in bytes (default: `delta.targetFileSize`, else 128 MiB).
    pub fn with_target_file_size(mut self, bytes: u64) -> Self {
        self.target_file_size = Some(bytes);
        self
    }

    /// Parquet writer settings for the data files (compression, row-group size,
    /// encodings), in place of Tarn's: the table's codec (`tarn.parquet.compression`,
    /// LZ4_RAW unless set), data pages of at most 16,384 rows, each column's encoding
    /// judged by its first rows, Parquet's defaults otherwise.
    pub fn with_writer_properties(mut self, properties: WriterProperties) -> Self {
        self.writer_properties = Some(properties);
        self
    }

    /// The isolation level of this write (default: the table handle's).
    pub fn with_isolation(mut self, isolation: IsolationLevel) -> Self {
        self.isolation = Some(isolation);
        self
    }

    /// Makes the write exactly-once for an application: it commits `version` of
    /// `app_id` with the data, and is skipped (nothing written) when the table already
    /// holds that version or a later one. A retried streaming write stays single.
    pub fn with_app_transaction(mut self, app_id: impl Into<String>, version: i64) -> Self {
        self.app_transaction = Some((app_id.into(), version));
        self
    }

    /// Writes the data files and commits them.
    ///
    /// Identity columns the batches leave out get values after their high-water marks,
    /// which the commit moves on (a concurrent write that drew values too then fails
    /// with [`Error::Conflict`]; retry it).
    ///
    /// Fails with [`Error::SchemaMismatch`] when the batches do not fit the table or bring
    /// values for a `GENERATED ALWAYS` identity column,
    /// [`Error::InvalidArgument`] for a `replace_where` that names non-partition columns or
    /// rows outside it or a zero target size, [`Error::AppendOnly`] for an overwrite of an
    /// append-only table,
    /// [`Error::UnsupportedWriterFeature`] when the table needs what Tarn cannot maintain,
    /// and as [`Transaction::commit`](crate::Transaction::commit) does ([`Error::Conflict`] when a concurrent commit
    /// invalidates this one). Nothing is committed on failure.
    // Long by design: the write's steps in order (checks, identity, schema, replaced
    // files, data files with their segments, commit with the index-race retry), each
    // step a call of its own.
    pub async fn execute(self) -> Result<WriteOutcome> {
        let WriteBuilder {
            table,
            input,
            mode,
            replace_where,
            schema_mode,
            target_file_size,
            writer_properties,
            isolation,
            app_transaction,
        } = self;
        let mut txn = table.transaction().with_operation("WRITE");
        if let Some(level) = isolation {
            txn = txn.with_isolation(level);
        }
        if let Some((app_id, version)) = &app_transaction
            && txn
                .read_app_transaction(app_id)
                .is_some_and(|done| done >= *version)
        {
            return Ok(WriteOutcome::nothing(table.snapshot(), true));
        }
        let snapshot = table.snapshot().clone();
        ensure_writable(snapshot.protocol(), snapshot.metadata(), snapshot.schema())?;
        let target_file_size = target_file_size
            .or_else(|| snapshot.properties().target_file_size())
            .unwrap_or(DEFAULT_TARGET_FILE_SIZE);
        if target_file_size == 0 {
            return Err(Error::InvalidArgument {
                name: "target_file_size",
                reason: "must be positive".into(),
            });
        }
        if replace_where.is_some() && mode != WriteMode::Overwrite {
            return Err(Error::InvalidArgument {
                name: "replace_where",
                reason: "only applies to WriteMode::Overwrite".into(),
            });
        }
        // A stream's first batch decides the schema; the rest are conformed as they come.
        let (batches, mut rest) = match input {
            Input::Batches(batches) => (batches, None),
            Input::Stream(mut stream) => {
                let first = stream.next().await.transpose()?;
                (first.into_iter().collect(), Some(stream))
            }
        };
        // Identity columns get their values, and their high-water marks move on.
        let (batches, marked) = fill_identity(snapshot.schema(), &batches)?;
        let (batches, evolved) = prepare_batches(
            marked.as_ref().unwrap_or(snapshot.schema()),
            snapshot.partition_columns(),
            &batches,
            schema_mode,
        )?;
        let evolved = evolved.or(marked);
        let (schema, evolved) = with_new_metadata(&snapshot, evolved)?;
        // Constraints that cannot be read refuse the write before any file is written.
        let checks = Checks::of(snapshot.metadata(), &schema)?;

        // An overwrite reads what it replaces: the whole table, or the named partitions.
        let mut removed: Vec<Add> = Vec::new();
        if mode == WriteMode::Overwrite {
            if snapshot.properties().append_only() {
                return Err(Error::AppendOnly {
                    table: snapshot.location().url().to_string(),
                    operation: "overwrite".into(),
                });
            }
            removed = replaced_files(
                &snapshot,
                &mut txn,
                replace_where.as_ref(),
                &schema,
                &batches,
            )
            .await?;
            txn.record_read_files(&removed);
        }

        let now = table.clock().now_ms();
        let mut inline = InlineSegments::of(&snapshot)?;
        let capture = inline.columns();
        let options = FileWriteOptions {
            target_file_size,
            stats_columns: StatsColumns::of(&snapshot)?,
            // The caller's settings carry their own codec.
            compression: match &writer_properties {
                Some(_) => parquet::basic::Compression::UNCOMPRESSED,
                None => snapshot.properties().data_compression()?,
            },
            writer_properties,
            modification_time: now,
            capture: capture.clone(),
            file_per_batch: false,
            change_data: false,
            hidden: Vec::new(),
            checks,
        };
        let (written, mut prebuilt, evolved) = match rest.take() {
            None => {
                let (written, prebuilt) =
                    write_with_segments(&snapshot, &schema, batches, &options, &inline).await?;
                (written, prebuilt, evolved)
            }
            Some(rest) => {
                let bound = replace_where
                    .as_ref()
                    .map(|p| p.bind(&schema))
                    .transpose()?;
                let partitions = snapshot.partition_columns();
                let mut conformer = Conformer::new(schema.clone(), partitions, schema_mode, bound);
                let (written, prebuilt) = write_stream(
                    &snapshot,
                    &schema,
                    batches,
                    rest,
                    &mut conformer,
                    &options,
                    &inline,
                )
                .await?;
                let evolved = conformer.final_metadata(&snapshot, evolved);
                (written, prebuilt, evolved)
            }
        };

        if let Some((_, metadata)) = &evolved {
            txn.set_metadata(metadata.clone());
        }
        let (files_removed, files_added) = (removed.len(), written.adds.len());
        for add in removed {
            txn.remove_file(add.into_remove(now));
        }
        for add in &written.adds {
            txn.add_file(add.clone());
        }
        if txn.actions().is_empty() {
            // Nothing to write and nothing to replace: no commit.
            return Ok(WriteOutcome::nothing(&snapshot, false));
        }
        let has_app = app_transaction.is_some();
        if let Some((app_id, version)) = app_transaction {
            txn.set_app_transaction(app_id, version);
        }
        let partition_by: Vec<String> = snapshot
            .partition_columns()
            .iter()
            .map(|p| p.name.clone())
            .collect();
        let mode_name = match mode {
            WriteMode::Append => "Append",
            WriteMode::Overwrite => "Overwrite",
        };
        let described = |txn: Transaction| {
            txn.with_parameter("mode", mode_name)
                .with_parameter(
                    "partitionBy",
                    serde_json::to_string(&partition_by).unwrap_or_default(),
                )
                .with_metric("numFiles", files_added.to_string())
                .with_metric("numOutputRows", written.rows.to_string())
                .with_metric("numOutputBytes", written.bytes.to_string())
                .with_metric("numRemovedFiles", files_removed.to_string())
        };
        txn = described(txn);
        if let Some(p) = &replace_where {
            txn = txn.with_parameter("predicate", p.to_string());
        }
        // A plain append that raced an index's creation or drop is retried with the new
        // set of indices: its data files stand, only its segments change.
        let plain_append = mode == WriteMode::Append && evolved.is_none() && !has_app;
        let mut attempt = 1;
        let commit = loop {
            let mut attempt_txn = txn.clone();
            match prebuilt.take() {
                Some(built) => InlineSegments::apply(&mut attempt_txn, table.snapshot(), built)?,
                None => {
                    inline
                        .add_to(
                            &mut attempt_txn,
                            table.snapshot(),
                            &written.adds,
                            &capture,
                            &written.captured,
                        )
                        .await?
                }
            }
            match table.commit(attempt_txn).await {
                Ok(commit) => break commit,
                Err(Error::Conflict {
                    reason: ConflictReason::DomainMetadataChanged { domain },
                    ..
                }) if plain_append
                    && domain == REGISTRY_DOMAIN
                    && attempt < INDEX_RACE_ATTEMPTS =>
                {
                    attempt += 1;
                    table.refresh().await?;
                    inline = InlineSegments::of(table.snapshot())?;
                    let mut fresh = table.transaction().with_operation("WRITE");
                    if let Some(level) = isolation {
                        fresh = fresh.with_isolation(level);
                    }
                    for add in &written.adds {
                        fresh.add_file(add.clone());
                    }
                    txn = described(fresh);
                }
                Err(e) => return Err(e),
            }
        };
        Ok(WriteOutcome {
            commit,
            skipped: false,
            files_added,
            files_removed,
            rows_written: written.rows,
            bytes_written: written.bytes,
        })
    }
}

/// The files an overwrite replaces: every live file, or those of the partitions
/// `replace_where` names, recorded as read by `txn`.
///
/// Fails with [`Error::InvalidArgument`] when `replace_where` names other columns or
/// `batches` hold rows outside it.
async fn replaced_files(
    snapshot: &Snapshot,
    txn: &mut Transaction,
    replace_where: Option<&Expr>,
    schema: &StructType,
    batches: &[RecordBatch],
) -> Result<Vec<Add>> {
    Ok(match replace_where {
        None => {
            txn.record_read_whole_table();
            snapshot.files().cloned().collect()
        }
        Some(predicate) => {
            let bound = predicate.bind(schema)?;
            let partitions: Vec<&str> = snapshot
                .partition_columns()
                .iter()
                .map(|p| p.name.as_str())
                .collect();
            if let Some(other) = bound
                .columns()
                .into_iter()
                .find(|c| !partitions.contains(&c.root()))
            {
                return Err(Error::InvalidArgument {
                    name: "replace_where",
                    reason: format!(
                        "{other} is not a partition column; only partitions can be replaced"
                    ),
                });
            }
            ensure_rows_match(batches, &bound)?;
            txn.record_read_predicate(predicate)?;
            snapshot
                .scan()
                .filter(predicate.clone())
                .plan()
                .await?
                .files
        }
    })
}

/// The schema a write's files are written under, and the metadata to commit when the
/// write changes it: new columns of a mapped table get their ids and physical names
/// before any file is written under them.
fn with_new_metadata(
    snapshot: &Snapshot,
    evolved: Option<StructType>,
) -> Result<(StructType, Option<(StructType, Metadata)>)> {
    let evolved = match evolved {
        Some(mut schema) => {
            let mut metadata = snapshot.metadata().clone();
            mapping::annotate(&mut schema, &mut metadata, false)?;
            metadata.schema_string = schema.to_json();
            Some((schema, metadata))
        }
        None => None,
    };
    let schema = match &evolved {
        Some((schema, _)) => schema.clone(),
        None => snapshot.schema().clone(),
    };
    Ok((schema, evolved))
}

/// Writes `batches` as data files and, for the inline indices, builds their segments
/// from the captured columns as soon as the files are encoded, uploaded beside them
/// rather than after.
async fn write_with_segments(
    snapshot: &Snapshot,
    schema: &StructType,
    batches: Vec<RecordBatch>,
    options: &FileWriteOptions,
    inline: &InlineSegments,
) -> Result<(WrittenFiles, Option<BuiltSegments>)> {
    let capture = &options.capture;
    let (encoded_tx, encoded_rx) = if inline.is_empty() {
        (None, None)
    } else {
        let (tx, rx) = tokio::sync::oneshot::channel::<WrittenFiles>();
        (Some(tx), Some(rx))
    };
    let segments = async {
        let Some(Ok(files)) = (match encoded_rx {
            Some(rx) => Some(rx.await),
            None => None,
        }) else {
            return Ok(None);
        };
        inline
            .build(snapshot, &files.adds, capture, &files.captured)
            .await
            .map(Some)
    };
    let files = write_files(
        snapshot.location(),
        schema,
        snapshot.partition_columns(),
        batches,
        options,
        encoded_tx,
    );
    let (written, segments) = futures::join!(files, segments);
    Ok((written?, segments?))
}
