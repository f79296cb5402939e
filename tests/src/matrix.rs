//! The conflict matrix's operations and expected outcomes, shared by the matrix of
//! operations committed one by one (`tests/conflict_matrix.rs`) and of operations grouped
//! into one commit (`tests/grouped_matrix.rs`).

use std::sync::Arc;

use arrow::array::{Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use tarn::expr::{col, lit};
use tarn::protocol::{DataType as DeltaType, PrimitiveType, StructField};
use tarn::{ChangeStrategy, ConflictReason, Error, IsolationLevel, StoreOptions, Table, WriteMode};

/// The operations of the matrix; `A` and `B` are partitions of the `part` column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Five rows appended to a partition.
    Append(&'static str),
    /// The whole table overwritten with rows in A.
    Overwrite,
    /// One partition replaced (`replace_where`).
    OverwritePartition(&'static str),
    /// One partition deleted.
    DeletePartition(&'static str),
    /// A nullable column added (a metadata change).
    AddColumn,
    /// A table property set (a metadata change).
    SetProperty,
    /// A checkpoint (commits nothing).
    Checkpoint,
    /// DELETE of one row (by id) copy-on-write (`false`) or merge-on-read (`true`).
    DeleteRow(i64, bool),
    /// UPDATE of one row, merge-on-read: `id = id + 1000`.
    UpdateRow(i64),
    /// OPTIMIZE: the two small files of each partition into one.
    Optimize,
    /// CREATE INDEX `tag_idx` (a Bitmap on `id`, inline).
    CreateIndex,
    /// DROP INDEX `id_idx`.
    DropIndex,
    /// OPTIMIZE INDICES: `id_idx`'s two segments merged into one.
    OptimizeIndices,
    /// Reads partition A (its predicate and files, at the version the handle holds) and
    /// appends five rows to B, as an `INSERT INTO … SELECT … WHERE part = 'A'` would.
    ReadAppend,
}

/// The isolation levels, in the order of `EXPECTED`'s outcome columns.
pub const LEVELS: [IsolationLevel; 4] = [
    IsolationLevel::SnapshotIsolation,
    IsolationLevel::WriteSerializable,
    IsolationLevel::Serializable,
    IsolationLevel::StrictSerializable,
];

/// A cell's outcome: commits (C), or conflicts because of a concurrent append matching
/// the loser's reads (A), a file both remove (D), a removed file the loser read (R), or a
/// metadata change (M).
///
/// loser, winner, outcomes at SnapshotIsolation, WriteSerializable, Serializable,
/// StrictSerializable. The table holds two files per partition: A (ids 0-4, 20-24) and B
/// (10-14, 30-34). The winner writes into partition A; overwrite writes its rows there
/// too. Row ids: 1 and 3 are in A's first file, 11 in B's. Besides the outcomes above,
/// V: both changed the same row of a file through deletion vectors.
pub const EXPECTED: &[(Op, Op, &str)] = {
    use Op::*;
    &[
        // The winner appends to A (a blind append).
        (Append("A"), Append("A"), "C C C C"),
        (Append("B"), Append("A"), "C C C C"),
        (Overwrite, Append("A"), "C C A A"),
        (OverwritePartition("A"), Append("A"), "C C A A"),
        (OverwritePartition("B"), Append("A"), "C C C C"),
        (DeletePartition("A"), Append("A"), "C C A A"),
        (DeletePartition("B"), Append("A"), "C C C C"),
        (AddColumn, Append("A"), "C A A A"),
        (SetProperty, Append("A"), "C C C C"),
        (Checkpoint, Append("A"), "C C C C"),
        // The winner overwrites the whole table.
        (Append("A"), Overwrite, "C C C C"),
        (Append("B"), Overwrite, "C C C C"),
        (Overwrite, Overwrite, "D A A A"),
        (OverwritePartition("A"), Overwrite, "D A A A"),
        (OverwritePartition("B"), Overwrite, "D D D D"),
        (DeletePartition("A"), Overwrite, "D A A A"),
        (DeletePartition("B"), Overwrite, "D D D D"),
        (AddColumn, Overwrite, "C A A A"),
        (SetProperty, Overwrite, "C C C C"),
        (Checkpoint, Overwrite, "C C C C"),
        // The winner overwrites partition A.
        (Append("A"), OverwritePartition("A"), "C C C C"),
        (Append("B"), OverwritePartition("A"), "C C C C"),
        (Overwrite, OverwritePartition("A"), "D A A A"),
        (OverwritePartition("A"), OverwritePartition("A"), "D A A A"),
        (OverwritePartition("B"), OverwritePartition("A"), "C C C C"),
        (DeletePartition("A"), OverwritePartition("A"), "D A A A"),
        (DeletePartition("B"), OverwritePartition("A"), "C C C C"),
        (AddColumn, OverwritePartition("A"), "C A A A"),
        (SetProperty, OverwritePartition("A"), "C C C C"),
        (Checkpoint, OverwritePartition("A"), "C C C C"),
        // The winner deletes partition A.
        (Append("A"), DeletePartition("A"), "C C C C"),
        (Append("B"), DeletePartition("A"), "C C C C"),
        (Overwrite, DeletePartition("A"), "D D D D"),
        (OverwritePartition("A"), DeletePartition("A"), "D D D D"),
        (OverwritePartition("B"), DeletePartition("A"), "C C C C"),
        (DeletePartition("A"), DeletePartition("A"), "D D D D"),
        (DeletePartition("B"), DeletePartition("A"), "C C C C"),
        (AddColumn, DeletePartition("A"), "C R R R"),
        (SetProperty, DeletePartition("A"), "C C C C"),
        (Checkpoint, DeletePartition("A"), "C C C C"),
        // The winner adds a column: every commit conflicts on the metadata.
        (Append("A"), AddColumn, "M M M M"),
        (Append("B"), AddColumn, "M M M M"),
        (Overwrite, AddColumn, "M M M M"),
        (OverwritePartition("A"), AddColumn, "M M M M"),
        (OverwritePartition("B"), AddColumn, "M M M M"),
        (DeletePartition("A"), AddColumn, "M M M M"),
        (DeletePartition("B"), AddColumn, "M M M M"),
        (AddColumn, AddColumn, "M M M M"),
        (SetProperty, AddColumn, "M M M M"),
        (Checkpoint, AddColumn, "C C C C"),
        // The winner sets a property: the same.
        (Append("A"), SetProperty, "M M M M"),
        (Append("B"), SetProperty, "M M M M"),
        (Overwrite, SetProperty, "M M M M"),
        (OverwritePartition("A"), SetProperty, "M M M M"),
        (OverwritePartition("B"), SetProperty, "M M M M"),
        (DeletePartition("A"), SetProperty, "M M M M"),
        (DeletePartition("B"), SetProperty, "M M M M"),
        (AddColumn, SetProperty, "M M M M"),
        (SetProperty, SetProperty, "M M M M"),
        (Checkpoint, SetProperty, "C C C C"),
        // The winner only checkpoints: no commit, no race.
        (Append("A"), Checkpoint, "C C C C"),
        (Append("B"), Checkpoint, "C C C C"),
        (Overwrite, Checkpoint, "C C C C"),
        (OverwritePartition("A"), Checkpoint, "C C C C"),
        (OverwritePartition("B"), Checkpoint, "C C C C"),
        (DeletePartition("A"), Checkpoint, "C C C C"),
        (DeletePartition("B"), Checkpoint, "C C C C"),
        (AddColumn, Checkpoint, "C C C C"),
        (SetProperty, Checkpoint, "C C C C"),
        (Checkpoint, Checkpoint, "C C C C"),
        // Row-level losers against the winners above.
        (DeleteRow(1, false), Append("A"), "C C C C"),
        (DeleteRow(1, false), Overwrite, "D D D D"),
        (DeleteRow(1, false), OverwritePartition("A"), "D D D D"),
        (DeleteRow(1, false), DeletePartition("A"), "D D D D"),
        (DeleteRow(1, false), AddColumn, "M M M M"),
        (DeleteRow(1, false), SetProperty, "M M M M"),
        (DeleteRow(1, false), Checkpoint, "C C C C"),
        (DeleteRow(1, true), Append("A"), "C C C C"),
        (DeleteRow(1, true), Overwrite, "D D D D"),
        (DeleteRow(1, true), OverwritePartition("A"), "D D D D"),
        (DeleteRow(1, true), DeletePartition("A"), "D D D D"),
        (DeleteRow(1, true), AddColumn, "M M M M"),
        (DeleteRow(1, true), SetProperty, "M M M M"),
        (DeleteRow(1, true), Checkpoint, "C C C C"),
        (DeleteRow(3, true), Append("A"), "C C C C"),
        (DeleteRow(3, true), Overwrite, "D D D D"),
        (DeleteRow(3, true), OverwritePartition("A"), "D D D D"),
        (DeleteRow(3, true), DeletePartition("A"), "D D D D"),
        (DeleteRow(11, true), Append("A"), "C C C C"),
        (DeleteRow(11, true), Overwrite, "D D D D"),
        (DeleteRow(11, true), OverwritePartition("A"), "C C C C"),
        (DeleteRow(11, true), DeletePartition("A"), "C C C C"),
        (DeleteRow(11, true), AddColumn, "M M M M"),
        (UpdateRow(2), Append("A"), "C C C C"),
        (UpdateRow(2), Overwrite, "D D D D"),
        (UpdateRow(2), OverwritePartition("A"), "D D D D"),
        (UpdateRow(2), DeletePartition("A"), "D D D D"),
        (UpdateRow(2), SetProperty, "M M M M"),
        (UpdateRow(2), Checkpoint, "C C C C"),
        (Optimize, Append("A"), "C C C C"),
        (Optimize, Overwrite, "D D D D"),
        (Optimize, OverwritePartition("A"), "D D D D"),
        (Optimize, DeletePartition("A"), "D D D D"),
        (Optimize, AddColumn, "M M M M"),
        (Optimize, SetProperty, "M M M M"),
        (Optimize, Checkpoint, "C C C C"),
        // The winner deletes row 1 copy-on-write: A's first file is rewritten.
        (Append("A"), DeleteRow(1, false), "C C C C"),
        (Append("B"), DeleteRow(1, false), "C C C C"),
        (Overwrite, DeleteRow(1, false), "D A A A"),
        (OverwritePartition("A"), DeleteRow(1, false), "D A A A"),
        (OverwritePartition("B"), DeleteRow(1, false), "C C C C"),
        (DeletePartition("A"), DeleteRow(1, false), "D A A A"),
        (DeletePartition("B"), DeleteRow(1, false), "C C C C"),
        (AddColumn, DeleteRow(1, false), "C A A A"),
        (SetProperty, DeleteRow(1, false), "C C C C"),
        (Checkpoint, DeleteRow(1, false), "C C C C"),
        (DeleteRow(1, false), DeleteRow(1, false), "D A A A"),
        (DeleteRow(1, true), DeleteRow(1, false), "D A A A"),
        (DeleteRow(3, true), DeleteRow(1, false), "D A A A"),
        (DeleteRow(11, true), DeleteRow(1, false), "C C C C"),
        (UpdateRow(2), DeleteRow(1, false), "D A A A"),
        (Optimize, DeleteRow(1, false), "D D D D"),
        // The winner deletes row 1 through a deletion vector.
        (Append("A"), DeleteRow(1, true), "C C C C"),
        (Overwrite, DeleteRow(1, true), "D D D D"),
        (OverwritePartition("A"), DeleteRow(1, true), "D D D D"),
        (OverwritePartition("B"), DeleteRow(1, true), "C C C C"),
        (DeletePartition("A"), DeleteRow(1, true), "D D D D"),
        (AddColumn, DeleteRow(1, true), "C R R R"),
        (SetProperty, DeleteRow(1, true), "C C C C"),
        (Checkpoint, DeleteRow(1, true), "C C C C"),
        (DeleteRow(1, false), DeleteRow(1, true), "D D D D"),
        (DeleteRow(1, true), DeleteRow(1, true), "V V V V"),
        (DeleteRow(3, true), DeleteRow(1, true), "C C C C"),
        (DeleteRow(11, true), DeleteRow(1, true), "C C C C"),
        (UpdateRow(2), DeleteRow(1, true), "C C C C"),
        (Optimize, DeleteRow(1, true), "D D D D"),
        // The winner updates row 2 through a deletion vector and a new file.
        (Append("A"), UpdateRow(2), "C C C C"),
        (Overwrite, UpdateRow(2), "D A A A"),
        (OverwritePartition("A"), UpdateRow(2), "D A A A"),
        (OverwritePartition("B"), UpdateRow(2), "C C C C"),
        (DeletePartition("A"), UpdateRow(2), "D A A A"),
        (AddColumn, UpdateRow(2), "C A A A"),
        (SetProperty, UpdateRow(2), "C C C C"),
        (Checkpoint, UpdateRow(2), "C C C C"),
        (DeleteRow(1, false), UpdateRow(2), "D D D D"),
        (DeleteRow(1, true), UpdateRow(2), "C C C C"),
        (DeleteRow(3, true), UpdateRow(2), "C C C C"),
        (DeleteRow(11, true), UpdateRow(2), "C C C C"),
        (UpdateRow(2), UpdateRow(2), "V V V V"),
        (Optimize, UpdateRow(2), "D D D D"),
        // The winner optimizes: every file rewritten, no data changed.
        (Append("A"), Optimize, "C C C C"),
        (Append("B"), Optimize, "C C C C"),
        (Overwrite, Optimize, "D D D D"),
        (OverwritePartition("A"), Optimize, "D D D D"),
        (OverwritePartition("B"), Optimize, "D D D D"),
        (DeletePartition("A"), Optimize, "D D D D"),
        (AddColumn, Optimize, "C R R R"),
        (SetProperty, Optimize, "C C C C"),
        (Checkpoint, Optimize, "C C C C"),
        (DeleteRow(1, false), Optimize, "D D D D"),
        (DeleteRow(1, true), Optimize, "D D D D"),
        (DeleteRow(11, true), Optimize, "D D D D"),
        (UpdateRow(2), Optimize, "D D D D"),
        (Optimize, Optimize, "D D D D"),
        // A loser that only read A's files: a compaction moving their rows leaves its read
        // standing, any change to A's rows does not.
        (ReadAppend, Append("A"), "C C A A"),
        (ReadAppend, Overwrite, "C A A A"),
        (ReadAppend, OverwritePartition("A"), "C A A A"),
        (ReadAppend, DeletePartition("A"), "C R R R"),
        (ReadAppend, AddColumn, "M M M M"),
        (ReadAppend, SetProperty, "M M M M"),
        (ReadAppend, Checkpoint, "C C C C"),
        (ReadAppend, DeleteRow(1, false), "C A A A"),
        (ReadAppend, DeleteRow(1, true), "C R R R"),
        (ReadAppend, UpdateRow(2), "C A A A"),
        (ReadAppend, Optimize, "C C C C"),
    ]
};

/// `id: Int64 not null, part: Utf8`, partitioned by `part` in the matrix's tables.
pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("part", DataType::Utf8, true),
    ]))
}

