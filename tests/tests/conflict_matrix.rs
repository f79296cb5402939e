//! The conflict matrix: every pair of table operations, at every isolation level, with
//! overlapping and disjoint partitions. A loser prepares its operation on version 1 while
//! a winner commits version 2 first; the loser then commits, rebases, or fails with the
//! typed conflict Delta's rules call for. `EXPECTED` lists every cell.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use arrow::array::{Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use tarn::expr::{col, lit};
use tarn::protocol::{DataType as DeltaType, PrimitiveType, StructField};
use tarn::{ChangeStrategy, ConflictReason, Error, IsolationLevel, StoreOptions, Table, WriteMode};
use tarn_tests::log::commit_info_at;

/// The operations of the matrix; `A` and `B` are partitions of the `part` column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Append(&'static str),
    Overwrite,
    OverwritePartition(&'static str),
    DeletePartition(&'static str),
    AddColumn,
    SetProperty,
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
}

/// A cell's outcome: commits (C), or conflicts because of a concurrent append matching
/// the loser's reads (A), a file both remove (D), a removed file the loser read (R), or a
/// metadata change (M).
const LEVELS: [IsolationLevel; 4] = [
    IsolationLevel::SnapshotIsolation,
    IsolationLevel::WriteSerializable,
    IsolationLevel::Serializable,
    IsolationLevel::StrictSerializable,
];

/// loser, winner, outcomes at SnapshotIsolation, WriteSerializable, Serializable,
/// StrictSerializable. The table holds two files per partition: A (ids 0-4, 20-24) and B
/// (10-14, 30-34). The winner writes into partition A; overwrite writes its rows there
/// too. Row ids: 1 and 3 are in A's first file, 11 in B's. Besides the outcomes above,
/// V: both changed the same row of a file through deletion vectors.
const EXPECTED: &[(Op, Op, &str)] = {
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
    ]
};

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("part", DataType::Utf8, true),
    ]))
}

