//! The model test: random sequences of appends, overwrites (whole and by partition),
//! partition deletes, checkpoints and vacuums, with faults injected into the writer's
//! PUTs, checked after every step against a serial model of the table:
//!
//! - versions are contiguous, and a version exists only for an acknowledged commit (or
//!   one whose outcome was reported unknown and which did land);
//! - every acknowledged transaction appears in the log exactly once;
//! - the snapshot at every version equals the serial replay up to it (versions a
//!   zero-retention vacuum made unreadable fail with an error, never with fewer rows);
//! - replaying with the checkpoints equals replaying the JSON commits alone.
//!
//! The run is seeded: `TARN_MODEL_SEED` replays one, `TARN_MODEL_CASES` sets how many.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::TryStreamExt;
use object_store::memory::InMemory;
use object_store::{ObjectStore, ObjectStoreExt};
use proptest::prelude::*;
use tarn::expr::{col, lit};
use tarn::{Error, Snapshot, StoreLocation, Table, WriteMode};
use tarn_store::{Fault, FaultControl, FaultOp, FaultRule, FaultStore};
use tarn_tests::log::commit_info_at;
use tarn_tests::part_rows::{PARTS, Rows, batch, rows_of, schema};
use url::Url;

#[derive(Debug, Clone)]
enum Op {
    Append { rows: Vec<u8> },
    Overwrite { rows: Vec<u8> },
    OverwritePartition { part: u8, rows: u8 },
    DeletePartition { part: u8 },
    Checkpoint,
    Vacuum,
}

/// A fault for the writer's next operation: on data files or on the commit.
#[derive(Debug, Clone)]
struct Injection {
    commit: bool,
    fault: Fault,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => prop::collection::vec(0u8..3, 1..6).prop_map(|rows| Op::Append { rows }),
        1 => prop::collection::vec(0u8..3, 0..4).prop_map(|rows| Op::Overwrite { rows }),
        2 => (0u8..3, 1u8..4).prop_map(|(part, rows)| Op::OverwritePartition { part, rows }),
        1 => (0u8..3).prop_map(|part| Op::DeletePartition { part }),
        1 => Just(Op::Checkpoint),
        1 => Just(Op::Vacuum),
    ]
}

fn injection() -> impl Strategy<Value = Option<Injection>> {
    let fault = tarn_tests::seeded::fault();
    prop_oneof![
        3 => Just(None),
        2 => (any::<bool>(), fault).prop_map(|(commit, fault)| Some(Injection { commit, fault })),
    ]
}

/// The serial model: the rows after each version, and the txnIds acknowledged.
struct Model {
    versions: Vec<Rows>,
    acknowledged: BTreeMap<i64, String>,
    /// Versions below this may have lost files to a zero-retention vacuum.
    readable_from: i64,
    next_id: i64,
}

struct Harness {
    store: Arc<dyn ObjectStore>,
    clean: StoreLocation,
    writer: Table,
    faults: FaultControl,
}

async fn harness(seed: u64) -> Harness {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let url = Url::parse("memory://model/t").unwrap();
    let root = object_store::path::Path::from("t");
    let clean = StoreLocation::new(url.clone(), Arc::clone(&store), root.clone());
    let faulty = FaultStore::new(Arc::clone(&store), seed);
    let faults = faulty.control();
    let writer_location = StoreLocation::new(url, Arc::new(faulty), root);
    let writer = Table::create_at(writer_location)
        .with_arrow_schema(&schema())
        .with_partition_columns(["part"])
        .with_property("delta.checkpointInterval", "3")
        .execute()
        .await
        .unwrap();
    Harness {
        store,
        clean,
        writer,
        faults,
    }
}

/// The txnId of the commit at `version`, read from the clean store.
async fn txn_id_at(location: &StoreLocation, version: i64) -> Option<String> {
    commit_info_at(location, version).await?["txnId"]
        .as_str()
        .map(str::to_string)
}

