//! Snapshots: the state of a table at one version, built from the newest checkpoint at or
//! below it plus the commits after it, and refreshed incrementally.

use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use tarn_store::StoreLocation;

use crate::cache::Caches;
use crate::error::{Error, Result};
use crate::log::checkpoint::read_checkpoint;
use crate::log::versions::{commit_timestamps, in_commit_timestamp};
use crate::log::{
    CommitFile, LogListing, LogSegment, list_log, list_whole_log_if_short, read_commit,
    read_commits, read_last_checkpoint,
};
use crate::protocol::features::ensure_readable;
use crate::protocol::properties::{ColumnMappingMode, TableProperties};
use crate::protocol::{
    Action, Add, DataType, DomainMetadata, Metadata, PrimitiveType, Protocol, Remove, StructType,
    Txn,
};

mod state;

pub use state::FileKey;
pub(crate) use state::TableState;

/// A partition column: its logical and physical names and its type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionColumn {
    /// The logical name.
    pub name: String,
    /// The key in `partitionValues` and the folder name.
    pub physical_name: String,
    /// The type.
    pub data_type: PrimitiveType,
}

/// A table at one version: protocol, metadata, schema and live files. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Snapshot {
    location: StoreLocation,
    version: i64,
    timestamp: i64,
    protocol: Protocol,
    metadata: Metadata,
    schema: Arc<StructType>,
    arrow_schema: SchemaRef,
    partition_columns: Arc<Vec<PartitionColumn>>,
    state: Arc<TableState>,
    /// Shared with every snapshot derived from this one.
    caches: Arc<Caches>,
    /// The newest checkpoint this snapshot knows of (read, listed or started here).
    checkpoint: Option<i64>,
}

/// Builds a [`Snapshot`]: the latest, or at a version, or at a timestamp.
///
/// ```no_run
/// # async fn f() -> tarn::Result<()> {
/// let location = tarn_store::open("/tmp/table")?;
/// let latest = tarn::Snapshot::builder(location.clone()).build().await?;
/// let v3 = tarn::Snapshot::builder(location).at_version(3).build().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct SnapshotBuilder {
    location: StoreLocation,
    version: Option<i64>,
    timestamp_ms: Option<i64>,
}

impl SnapshotBuilder {
    /// The snapshot at this version.
    pub fn at_version(mut self, version: i64) -> Self {
        self.version = Some(version);
        self
    }

    /// The snapshot of the newest version committed at or before this time (milliseconds
    /// since the epoch).
    pub fn at_timestamp(mut self, timestamp_ms: i64) -> Self {
        self.timestamp_ms = Some(timestamp_ms);
        self
    }

    /// Reads the log and builds the snapshot.
    ///
    /// Fails with [`Error::TableNotFound`] when there is no log, [`Error::VersionNotFound`]
    /// or [`Error::TimestampOutOfRange`] outside the table's history, [`Error::VersionGap`]
    /// when commits are missing, [`Error::MissingProtocol`] / [`Error::MissingMetadata`],
    /// and with the reader-feature errors when the table needs what Tarn lacks.
    pub async fn build(self) -> Result<Snapshot> {
        match (self.version, self.timestamp_ms) {
            (Some(_), Some(_)) => Err(Error::InvalidArgument {
                name: "at_version / at_timestamp",
                reason: "give a version or a timestamp, not both".into(),
            }),
            (version, timestamp) => {
                // A log cleanup may delete what a listing showed before it is read (only
                // below a checkpoint it keeps): list and read again.
                let mut tries = 0;
                loop {
                    let location = self.location.clone();
                    let result = match timestamp {
                        Some(ts) => Snapshot::at_timestamp(location, ts).await,
                        None => Snapshot::load(location, version).await,
                    };
                    match result {
                        Err(e) if tries < LOG_RACE_RETRIES && e.is_missing_object() => {
                            tries += 1;
                        }
                        other => return other,
                    }
                }
            }
        }
    }
}

/// How many times a snapshot is built again after a log file it listed went missing.
const LOG_RACE_RETRIES: u32 = 4;

impl Snapshot {
    /// A builder for the snapshot of the table at `location`.
    pub fn builder(location: StoreLocation) -> SnapshotBuilder {
        SnapshotBuilder {
            location,
            version: None,
            timestamp_ms: None,
        }
    }

