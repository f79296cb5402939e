//! The crate's error type: what failed, on which object.

/// Everything that can go wrong building, opening or querying an index. Variants name
/// the object concerned.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An object-store request failed.
    #[error("object store {operation} of {path:?} failed: {source}")]
    Store {
        /// The request that failed.
        operation: tarn_store::StoreOp,
        /// The object.
        path: String,
        /// The store's error.
        #[source]
        source: object_store::Error,
    },

    /// The index object is missing.
    #[error("index object {path:?} does not exist")]
    NotFound {
        /// The object.
        path: String,
    },

    /// The index object is truncated or corrupt (bad magic, size or checksum, a part that
    /// does not decode).
    #[error("index object {path:?} is corrupt: {reason}")]
    Corrupt {
        /// The object.
        path: String,
        /// What is wrong.
        reason: String,
    },

    /// The object was written by a newer format than this crate reads.
    #[error(
        "index object {path:?} has format version {version}; this build reads up to {supported}"
    )]
    UnsupportedVersion {
        /// The object.
        path: String,
        /// Its version.
        version: u16,
        /// The newest version this build reads.
        supported: u16,
    },

    /// The object is another kind of index than the one asked for.
    #[error("index object {path:?} is a {found} index, not a {expected} index")]
    WrongKind {
        /// The object.
        path: String,
        /// The kind asked for.
        expected: String,
        /// The kind found.
        found: String,
    },

    /// A column type the index kind cannot hold.
    #[error("a {kind} index cannot hold values of type {data_type}")]
    UnsupportedType {
        /// The index kind.
        kind: &'static str,
        /// The column type.
        data_type: String,
    },

    /// A query or input that does not fit the index (wrong value type, mismatched
    /// lengths, a malformed full-text query).
    #[error("invalid index input: {reason}")]
    InvalidInput {
        /// What is wrong.
        reason: String,
    },

    /// An Arrow computation failed.
    #[error("Arrow error while {context}: {source}")]
    Arrow {
        /// What was being done.
        context: String,
        /// The Arrow error.
        #[source]
        source: arrow::error::ArrowError,
    },

    /// The full-text engine failed.
    #[error("full-text index {path:?}: {reason}")]
    FullText {
        /// The object (empty while building).
        path: String,
        /// What failed.
        reason: String,
    },

    /// A build or search task running off the async threads did not finish.
    #[error("the index {task} task did not finish: {source}")]
    TaskFailed {
        /// What the task was doing.
        task: &'static str,
        /// Why.
        #[source]
        source: tokio::task::JoinError,
    },
}

/// Result with this crate's [`enum@Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn arrow(
        context: impl Into<String>,
    ) -> impl FnOnce(arrow::error::ArrowError) -> Error {
        let context = context.into();
        move |source| Error::Arrow { context, source }
    }

    pub(crate) fn corrupt(path: &impl ToString, reason: impl Into<String>) -> Error {
        Error::Corrupt {
            path: path.to_string(),
            reason: reason.into(),
        }
    }

    pub(crate) fn store(
        operation: tarn_store::StoreOp,
        path: &object_store::path::Path,
    ) -> impl FnOnce(object_store::Error) -> Error {
        let path = path.to_string();
        move |source| match source {
            object_store::Error::NotFound { .. } => Error::NotFound { path },
            source => Error::Store {
                operation,
                path,
                source,
            },
        }
    }
}
