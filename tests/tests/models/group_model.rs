//! The model test with group commit: rounds in which several writers (each its own table
//! handle, as separate processes would have) append, overwrite partitions, delete
//! partitions and delete ranges of rows through deletion vectors (inline, or in files in
//! half the histories) at once, with faults on their data files, commit PUTs, proposal
//! PUTs and reads of DV files, checked against a serial model of the table replayed in
//! the order the log names its writers (each commit's `commitInfo.txnId`, then the
//! `txnId`s it carried):
//!
//! - versions are contiguous;
//! - every acknowledged operation's `txnId` is in the log exactly once, at the version it
//!   was told; an operation whose outcome was unknown (a lost acknowledgement, or a store
//!   error with its proposal out: a crashed committer or proposer) is in it at most once;
//!   no other `txnId` is (nothing commits that its writer was told had failed);
//! - a writer told an unknown outcome crashes, restarts and fences its id: its work
//!   landed before the fence or never does;
//! - the rows at every version equal the model's after applying, in that order, the
//!   operations the commits up to it name (the handles run at `Serializable`, so the
//!   log's order is the serial order).
//!
//! The run is seeded: `TARN_MODEL_SEED` (`TARN_CLAIM_MODEL_SEED` for the run in which
//! writers claim versions) fixes the operations and faults (the writers' interleaving
//! follows real timing), `TARN_MODEL_CASES` sets how many cases run.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures::TryStreamExt;
use object_store::ObjectStore;
use object_store::memory::InMemory;
use proptest::prelude::*;
use tarn::expr::{col, lit};
use tarn::{
    ChangeStrategy, Error, IsolationLevel, RetryPolicy, Snapshot, StoreLocation, Table, WriteMode,
};
use tarn_store::{
    Fault, FaultControl, FaultOp, FaultRule, FaultStore, LatencyProfile, LatencyStore,
};
use tarn_tests::log::txn_ids_at;
use tarn_tests::part_rows::{PARTS, Rows, batch, rows_of, schema};
use url::Url;

/// Writers per round: with three or more, losers of one race carry each other.
const WRITERS: usize = 6;

#[derive(Debug, Clone)]
enum Op {
    Append {
        rows: Vec<u8>,
    },
    OverwritePartition {
        part: u8,
        rows: u8,
    },
    DeletePartition {
        part: u8,
    },
    /// Merge-on-read DELETE of ids `from..from + len`: concurrent ones on one file unite
    /// their deletion vectors when their rows are disjoint, and conflict when not.
    DeleteIds {
        from: i64,
        len: i64,
    },
}

/// A fault for one writer's operation.
#[derive(Debug, Clone)]
enum Injection {
    /// On its first data file PUT (a partition delete writes none).
    DataFile(Fault),
    /// On its commit PUT after `skip` others (a second PUT usually goes up beside its
    /// proposal: failing it leaves a proposal whose writer has stopped).
    Commit { skip: u64, fault: Fault },
    /// On its proposal PUT.
    Proposal(Fault),
    /// On its claim of a version (`_tarn_claims/`): a claim that failed may have landed,
    /// and its writer then counts it as held.
    Claim(Fault),
    /// On a GET of a deletion-vector file: a writer uniting its DVs with a concurrent
    /// commit's reads them, often with its proposal out, when its outcome is unknown.
    DvRead(Fault),
    /// Its commit PUT after `skip` others fails, and so do its next reads of commits:
    /// it cannot learn its outcome, crashes, and restarts fencing itself.
    Crash { skip: u64 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => prop::collection::vec(0u8..3, 1..4).prop_map(|rows| Op::Append { rows }),
        2 => (0u8..3, 1u8..3).prop_map(|(part, rows)| Op::OverwritePartition { part, rows }),
        2 => (0u8..3).prop_map(|part| Op::DeletePartition { part }),
        2 => (1i64..24, 1i64..4).prop_map(|(from, len)| Op::DeleteIds { from, len }),
    ]
}

