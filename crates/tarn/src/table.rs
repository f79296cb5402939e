//! `Table`: the entry point. Create or open a table by URL, write to it, change its
//! schema and properties, scan it, travel in time.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::datatypes::Schema;
use chrono::Utc;
use parquet::file::properties::WriterProperties;
use serde_json::{Map, Value};
use tarn_store::{StoreLocation, StoreOptions};
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::expr::Expr;
use crate::log::checkpoint::CheckpointWritten;
use crate::paths::validate_name;
use crate::properties::DEFAULT_TARGET_FILE_SIZE;
use crate::protocol::features::ensure_writable;
use crate::protocol::{
    Action, Add, DataType, Format, Metadata, Protocol, Remove, StructField, StructType,
};
use crate::scan::Scan;
use crate::snapshot::Snapshot;
use crate::txn::{
    Clock, CommitOutcome, IsolationLevel, RetryPolicy, SystemClock, Transaction, commit_create,
};
use crate::write::{
    FileWriteOptions, SchemaMode, WriteMode, ensure_rows_match, prepare_batches,
    validate_partition_columns, write_files,
};

/// A Delta table: a location and the snapshot this handle is at.
///
/// Writes commit on top of the handle's snapshot and move it to the new version; other
/// writers' commits are seen after [`refresh`](Self::refresh).
#[derive(Debug, Clone)]
pub struct Table {
    snapshot: Snapshot,
    retry: RetryPolicy,
    isolation: IsolationLevel,
    clock: Arc<dyn Clock>,
}

impl Table {
    /// Opens the table at `url` at its latest version (see [`tarn_store::open`] for URLs).
    ///
    /// Fails with [`Error::Location`] for a bad URL, [`Error::TableNotFound`] when there is
    /// no table, and as [`crate::SnapshotBuilder::build`] otherwise.
    pub async fn open(url: &str) -> Result<Table> {
        Self::open_with_options(url, &StoreOptions::default()).await
    }

    /// Opens the table at `url` with store options (endpoint, credentials, region).
    pub async fn open_with_options(url: &str, options: &StoreOptions) -> Result<Table> {
        Self::open_location(tarn_store::open_with_options(url, options)?).await
    }

    /// Opens the table at a location built by hand (for example with a wrapped store).
    pub async fn open_location(location: StoreLocation) -> Result<Table> {
        let snapshot = Snapshot::builder(location).build().await?;
        Ok(Self::from_snapshot(snapshot))
    }

    /// A handle at an existing snapshot.
    pub fn from_snapshot(snapshot: Snapshot) -> Table {
        Table {
            snapshot,
            retry: RetryPolicy::default(),
            isolation: IsolationLevel::default(),
            clock: Arc::new(SystemClock),
        }
    }

    /// Starts creating a table at `url`.
    pub fn create(url: &str) -> CreateBuilder {
        CreateBuilder::new(Target::Url(url.to_string(), StoreOptions::default()))
    }

    /// Starts creating a table at a location built by hand.
    pub fn create_at(location: StoreLocation) -> CreateBuilder {
        CreateBuilder::new(Target::Location(location))
    }