/// Five rows in partition `part`, ids from `start`.
pub fn rows(part: &str, start: i64) -> RecordBatch {
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from((start..start + 5).collect::<Vec<_>>())),
            Arc::new(StringArray::from(vec![part; 5])),
        ],
    )
    .unwrap()
}

/// Runs one operation; `Ok(Some(attempts))` when it committed.
pub async fn run(op: Op, table: &mut Table) -> tarn::Result<Option<u32>> {
    let attempts = match op {
        Op::Append(p) => Some(table.append([rows(p, 100)]).await?.commit.attempts),
        Op::Overwrite => Some(table.overwrite([rows("A", 200)]).await?.commit.attempts),
        Op::OverwritePartition(p) => Some(
            table
                .write([rows(p, 300)])
                .with_mode(WriteMode::Overwrite)
                .replace_where(col("part").eq(lit(p)))
                .execute()
                .await?
                .commit
                .attempts,
        ),
        Op::DeletePartition(p) => Some(
            table
                .delete_partitions(col("part").eq(lit(p)))
                .await?
                .commit
                .attempts,
        ),
        Op::AddColumn => Some(
            table
                .add_columns([StructField::new(
                    "extra",
                    DeltaType::Primitive(PrimitiveType::Long),
                    true,
                )])
                .await?
                .attempts,
        ),
        Op::SetProperty => Some(
            table
                .set_properties([("tarn.test.owner", "matrix")])
                .await?
                .attempts,
        ),
        Op::Checkpoint => {
            table.checkpoint().await?;
            None
        }
        Op::DeleteRow(id, mor) => {
            let strategy = if mor {
                ChangeStrategy::MergeOnRead
            } else {
                ChangeStrategy::CopyOnWrite
            };
            Some(
                table
                    .delete(col("id").eq(lit(id)))
                    .with_strategy(strategy)
                    .execute()
                    .await?
                    .commit
                    .attempts,
            )
        }
        Op::UpdateRow(id) => Some(
            table
                .update()
                .filter(col("id").eq(lit(id)))
                .set("id", col("id") + lit(1000i64))
                .with_strategy(ChangeStrategy::MergeOnRead)
                .execute()
                .await?
                .commit
                .attempts,
        ),
        Op::Optimize => Some(table.optimize().execute().await?.commit.attempts),
        Op::CreateIndex => {
            table
                .create_index("id")
                .with_name("tag_idx")
                .with_kind(tarn::IndexKind::Bitmap)
                .execute()
                .await?;
            Some(1)
        }
        Op::DropIndex => Some(table.drop_index("id_idx").await?.attempts),
        Op::ReadAppend => {
            let read = col("part").eq(lit("A"));
            let plan = table.snapshot().scan().filter(read.clone()).plan().await?;
            let mut txn = table.transaction();
            txn.record_read_predicate(&read)?;
            txn.record_read_files(&plan.files);
            txn.write_files(vec![rows("B", 400)]).await?;
            Some(table.commit(txn).await?.attempts)
        }
        Op::OptimizeIndices => Some(
            table
                .optimize_indices()
                .await?
                .commit
                .map_or(0, |c| c.attempts),
        ),
    };
    Ok(attempts)
}

