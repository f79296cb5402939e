//! Tarn's error type: one enum whose variants say what failed and on what.

use thiserror::Error;

/// Everything that can go wrong in Tarn. Each variant names the object it concerns
/// (path, version, column) so a message is actionable on its own.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum Error {
    /// The table URL or store could not be opened.
    #[error(transparent)]
    Location(#[from] tarn_store::Error),

    /// An object-store request failed.
    #[error("object store {operation} of {path:?} failed: {source}")]
    Store {
        /// The request that failed.
        operation: tarn_store::StoreOp,
        /// The object or prefix.
        path: String,
        /// The store's error.
        #[source]
        source: object_store::Error,
    },

    /// There is no Delta table at the location (no `_delta_log`, or no commit in it).
    #[error("no Delta table at {url}: {reason}")]
    TableNotFound {
        /// The table URL.
        url: String,
        /// What was missing.
        reason: String,
    },

    /// `create` was asked for a table that already has commits.
    #[error("a table already exists at {url} (version {version})")]
    TableAlreadyExists {
        /// The table URL.
        url: String,
        /// Its latest version.
        version: i64,
    },

    /// A version was asked for that the log does not hold.
    #[error("version {version} of the table is not available: {reason}")]
    VersionNotFound {
        /// The version asked for.
        version: i64,
        /// Why (newer than the latest, or older than the earliest kept).
        reason: String,
    },

    /// The log skips versions where it must be contiguous.
    #[error("the log is not contiguous: version {missing} is missing (found {found:?})")]
    VersionGap {
        /// The first missing version.
        missing: i64,
        /// The versions that were found, around the gap.
        found: Vec<i64>,
    },

    /// A timestamp outside the table's history.
    #[error("no version of the table at timestamp {timestamp_ms} ms: {reason}")]
    TimestampOutOfRange {
        /// The timestamp asked for, milliseconds since the epoch.
        timestamp_ms: i64,
        /// Why.
        reason: String,
    },

    /// The replayed log has no `protocol` action.
    #[error("the log up to version {version} has no protocol action")]
    MissingProtocol {
        /// The snapshot version.
        version: i64,
    },

    /// The replayed log has no `metaData` action.
    #[error("the log up to version {version} has no metaData action")]
    MissingMetadata {
        /// The snapshot version.
        version: i64,
    },

    /// The table needs a newer reader than Tarn.
    #[error("the table requires reader version {version}; Tarn reads versions 1 to 3")]
    UnsupportedReaderVersion {
        /// The table's minReaderVersion.
        version: i32,
    },

    /// The table uses a reader feature Tarn lacks.
    #[error("the table requires reader feature {feature:?}, which Tarn does not support")]
    UnsupportedReaderFeature {
        /// The feature's name.
        feature: String,
    },

    /// The table needs a newer writer than Tarn.
    #[error("the table requires writer version {version}; Tarn writes versions 1 to 7")]
    UnsupportedWriterVersion {
        /// The table's minWriterVersion.
        version: i32,
    },

    /// The table uses a writer feature Tarn cannot maintain.
    #[error("the table uses writer feature {feature:?}, which Tarn cannot maintain when writing")]
    UnsupportedWriterFeature {
        /// The feature's name.
        feature: String,
    },

    /// A commit file is not valid newline-delimited JSON of actions.
    #[error("commit {version} is malformed at line {line}: {reason}")]
    InvalidCommit {
        /// The commit's version.
        version: i64,
        /// The 1-based line.
        line: usize,
        /// What is wrong.
        reason: String,
    },

    /// A checkpoint or `_last_checkpoint` could not be read.
    #[error("checkpoint {path:?} is invalid: {reason}")]
    InvalidCheckpoint {
        /// The checkpoint file.
        path: String,
        /// What is wrong.
        reason: String,
    },

    /// A deletion vector is corrupt: bad magic, size, checksum or cardinality.
    #[error("deletion vector {location} is invalid: {reason}")]
    InvalidDeletionVector {
        /// Where the DV lives (file and offset, or "inline").
        location: String,
        /// What is wrong.
        reason: String,
    },

    /// The table schema (schemaString) is not valid.
    #[error("invalid schema: {reason}")]
    InvalidSchema {
        /// What is wrong.
        reason: String,
    },

    /// Data handed to a write does not fit the table schema.
    #[error("schema mismatch: {reason}")]
    SchemaMismatch {
        /// What does not fit.
        reason: String,
    },

    /// A column name that the table does not have.
    #[error("unknown column {column:?}; the table has {available:?}")]
    UnknownColumn {
        /// The name asked for.
        column: String,
        /// The columns there are.
        available: Vec<String>,
    },

    /// A value of the wrong type for a column (a mistyped literal, comparing a string
    /// column with a number).
    #[error("type mismatch on column {column:?}: expected {expected}, found {found}")]
    TypeMismatch {
        /// The column.
        column: String,
        /// The column's type.
        expected: String,
        /// What was given.
        found: String,
    },

    /// A partition value that cannot be written or parsed.
    #[error("invalid value {value:?} for partition column {column:?}: {reason}")]
    InvalidPartitionValue {
        /// The partition column.
        column: String,
        /// The value.
        value: String,
        /// What is wrong.
        reason: String,
    },

    /// A path in the log, or a name given to Tarn, that would escape the table or is not
    /// a valid object path.
    #[error("invalid path {path:?}: {reason}")]
    InvalidPath {
        /// The path.
        path: String,
        /// What is wrong.
        reason: String,
    },

    /// A path in the table's log leaves the table's root (an absolute URI or path to
    /// elsewhere, or a symbolic link that points out of it). Shallow clones allow their
    /// source with `StoreOptions::with_allowed_roots`.
    #[error(
        "path {path:?} in the log of {table} leaves the table; allow its root with \
         StoreOptions::with_allowed_roots to read it"
    )]
    PathOutsideTable {
        /// The table's URL.
        table: String,
        /// The path as the log records it.
        path: String,
    },

    /// An argument that makes no sense (empty partition column list entry, zero target
    /// file size, duplicate column).
    #[error("invalid argument {name}: {reason}")]
    InvalidArgument {
        /// The argument.
        name: &'static str,
        /// What is wrong.
        reason: String,
    },

    /// The table is append-only (`delta.appendOnly`): an operation that would remove or
    /// change rows is refused before anything is written.
    #[error("{table} is append-only (delta.appendOnly): {operation} would remove or change rows")]
    AppendOnly {
        /// The table's URL.
        table: String,
        /// The operation refused (`delete`, `update`, `merge`, `overwrite`, ...).
        operation: String,
    },

    /// An operation needs a table feature the table has not enabled.
    #[error("{operation} on {table} needs the table feature {feature}: {how}")]
    FeatureNotEnabled {
        /// The table's URL.
        table: String,
        /// The feature (`deletionVectors`, ...).
        feature: &'static str,
        /// What asked for it (`merge-on-read delete`, ...).
        operation: String,
        /// How to enable it.
        how: &'static str,
    },

    /// A change feed was asked of a version committed while the table did not record one.
    #[error(
        "version {version} was committed without delta.enableChangeDataFeed: it has no change feed"
    )]
    ChangeDataFeedNotEnabled {
        /// The version.
        version: i64,
    },

    /// SQL expression text (a CHECK constraint, a column invariant) Tarn cannot parse.
    #[error("cannot read the SQL expression {expression:?}: {reason}")]
    InvalidExpression {
        /// The text.
        expression: String,
        /// What was not understood.
        reason: String,
    },

    /// Rows a write would add break a CHECK constraint or column invariant of the table.
    #[error("{rows} row(s) break {constraint} ({expression}); nothing was written")]
    ConstraintViolated {
        /// The constraint: `delta.constraints.<name>`, or the invariant's column.
        constraint: String,
        /// Its SQL expression.
        expression: String,
        /// How many rows of the batch break it.
        rows: usize,
    },

    /// A concurrent commit changed what this transaction depends on.
    #[error("conflict with the commit at version {winning_version} ({operation}): {reason}")]
    Conflict {
        /// The version that won the race.
        winning_version: i64,
        /// The winning commit's operation.
        operation: String,
        /// What conflicts.
        reason: ConflictReason,
    },

    /// A commit was sent but whether it landed could not be found out (the store kept
    /// failing, or its group-commit proposal may still be carried). The work is never
    /// committed twice, and never after `last_version`: `Table::resolve_commit` (with
    /// [`Error::unknown_commit`]) settles it into landed or not landed.
    #[error(
        "commit of version {version} (txnId {txn_id}) is in an unknown state until version \
         {last_version}: {reason}"
    )]
    CommitStateUnknown {
        /// The first version it may have landed at.
        version: i64,
        /// The last version it may land at.
        last_version: i64,
        /// The transaction's `commitInfo.txnId`, to look for in the log.
        txn_id: String,
        /// Why the outcome could not be read.
        reason: String,
    },

    /// Every commit attempt lost the race.
    #[error("gave up committing after {attempts} attempts; the last version tried was {version}")]
    CommitRetriesExhausted {
        /// Attempts made.
        attempts: u32,
        /// The last version tried.
        version: i64,
    },

    /// A MERGE matched ambiguously: a source row matched several target rows, or a target
    /// row several source rows.
    #[error("merge match on {key} is ambiguous: {reason}")]
    MergeDuplicateMatch {
        /// The key, as `column = value`.
        key: String,
        /// What is ambiguous.
        reason: String,
    },

    /// A data file the log references is not in the store (deleted by hand, or by a
    /// vacuum with too short a retention).
    #[error("data file {file:?} is missing: no object at {url}")]
    DataFileNotFound {
        /// The path as the log records it (relative to the table root, or absolute).
        file: String,
        /// The full URL looked for.
        url: String,
    },

    /// A restore needs files of the old version that are no longer in the store (a
    /// vacuum removed them); nothing was committed.
    #[error(
        "cannot restore version {version}: {} file(s) it needs are gone (vacuumed?), \
         first {:?}",
        missing.len(),
        missing.first()
    )]
    RestoreFilesMissing {
        /// The version the restore went back to.
        version: i64,
        /// The data and deletion-vector files missing, as the log names them, sorted.
        missing: Vec<String>,
    },

    /// A data file could not be read or written as Parquet.
    #[error("Parquet error on {path:?}: {source}")]
    Parquet {
        /// The data file.
        path: String,
        /// The Parquet error.
        #[source]
        source: parquet::errors::ParquetError,
    },

    /// The stream of batches a write was given failed.
    #[error("the input stream of the write failed: {source}")]
    InputStream {
        /// The stream's error.
        #[source]
        source: std::sync::Arc<dyn std::error::Error + Send + Sync>,
    },

    /// A local file a MERGE spilled its source to, or a write its partitions' waiting
    /// rows to, could not be written or read back.
    #[error("the spill file {path:?} failed: {source}")]
    Spill {
        /// The spill file or directory.
        path: std::path::PathBuf,
        /// The file system's error.
        #[source]
        source: std::io::Error,
    },

    /// An Arrow computation failed.
    #[error("Arrow error while {context}: {source}")]
    Arrow {
        /// What Tarn was doing.
        context: String,
        /// The Arrow error.
        #[source]
        source: arrow_schema::ArrowError,
    },

    /// An index object could not be built, read or queried (missing, corrupt, a store
    /// failure). Scans with `with_indices(false)` still read the table.
    #[error("index {index:?}: {source}")]
    Index {
        /// The index's name.
        index: String,
        /// What failed, naming the object.
        #[source]
        source: Box<tarn_index::Error>,
    },

    /// No index of that name.
    #[error("the table has no index {name:?} (it has {available:?})")]
    IndexNotFound {
        /// The name asked for.
        name: String,
        /// The indices there are.
        available: Vec<String>,
    },

    /// An index of that name exists already.
    #[error("the table already has an index {name:?}")]
    IndexAlreadyExists {
        /// The name.
        name: String,
    },

    /// The column's type cannot be held by that kind of index.
    #[error("a {kind} index cannot index column {column:?} of type {data_type}")]
    UnsupportedIndexType {
        /// The column.
        column: String,
        /// The kind asked for.
        kind: String,
        /// The column's type.
        data_type: String,
    },

    /// An index (or the registry of indices) recorded by a newer format than this build
    /// reads. Scans with `with_indices(false)` still read the table; writes leave the index
    /// alone.
    #[error("index {index:?} has format {version}; this build reads up to {supported}")]
    UnsupportedIndexFormat {
        /// The index.
        index: String,
        /// Its format.
        version: u32,
        /// The newest format this build reads.
        supported: u32,
    },

    /// An index record in the table's domain metadata does not parse.
    #[error("index metadata in domain {domain:?} is invalid: {reason}")]
    InvalidIndexMetadata {
        /// The domain.
        domain: String,
        /// What is wrong.
        reason: String,
    },

    /// `text_match` on a column with no full-text index.
    #[error(
        "text_match on column {column:?} needs a full-text index on it; create one with create_index(..).with_kind(IndexKind::FullText)"
    )]
    TextMatchWithoutIndex {
        /// The column.
        column: String,
    },

    /// A task run off the async threads (encoding, a background checkpoint) panicked or
    /// was cancelled.
    #[error("the {task} task did not finish: {source}")]
    TaskFailed {
        /// What the task was doing.
        task: &'static str,
        /// Why it did not finish.
        #[source]
        source: tokio::task::JoinError,
    },

    /// An action or a log file could not be serialized.
    #[error("could not serialize {what}: {source}")]
    Serialize {
        /// What was being serialized.
        what: String,
        /// The encoder's error.
        #[source]
        source: serde_json::Error,
    },

    /// A background checkpoint could not be written. The commit it followed stands;
    /// readers replay the commits instead.
    #[error("the checkpoint of version {version} was not written: {source}")]
    CheckpointFailed {
        /// The version being checkpointed.
        version: i64,
        /// Why.
        #[source]
        source: std::sync::Arc<Error>,
    },
}