    /// Sets how commits retry after losing the race for a version.
    #[must_use]
    pub fn with_retry_policy(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Sets the isolation level of this handle's writes (default: Serializable).
    #[must_use]
    pub fn with_isolation(mut self, isolation: IsolationLevel) -> Self {
        self.isolation = isolation;
        self
    }

    /// Sets the clock commit timestamps come from (a test can skew it).
    #[must_use]
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The clock of this handle's commits.
    pub(crate) fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// The snapshot this handle is at.
    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    /// The version this handle is at.
    pub fn version(&self) -> i64 {
        self.snapshot.version()
    }

    /// The table's Delta schema.
    pub fn schema(&self) -> &StructType {
        self.snapshot.schema()
    }

    /// Where the table lives.
    pub fn location(&self) -> &StoreLocation {
        self.snapshot.location()
    }

    /// Moves to the newest version, reading only the commits after the current one.
    pub async fn refresh(&mut self) -> Result<()> {
        self.snapshot = self.snapshot.refresh().await?;
        Ok(())
    }

    /// Moves to `version` (time travel).
    pub async fn load_version(&mut self, version: i64) -> Result<()> {
        self.snapshot = Snapshot::builder(self.location().clone())
            .at_version(version)
            .build()
            .await?;
        Ok(())
    }

    /// Moves to the newest version committed at or before `timestamp_ms`.
    pub async fn load_timestamp(&mut self, timestamp_ms: i64) -> Result<()> {
        self.snapshot = Snapshot::builder(self.location().clone())
            .at_timestamp(timestamp_ms)
            .build()
            .await?;
        Ok(())
    }

    /// The versions the log holds, with their commit timestamps (ms), oldest first.
    pub async fn versions(&self) -> Result<Vec<(i64, i64)>> {
        Ok(crate::snapshot::list_versions(self.location())
            .await?
            .into_iter()
            .collect())
    }

    /// A scan of the current snapshot.
    pub fn scan(&self) -> Scan {
        self.snapshot.scan()
    }

    /// A transaction on the current snapshot, with this handle's isolation level, retry
    /// policy and clock. Commit it with [`Table::commit`] (or [`Transaction::commit`]).
    pub fn transaction(&self) -> Transaction {
        Transaction::new(self.snapshot.clone())
            .with_isolation(self.isolation)
            .with_retry_policy(self.retry)
            .with_clock(Arc::clone(&self.clock))
    }

    /// Commits a transaction and moves this handle to the version it committed.
    ///
    /// Fails as [`Transaction::commit`] does; the handle stays where it was.
    pub async fn commit(&mut self, transaction: Transaction) -> Result<CommitOutcome> {
        let outcome = transaction.commit().await?;
        self.snapshot = outcome.snapshot.clone();
        Ok(outcome)
    }

    /// Starts a write of `batches` (append by default).
    pub fn write(&mut self, batches: impl IntoIterator<Item = RecordBatch>) -> WriteBuilder<'_> {
        WriteBuilder {
            table: self,
            batches: batches.into_iter().collect(),
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
            .mode(WriteMode::Overwrite)
            .execute()
            .await
    }

    /// Removes the partitions `predicate` (on partition columns only) names, without
    /// reading any data: a metadata-only delete.
    ///
    /// Fails with [`Error::InvalidArgument`] for a predicate on other columns or an
    /// append-only table, and as [`Transaction::commit`] does.
    pub async fn delete_partitions(&mut self, predicate: Expr) -> Result<WriteOutcome> {
        self.write(Vec::new())
            .mode(WriteMode::Overwrite)
            .replace_where(predicate)
            .execute()
            .await
    }

    /// Sets table properties (`delta.checkpointInterval`, user keys...) in one commit,
    /// upgrading the protocol when a property needs a table feature.
    ///
    /// Fails with [`Error::InvalidArgument`] for empty keys, and as
    /// [`Transaction::commit`] does.
    pub async fn set_properties(
        &mut self,
        properties: impl IntoIterator<Item = (impl Into<String>, impl Into<String>)>,
    ) -> Result<CommitOutcome> {
        let mut metadata = self.snapshot.metadata().clone();
        let mut names = Vec::new();
        for (key, value) in properties {
            let key = key.into();
            if key.trim().is_empty() {
                return Err(Error::InvalidArgument {
                    name: "properties",
                    reason: "a property key must not be empty".into(),
                });
            }
            names.push(key.clone());
            metadata.configuration.insert(key, Some(value.into()));
        }
        let mut txn = self
            .transaction()
            .with_operation("SET TBLPROPERTIES")
            .with_parameter("properties", Value::from(names));
        let upgraded = self
            .snapshot
            .protocol()
            .merged_with(&Protocol::for_new_table(self.schema(), &metadata));
        if &upgraded != self.snapshot.protocol() {
            txn.add_action(Action::Protocol(upgraded));
        }
        txn.set_metadata(metadata);
        self.commit(txn).await
    }

    /// Adds nullable columns at the end of the schema in one commit. The transaction reads
    /// the whole table: a concurrent write conflicts with it as its isolation level says.
    ///
    /// Fails with [`Error::InvalidArgument`] for bad or duplicate names and non-nullable
    /// columns, and as [`Transaction::commit`] does.
    pub async fn add_columns(
        &mut self,
        columns: impl IntoIterator<Item = StructField>,
    ) -> Result<CommitOutcome> {
        let mut schema = self.schema().clone();
        let mut names = Vec::new();
        for column in columns {
            validate_name("column", &column.name)?;
            if !column.nullable {
                return Err(Error::InvalidArgument {
                    name: "columns",
                    reason: format!(
                        "added column {:?} must be nullable: existing rows have no value",
                        column.name
                    ),
                });
            }
            if schema
                .fields
                .iter()
                .any(|f| f.name.eq_ignore_ascii_case(&column.name))
            {
                return Err(Error::InvalidArgument {
                    name: "columns",
                    reason: format!("column {:?} already exists", column.name),
                });
            }
            names.push(column.name.clone());
            schema.fields.push(column);
        }
        let mut metadata = self.snapshot.metadata().clone();
        metadata.schema_string = schema.to_json();
        let mut txn = self
            .transaction()
            .with_operation("ADD COLUMNS")
            .with_parameter("columns", Value::from(names));
        txn.record_read_whole_table();
        let upgraded = self
            .snapshot
            .protocol()
            .merged_with(&Protocol::for_new_table(&schema, &metadata));
        if &upgraded != self.snapshot.protocol() {
            txn.add_action(Action::Protocol(upgraded));
        }
        txn.set_metadata(metadata);
        self.commit(txn).await
    }

    /// Writes a checkpoint of the current snapshot now.
    pub async fn checkpoint(&self) -> Result<CheckpointWritten> {
        crate::txn::checkpoint(&self.snapshot).await
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
            commit: CommitOutcome {
                version: snapshot.version(),
                attempts: 0,
                txn_id: String::new(),
                rebased_over: Vec::new(),
                checkpoint: None,
                snapshot: snapshot.clone(),
            },
            skipped,
            files_added: 0,
            files_removed: 0,
            rows_written: 0,
            bytes_written: 0,
        }
    }
}