    async fn load(location: StoreLocation, version: Option<i64>) -> Result<Snapshot> {
        if let Some(v) = version.filter(|v| *v < 0) {
            return Err(Error::VersionNotFound {
                version: v,
                reason: "versions start at 0".into(),
            });
        }
        let store = location.store().as_ref();
        let root = location.root();
        // The hint and a LIST of the whole log at once: a short log needs no second LIST.
        let (hint, whole) = futures::join!(
            read_last_checkpoint(store, root),
            list_whole_log_if_short(store, root)
        );
        if let Some(listing) = whole {
            return Self::from_listing(location, listing, version).await;
        }
        let hint = hint?;
        let start = match (&hint, version) {
            (Some(h), Some(v)) if v < h.version => 0,
            (Some(h), _) => h.version,
            (None, _) => 0,
        };
        let mut listing = list_log(store, root, start).await?;
        if start > 0 && !listing.checkpoints.contains_key(&start) {
            // A stale or wrong hint: fall back to listing everything, as Delta readers do.
            listing = list_log(store, root, 0).await?;
        }
        Self::from_listing(location, listing, version).await
    }

    async fn from_listing(
        location: StoreLocation,
        mut listing: LogListing,
        version: Option<i64>,
    ) -> Result<Snapshot> {
        let latest = listing
            .latest_version()
            .ok_or_else(|| Error::TableNotFound {
                url: location.url().to_string(),
                reason: "the _delta_log folder is missing or holds no commit".into(),
            })?;
        let target = version.unwrap_or(latest);
        if target > latest {
            return Err(Error::VersionNotFound {
                version: target,
                reason: format!("the latest version is {latest}"),
            });
        }
        let mut excluded = Vec::new();
        // The first corrupt checkpoint, reported if no older state can replace it.
        let mut corrupt: Option<Error> = None;
        // Checkpoints that failed to read, counted so a log that keeps changing under the
        // reader cannot keep it here.
        let mut vanished = 0;
        loop {
            let segment = match LogSegment::from_listing(&listing, target, &excluded) {
                Ok(segment) => segment,
                Err(e) => return Err(corrupt.unwrap_or(e)),
            };
            let checkpoint_version = segment.checkpoint.as_ref().map(|c| c.version);
            match (
                Self::from_segment(&location, &listing, &segment).await,
                checkpoint_version,
            ) {
                (Err(e @ Error::InvalidCheckpoint { .. }), Some(bad)) => {
                    // List again, from the start: a checkpoint gone missing may have been
                    // removed by a log cleanup that kept a newer one.
                    listing = list_log(location.store().as_ref(), location.root(), 0).await?;
                    vanished += 1;
                    if listing.checkpoints.contains_key(&bad) || vanished > LOG_RACE_RETRIES {
                        // Still listed: corrupt. Rebuild from an older checkpoint or from
                        // the commits, as Delta readers do.
                        corrupt.get_or_insert(e);
                        excluded.push(bad);
                    }
                    // Gone from the listing: a cleanup removed it; the new listing holds
                    // the checkpoint it kept, so it is not corruption.
                }
                (other, _) => return other.inspect(|s| s.note_listing(&listing)),
            }
        }
    }

    /// Keeps what a listing of the log showed that commits use: how many group-commit
    /// proposals are waiting (with many, a commit claims its version).
    fn note_listing(&self, listing: &LogListing) {
        let pending = self.caches.shared::<crate::log::ListedProposals>();
        pending.0.store(
            listing.proposals.len(),
            std::sync::atomic::Ordering::Relaxed,
        );
    }

    async fn from_segment(
        location: &StoreLocation,
        listing: &LogListing,
        segment: &LogSegment,
    ) -> Result<Snapshot> {
        let store = location.store().as_ref();
        let root = location.root();
        let (checkpoint, commits) = futures::join!(
            async {
                match &segment.checkpoint {
                    Some(cp) => read_checkpoint(store, root, cp).await.map(Some),
                    None => Ok(None),
                }
            },
            read_commits(store, &segment.commits)
        );
        let mut state = TableState::default();
        if let Some(actions) = checkpoint? {
            state.apply_checkpoint(location, actions);
        }
        for actions in commits? {
            state.apply_commit(location, actions);
        }
        let timestamp = commit_timestamp(listing, segment);
        let mut snapshot =
            Self::from_state(location.clone(), segment.version, timestamp, state, None)?;
        snapshot.checkpoint = segment.checkpoint.as_ref().map(|c| c.version);
        Ok(snapshot)
    }