/// Why a transaction conflicts with a concurrent commit, in the order Delta checks.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConflictReason {
    /// The winner changed the protocol.
    ProtocolChanged,
    /// The winner changed the metadata (schema, partitioning or properties).
    MetadataChanged,
    /// The winner changed a metadata domain this transaction reads or writes.
    DomainMetadataChanged {
        /// The domain.
        domain: String,
    },
    /// The winner committed an application transaction this transaction reads or writes.
    AppTransactionCommitted {
        /// The application.
        app_id: String,
        /// The version it committed.
        version: i64,
    },
    /// A newer fence of the writer this transaction commits as landed
    /// (`Table::fence_writer`): this is an earlier incarnation's work, and never commits.
    WriterFenced {
        /// The writer's id.
        writer: String,
        /// The epoch the fence set.
        epoch: i64,
    },
    /// A commit fence named this transaction (`Table::resolve_commit`): it never commits.
    CommitFenced {
        /// The transaction's `commitInfo.txnId`.
        txn_id: String,
    },
    /// The winner added a file this transaction would have read.
    ConcurrentAppend {
        /// The file.
        file: String,
        /// What this transaction read that the file matches: a predicate, or the whole
        /// table.
        read: String,
    },
    /// The winner removed a file this transaction read.
    ConcurrentDeleteRead {
        /// The file.
        file: String,
    },
    /// The winner removed a file this transaction removes too.
    ConcurrentDeleteDelete {
        /// The file.
        file: String,
    },
    /// The winner deleted, through a deletion vector, rows of a file that this
    /// transaction deletes or updates too.
    ConcurrentDeletionVectorOverlap {
        /// The file.
        file: String,
        /// How many rows both touched.
        rows: u64,
    },
    /// A log cleanup removed the commits after the version this transaction read (its
    /// snapshot is older than `delta.logRetentionDuration`): read the table again.
    LogCleanedUp {
        /// The version the transaction read.
        read_version: i64,
    },
}