async fn step(h: &mut Harness, model: &mut Model, op: &Op, injection: &Option<Injection>) {
    if let Some(i) = injection {
        let pattern = if i.commit {
            "*/_delta_log/*.json"
        } else {
            "*.parquet"
        };
        h.faults.add_rule(
            FaultRule::new(FaultOp::Put, i.fault)
                .with_glob(pattern)
                .with_limit(1),
        );
    }
    let before = model.versions.last().cloned().unwrap_or_default();
    let mut new_rows = |parts: Vec<u8>| -> Vec<(i64, String)> {
        parts
            .into_iter()
            .map(|p| {
                model.next_id += 1;
                (model.next_id, PARTS[p as usize].to_string())
            })
            .collect()
    };
    let (result, expected): (Option<tarn::Result<tarn::WriteOutcome>>, Rows) = match op.clone() {
        Op::Append { rows } => {
            let rows = new_rows(rows);
            let mut after = before.clone();
            after.extend(rows.iter().cloned());
            (Some(h.writer.append([batch(&rows)]).await), after)
        }
        Op::Overwrite { rows } => {
            let rows = new_rows(rows);
            (
                Some(h.writer.overwrite([batch(&rows)]).await),
                rows.into_iter().collect(),
            )
        }
        Op::OverwritePartition { part, rows } => {
            let rows = new_rows(vec![part; rows as usize]);
            let name = PARTS[part as usize];
            let mut after: Rows = before.iter().filter(|r| r.1 != name).cloned().collect();
            after.extend(rows.iter().cloned());
            let result = h
                .writer
                .write([batch(&rows)])
                .with_mode(WriteMode::Overwrite)
                .replace_where(col("part").eq(lit(name)))
                .execute()
                .await;
            (Some(result), after)
        }
        Op::DeletePartition { part } => {
            let name = PARTS[part as usize];
            let after = before.iter().filter(|r| r.1 != name).cloned().collect();
            (
                Some(h.writer.delete_partitions(col("part").eq(lit(name))).await),
                after,
            )
        }
        Op::Checkpoint => {
            let _ = h.writer.checkpoint().await;
            (None, before.clone())
        }
        Op::Vacuum => {
            let vacuum = h
                .writer
                .vacuum()
                .with_retention(Duration::ZERO)
                .with_enforce_retention(false)
                .execute()
                .await;
            if vacuum.is_ok() {
                model.readable_from = h.writer.version();
            }
            (None, before.clone())
        }
    };
    h.faults.clear();
    let latest = Snapshot::builder(h.clean.clone()).build().await.unwrap();
    let version_before = model.versions.len() as i64 - 1;
    match result {
        None => assert_eq!(
            latest.version(),
            version_before,
            "{op:?} committed something"
        ),
        Some(Ok(outcome)) if outcome.commit.attempts == 0 => {
            assert_eq!(latest.version(), version_before, "a no-op {op:?} committed");
        }
        Some(Ok(outcome)) => {
            assert_eq!(outcome.commit.version, version_before + 1, "{op:?}");
            model
                .acknowledged
                .insert(outcome.commit.version, outcome.commit.txn_id.clone());
            model.versions.push(expected);
        }
        Some(Err(Error::CommitStateUnknown {
            version, txn_id, ..
        })) => {
            // Unknown to the writer; the log tells.
            if txn_id_at(&h.clean, version).await.as_deref() == Some(txn_id.as_str()) {
                model.acknowledged.insert(version, txn_id);
                model.versions.push(expected);
            }
        }
        Some(Err(e)) => {
            assert_eq!(
                latest.version(),
                version_before,
                "{op:?} failed ({e}) yet committed"
            );
        }
    }
    // A failed write leaves the writer's handle behind, as a real writer's would be.
    h.writer.refresh().await.unwrap();
}

async fn check(h: &Harness, model: &Model) {
    let latest_version = model.versions.len() as i64 - 1;
    // Contiguous versions, each an acknowledged commit appearing once.
    let listed: Vec<i64> = h
        .store
        .list(Some(&object_store::path::Path::from("t/_delta_log")))
        .try_filter_map(|m| async move {
            Ok(m.location
                .filename()
                .and_then(|f| f.strip_suffix(".json"))
                .and_then(|v| v.parse::<i64>().ok()))
        })
        .try_collect::<Vec<_>>()
        .await
        .unwrap();
    let mut sorted = listed.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..=latest_version).collect::<Vec<_>>(), "versions");
    let mut seen = BTreeSet::new();
    for version in 1..=latest_version {
        let id = txn_id_at(&h.clean, version).await.unwrap();
        assert_eq!(
            model.acknowledged.get(&version),
            Some(&id),
            "version {version} is not the acknowledged commit"
        );
        assert!(seen.insert(id), "txnId twice");
    }
    // Every version reads as the model says, with and without checkpoints.
    let json_only: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let objects: Vec<_> = h.store.list(None).try_collect().await.unwrap();
    for meta in objects {
        let name = meta.location.filename().unwrap_or_default();
        if name.contains(".checkpoint.") || name == "_last_checkpoint" {
            continue;
        }
        let bytes = h
            .store
            .get(&meta.location)
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        json_only.put(&meta.location, bytes.into()).await.unwrap();
    }
    let json_location =
        StoreLocation::new(h.clean.url().clone(), json_only, h.clean.root().clone());
    for version in 0..=latest_version {
        let with_checkpoints = Snapshot::builder(h.clean.clone())
            .at_version(version)
            .build()
            .await
            .unwrap();
        let from_json = Snapshot::builder(json_location.clone())
            .at_version(version)
            .build()
            .await
            .unwrap();
        let keys = |s: &Snapshot| {
            s.file_entries()
                .map(|(k, _)| k.clone())
                .collect::<BTreeSet<_>>()
        };
        assert_eq!(
            keys(&with_checkpoints),
            keys(&from_json),
            "checkpoint replay differs at {version}"
        );
        let read = rows_of(&with_checkpoints).await;
        if version >= model.readable_from {
            assert_eq!(
                read.unwrap(),
                model.versions[version as usize],
                "rows at version {version}"
            );
        } else if let Ok(rows) = read {
            // A vacuumed version either fails or is still whole: never fewer rows.
            assert_eq!(
                rows, model.versions[version as usize],
                "rows at vacuumed version {version}"
            );
        }
    }
}

async fn run(ops: Vec<(Op, Option<Injection>)>, seed: u64) {
    let mut h = harness(seed).await;
    let mut model = Model {
        versions: vec![Rows::new()],
        acknowledged: BTreeMap::new(),
        readable_from: 0,
        next_id: 0,
    };
    for (op, injection) in &ops {
        step(&mut h, &mut model, op, injection).await;
        check(&h, &model).await;
    }
}

#[test]
fn random_histories_with_faults_match_the_serial_model() {
    let (mut runner, seed, _) = tarn_tests::seeded::runner("TARN_MODEL", 0x7A24, 64);
    let runtime = tarn_tests::seeded::runtime();
    let strategy = (
        prop::collection::vec((op(), injection()), 1..14),
        any::<u64>(),
    );
    let result = runner.run(&strategy, |(ops, fault_seed)| {
        runtime.block_on(run(ops, fault_seed));
        Ok(())
    });
    if let Err(e) = result {
        panic!("seed {seed}: {e}");
    }
}
