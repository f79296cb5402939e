//! `Table`: the entry point. Create or open a table by URL, write to it, scan it, travel
//! in time.

use std::collections::HashMap;

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
use crate::protocol::{Action, DataType, Format, Metadata, Protocol, Remove, StructType};
use crate::scan::Scan;
use crate::snapshot::Snapshot;
use crate::txn::{CommitOutcome, PendingCommit, RetryPolicy, commit, commit_create};
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

    /// Writes a checkpoint of the current snapshot now.
    pub async fn checkpoint(&self) -> Result<CheckpointWritten> {
        crate::txn::checkpoint(&self.snapshot).await
    }
}

/// What a write did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteOutcome {
    /// The commit.
    pub commit: CommitOutcome,
    /// Data files added.
    pub files_added: usize,
    /// Data files removed (overwrites).
    pub files_removed: usize,
    /// Rows written.
    pub rows_written: u64,
    /// Bytes of data files written.
    pub bytes_written: u64,
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
}

impl WriteBuilder<'_> {
    /// Parquet writer settings for the data files (compression, row-group size,
    /// encodings). Default: Snappy, Parquet's defaults otherwise.
    pub fn writer_properties(mut self, properties: WriterProperties) -> Self {
        self.writer_properties = Some(properties);
        self
    }

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

    /// Writes the data files and commits them.
    ///
    /// Fails with [`Error::SchemaMismatch`] when the batches do not fit the table,
    /// [`Error::InvalidArgument`] for a `replace_where` that names non-partition columns or
    /// rows outside it, an overwrite of an append-only table or a zero target size,
    /// [`Error::UnsupportedWriterFeature`] when the table needs what Tarn cannot maintain,
    /// and [`Error::Conflict`] when a concurrent commit invalidates this one. Nothing is
    /// committed on failure.
    pub async fn execute(self) -> Result<WriteOutcome> {
        let WriteBuilder {
            table,
            batches,
            mode,
            replace_where,
            schema_mode,
            target_file_size,
            writer_properties,
        } = self;
        let snapshot = &table.snapshot;
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

        // The files an overwrite replaces.
        let removed: Vec<Remove> = match mode {
            WriteMode::Append => Vec::new(),
            WriteMode::Overwrite => {
                if snapshot.properties().append_only() {
                    return Err(Error::InvalidArgument {
                        name: "mode",
                        reason:
                            "the table is append-only (delta.appendOnly): it cannot be overwritten"
                                .into(),
                    });
                }
                let files = match &replace_where {
                    None => snapshot.files().cloned().collect::<Vec<_>>(),
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
                        snapshot.scan().filter(predicate.clone()).plan()?.files
                    }
                };
                let now = Utc::now().timestamp_millis();
                files
                    .into_iter()
                    .map(|add| Remove {
                        path: add.path,
                        deletion_timestamp: Some(now),
                        data_change: true,
                        extended_file_metadata: Some(true),
                        partition_values: Some(add.partition_values),
                        size: Some(add.size),
                        stats: None,
                        tags: add.tags,
                        deletion_vector: add.deletion_vector,
                        base_row_id: add.base_row_id,
                        default_row_commit_version: add.default_row_commit_version,
                    })
                    .collect()
            }
        };

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

        let mut actions = Vec::new();
        if let Some(new_schema) = &evolved {
            let mut metadata = snapshot.metadata().clone();
            metadata.schema_string = new_schema.to_json();
            actions.push(Action::Metadata(metadata));
        }
        let files_removed = removed.len();
        let files_added = written.adds.len();
        actions.extend(removed.into_iter().map(Action::Remove));
        actions.extend(written.adds.into_iter().map(Action::Add));
        if actions.is_empty() {
            // Nothing to write and nothing to replace: no commit.
            return Ok(WriteOutcome {
                commit: CommitOutcome {
                    version: snapshot.version(),
                    attempts: 0,
                    checkpoint: None,
                    checkpoint_error: None,
                },
                files_added: 0,
                files_removed: 0,
                rows_written: 0,
                bytes_written: 0,
            });
        }
        let mut parameters = Map::new();
        let mode_name = match mode {
            WriteMode::Append => "Append",
            WriteMode::Overwrite => "Overwrite",
        };
        parameters.insert("mode".into(), Value::from(mode_name));
        let partition_by: Vec<String> = snapshot
            .partition_columns()
            .iter()
            .map(|p| p.name.clone())
            .collect();
        parameters.insert(
            "partitionBy".into(),
            Value::from(serde_json::to_string(&partition_by).unwrap_or_default()),
        );
        if let Some(p) = &replace_where {
            parameters.insert("predicate".into(), Value::from(p.to_string()));
        }
        let mut metrics = Map::new();
        metrics.insert("numFiles".into(), Value::from(files_added.to_string()));
        metrics.insert(
            "numOutputRows".into(),
            Value::from(written.rows.to_string()),
        );
        metrics.insert(
            "numOutputBytes".into(),
            Value::from(written.bytes.to_string()),
        );
        metrics.insert(
            "numRemovedFiles".into(),
            Value::from(files_removed.to_string()),
        );
        let pending = PendingCommit {
            operation: "WRITE",
            parameters,
            metrics,
            actions,
        };
        let (snapshot, commit) = commit(&table.snapshot, pending, &table.retry).await?;
        table.snapshot = snapshot;
        Ok(WriteOutcome {
            commit,
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
        let timestamp = commit_create(&location, &actions, parameters).await?;
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
