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
use tarn::{ConflictReason, Error, IsolationLevel, StoreOptions, Table, WriteMode};

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
/// StrictSerializable. The winner writes into partition A; overwrite writes its rows
/// there too.
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
            other => format!("{other:?}"),
        },
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
    setup.append([rows("A", 0), rows("B", 10)]).await.unwrap();
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
            if latest.version() != l.version() || l.version() != if raced { 3 } else { 2 } {
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
        ) if *winning_version != 2 => {
            return Err(format!("conflict names version {winning_version}, not 2"));
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
    assert_eq!(EXPECTED.len(), 70, "ten losers by seven winners");
}