/// A cell's outcome as `EXPECTED` writes it.
pub fn code(result: &tarn::Result<Option<u32>>) -> String {
    match result {
        Ok(_) => "C".into(),
        Err(Error::Conflict { reason, .. }) => match reason {
            ConflictReason::ConcurrentAppend { .. } => "A".into(),
            ConflictReason::ConcurrentDeleteDelete { .. } => "D".into(),
            ConflictReason::ConcurrentDeleteRead { .. } => "R".into(),
            ConflictReason::MetadataChanged => "M".into(),
            ConflictReason::ConcurrentDeletionVectorOverlap { .. } => "V".into(),
            ConflictReason::DomainMetadataChanged { .. } => "I".into(),
            other => format!("{other:?}"),
        },
        Err(Error::IndexAlreadyExists { .. }) => "X".into(),
        Err(Error::IndexNotFound { .. }) => "N".into(),
        Err(e) => format!("error: {e}"),
    }
}

/// Where the matrix runs.
#[derive(Clone, Copy)]
pub enum Backend {
    /// An in-memory store.
    Memory,
    /// The test process's MinIO server.
    Minio,
}

impl Backend {
    /// A fresh table URL on this backend, and its store options.
    pub fn url(self) -> (String, StoreOptions) {
        match self {
            Backend::Memory => (
                format!("memory://matrix/{}", crate::unique("cell")),
                StoreOptions::new(),
            ),
            Backend::Minio => {
                let server = crate::minio::s3();
                (server.url("cell"), server.options())
            }
        }
    }
}

/// The table every cell starts from: partitioned by `part`, deletion vectors on, two
/// files per partition (A: ids 0-4 and 20-24, B: 10-14 and 30-34). Returns its handle.
pub async fn cell_table(url: &str, options: &StoreOptions) -> Table {
    let mut setup = Table::create(url)
        .with_store_options(options.clone())
        .with_arrow_schema(&schema())
        .with_partition_columns(["part"])
        .execute()
        .await
        .unwrap();
    let _ = setup
        .set_properties([("delta.enableDeletionVectors", "true")])
        .await
        .unwrap();
    setup.append([rows("A", 0), rows("B", 10)]).await.unwrap();
    setup.append([rows("A", 20), rows("B", 30)]).await.unwrap();
    setup
}
