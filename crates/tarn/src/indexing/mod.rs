//! Index operations: building segments (`build`), creating, listing and dropping
//! indices (`ddl`), and keeping them covering the table (`maintain`: inline segments in a
//! write's commit, deferred ones caught up by `Table::optimize_indices`). The read path
//! (records and lookups) is `crate::index`.

mod build;
mod ddl;
mod maintain;

pub use ddl::{CreateIndexBuilder, IndexInfo, OptimizeIndicesOutcome};
pub(crate) use maintain::{BuiltSegments, InlineSegments, referenced_objects};