    fn from_state(
        location: StoreLocation,
        version: i64,
        timestamp: i64,
        state: TableState,
        caches: Option<Arc<Caches>>,
    ) -> Result<Snapshot> {
        let protocol = state
            .protocol
            .clone()
            .ok_or(Error::MissingProtocol { version })?;
        ensure_readable(&protocol)?;
        let metadata = state
            .metadata
            .clone()
            .ok_or(Error::MissingMetadata { version })?;
        if metadata.schema_string.trim().is_empty() {
            return Err(Error::InvalidSchema {
                reason: format!("the metaData of version {version} has no schemaString"),
            });
        }
        let schema = StructType::from_json(&metadata.schema_string)?;
        crate::protocol::widening::ensure_allowed(&schema)?;
        let partition_columns = partition_columns(&schema, &metadata)?;
        let arrow_schema = Arc::new(schema.to_arrow());
        Ok(Snapshot {
            location,
            version,
            timestamp,
            protocol,
            metadata,
            schema: Arc::new(schema),
            arrow_schema,
            partition_columns: Arc::new(partition_columns),
            state: Arc::new(state),
            caches: caches.unwrap_or_default(),
            checkpoint: None,
        })
    }

    /// The newest checkpoint version this snapshot knows of.
    pub(crate) fn known_checkpoint(&self) -> Option<i64> {
        self.checkpoint
    }

    /// Records that a checkpoint exists (or is being written) at `version`.
    pub(crate) fn note_checkpoint(&mut self, version: i64) {
        self.checkpoint = self.checkpoint.max(Some(version));
    }

    /// The snapshot of a table just created with `actions` as version 0.
    pub(crate) fn new_table(
        location: StoreLocation,
        timestamp: i64,
        actions: Vec<Action>,
    ) -> Result<Snapshot> {
        let mut state = TableState::default();
        state.apply_commit(&location, actions);
        Self::from_state(location, 0, timestamp, state, None)
    }

    /// The snapshot after committing `actions` as `version` on top of this one, without
    /// reading the log.
    pub(crate) fn with_commit(
        &self,
        version: i64,
        timestamp: i64,
        actions: Vec<Action>,
    ) -> Result<Snapshot> {
        let mut state = (*self.state).clone();
        state.apply_commit(&self.location, actions);
        let mut next = Self::from_state(
            self.location.clone(),
            version,
            timestamp,
            state,
            Some(Arc::clone(&self.caches)),
        )?;
        next.checkpoint = self.checkpoint;
        Ok(next)
    }

    /// The snapshot at the newest version, reading only the commits after this one (one
    /// LIST, then the new commits in parallel). Returns a clone when nothing changed.
    ///
    /// Falls back to a full build when the commits after this version are gone (log
    /// cleanup); fails like [`SnapshotBuilder::build`] otherwise.
    pub async fn refresh(&self) -> Result<Snapshot> {
        let store = self.location.store().as_ref();
        let listing = list_log(store, self.location.root(), self.version + 1).await?;
        self.note_listing(&listing);
        let Some(latest) = listing.commits.keys().next_back().copied() else {
            return Ok(self.clone());
        };
        let commits: Vec<CommitFile> = (self.version + 1..=latest)
            .map(|v| {
                listing.commits.get(&v).map(|meta| CommitFile {
                    version: v,
                    meta: meta.clone(),
                })
            })
            .collect::<Option<_>>()
            .unwrap_or_default();
        if commits.is_empty() {
            // A gap after this version: a cleanup removed commits; build afresh (retrying
            // as a build does when what it listed goes missing).
            return Self::builder(self.location.clone()).build().await;
        }
        let bodies = match read_commits(store, &commits).await {
            // A log cleanup removed commits this handle is far behind on.
            Err(e) if e.is_missing_object() => {
                return Self::builder(self.location.clone()).build().await;
            }
            other => other?,
        };
        let mut state = (*self.state).clone();
        for actions in bodies {
            state.apply_commit(&self.location, actions);
        }
        let timestamp = commits
            .last()
            .map(|c| c.meta.last_modified.timestamp_millis())
            .unwrap_or(self.timestamp)
            .max(self.timestamp + 1);
        let mut refreshed = Self::from_state(
            self.location.clone(),
            latest,
            timestamp,
            state,
            Some(Arc::clone(&self.caches)),
        )?;
        refreshed.checkpoint = self.checkpoint.max(
            listing
                .checkpoints
                .range(..=latest)
                .next_back()
                .map(|(v, _)| *v),
        );
        Ok(refreshed)
    }