/// A writer's fault, if any; faults on claims only where writers claim versions.
/// Crashes (unknown outcomes, then a restart that fences) only in the histories that
/// model them: they take work a later commit would have carried.
fn injection(claims: bool, crashes: bool) -> BoxedStrategy<Option<Injection>> {
    let fault = tarn_tests::seeded::fault();
    let common = prop_oneof![
        6 => Just(None),
        1 => fault.clone().prop_map(Injection::DataFile).prop_map(Some),
        3 => (0u64..3, fault.clone())
            .prop_map(|(skip, fault)| Some(Injection::Commit { skip, fault })),
        1 => fault.clone().prop_map(Injection::Proposal).prop_map(Some),
        1 => fault.clone().prop_map(Injection::DvRead).prop_map(Some),
        u32::from(crashes) => (0u64..3).prop_map(|skip| Some(Injection::Crash { skip })),
    ];
    if claims {
        prop_oneof![11 => common, 1 => fault.prop_map(Injection::Claim).prop_map(Some)].boxed()
    } else {
        common.boxed()
    }
}

/// One round: an operation (or none), with its fault, per writer.
type Round = Vec<Option<(Op, Option<Injection>)>>;

fn round(claims: bool, crashes: bool) -> impl Strategy<Value = Round> {
    prop::collection::vec(
        prop_oneof![1 => Just(None), 4 => (op(), injection(claims, crashes)).prop_map(Some)],
        WRITERS,
    )
}

