use thiserror::Error;

/// Errors opening or configuring a store.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum Error {
    /// The URL could not be parsed, or names a location Tarn refuses (for example one with
    /// `..` segments or control characters).
    #[error("invalid table URL {url:?}: {reason}")]
    InvalidUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The URL's scheme has no store.
    #[error(
        "unsupported URL scheme {scheme:?} in {url:?}; use memory://, file://, a path, s3://, gs:// or az://"
    )]
    UnsupportedScheme {
        /// The scheme found.
        scheme: String,
        /// The URL as given.
        url: String,
    },
    /// An option key is not known for this kind of store.
    #[error("unknown store option {key:?} for {url:?}")]
    UnknownOption {
        /// The option key.
        key: String,
        /// The URL the option was given for.
        url: String,
    },
    /// A latency profile name is not known.
    #[error(
        "unknown latency profile {name:?}; known: none, s3-standard, s3-express, gcs-standard, azure-blob"
    )]
    UnknownProfile {
        /// The name given.
        name: String,
    },
    /// The underlying store could not be built (bad credentials configuration, bad endpoint).
    #[error("cannot build the store for {url:?}: {source}")]
    Build {
        /// The URL.
        url: String,
        /// The object_store error.
        #[source]
        source: object_store::Error,
    },
    /// Reading or preparing the local path failed.
    #[error("cannot use local path {path:?}: {source}")]
    Io {
        /// The local path.
        path: String,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
}

/// The kind of object-store request an error names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StoreOp {
    /// A GET, whole or ranged.
    Get,
    /// A HEAD.
    Head,
    /// A PUT of one object (plain, put-if-absent or conditional).
    Put,
    /// A multipart upload.
    PutMultipart,
    /// A LIST.
    List,
    /// A DELETE.
    Delete,
    /// A copy.
    Copy,
}

impl StoreOp {
    /// The request's name: `get`, `head`, `put`, `put_multipart`, `list`, `delete` or
    /// `copy`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Get => "get",
            Self::Head => "head",
            Self::Put => "put",
            Self::PutMultipart => "put_multipart",
            Self::List => "list",
            Self::Delete => "delete",
            Self::Copy => "copy",
        }
    }
}

impl std::fmt::Display for StoreOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Result with this crate's [`enum@Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