    async fn at_timestamp(location: StoreLocation, timestamp_ms: i64) -> Result<Snapshot> {
        let store = location.store().as_ref();
        let listing = list_log(store, location.root(), 0).await?;
        let latest = Self::from_listing(location.clone(), listing.clone(), None).await?;
        let timestamps = commit_timestamps(&listing);
        let out_of_range = |reason: String| Error::TimestampOutOfRange {
            timestamp_ms,
            reason,
        };
        let Some((&first_version, &first_ts)) = timestamps.iter().next() else {
            return Err(out_of_range("the log holds no commits".into()));
        };
        if timestamp_ms < first_ts {
            return Err(out_of_range(format!(
                "the earliest available version {first_version} was committed at {first_ts} ms"
            )));
        }
        let mut found = timestamps
            .iter()
            .take_while(|(_, ts)| **ts <= timestamp_ms)
            .map(|(v, _)| *v)
            .last()
            .unwrap_or(first_version);
        // With in-commit timestamps, commits from the enablement version on carry their
        // timestamp inside; file times no longer count there.
        if let Some(since) = latest.properties().in_commit_timestamps_since() {
            let ict_versions: Vec<i64> =
                timestamps.keys().copied().filter(|v| *v >= since).collect();
            if let Some(&first_ict) = ict_versions.first() {
                let ts_of = |v: i64| {
                    let meta = listing.commits.get(&v).cloned();
                    let location = &location;
                    async move {
                        let meta = meta.ok_or(Error::VersionGap {
                            missing: v,
                            found: vec![],
                        })?;
                        let actions = read_commit(
                            location.store().as_ref(),
                            &CommitFile { version: v, meta },
                        )
                        .await?;
                        Ok::<_, Error>(in_commit_timestamp(&actions).unwrap_or(i64::MIN))
                    }
                };
                if ts_of(first_ict).await? <= timestamp_ms {
                    // Binary search for the last version whose timestamp is not after the target.
                    let (mut lo, mut hi) = (0usize, ict_versions.len() - 1);
                    while lo < hi {
                        let mid = (lo + hi).div_ceil(2);
                        if ts_of(ict_versions[mid]).await? <= timestamp_ms {
                            lo = mid;
                        } else {
                            hi = mid - 1;
                        }
                    }
                    found = ict_versions[lo];
                } else {
                    found = found.min(first_ict - 1);
                }
            }
        }
        if found == latest.version {
            return Ok(latest);
        }
        Self::from_listing(location, listing, Some(found)).await
    }

    /// The snapshot's version.
    pub fn version(&self) -> i64 {
        self.version
    }

    /// When this version was committed, milliseconds since the epoch (the commit file's
    /// modification time, made monotonic).
    pub fn timestamp_ms(&self) -> i64 {
        self.timestamp
    }

    /// The newest time this version is known by: its file time, or the timestamp its
    /// writer recorded if that is later. A new commit is stamped after it, so commit
    /// timestamps increase with the version even when writers' clocks disagree.
    pub fn latest_commit_timestamp_ms(&self) -> i64 {
        self.state
            .last_commit_timestamp
            .unwrap_or(i64::MIN)
            .max(self.timestamp)
    }

    /// The timestamp the newest commit replayed into this snapshot recorded (its
    /// in-commit timestamp, else `commitInfo.timestamp`); `None` when the snapshot was
    /// read from a checkpoint with no commit after it.
    pub(crate) fn recorded_commit_timestamp(&self) -> Option<i64> {
        self.state.last_commit_timestamp
    }

    /// The table's location.
    pub fn location(&self) -> &StoreLocation {
        &self.location
    }

    /// The protocol in force.
    pub fn protocol(&self) -> &Protocol {
        &self.protocol
    }