impl std::fmt::Display for ConflictReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::ProtocolChanged => f.write_str("the protocol changed concurrently"),
            Self::MetadataChanged => f.write_str(
                "the metadata (schema, partitioning or properties) changed concurrently",
            ),
            Self::DomainMetadataChanged { domain } => {
                write!(f, "metadata domain {domain:?} changed concurrently")
            }
            Self::AppTransactionCommitted { app_id, version } => write!(
                f,
                "application {app_id:?} committed its version {version} concurrently"
            ),
            Self::WriterFenced { writer, epoch } => write!(
                f,
                "writer {writer:?} was fenced at epoch {epoch}; this is an earlier \
                 incarnation's commit"
            ),
            Self::CommitFenced { txn_id } => {
                write!(
                    f,
                    "commit {txn_id} was fenced by a resolution of its outcome"
                )
            }
            Self::ConcurrentAppend { file, read } => {
                write!(f, "file {file} was added concurrently and matches {read}")
            }
            Self::ConcurrentDeleteRead { file } => {
                write!(
                    f,
                    "file {file}, which this transaction read, was removed concurrently"
                )
            }
            Self::ConcurrentDeleteDelete { file } => {
                write!(
                    f,
                    "file {file}, which this transaction removes, was removed concurrently"
                )
            }
            Self::LogCleanedUp { read_version } => write!(
                f,
                "a log cleanup removed the commits after version {read_version}, which this \
                 transaction read; read the table again"
            ),
            Self::ConcurrentDeletionVectorOverlap { file, rows } => write!(
                f,
                "{rows} rows of file {file} that this transaction changes were deleted concurrently"
            ),
        }
    }
}

