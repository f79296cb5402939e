//! Writing the change data feed of a row-level change, on tables with
//! `delta.enableChangeDataFeed`: the rows a DELETE, UPDATE or MERGE removed, the old and
//! new images of the rows it updated and the rows it inserted go, with `_change_type`,
//! into change files (`_change_data/cdc-*.parquet`) that the commit names in `cdc`
//! actions. A commit with change files is read by them alone (Spark's rule), so every
//! change of the commit is in them.

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, StringArray};
use arrow::datatypes::{DataType as ArrowType, Field};

use crate::changes::CHANGE_TYPE;
use crate::error::Result;
use crate::protocol::properties::DEFAULT_TARGET_FILE_SIZE;
use crate::protocol::{Action, Cdc, DataType, PrimitiveType, StructField};
use crate::snapshot::Snapshot;
use crate::txn::Transaction;
use crate::write::{
    Checks, FileWriteOptions, SchemaMode, StatsColumns, prepare_batches, with_column,
    without_generated, write_files,
};

/// What happened to the rows of a feed entry, as `_change_type` says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChangeKind {
    /// Rows the change removed.
    Delete,
    /// Rows the change added.
    Insert,
    /// Updated rows as they were.
    UpdatePreimage,
    /// Updated rows as they became.
    UpdatePostimage,
}

impl ChangeKind {
    fn name(self) -> &'static str {
        match self {
            Self::Delete => "delete",
            Self::Insert => "insert",
            Self::UpdatePreimage => "update_preimage",
            Self::UpdatePostimage => "update_postimage",
        }
    }

    /// Whether the rows are new ones (assignments applied, not yet in the table's
    /// shape): they are conformed as written rows are.
    fn is_new(self) -> bool {
        matches!(self, Self::Insert | Self::UpdatePostimage)
    }
}

/// Rows of a change and what happened to them. New rows (inserts, post-images) are as
/// the operation built them; the others as read from the table.
pub(crate) type Feed = Vec<(RecordBatch, ChangeKind)>;

/// Whether row-level changes to `snapshot`'s table write a change data feed.
pub(crate) fn records_feed(snapshot: &Snapshot) -> bool {
    snapshot.properties().change_data_feed()
}

/// Writes `feed` as change files and adds their `cdc` actions to `txn`; returns the
/// bytes written. Nothing happens when the table records no feed or nothing changed.
///
/// Fails when new rows do not fit the table or a file cannot be written.
pub(crate) async fn write_feed(
    txn: &mut Transaction,
    snapshot: &Snapshot,
    feed: Feed,
    now_ms: i64,
) -> Result<u64> {
    if !records_feed(snapshot) || feed.iter().all(|(b, _)| b.num_rows() == 0) {
        return Ok(0);
    }
    let mut fields = snapshot.schema().fields.clone();
    fields.push(StructField::new(
        CHANGE_TYPE,
        DataType::Primitive(PrimitiveType::String),
        true,
    ));
    let schema = crate::protocol::StructType::new(fields);
    let mut batches = Vec::new();
    for (rows, kind) in feed {
        let shaped = match kind.is_new() {
            true => {
                prepare_batches(
                    snapshot.schema(),
                    snapshot.partition_columns(),
                    &without_generated(snapshot.schema(), &[rows]),
                    SchemaMode::Strict,
                )?
                .0
            }
            false => vec![rows],
        };
        for batch in shaped.into_iter().filter(|b| b.num_rows() > 0) {
            batches.push(with_change_type(&batch, kind)?);
        }
    }
    let options = FileWriteOptions {
        target_file_size: DEFAULT_TARGET_FILE_SIZE,
        stats_columns: StatsColumns::default(),
        writer_properties: None,
        compression: snapshot.properties().data_compression()?,
        modification_time: now_ms,
        capture: Vec::new(),
        file_per_batch: false,
        // Deleted rows and old images need not meet today's constraints.
        checks: Checks::default(),
        change_data: true,
        hidden: Vec::new(),
    };
    let written = write_files(
        snapshot.location(),
        &schema,
        snapshot.partition_columns(),
        batches,
        &options,
        None,
    )
    .await?;
    for add in written.adds {
        txn.add_action(Action::Cdc(Cdc {
            path: add.path,
            partition_values: add.partition_values,
            size: add.size,
            data_change: false,
        }));
    }
    Ok(written.bytes)
}

fn with_change_type(batch: &RecordBatch, kind: ChangeKind) -> Result<RecordBatch> {
    let kinds: ArrayRef = Arc::new(StringArray::from(vec![kind.name(); batch.num_rows()]));
    let field = Field::new(CHANGE_TYPE, ArrowType::Utf8, true);
    with_column(batch, field, kinds, "writing the change data feed")
}