    /// The metadata in force.
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// Typed table properties.
    pub fn properties(&self) -> TableProperties<'_> {
        TableProperties::new(&self.metadata)
    }

    /// The Delta schema.
    pub fn schema(&self) -> &StructType {
        &self.schema
    }

    /// The Arrow schema scans return (logical names, table column order).
    pub fn arrow_schema(&self) -> &SchemaRef {
        &self.arrow_schema
    }

    /// The partition columns, in partition order.
    pub fn partition_columns(&self) -> &[PartitionColumn] {
        &self.partition_columns
    }

    /// The column mapping mode.
    pub fn column_mapping_mode(&self) -> ColumnMappingMode {
        self.properties().column_mapping_mode()
    }

    /// The caches this snapshot shares with the snapshots derived from it.
    pub(crate) fn caches(&self) -> &Arc<Caches> {
        &self.caches
    }

    /// Whether a data file at this canonical path (as [`FileKey`] holds it) is live, with
    /// whatever deletion vector.
    pub(crate) fn has_file(&self, canonical: &str) -> bool {
        let from = FileKey {
            path: canonical.to_string(),
            dv: None,
        };
        self.state
            .files
            .range(from..)
            .next()
            .is_some_and(|(k, _)| k.path == canonical)
    }

    /// The live `add` of the data file at `path` (as a log action names it), with whatever
    /// deletion vector.
    pub(crate) fn live_file(&self, path: &str) -> Option<&Add> {
        let from = FileKey {
            path: crate::paths::canonical(&self.location, path),
            dv: None,
        };
        self.state
            .files
            .range(&from..)
            .next()
            .filter(|(k, _)| k.path == from.path)
            .map(|(_, a)| a.as_ref())
    }

    /// The live data files.
    pub fn files(&self) -> impl ExactSizeIterator<Item = &Add> {
        self.state.files.values().map(Arc::as_ref)
    }

    /// The live data files as the snapshot holds them, in [`files`](Self::files) order:
    /// what a scan plan keeps without copying each file's statistics.
    pub(crate) fn shared_files(&self) -> impl ExactSizeIterator<Item = &Arc<Add>> {
        self.state.files.values()
    }

    /// The live data files with their replay keys.
    pub fn file_entries(&self) -> impl ExactSizeIterator<Item = (&FileKey, &Add)> {
        self.state.files.iter().map(|(k, a)| (k, a.as_ref()))
    }

    /// How many live data files there are.
    pub fn file_count(&self) -> usize {
        self.state.files.len()
    }

    /// Files removed and not yet expired from the log (`remove` tombstones).
    pub fn tombstones(&self) -> impl ExactSizeIterator<Item = &Remove> {
        self.state.tombstones.values()
    }

    /// The last version an application committed with a `txn` action, if any.
    pub fn app_transaction_version(&self, app_id: &str) -> Option<i64> {
        self.state.txns.get(app_id).map(|t| t.version)
    }

    /// All application transactions.
    pub fn app_transactions(&self) -> impl Iterator<Item = &Txn> {
        self.state.txns.values()
    }

    /// The configuration of a metadata domain, if set.
    pub fn domain_metadata(&self, domain: &str) -> Option<&str> {
        self.state
            .domains
            .get(domain)
            .map(|d| d.configuration.as_str())
    }

    /// All live metadata domains.
    pub fn domains(&self) -> impl Iterator<Item = &DomainMetadata> {
        self.state.domains.values()
    }

    /// The actions a checkpoint of this snapshot holds: protocol, metadata, application
    /// transactions, domains, live files (with `dataChange: false`) and tombstones younger
    /// than the retention period at `now_ms`.
    pub(crate) fn checkpoint_actions(&self, now_ms: i64) -> Vec<Action> {
        let retention = self.properties().deleted_file_retention();
        let cutoff = now_ms - retention.as_millis() as i64;
        let mut actions = vec![
            Action::Protocol(self.protocol.clone()),
            Action::Metadata(self.metadata.clone()),
        ];
        actions.extend(self.state.txns.values().cloned().map(Action::Txn));
        actions.extend(
            self.state
                .domains
                .values()
                .cloned()
                .map(Action::DomainMetadata),
        );
        actions.extend(self.state.files.values().map(|a| {
            let mut add = Add::clone(a);
            add.data_change = false;
            Action::Add(add)
        }));
        actions.extend(
            self.state
                .tombstones
                .values()
                .filter(|r| r.deletion_timestamp.unwrap_or(0) > cutoff)
                .map(|r| {
                    let mut remove = r.clone();
                    remove.data_change = false;
                    Action::Remove(remove)
                }),
        );
        actions
    }
}

/// The commit timestamp of a segment's version: its commit file's modification time,
/// made monotonic over the versions listed.
fn commit_timestamp(listing: &LogListing, segment: &LogSegment) -> i64 {
    let timestamps = commit_timestamps(listing);
    timestamps
        .get(&segment.version)
        .copied()
        .or_else(|| {
            segment
                .checkpoint
                .as_ref()
                .and_then(|c| c.files.first())
                .map(|m| m.last_modified.timestamp_millis())
        })
        .unwrap_or(0)
}

fn partition_columns(schema: &StructType, metadata: &Metadata) -> Result<Vec<PartitionColumn>> {
    metadata
        .partition_columns
        .iter()
        .map(|name| {
            let field = schema.field(name).ok_or_else(|| Error::InvalidSchema {
                reason: format!("partition column {name:?} is not in the schema"),
            })?;
            let data_type = match &field.data_type {
                DataType::Primitive(p) => *p,
                other => {
                    return Err(Error::InvalidSchema {
                        reason: format!("partition column {name:?} has non-primitive type {other}"),
                    });
                }
            };
            Ok(PartitionColumn {
                name: name.clone(),
                physical_name: field.physical_name().to_string(),
                data_type,
            })
        })
        .collect()
}
