//! The catalog's error type.

/// What can go wrong in the catalog; each variant names the object concerned.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A name that cannot be an object name: empty, over 256 bytes, or holding `$`, `/`,
    /// `..` or control characters.
    #[error("invalid name {name:?}: {reason}")]
    InvalidName {
        /// The name.
        name: String,
        /// What is wrong.
        reason: String,
    },

    /// The object does not exist.
    #[error("{kind} {id:?} does not exist")]
    NotFound {
        /// `namespace` or `table`.
        kind: &'static str,
        /// The object id (`a$b$c`).
        id: String,
    },

    /// An object of that name exists already.
    #[error("{kind} {id:?} already exists")]
    AlreadyExists {
        /// What exists there: `namespace` or `table`.
        kind: &'static str,
        /// The object id.
        id: String,
    },

    /// A namespace holds objects and cascade was not asked for.
    #[error("namespace {id:?} is not empty: it holds {children} objects")]
    NotEmpty {
        /// The namespace.
        id: String,
        /// Objects directly in it.
        children: usize,
    },

    /// A table location outside the catalog's root, or where no Delta table is.
    #[error("invalid table location {location:?}: {reason}")]
    InvalidLocation {
        /// The location given.
        location: String,
        /// What is wrong.
        reason: String,
    },

    /// A page token that does not belong to this listing.
    #[error("invalid page token: {reason}")]
    InvalidPageToken {
        /// Why it does not fit.
        reason: String,
    },

    /// The manifest holds something this build cannot read (a row of an unknown type,
    /// metadata that is not JSON).
    #[error("the catalog manifest is invalid: {reason}")]
    InvalidManifest {
        /// What is wrong.
        reason: String,
    },

    /// An argument that makes no sense (a zero page size).
    #[error("invalid argument {name}: {reason}")]
    InvalidArgument {
        /// The argument.
        name: &'static str,
        /// What is wrong.
        reason: String,
    },

    /// The manifest table, or a catalogued table, failed (store, conflict, corrupt file).
    #[error(transparent)]
    Table(#[from] tarn::Error),

    /// The commit that carried this mutation with others from this process failed; the
    /// error is the commit's.
    #[error("the commit of this mutation and others failed: {0}")]
    Batch(#[source] std::sync::Arc<Error>),

    /// The committer task of this catalog handle is gone.
    #[error("the catalog's commit task stopped")]
    Stopped,
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
