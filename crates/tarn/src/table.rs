//! `Table`: the entry point. Create or open a table by URL, write to it, change its
//! schema and properties, scan it, travel in time.

use std::sync::Arc;

use serde_json::Value;
use tarn_store::{StoreLocation, StoreOptions};

use crate::clock::{Clock, SystemClock};
use crate::error::{Error, Result, UnknownCommit};
use crate::log::checkpoint_write::CheckpointWritten;
use crate::paths::validate_name;
use crate::protocol::properties::ColumnMappingMode;
use crate::protocol::{Action, Protocol, StructField, StructType, mapping};
use crate::scan::Scan;
use crate::snapshot::Snapshot;
use crate::txn::{
    CommitOutcome, IsolationLevel, Resolution, RetryPolicy, Settle, Transaction, Writer,
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
    /// The writer this handle commits as, once fenced.
    writer: Option<Writer>,
}

/// A version the log holds, as [`Table::versions`] lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VersionInfo {
    /// The version.
    pub version: i64,
    /// Its commit timestamp in milliseconds since the epoch: the in-commit timestamp
    /// where the table has them, else the commit file's time.
    pub timestamp_ms: i64,
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
        Self::open_at(tarn_store::open_with_options(url, options)?).await
    }

    /// Opens the table at a location built by hand (for example with a wrapped store).
    pub async fn open_at(location: StoreLocation) -> Result<Table> {
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
            writer: None,
        }
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

    /// The versions the log holds, with their commit timestamps (ms), oldest first: the
    /// in-commit timestamps where the table has them (read from those commits), else
    /// the commit files' times.
    ///
    /// Fails with [`Error::Store`] when the log cannot be listed or a commit read.
    pub async fn versions(&self) -> Result<Vec<VersionInfo>> {
        let since = self.snapshot.properties().in_commit_timestamps_since();
        Ok(
            crate::log::versions::list_stamped_versions(self.location(), since)
                .await?
                .into_iter()
                .map(|(version, timestamp_ms)| VersionInfo {
                    version,
                    timestamp_ms,
                })
                .collect(),
        )
    }

    /// A scan of the current snapshot.
    pub fn scan(&self) -> Scan {
        self.snapshot.scan()
    }

    /// A transaction on the current snapshot, with this handle's isolation level, retry
    /// policy and clock. Commit it with [`Table::commit`] (or [`Transaction::commit`]).
    pub fn transaction(&self) -> Transaction {
        let txn = Transaction::new(self.snapshot.clone())
            .with_isolation(self.isolation)
            .with_retry_policy(self.retry)
            .with_clock(Arc::clone(&self.clock));
        match &self.writer {
            Some(writer) => txn.with_writer(writer.clone()),
            None => txn,
        }
    }

    /// Fences writer `id`: commits a new epoch for it, after which no commit or
    /// group-commit proposal made by an earlier incarnation of the writer can land (an
    /// earlier handle still running fails with
    /// [`ConflictReason::WriterFenced`](crate::ConflictReason::WriterFenced)). This handle
    /// then commits as the writer at the new epoch, and is at the fence's version: what it
    /// reads is final as far as the writer's earlier work goes. Call it when a writer
    /// (re)starts, and again to settle its work after [`Error::CommitStateUnknown`].
    ///
    /// Fails with [`Error::InvalidArgument`] for an empty id, and as
    /// [`Transaction::commit`] does; the handle stays where it was.
    pub async fn fence_writer(&mut self, id: impl AsRef<str>) -> Result<Writer> {
        let (writer, outcome) = crate::txn::fence_writer(self.transaction(), id.as_ref()).await?;
        self.snapshot = outcome.snapshot;
        self.writer = Some(writer.clone());
        Ok(writer)
    }

    /// The writer this handle commits as, once [`fence_writer`](Self::fence_writer) set it.
    pub fn writer(&self) -> Option<&Writer> {
        self.writer.as_ref()
    }

    /// Settles a commit whose outcome was unknown ([`Error::unknown_commit`]) into
    /// landed or not landed: by reading the log until its last version exists
    /// ([`Settle::Wait`]), or by committing a fence that names it ([`Settle::Fence`]). The
    /// handle moves to the newest version read.
    ///
    /// Fails with [`Error::Store`] when the log cannot be read, and as
    /// [`Transaction::commit`] does for the fence; the handle stays where it was.
    pub async fn resolve_commit(
        &mut self,
        unknown: &UnknownCommit,
        settle: Settle,
    ) -> Result<Resolution> {
        let (resolution, snapshot) =
            crate::txn::resolve(self.transaction(), unknown, settle).await?;
        self.snapshot = snapshot;
        Ok(resolution)
    }

    /// Commits a transaction and moves this handle to the version it committed.
    ///
    /// Fails as [`Transaction::commit`] does; the handle stays where it was.
    pub async fn commit(&mut self, transaction: Transaction) -> Result<CommitOutcome> {
        let outcome = transaction.commit().await?;
        self.snapshot = outcome.snapshot.clone();
        Ok(outcome)
    }

    /// Sets table properties (`delta.checkpointInterval`, user keys...) in one commit,
    /// upgrading the protocol when a property needs a table feature.
    /// `delta.columnMapping.mode` may go from `none` to `name`: the columns keep their
    /// names as physical names and get column ids, so existing files read as before.
    ///
    /// Turning on in-commit timestamps (`delta.enableInCommitTimestamps`) records the
    /// commit's version and stamp as the enablement version and timestamp. Turning on row
    /// tracking (`delta.enableRowTracking`) names its materialized columns and recommits
    /// every file that has no row ids yet with fresh ones.
    ///
    /// Fails with [`Error::InvalidArgument`] for empty keys, CHECK constraints
    /// (`delta.constraints.*`: [`Table::add_constraint`] checks the rows), any other
    /// change of the column mapping mode and a `tarn.parquet.compression` naming no codec
    /// Tarn writes, and as [`Transaction::commit`] does.
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
            // A constraint must first be checked against the rows already there.
            if key.starts_with("delta.constraints.") {
                return Err(Error::InvalidArgument {
                    name: "properties",
                    reason: format!("{key} is a CHECK constraint: add it with add_constraint"),
                });
            }
            names.push(key.clone());
            metadata.configuration.insert(key, Some(value.into()));
        }
        // A codec no write could use is refused now, not at the next write.
        crate::protocol::properties::TableProperties::new(&metadata).data_compression()?;
        let mut schema = self.schema().clone();
        let (before, after) = (
            mapping::mode_of(self.snapshot.metadata())?,
            mapping::mode_of(&metadata)?,
        );
        match (before, after) {
            _ if before == after => {}
            // Files written so far use the logical names: they become the physical ones.
            (ColumnMappingMode::None, ColumnMappingMode::Name) => {
                mapping::annotate(&mut schema, &mut metadata, true)?;
            }
            _ => {
                return Err(Error::InvalidArgument {
                    name: "properties",
                    reason: format!(
                        "delta.columnMapping.mode cannot change from {before:?} to {after:?}: \
                         only None to Name keeps the existing files readable"
                    ),
                });
            }
        }
        // Row tracking names its hidden columns before it may be on; the commit gives
        // every file without row ids its ids.
        crate::txn::name_materialized_columns(&mut metadata);
        let mut txn = self
            .transaction()
            .with_operation("SET TBLPROPERTIES")
            .with_parameter("properties", Value::from(names));
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
        mapping::annotate(&mut schema, &mut metadata, false)?;
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
    ///
    /// Fails with [`Error::Store`] when the checkpoint or `_last_checkpoint` cannot be
    /// written; the table is unchanged either way.
    pub async fn checkpoint(&self) -> Result<CheckpointWritten> {
        crate::txn::checkpoint(&self.snapshot, self.clock.now_ms()).await
    }
}
