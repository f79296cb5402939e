//! The conflict matrix: every pair of table operations, at every isolation level, with
//! overlapping and disjoint partitions. A loser prepares its operation on version 1 while
//! a winner commits version 2 first; the loser then commits, rebases, or fails with the
//! typed conflict Delta's rules call for. `EXPECTED` lists every cell.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use tarn::expr::{col, lit};
use tarn::{Error, IsolationLevel, Table};
use tarn_tests::matrix::{Backend, EXPECTED, LEVELS, Op, cell_table, code, rows, run, schema};

async fn cell(
    loser: Op,
    winner: Op,
    level: IsolationLevel,
    backend: Backend,
) -> Result<String, String> {
    let (url, options) = backend.url();
    let open = || Table::open_with_options(&url, &options);
    let setup = cell_table(&url, &options).await;
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
    assert_eq!(EXPECTED.len(), 175);
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
            .with_indices(false)
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
