//! Tarn: ACID tables on object storage that speak the Delta Lake protocol.
//!
//! A table is a set of Parquet files plus a transaction log of commits written with
//! put-if-absent, so independent processes can read and write one table on S3 with no
//! lock service. Tables Tarn writes read in Spark (Delta 4.4) and delta-rs with the same
//! rows, and Tarn reads theirs; the integration tests check both.
//!
//! ```no_run
//! use std::sync::Arc;
//! use arrow::array::{Int64Array, RecordBatch, StringArray};
//! use arrow::datatypes::{DataType, Field, Schema};
//! use tarn::expr::{col, lit};
//!
//! # async fn demo() -> tarn::Result<()> {
//! let schema = Arc::new(Schema::new(vec![
//!     Field::new("id", DataType::Int64, false),
//!     Field::new("country", DataType::Utf8, true),
//! ]));
//! let mut table = tarn::Table::create("/tmp/tarn-demo")
//!     .with_arrow_schema(&schema)
//!     .with_partition_columns(["country"])
//!     .execute()
//!     .await?;
//! let batch = RecordBatch::try_new(
//!     schema,
//!     vec![
//!         Arc::new(Int64Array::from(vec![1, 2, 3])),
//!         Arc::new(StringArray::from(vec!["NL", "FR", "NL"])),
//!     ],
//! )
//! .expect("valid batch");
//! table.append([batch]).await?;
//! let rows = table
//!     .scan()
//!     .filter(col("country").eq(lit("NL")))
//!     .collect()
//!     .await?;
//! # Ok(()) }
//! ```
//!
//! The public modules: [`protocol`] (Delta actions, schemas, features and table properties
//! as plain types), [`clock`] (where timestamps come from), [`expr`] (predicates and
//! expressions). Everything else is reached from the crate root, starting at a [`Table`]:
//! its [`Snapshot`], a [`Scan`], a [`Transaction`], and the operations ([`WriteBuilder`],
//! [`DeleteBuilder`], [`UpdateBuilder`], [`MergeBuilder`], [`OptimizeBuilder`],
//! [`VacuumBuilder`], [`RestoreBuilder`]) and the table's [`history`](Table::history).
//! `docs/architecture.md` maps the modules and their layers.

pub mod clock;
pub mod expr;
pub mod protocol;

mod background;
mod cache;
mod changes;
mod cleanup;
mod conform;
mod create;
mod describe;
mod dml;
mod dv;
mod error;
mod history;
mod index;
mod indexing;
#[cfg(test)]
mod layers;
mod log;
mod optimize;
mod paths;
mod reader;
mod restore;
mod scan;
mod snapshot;
mod stats;
mod table;
mod tasks;
mod txn;
mod vacuum;
mod write;

pub use background::settle_background_work;
pub use changes::{CHANGE_TYPE, COMMIT_TIMESTAMP, COMMIT_VERSION};
pub use cleanup::LogCleanupBuilder;
pub use clock::{Clock, ManualClock, OffsetClock, SystemClock};
pub use create::CreateBuilder;
pub use describe::TableDetail;
pub use dml::{
    DEFAULT_MERGE_MEMORY_LIMIT, DeleteBuilder, DmlMetrics, DmlOutcome, MergeBuilder, UpdateBuilder,
};
pub use error::{ConflictReason, Error, Result, UnknownCommit};
pub use history::CommitRecord;
pub use index::{IndexDefinition, IndexKind, IndexMode, IndexOptions, IndexSegment, IndexUse};
pub use indexing::{CreateIndexBuilder, IndexInfo, OptimizeIndicesOutcome};
pub use log::checkpoint_write::CheckpointWritten;
pub use optimize::{OptimizeBuilder, OptimizeOutcome};
pub use protocol::properties::ChangeStrategy;
pub use restore::{RestoreBuilder, RestoreOutcome};
pub use scan::{
    ColumnStatistics, CountOutcome, DEFAULT_BATCH_SIZE, DEFAULT_CONCURRENCY, IN_FLIGHT_BYTES,
    MAX_CONCURRENCY, MinMaxOutcome, PartFile, RecordBatchStream, Scan, ScanPlan,
};
pub use snapshot::{FileKey, PartitionColumn, Snapshot, SnapshotBuilder};
pub use table::{Table, VersionInfo};
pub use tarn_store::{StoreLocation, StoreOptions};
pub use txn::{
    CheckpointTask, CommitOutcome, ENGINE_INFO, IsolationLevel, LogCleanupOutcome, Resolution,
    RetryPolicy, Settle, Transaction, Writer,
};
pub use vacuum::{VacuumBuilder, VacuumOutcome};
pub use write::{SchemaMode, WriteBuilder, WriteMode, WriteOutcome};