/// What a writer was told.
#[derive(Debug)]
enum Told {
    Committed {
        version: i64,
    },
    NothingToCommit,
    /// Unknown; the writer then restarted and fenced itself at `fenced_at`.
    Unknown {
        fenced_at: i64,
    },
    Failed(#[allow(dead_code, reason = "shown when a check fails")] String),
}

/// An operation issued, with the rows it wrote.
#[derive(Debug)]
struct Issued {
    op: Op,
    rows: Vec<(i64, String)>,
    told: Told,
}

struct Writer {
    table: Table,
    faults: FaultControl,
}

struct Harness {
    store: Arc<dyn ObjectStore>,
    clean: StoreLocation,
    /// The versions that are writer fences.
    fences: BTreeSet<i64>,
    writers: Vec<Writer>,
    policy: RetryPolicy,
}

async fn harness(seed: u64, policy: RetryPolicy) -> Harness {
    let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let url = Url::parse("memory://group-model/t").unwrap();
    let root = object_store::path::Path::from("t");
    let clean = StoreLocation::new(url.clone(), Arc::clone(&store), root.clone());
    Table::create_at(clean.clone())
        .with_arrow_schema(&schema())
        .with_partition_columns(["part"])
        .with_property("delta.checkpointInterval", "5")
        .with_property("delta.enableDeletionVectors", "true")
        // Half the histories keep their deletion vectors in files: a committer that
        // unites those writes a DV file of its own before its commit.
        .with_property(
            tarn::protocol::properties::DV_INLINE_THRESHOLD,
            if seed.is_multiple_of(2) {
                0
            } else {
                tarn::protocol::properties::DEFAULT_DV_INLINE_THRESHOLD
            }
            .to_string(),
        )
        .execute()
        .await
        .unwrap();
    let mut writers = Vec::new();
    let mut fences = BTreeSet::new();
    for w in 0..WRITERS as u64 {
        // Each writer's requests take a few milliseconds, drawn from its own seed, so
        // the writers' commits interleave and race.
        let slow = LatencyStore::new(
            Arc::clone(&store),
            LatencyProfile::s3_express().scaled(0.5),
            seed.wrapping_add(w),
        );
        let faulty = FaultStore::new(Arc::new(slow) as Arc<dyn ObjectStore>, seed ^ (w << 32));
        let faults = faulty.control();
        let location = StoreLocation::new(url.clone(), Arc::new(faulty), root.clone());
        let (table, fenced_at) = start_writer(location, w as usize, policy).await;
        fences.insert(fenced_at);
        writers.push(Writer { table, faults });
    }
    Harness {
        store,
        clean,
        fences,
        writers,
        policy,
    }
}

/// Writer `w` (re)starting: a handle that fences the writer's id, and the fence's version.
async fn start_writer(location: StoreLocation, w: usize, policy: RetryPolicy) -> (Table, i64) {
    let mut table = Table::open_at(location)
        .await
        .unwrap()
        .with_isolation(IsolationLevel::Serializable)
        .with_retry_policy(policy);
    let _ = table.fence_writer(format!("w{w}")).await.unwrap();
    let version = table.version();
    (table, version)
}

fn rule(injection: &Injection) -> FaultRule {
    let rule = match injection {
        // Data files only, never a background checkpoint's Parquet.
        Injection::DataFile(fault) => {
            FaultRule::new(FaultOp::Put, *fault).with_glob("*/part-*.parquet")
        }
        Injection::Commit { skip, fault } => FaultRule::new(FaultOp::Put, *fault)
            .with_glob("*/_delta_log/0*.json")
            .with_skip(*skip),
        Injection::Proposal(fault) => {
            FaultRule::new(FaultOp::Put, *fault).with_glob("*/_tarn_proposals/*")
        }
        Injection::Claim(fault) => {
            FaultRule::new(FaultOp::Put, *fault).with_glob("*/_tarn_claims/*")
        }
        Injection::DvRead(fault) => {
            FaultRule::new(FaultOp::Get, *fault).with_glob("*/deletion_vector_*.bin")
        }
        Injection::Crash { skip } => FaultRule::new(FaultOp::Put, Fault::ServerError)
            .with_glob("*/_delta_log/0*.json")
            .with_skip(*skip),
    };
    rule.with_limit(1)
}

/// A second rule an injection needs: a crash's failing reads of commits, more than a
/// writer makes before it gives up on learning its outcome.
fn second_rule(injection: &Injection) -> Option<FaultRule> {
    let reads = RetryPolicy::default().max_outcome_reads as u64 + 2;
    matches!(injection, Injection::Crash { .. }).then(|| {
        FaultRule::new(FaultOp::Get, Fault::ServerError)
            .with_glob("*/_delta_log/0*.json")
            .with_limit(reads)
    })
}

async fn execute(
    table: &mut Table,
    op: &Op,
    rows: &[(i64, String)],
) -> tarn::Result<tarn::CommitOutcome> {
    match op {
        Op::Append { .. } => table.append([batch(rows)]).await.map(|o| o.commit),
        Op::OverwritePartition { part, .. } => table
            .write([batch(rows)])
            .with_mode(WriteMode::Overwrite)
            .replace_where(col("part").eq(lit(PARTS[*part as usize])))
            .execute()
            .await
            .map(|o| o.commit),
        Op::DeletePartition { part } => table
            .delete_partitions(col("part").eq(lit(PARTS[*part as usize])))
            .await
            .map(|o| o.commit),
        Op::DeleteIds { from, len } => table
            .delete(
                col("id")
                    .gt_eq(lit(*from))
                    .and(col("id").lt(lit(from + len))),
            )
            .with_strategy(ChangeStrategy::MergeOnRead)
            .execute()
            .await
            .map(|o| o.commit),
    }
}

/// Runs one round: every writer's operation at once, from the same latest version.
async fn play(
    h: &mut Harness,
    round: &[Option<(Op, Option<Injection>)>],
    issued: &mut Vec<Issued>,
    by_txn: &mut BTreeMap<String, usize>,
    next_id: &mut i64,
) {
    for w in &mut h.writers {
        w.table.refresh().await.unwrap();
    }
    let mut planned = Vec::new();
    for (w, slot) in round.iter().enumerate() {
        let Some((op, injection)) = slot else {
            continue;
        };
        if let Some(i) = injection {
            h.writers[w].faults.add_rule(rule(i));
            if let Some(second) = second_rule(i) {
                h.writers[w].faults.add_rule(second);
            }
        }
        let parts: Vec<u8> = match op {
            Op::Append { rows } => rows.clone(),
            Op::OverwritePartition { part, rows } => vec![*part; *rows as usize],
            Op::DeletePartition { .. } | Op::DeleteIds { .. } => Vec::new(),
        };
        let rows: Vec<(i64, String)> = parts
            .into_iter()
            .map(|p| {
                *next_id += 1;
                (*next_id, PARTS[p as usize].to_string())
            })
            .collect();
        planned.push((w, op.clone(), rows));
    }
    let results =
        futures::future::join_all(h.writers.iter_mut().enumerate().filter_map(|(w, writer)| {
            let (_, op, rows) = planned.iter().find(|p| p.0 == w)?;
            Some(execute(&mut writer.table, op, rows))
        }))
        .await;
    for ((w, op, rows), result) in planned.into_iter().zip(results) {
        h.writers[w].faults.clear();
        let (told, txn_id) = match result {
            Ok(outcome) if outcome.txn_id.is_empty() => (Told::NothingToCommit, None),
            Ok(outcome) => {
                assert!(outcome.attempts >= 1, "{op:?} committed in no attempt");
                (
                    Told::Committed {
                        version: outcome.version,
                    },
                    Some(outcome.txn_id),
                )
            }
            Err(Error::CommitStateUnknown { txn_id, .. }) => {
                // A writer that could not learn its outcome crashes; it restarts and
                // fences itself, so its work lands before the fence or never.
                let location = h.writers[w].table.snapshot().location().clone();
                let (table, fenced_at) = start_writer(location, w, h.policy).await;
                h.writers[w].table = table;
                h.fences.insert(fenced_at);
                eprintln!("writer {w} restarted after an unknown outcome, fenced at {fenced_at}");
                (Told::Unknown { fenced_at }, Some(txn_id))
            }
            Err(e) => (Told::Failed(e.to_string()), None),
        };
        if let Some(id) = txn_id {
            assert!(
                by_txn.insert(id.clone(), issued.len()).is_none(),
                "txnId {id} reused"
            );
        }
        issued.push(Issued { op, rows, told });
    }
}

fn apply(rows: &mut Rows, issued: &Issued) {
    match &issued.op {
        Op::Append { .. } => rows.extend(issued.rows.iter().cloned()),
        Op::OverwritePartition { part, .. } => {
            rows.retain(|r| r.1 != PARTS[*part as usize]);
            rows.extend(issued.rows.iter().cloned());
        }
        Op::DeletePartition { part } => rows.retain(|r| r.1 != PARTS[*part as usize]),
        Op::DeleteIds { from, len } => rows.retain(|r| r.0 < *from || r.0 >= from + len),
    }
}

/// Checks the log against what the writers were told; returns how many operations rode
/// in another writer's commit.
async fn check(h: &Harness, issued: &[Issued], by_txn: &BTreeMap<String, usize>) -> usize {
    let latest = Snapshot::builder(h.clean.clone())
        .build()
        .await
        .unwrap()
        .version();
    let mut listed: Vec<i64> = h
        .store
        .list(Some(&object_store::path::Path::from("t/_delta_log")))
        .try_filter_map(|m| async move {
            Ok(m.location
                .filename()
                .and_then(|f| f.strip_suffix(".json"))
                .and_then(|v| v.parse::<i64>().ok()))
        })
        .try_collect()
        .await
        .unwrap();
    listed.sort_unstable();
    assert_eq!(listed, (0..=latest).collect::<Vec<_>>(), "versions");
    let mut rows = Rows::new();
    let mut seen = BTreeSet::new();
    let mut carried = 0;
    for version in 1..=latest {
        let ids = txn_ids_at(&h.clean, version).await;
        assert!(!ids.is_empty(), "version {version} names no txnId");
        // A fence commits alone and changes no rows.
        if h.fences.contains(&version) {
            assert_eq!(ids.len(), 1, "fence at {version} carried work: {ids:?}");
            continue;
        }
        carried += ids.len() - 1;
        for (k, id) in ids.into_iter().enumerate() {
            let Some(&i) = by_txn.get(&id) else {
                panic!(
                    "version {version} holds txnId {id}, which no writer was told committed \
                     or left unknown: {issued:#?}"
                );
            };
            assert!(
                seen.insert(i),
                "{:?} applied twice (again at {version})",
                issued[i]
            );
            match issued[i].told {
                Told::Committed { version: told } => {
                    assert_eq!(told, version, "{:?} told the wrong version", issued[i]);
                }
                Told::Unknown { fenced_at } => assert!(
                    version < fenced_at,
                    "{:?} landed at {version}, after its writer's fence at {fenced_at}",
                    issued[i]
                ),
                _ => panic!("{:?} is in version {version}", issued[i]),
            }
            apply(&mut rows, &issued[i]);
            if k > 0 && matches!(issued[i].op, Op::DeleteIds { .. }) {
                eprintln!("version {version} carried {:?}", issued[i].op);
            }
        }
        let snapshot = Snapshot::builder(h.clean.clone())
            .at_version(version)
            .build()
            .await
            .unwrap();
        assert_eq!(
            rows_of(&snapshot).await.unwrap(),
            rows,
            "rows at version {version}"
        );
    }
    for (i, op) in issued.iter().enumerate() {
        if matches!(op.told, Told::Committed { .. }) {
            assert!(seen.contains(&i), "acknowledged {op:?} is not in the log");
        }
    }
    carried
}

/// Plays `rounds` and checks the log; returns how many operations rode in another
/// writer's commit, and how many writers crashed and restarted.
async fn run(rounds: Vec<Round>, seed: u64, policy: RetryPolicy) -> (usize, usize) {
    let mut h = harness(seed, policy).await;
    let mut issued = Vec::new();
    let mut by_txn = BTreeMap::new();
    let mut next_id = 0;
    for round in &rounds {
        play(&mut h, round, &mut issued, &mut by_txn, &mut next_id).await;
    }
    let restarts = issued
        .iter()
        .filter(|i| matches!(i.told, Told::Unknown { .. }))
        .count();
    (check(&h, &issued, &by_txn).await, restarts)
}

/// Runs `cases` seeded histories under `policy` and checks that writers rode in others'
/// commits.
fn histories_match_the_serial_model(
    seed_name: &str,
    cases: u32,
    policy: RetryPolicy,
    crashes: bool,
) {
    // The default seed's histories group writers well above the floor checked below
    // (41-46 carried in 32 cases; some seeds carry as few as 26).
    let (mut runner, seed, cases) = tarn_tests::seeded::runner(seed_name, 0x6C1, cases);
    let runtime = tarn_tests::seeded::runtime();
    let strategy = (
        prop::collection::vec(round(policy.claim_at == 0, crashes), 1..8),
        any::<u64>(),
    );
    let carried = std::sync::atomic::AtomicUsize::new(0);
    let restarts = std::sync::atomic::AtomicUsize::new(0);
    let result = runner.run(&strategy, |(rounds, fault_seed)| {
        let (n, r) = runtime.block_on(run(rounds, fault_seed, policy));
        carried.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
        restarts.fetch_add(r, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    });
    if let Err(e) = result {
        panic!("seed {seed}: {e}");
    }
    // The histories must actually group writers, or this test checks nothing new. (How
    // many ride depends on timing; a replay of a few cases may carry none.)
    let carried = carried.into_inner();
    let restarts = restarts.into_inner();
    eprintln!("{restarts} writers crashed, restarted and fenced");
    if crashes && cases >= 16 {
        assert!(
            restarts >= cases as usize / 2 && carried > 0,
            "{restarts} restarts and {carried} carried operations in {cases} cases"
        );
        return;
    }
    eprintln!("{carried} operations rode in other writers' commits");
    if cases >= 16 {
        assert!(
            carried > cases as usize,
            "only {carried} carried operations in {cases} cases"
        );
    }
}

#[test]
fn concurrent_histories_grouped_with_faults_match_the_serial_model() {
    histories_match_the_serial_model("TARN_MODEL", 32, RetryPolicy::default(), false);
}

/// The same histories with every writer whose proposal is out claiming its version (as
/// under a crowd of writers): one reads the proposals and commits, the others wait for
/// its commit; faults on claims, and claimers that stop after claiming, are waited out.
#[test]
fn concurrent_histories_claiming_versions_match_the_serial_model() {
    let claiming = RetryPolicy {
        claim_at: 0,
        ..RetryPolicy::default()
    };
    histories_match_the_serial_model("TARN_CLAIM_MODEL", 24, claiming, false);
}

/// The same histories with writers that crash: a commit PUT fails and so do the reads
/// that would tell its outcome, so the writer is told `CommitStateUnknown`; it restarts
/// and fences its id, after which its work must not land.
#[test]
fn crashed_writers_that_restart_and_fence_never_land_late() {
    histories_match_the_serial_model("TARN_CRASH_MODEL", 24, RetryPolicy::default(), true);
}