/// Result with Tarn's [`enum@Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A commit whose outcome was unknown, as [`Error::unknown_commit`] gives it: where it may
/// have landed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownCommit {
    /// The commit's `commitInfo.txnId`.
    pub txn_id: String,
    /// The first version it may have landed at.
    pub version: i64,
    /// The last version it may land at: once this version exists, it landed at or before
    /// it, or never will.
    pub last_version: i64,
}

impl Error {
    /// Where a commit whose outcome is unknown may have landed, for
    /// `Table::resolve_commit`: `Some` for [`Error::CommitStateUnknown`] only.
    pub fn unknown_commit(&self) -> Option<UnknownCommit> {
        match self {
            Error::CommitStateUnknown {
                version,
                last_version,
                txn_id,
                ..
            } => Some(UnknownCommit {
                txn_id: txn_id.clone(),
                version: *version,
                last_version: *last_version,
            }),
            _ => None,
        }
    }

    /// Whether this is a store operation that found no object (a log file a cleanup
    /// deleted after a listing showed it).
    pub(crate) fn is_missing_object(&self) -> bool {
        matches!(
            self,
            Error::Store {
                source: object_store::Error::NotFound { .. },
                ..
            }
        )
    }

    pub(crate) fn store(
        operation: tarn_store::StoreOp,
        path: impl ToString,
    ) -> impl FnOnce(object_store::Error) -> Error {
        let path = path.to_string();
        move |source| Error::Store {
            operation,
            path,
            source,
        }
    }

    pub(crate) fn arrow(
        context: impl Into<String>,
    ) -> impl FnOnce(arrow_schema::ArrowError) -> Error {
        let context = context.into();
        move |source| Error::Arrow { context, source }
    }

    pub(crate) fn parquet(
        path: impl ToString,
    ) -> impl FnOnce(parquet::errors::ParquetError) -> Error {
        let path = path.to_string();
        move |source| Error::Parquet { path, source }
    }
}

/// An Arrow error met outside Tarn's own calls (building the batches a caller hands in),
/// so a caller's `?` works on both.
impl From<arrow_schema::ArrowError> for Error {
    fn from(source: arrow_schema::ArrowError) -> Self {
        Error::Arrow {
            context: "building Arrow data".into(),
            source,
        }
    }
}
