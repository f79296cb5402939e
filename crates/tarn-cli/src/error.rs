//! What can go wrong in a command, and the exit code each kind of failure gives, so a
//! script can tell a missing table from a conflict from a store outage.

use datafusion::common::DataFusionError;

/// The result of a command.
pub(crate) type Result<T> = std::result::Result<T, CliError>;

/// A command's failure.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
    /// A table operation failed.
    #[error(transparent)]
    Table(#[from] tarn::Error),
    /// A catalog operation failed.
    #[error(transparent)]
    Catalog(#[from] tarn_catalog::Error),
    /// A SQL statement failed.
    #[error("SQL: {0}")]
    Sql(#[from] DataFusionError),
    /// Bad flags or arguments.
    #[error("{0}")]
    Usage(String),
    /// The output could not be written.
    #[error("cannot write {what}: {reason}")]
    Output {
        /// Where to.
        what: String,
        /// Why not.
        reason: String,
    },
}

/// Exit codes: 0 success, 2 bad usage (from the argument parser), and these.
pub(crate) mod code {
    /// Any other failure.
    pub(crate) const OTHER: u8 = 1;
    /// Bad flags or arguments, or input the operation refuses (an unknown column, a
    /// predicate that does not parse, a retention too short).
    pub(crate) const INVALID: u8 = 3;
    /// What was named does not exist: table, version, index, catalog entry, data files.
    pub(crate) const NOT_FOUND: u8 = 4;
    /// A concurrent commit conflicted, or a commit's outcome is unknown.
    pub(crate) const CONFLICT: u8 = 5;
    /// The object store failed (network, permissions, a missing bucket).
    pub(crate) const STORE: u8 = 6;
    /// The table needs a feature this build does not support.
    pub(crate) const UNSUPPORTED: u8 = 7;
}

impl CliError {
    /// The process exit code for this failure (see [`code`]).
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            CliError::Table(e) => table_code(e),
            CliError::Catalog(e) => catalog_code(e),
            CliError::Sql(e) => sql_code(e),
            CliError::Usage(_) => code::INVALID,
            CliError::Output { .. } => code::OTHER,
        }
    }
}

fn table_code(error: &tarn::Error) -> u8 {
    use tarn::Error as E;
    match error {
        E::TableNotFound { .. }
        | E::VersionNotFound { .. }
        | E::TimestampOutOfRange { .. }
        | E::IndexNotFound { .. }
        | E::DataFileNotFound { .. }
        | E::RestoreFilesMissing { .. } => code::NOT_FOUND,
        E::Conflict { .. } | E::CommitStateUnknown { .. } | E::CommitRetriesExhausted { .. } => {
            code::CONFLICT
        }
        E::Store { .. } => code::STORE,
        E::UnsupportedReaderVersion { .. }
        | E::UnsupportedReaderFeature { .. }
        | E::UnsupportedWriterVersion { .. }
        | E::UnsupportedWriterFeature { .. } => code::UNSUPPORTED,
        E::Location(_)
        | E::InvalidArgument { .. }
        | E::InvalidExpression { .. }
        | E::UnknownColumn { .. }
        | E::TypeMismatch { .. }
        | E::SchemaMismatch { .. }
        | E::InvalidPartitionValue { .. }
        | E::InvalidPath { .. }
        | E::ConstraintViolated { .. }
        | E::AppendOnly { .. }
        | E::FeatureNotEnabled { .. }
        | E::IndexAlreadyExists { .. }
        | E::UnsupportedIndexType { .. }
        | E::TextMatchWithoutIndex { .. } => code::INVALID,
        _ => code::OTHER,
    }
}

fn catalog_code(error: &tarn_catalog::Error) -> u8 {
    use tarn_catalog::Error as E;
    match error {
        E::NotFound { .. } => code::NOT_FOUND,
        E::AlreadyExists { .. }
        | E::NotEmpty { .. }
        | E::InvalidName { .. }
        | E::InvalidArgument { .. }
        | E::InvalidPageToken { .. }
        | E::InvalidLocation { .. } => code::INVALID,
        E::Table(e) => table_code(e),
        E::Batch(e) => catalog_code(e),
        _ => code::OTHER,
    }
}

fn sql_code(error: &DataFusionError) -> u8 {
    match error {
        DataFusionError::SQL(..)
        | DataFusionError::Plan(_)
        | DataFusionError::SchemaError(..)
        | DataFusionError::Configuration(_) => code::INVALID,
        DataFusionError::NotImplemented(_) => code::UNSUPPORTED,
        DataFusionError::ObjectStore(_) => code::STORE,
        DataFusionError::External(e) => {
            if let Some(e) = e.downcast_ref::<tarn::Error>() {
                table_code(e)
            } else if let Some(e) = e.downcast_ref::<tarn_catalog::Error>() {
                catalog_code(e)
            } else if let Some(e) = e.downcast_ref::<DataFusionError>() {
                sql_code(e)
            } else {
                code::OTHER
            }
        }
        DataFusionError::Context(_, inner) | DataFusionError::Diagnostic(_, inner) => {
            sql_code(inner)
        }
        DataFusionError::Shared(inner) => sql_code(inner),
        // The first failure of a collection decides, as DataFusion's own message leads
        // with it.
        DataFusionError::Collection(all) => all.first().map_or(code::OTHER, sql_code),
        _ => code::OTHER,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn wrapped_sql_errors_keep_their_codes() {
        let plan = || DataFusionError::Plan("no such column".into());
        let missing = || {
            DataFusionError::External(Box::new(tarn::Error::TableNotFound {
                url: "file:///nowhere".into(),
                reason: "no _delta_log".into(),
            }))
        };
        assert_eq!(sql_code(&plan()), code::INVALID);
        assert_eq!(
            sql_code(&DataFusionError::Shared(Arc::new(missing()))),
            code::NOT_FOUND
        );
        assert_eq!(
            sql_code(&DataFusionError::Context(
                "scan".into(),
                Box::new(missing())
            )),
            code::NOT_FOUND
        );
        assert_eq!(
            sql_code(&DataFusionError::Collection(vec![plan(), missing()])),
            code::INVALID
        );
        assert_eq!(
            sql_code(&DataFusionError::NotImplemented("x".into())),
            code::UNSUPPORTED
        );
    }
}