// The examples of the README and of docs/ compile as doc tests, so they cannot drift
// from the API (docs/catalog.md's compile in tarn-catalog, which they use).
#[cfg(doctest)]
mod doc_examples {
    #[doc = include_str!("../../../README.md")]
    struct Readme;
    #[doc = include_str!("../../../docs/indices.md")]
    struct Indices;
    #[doc = include_str!("../../../docs/row-level-changes.md")]
    struct RowLevelChanges;
    #[doc = include_str!("../../../docs/storage.md")]
    struct Storage;
    #[doc = include_str!("../../../docs/transactions.md")]
    struct Transactions;
    #[doc = include_str!("../../../docs/features.md")]
    struct Features;
    #[doc = include_str!("../../../docs/architecture.md")]
    struct Architecture;
    #[doc = include_str!("../../../docs/operations.md")]
    struct Operations;
}

/// Opens the table at `url` at its latest version. See [`Table::open`].
pub async fn open(url: &str) -> Result<Table> {
    Table::open(url).await
}

#[cfg(test)]
mod send_tests {
    //! Every future of the public API can be spawned on a multi-threaded runtime: nothing
    //! it holds across an await is `Send` only for some lifetimes.
    use crate::expr::{col, lit};

    fn spawnable<F: std::future::Future + Send + 'static>(_: F) {}

    #[allow(dead_code)]
    fn futures_are_send(table: crate::Table, txn: crate::Transaction, add: crate::protocol::Add) {
        let t = table.clone();
        spawnable(async move { t.clone().commit(txn.clone()).await });
        let mut t = table.clone();
        spawnable(async move { t.refresh().await });
        let mut t = table.clone();
        spawnable(async move { t.append(Vec::new()).await });
        let mut t = table.clone();
        spawnable(async move { t.delete(col("a").eq(lit(1))).execute().await });
        let mut t = table.clone();
        spawnable(async move { t.update().set("a", lit(1)).execute().await });
        let mut t = table.clone();
        spawnable(async move { t.merge(Vec::new()).on(["a"]).execute().await });
        let mut t = table.clone();
        spawnable(async move { t.optimize().execute().await });
        let t = table.clone();
        spawnable(async move { t.vacuum().execute().await });
        let mut t = table.clone();
        spawnable(async move { t.restore().to_version(0).execute().await });
        let t = table.clone();
        spawnable(async move { t.history(None).await });
        let t = table.clone();
        spawnable(async move { t.cleanup_log().execute().await });
        let t = table.clone();
        spawnable(async move { t.scan().collect().await });
        let t = table.clone();
        spawnable(async move { t.scan().plan().await });
        let mut t = table.clone();
        spawnable(async move { t.create_index("a").execute().await });
        let mut t = table.clone();
        spawnable(async move { t.optimize_indices().await });
        let mut t = table.clone();
        spawnable(async move { t.drop_index("a").await });
        let t = table.clone();
        spawnable(async move { t.checkpoint().await });
        let s = table.snapshot().clone();
        spawnable(async move { s.read_file(&add).await });
        let location = table.location().clone();
        spawnable(async move { crate::Snapshot::builder(location).build().await });
        let mut txn = table.transaction();
        spawnable(async move { txn.write_files(Vec::new()).await });
        spawnable(async move { crate::Table::create("memory://x").execute().await });
    }
}