fn rows(part: &str, start: i64) -> RecordBatch {
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
async fn run(op: Op, table: &mut Table) -> tarn::Result<Option<u32>> {
    let attempts = match op {
        Op::Append(p) => Some(table.append([rows(p, 100)]).await?.commit.attempts),
        Op::Overwrite => Some(table.overwrite([rows("A", 200)]).await?.commit.attempts),
        Op::OverwritePartition(p) => Some(
            table
                .write([rows(p, 300)])
                .mode(WriteMode::Overwrite)
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
                    .strategy(strategy)
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
                .strategy(ChangeStrategy::MergeOnRead)
                .execute()
                .await?
                .commit
                .attempts,
        ),
        Op::Optimize => Some(table.optimize().execute().await?.commit.attempts),
        Op::CreateIndex => {
            table
                .create_index("id")
                .name("tag_idx")
                .kind(tarn::IndexKind::Bitmap)
                .execute()
                .await?;
            Some(1)
        }
        Op::DropIndex => Some(table.drop_index("id_idx").await?.attempts),
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

fn code(result: &tarn::Result<Option<u32>>) -> String {
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
enum Backend {
    Memory,
    Minio,
}

impl Backend {
    fn url(self) -> (String, StoreOptions) {
        match self {
            Backend::Memory => (
                format!("memory://matrix/{}", tarn_tests::unique("cell")),
                StoreOptions::new(),
            ),
            Backend::Minio => {
                let server = tarn_tests::minio::s3();
                (server.url("cell"), server.options())
            }
        }
    }
}

async fn cell(
    loser: Op,
    winner: Op,
    level: IsolationLevel,
    backend: Backend,
) -> Result<String, String> {
    let (url, options) = backend.url();
    let open = || Table::open_with_options(&url, &options);
    let mut setup = Table::create(&url)
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
    let base = setup.version();
    let mut w = open().await.unwrap().with_isolation(level);
    let mut l = open().await.unwrap().with_isolation(level);
    run(winner, &mut w)
        .await
        .map_err(|e| format!("the winner failed: {e}"))?;
    let result = run(loser, &mut l).await;
    let outcome = code(&result);
    match (&result, &result.as_ref().ok().copied().flatten()) {
        // A commit that raced a winning commit rebased once.
        (Ok(_), Some(attempts)) => {
            let raced = winner != Op::Checkpoint;
            let want = if raced { 2 } else { 1 };
            if *attempts != want {
                return Err(format!("committed in {attempts} attempts, expected {want}"));
            }
            let latest = open().await.unwrap();
            if latest.version() != l.version() || l.version() != base + want as i64 {
                return Err(format!(
                    "loser at {}, table at {}",
                    l.version(),
                    latest.version()
                ));
            }
        }
        (
            Err(Error::Conflict {
                winning_version, ..
            }),
            _,
        ) if *winning_version != base + 1 => {
            return Err(format!(
                "conflict names version {winning_version}, not {}",
                base + 1
            ));
        }
        _ => {}
    }
    Ok(outcome)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_pair_of_operations_at_every_isolation_level_in_memory() {
    matrix(Backend::Memory).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_pair_of_operations_at_every_isolation_level_on_minio() {
    matrix(Backend::Minio).await;
}

async fn matrix(backend: Backend) {
    let mut failures = Vec::new();
    for (loser, winner, expected) in EXPECTED {
        let expected: Vec<&str> = expected.split_whitespace().collect();
        for (level, want) in LEVELS.iter().zip(expected) {
            match cell(*loser, *winner, *level, backend).await {
                Ok(got) if got == want => {}
                Ok(got) => failures.push(format!(
                    "{loser:?} after {winner:?} at {level:?}: got {got}, expected {want}"
                )),
                Err(e) => failures.push(format!("{loser:?} after {winner:?} at {level:?}: {e}")),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} cells differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert_eq!(EXPECTED.len(), 164);
}

/// Index operations on a table with an inline BTree index `id_idx` (two segments): the
/// winner commits first, the loser then commits (C), or fails because the index registry
/// or a segment it read changed (I), finds the index it creates already there (X) or the
/// index it drops gone (N). Index creation, drops and plain appends retry on their own:
/// an append that raced an index DDL re-indexes its files for the new set of indices, a
/// creation catches up with the files appended meanwhile, a drop drops what is there
/// after a concurrent merge or DDL.
const INDEX_EXPECTED: &[(Op, Op, &str)] = {
    use Op::*;
    &[
        // Concurrent appends each add a segment: no conflict.
        (Append("A"), Append("A"), "C C C C"),
        (Append("B"), Append("A"), "C C C C"),
        (CreateIndex, Append("A"), "C C C C"),
        (DropIndex, Append("A"), "C C C C"),
        (OptimizeIndices, Append("A"), "C C C C"),
        (DeleteRow(1, true), Append("A"), "C C C C"),
        // The winner creates an index.
        (Append("A"), CreateIndex, "C C C C"),
        (CreateIndex, CreateIndex, "X X X X"),
        (DropIndex, CreateIndex, "C C C C"),
        (OptimizeIndices, CreateIndex, "I I I I"),
        (DeleteRow(1, true), CreateIndex, "C C C C"),
        (DeleteRow(1, false), CreateIndex, "I I I I"),
        // The winner drops `id_idx`.
        (Append("A"), DropIndex, "C C C C"),
        (CreateIndex, DropIndex, "C C C C"),
        (DropIndex, DropIndex, "N N N N"),
        (OptimizeIndices, DropIndex, "I I I I"),
        (DeleteRow(1, false), DropIndex, "I I I I"),
        // The winner merges `id_idx`'s segments.
        (Append("A"), OptimizeIndices, "C C C C"),
        (CreateIndex, OptimizeIndices, "C C C C"),
        (DropIndex, OptimizeIndices, "C C C C"),
        (OptimizeIndices, OptimizeIndices, "I I I I"),
    ]
};

async fn index_cell(
    loser: Op,
    winner: Op,
    level: IsolationLevel,
    backend: Backend,
) -> Result<String, String> {
    let (url, options) = backend.url();
    let open = || Table::open_with_options(&url, &options);
    let mut setup = Table::create(&url)
        .with_store_options(options.clone())
        .with_arrow_schema(&schema())
        .with_partition_columns(["part"])
        .with_property("delta.enableDeletionVectors", "true")
        .execute()
        .await
        .unwrap();
    setup.append([rows("A", 0), rows("B", 10)]).await.unwrap();
    setup.create_index("id").execute().await.unwrap();
    setup.append([rows("A", 20), rows("B", 30)]).await.unwrap();
    let mut w = open().await.unwrap().with_isolation(level);
    let mut l = open().await.unwrap().with_isolation(level);
    run(winner, &mut w)
        .await
        .map_err(|e| format!("the winner failed: {e}"))?;
    let result = run(loser, &mut l).await;
    let outcome = code(&result);
    // Whatever happened, the index answers exactly.
    let latest = open().await.unwrap();
    for key in [1i64, 13, 24, 100] {
        let predicate = col("id").eq(lit(key));
        let with = latest.scan().filter(predicate.clone()).collect().await;
        let without = latest
            .scan()
            .filter(predicate)
            .use_indices(false)
            .collect()
            .await
            .map_err(|e| e.to_string())?;
        let with = with.map_err(|e| e.to_string())?;
        if tarn_tests::rows::canonical_rows(&with) != tarn_tests::rows::canonical_rows(&without) {
            return Err(format!("id = {key} reads differently through the index"));
        }
    }
    Ok(outcome)
}

async fn index_matrix(backend: Backend) {
    let mut failures = Vec::new();
    for (loser, winner, expected) in INDEX_EXPECTED {
        let expected: Vec<&str> = expected.split_whitespace().collect();
        for (level, want) in LEVELS.iter().zip(expected) {
            match index_cell(*loser, *winner, *level, backend).await {
                Ok(got) if got == want => {}
                Ok(got) => failures.push(format!(
                    "{loser:?} after {winner:?} at {level:?}: got {got}, expected {want}"
                )),
                Err(e) => failures.push(format!("{loser:?} after {winner:?} at {level:?}: {e}")),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} cells differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn index_operations_against_each_other_in_memory() {
    index_matrix(Backend::Memory).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn index_operations_against_each_other_on_minio() {
    index_matrix(Backend::Minio).await;
}

/// Every pair again, but with both operations prepared on the same version and grouped
/// into one commit: `second` loses the race for a version to a carrier commit (an
/// unrelated application transaction), publishes its proposal and is held at the gate
/// with its PUT of the next version in flight; `first` then wins that version, carrying
/// `second`'s proposal when the checker lets it. `second` must end exactly as it would
/// committing alone after `first` (the cell of `EXPECTED`), and when it commits, it does so
/// inside `first`'s commit or alone after it, never both. Returns the outcome code and
/// whether `second` rode in `first`'s commit.
async fn grouped_cell(
    second: Op,
    first: Op,
    level: IsolationLevel,
) -> Result<(String, bool), String> {
    let (url, options) = Backend::Memory.url();
    let mut setup = Table::create(&url)
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
    let base = setup.version();
    let location = tarn_store::open_with_options(&url, &options).unwrap();
    let (gated, gate) = tarn_tests::gate::GateStore::new(
        Arc::clone(location.store()),
        format!("_delta_log/{:020}.json", base + 2),
    );
    let mut f = Table::open_location(location.clone())
        .await
        .unwrap()
        .with_isolation(level);
    let mut s = Table::open_location(location.clone().with_store(Arc::new(gated)))
        .await
        .unwrap()
        .with_isolation(level);
    let mut carrier = setup.transaction();
    carrier.set_app_transaction("carrier", 1);
    let _ = carrier.commit().await.unwrap();
    let held = tokio::spawn(async move {
        let result = run(second, &mut s).await;
        (result, s.version())
    });
    gate.arrived(60).await;
    // The proposal goes up beside the held PUT: wait for it where the work is carriable
    // (no metadata change, no deletion vector).
    let carriable = !matches!(
        second,
        Op::AddColumn | Op::SetProperty | Op::DeleteRow(_, true) | Op::UpdateRow(_)
    );
    if carriable {
        let folder = location
            .root()
            .clone()
            .join("_delta_log")
            .join("_tarn_proposals");
        let mut published = false;
        for _ in 0..500 {
            let listed: Vec<_> =
                futures::TryStreamExt::try_collect(location.store().list(Some(&folder)))
                    .await
                    .unwrap();
            if listed.iter().any(|m: &object_store::ObjectMeta| {
                m.location.as_ref().contains(&format!("{:020}.", base + 1))
            }) {
                published = true;
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        if !published {
            return Err("the second published no proposal".into());
        }
    }
    let first_result = run(first, &mut f).await;
    gate.open();
    let (result, s_version) = held.await.unwrap();
    first_result.map_err(|e| format!("the first failed: {e}"))?;
    if f.version() != base + 2 {
        return Err(format!(
            "the first committed {}, not {}",
            f.version(),
            base + 2
        ));
    }
    let names_second = |info: &serde_json::Value, id: &str| {
        info["tarnGroup"]
            .as_array()
            .is_some_and(|ids| ids.iter().any(|v| v.as_str() == Some(id)))
    };
    let info = |version: i64| {
        let location = location.clone();
        async move { commit_info_at(&location, version).await.unwrap() }
    };
    let grouped_info = info(base + 2).await;
    let carried = grouped_info["tarnGroup"]
        .as_array()
        .is_some_and(|ids| !ids.is_empty());
    match &result {
        Ok(_) if s_version == base + 2 => {
            if !carried {
                return Err("the second is at the first's version, which carried nothing".into());
            }
        }
        Ok(_) if s_version == base + 3 => {
            let alone = info(base + 3).await;
            let id = alone["txnId"].as_str().unwrap_or_default();
            if names_second(&grouped_info, id) {
                return Err("the second committed alone and inside the first's commit".into());
            }
        }
        Ok(_) => return Err(format!("the second committed at {s_version}")),
        Err(Error::Conflict {
            winning_version, ..
        }) if *winning_version != base + 2 => {
            return Err(format!(
                "conflict names version {winning_version}, not {}",
                base + 2
            ));
        }
        Err(_) if carried => {
            return Err("the second failed, yet the first's commit carried a proposal".into());
        }
        Err(_) => {}
    }
    Ok((code(&result), s_version == base + 2))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_pair_grouped_into_one_commit_ends_as_committed_one_by_one() {
    let mut failures = Vec::new();
    let mut grouped = Vec::new();
    for (second, first, expected) in EXPECTED {
        // A checkpoint commits nothing, so there is nothing to group.
        if *second == Op::Checkpoint || *first == Op::Checkpoint {
            continue;
        }
        let expected: Vec<&str> = expected.split_whitespace().collect();
        for (level, want) in LEVELS.iter().zip(expected) {
            match grouped_cell(*second, *first, *level).await {
                Ok((got, rode)) if got == want => {
                    if rode {
                        grouped.push((*second, *first, *level));
                    }
                }
                Ok((got, _)) => failures.push(format!(
                    "{second:?} grouped after {first:?} at {level:?}: got {got}, expected {want}"
                )),
                Err(e) => failures.push(format!(
                    "{second:?} grouped after {first:?} at {level:?}: {e}"
                )),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} cells differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // Work that another writer can carry was carried: appends, overwrites, partition
    // deletes, copy-on-write deletes; metadata changes and deletion vectors commit alone.
    for level in LEVELS {
        for (second, first) in [
            (Op::Append("A"), Op::Append("A")),
            (Op::Append("B"), Op::DeletePartition("A")),
            (Op::DeletePartition("B"), Op::Append("A")),
            (Op::DeleteRow(1, false), Op::Append("A")),
        ] {
            assert!(
                grouped.contains(&(second, first, level)),
                "{second:?} was not carried by {first:?} at {level:?}"
            );
        }
    }
    assert!(
        !grouped
            .iter()
            .any(|(s, _, _)| matches!(s, Op::AddColumn | Op::SetProperty | Op::UpdateRow(_))),
        "a metadata change or a deletion-vector update rode in another commit"
    );
}