/// The `remove` action that takes a live file out of the table.
pub(crate) fn remove_of(add: Add, now_ms: i64) -> Remove {
    Remove {
        path: add.path,
        deletion_timestamp: Some(now_ms),
        data_change: true,
        extended_file_metadata: Some(true),
        partition_values: Some(add.partition_values),
        size: Some(add.size),
        stats: None,
        tags: add.tags,
        deletion_vector: add.deletion_vector,
        base_row_id: add.base_row_id,
        default_row_commit_version: add.default_row_commit_version,
    }
}

/// A write being configured; run it with [`execute`](Self::execute).
#[derive(Debug)]
#[must_use]
pub struct WriteBuilder<'a> {
    table: &'a mut Table,
    batches: Vec<RecordBatch>,
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
    pub fn mode(mut self, mode: WriteMode) -> Self {
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
    pub fn schema_mode(mut self, mode: SchemaMode) -> Self {
        self.schema_mode = mode;
        self
    }

    /// Target size of data files in bytes (default: `delta.targetFileSize`, else 128 MiB).
    pub fn target_file_size(mut self, bytes: u64) -> Self {
        self.target_file_size = Some(bytes);
        self
    }

    /// Parquet writer settings for the data files (compression, row-group size,
    /// encodings). Default: Snappy, Parquet's defaults otherwise.
    pub fn writer_properties(mut self, properties: WriterProperties) -> Self {
        self.writer_properties = Some(properties);
        self
    }

    /// The isolation level of this write (default: the table handle's).
    pub fn isolation(mut self, isolation: IsolationLevel) -> Self {
        self.isolation = Some(isolation);
        self
    }

    /// Makes the write exactly-once for an application: it commits `version` of
    /// `app_id` with the data, and is skipped (nothing written) when the table already
    /// holds that version or a later one. A retried streaming write stays single.
    pub fn app_transaction(mut self, app_id: impl Into<String>, version: i64) -> Self {
        self.app_transaction = Some((app_id.into(), version));
        self
    }

    /// Writes the data files and commits them.
    ///
    /// Fails with [`Error::SchemaMismatch`] when the batches do not fit the table,
    /// [`Error::InvalidArgument`] for a `replace_where` that names non-partition columns or
    /// rows outside it, an overwrite of an append-only table or a zero target size,
    /// [`Error::UnsupportedWriterFeature`] when the table needs what Tarn cannot maintain,
    /// and as [`Transaction::commit`] does ([`Error::Conflict`] when a concurrent commit
    /// invalidates this one). Nothing is committed on failure.
    pub async fn execute(self) -> Result<WriteOutcome> {
        let WriteBuilder {
            table,
            batches,
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
            return Ok(WriteOutcome::nothing(&table.snapshot, true));
        }
        let snapshot = table.snapshot.clone();
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
        let (batches, evolved) = prepare_batches(
            snapshot.schema(),
            snapshot.partition_columns(),
            &batches,
            schema_mode,
        )?;
        let schema = evolved.clone().unwrap_or_else(|| snapshot.schema().clone());

        // An overwrite reads what it replaces: the whole table, or the named partitions.
        let mut removed: Vec<Add> = Vec::new();
        if mode == WriteMode::Overwrite {
            if snapshot.properties().append_only() {
                return Err(Error::InvalidArgument {
                    name: "mode",
                    reason: "the table is append-only (delta.appendOnly): it cannot be overwritten"
                        .into(),
                });
            }
            removed = match &replace_where {
                None => {
                    txn.record_read_whole_table();
                    snapshot.files().cloned().collect()
                }
                Some(predicate) => {
                    let bound = predicate.bind(&schema)?;
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
                    ensure_rows_match(&batches, &bound)?;
                    txn.record_read_predicate(predicate)?;
                    snapshot.scan().filter(predicate.clone()).plan()?.files
                }
            };
            txn.record_read_files(&removed);
        }

        let written = write_files(
            snapshot.location(),
            &schema,
            snapshot.partition_columns(),
            batches,
            &FileWriteOptions {
                target_file_size,
                num_indexed_cols: snapshot.properties().num_indexed_cols(),
                writer_properties,
            },
        )
        .await?;

        if let Some(new_schema) = &evolved {
            let mut metadata = snapshot.metadata().clone();
            metadata.schema_string = new_schema.to_json();
            txn.set_metadata(metadata);
        }
        let (files_removed, files_added) = (removed.len(), written.adds.len());
        let now = table.clock.now_ms();
        for add in removed {
            txn.remove_file(remove_of(add, now));
        }
        for add in written.adds {
            txn.add_file(add);
        }
        if txn.actions().is_empty() {
            // Nothing to write and nothing to replace: no commit.
            return Ok(WriteOutcome::nothing(&snapshot, false));
        }
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
        txn = txn
            .with_parameter("mode", mode_name)
            .with_parameter(
                "partitionBy",
                serde_json::to_string(&partition_by).unwrap_or_default(),
            )
            .with_metric("numFiles", files_added.to_string())
            .with_metric("numOutputRows", written.rows.to_string())
            .with_metric("numOutputBytes", written.bytes.to_string())
            .with_metric("numRemovedFiles", files_removed.to_string());
        if let Some(p) = &replace_where {
            txn = txn.with_parameter("predicate", p.to_string());
        }
        let commit = table.commit(txn).await?;
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

#[derive(Debug, Clone)]
enum Target {
    Url(String, StoreOptions),
    Location(StoreLocation),
}

/// A table being created; run it with [`execute`](Self::execute).
#[derive(Debug, Clone)]
#[must_use]
pub struct CreateBuilder {
    target: Target,
    schema: Option<StructType>,
    arrow_schema: Option<Schema>,
    partition_columns: Vec<String>,
    properties: HashMap<String, String>,
    name: Option<String>,
    description: Option<String>,
}

impl CreateBuilder {
    fn new(target: Target) -> Self {
        Self {
            target,
            schema: None,
            arrow_schema: None,
            partition_columns: Vec::new(),
            properties: HashMap::new(),
            name: None,
            description: None,
        }
    }

    /// Store options for a URL target (endpoint, credentials, region).
    pub fn with_store_options(mut self, options: StoreOptions) -> Self {
        if let Target::Url(url, _) = self.target {
            self.target = Target::Url(url, options);
        }
        self
    }

    /// The schema, from Arrow.
    pub fn with_arrow_schema(mut self, schema: &Schema) -> Self {
        self.arrow_schema = Some(schema.clone());
        self
    }

    /// The schema, as a Delta schema.
    pub fn with_schema(mut self, schema: StructType) -> Self {
        self.schema = Some(schema);
        self
    }

    /// Partition columns, in folder order.
    pub fn with_partition_columns(
        mut self,
        columns: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        self.partition_columns = columns.into_iter().map(Into::into).collect();
        self
    }

    /// A table property (`delta.checkpointInterval`, `delta.appendOnly`, ...).
    pub fn with_property(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.properties.insert(key.into(), value.into());
        self
    }

    /// The table's name.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The table's description.
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// Writes version 0.
    ///
    /// Fails with [`Error::InvalidArgument`] without a schema or for bad column names
    /// (empty, with `/` or control characters, duplicated) or partition columns,
    /// [`Error::InvalidSchema`] for Arrow types Delta lacks, and
    /// [`Error::TableAlreadyExists`] when the location already holds a table.
    pub async fn execute(self) -> Result<Table> {
        let location = match &self.target {
            Target::Url(url, options) => tarn_store::open_with_options(url, options)?,
            Target::Location(location) => location.clone(),
        };
        let schema = match (self.schema, &self.arrow_schema) {
            (Some(s), _) => s,
            (None, Some(a)) => StructType::try_from_arrow(a)?,
            (None, None) => {
                return Err(Error::InvalidArgument {
                    name: "schema",
                    reason: "a table needs a schema".into(),
                });
            }
        };
        validate_schema(&schema)?;
        validate_partition_columns(&schema, &self.partition_columns)?;
        if let Some(version) = crate::snapshot::latest_version(&location).await? {
            return Err(Error::TableAlreadyExists {
                url: location.url().to_string(),
                version,
            });
        }
        let metadata = Metadata {
            id: Uuid::new_v4().to_string(),
            name: self.name,
            description: self.description,
            format: Format::default(),
            schema_string: schema.to_json(),
            partition_columns: self.partition_columns.clone(),
            configuration: self
                .properties
                .into_iter()
                .map(|(k, v)| (k, Some(v)))
                .collect(),
            created_time: Some(Utc::now().timestamp_millis()),
        };
        let protocol = Protocol::for_new_table(&schema, &metadata);
        ensure_writable(&protocol, &metadata, &schema)?;
        let actions = vec![Action::Protocol(protocol), Action::Metadata(metadata)];
        let mut parameters = Map::new();
        parameters.insert(
            "partitionBy".into(),
            Value::from(serde_json::to_string(&self.partition_columns).unwrap_or_default()),
        );
        let (timestamp, actions) =
            commit_create(&location, &actions, parameters, &SystemClock).await?;
        let snapshot = Snapshot::new_table(location, timestamp, actions)?;
        Ok(Table::from_snapshot(snapshot))
    }
}

/// Column names must be usable as folder names and unique regardless of case (Delta
/// resolves names case-insensitively).
fn validate_schema(schema: &StructType) -> Result<()> {
    if schema.fields.is_empty() {
        return Err(Error::InvalidArgument {
            name: "schema",
            reason: "a table needs at least one column".into(),
        });
    }
    fn walk(s: &StructType) -> Result<()> {
        let mut seen = std::collections::HashSet::new();
        for field in &s.fields {
            validate_name("column", &field.name)?;
            if !seen.insert(field.name.to_lowercase()) {
                return Err(Error::InvalidArgument {
                    name: "schema",
                    reason: format!(
                        "column {:?} appears twice (names are case-insensitive)",
                        field.name
                    ),
                });
            }
            if let DataType::Struct(inner) = &field.data_type {
                walk(inner)?;
            }
        }
        Ok(())
    }
    walk(schema)
}
