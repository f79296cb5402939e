//! The row-level model test: random sequences of appends, deletes, updates (partition
//! moves included), merges, optimizes and checkpoints, each under a random strategy
//! (copy-on-write, merge-on-read, or the table's default), on memory and on local files.
//! After every step the table's rows equal an in-memory model of the same changes, both
//! through the writer's snapshot and through a fresh handle replaying the log.
//!
//! The run is seeded: `TARN_DML_MODEL_SEED` replays one, `TARN_DML_MODEL_CASES` sets how
//! many cases per store.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{Array, AsArray, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef};
use proptest::prelude::*;
use tarn::expr::{Expr, col, lit, source_col, target_col};
use tarn::{ChangeStrategy, Snapshot, StoreLocation, Table};

const PARTS: [&str; 3] = ["p0", "p1", "p2"];

/// id -> (part, v, s)
type Rows = BTreeMap<i64, (String, i64, Option<String>)>;

/// A predicate the test can both hand to Tarn and evaluate on the model.
#[derive(Debug, Clone)]
enum Pred {
    VLess(i64),
    IdEq(i64),
    PartAndVGreater(u8, i64),
    SIsNull,
    IdMod(i64),
}

impl Pred {
    fn expr(&self) -> Expr {
        match self {
            Pred::VLess(k) => col("v").lt(lit(*k)),
            Pred::IdEq(k) => col("id").eq(lit(*k)),
            Pred::PartAndVGreater(p, k) => col("part")
                .eq(lit(PARTS[*p as usize]))
                .and(col("v").gt(lit(*k))),
            Pred::SIsNull => col("s").is_null(),
            // id - (id / k) * k = 0, integer division: ids divisible by k.
            Pred::IdMod(k) => (col("id") - (col("id") / lit(*k)) * lit(*k)).eq(lit(0i64)),
        }
    }

    fn holds(&self, id: i64, row: &(String, i64, Option<String>)) -> bool {
        match self {
            Pred::VLess(k) => row.1 < *k,
            Pred::IdEq(k) => id == *k,
            Pred::PartAndVGreater(p, k) => row.0 == PARTS[*p as usize] && row.1 > *k,
            Pred::SIsNull => row.2.is_none(),
            Pred::IdMod(k) => id % k == 0,
        }
    }
}

#[derive(Debug, Clone)]
enum Assign {
    /// v = v * 2 + k
    Arith(i64),
    /// s = 'u<k>'
    Text(i64),
    /// part = PARTS[p], allowed to move rows.
    Move(u8),
}

#[derive(Debug, Clone)]
enum Op {
    Append(u8),
    Delete(Pred, Option<ChangeStrategy>),
    Update(Pred, Assign, Option<ChangeStrategy>),
    /// Source keys (existing ids reached by modulo, and new ones), a bound below which
    /// matched target rows are deleted rather than updated, and an optional
    /// not-matched-by-source delete of one partition.
    Merge {
        keys: Vec<u16>,
        delete_below: i64,
        by_source: Option<u8>,
        strategy: Option<ChangeStrategy>,
    },
    Optimize(bool),
    Checkpoint,
}

fn strategy() -> impl Strategy<Value = Option<ChangeStrategy>> {
    prop_oneof![
        Just(None),
        Just(Some(ChangeStrategy::CopyOnWrite)),
        Just(Some(ChangeStrategy::MergeOnRead)),
    ]
}

fn pred() -> impl Strategy<Value = Pred> {
    prop_oneof![
        (0i64..17).prop_map(Pred::VLess),
        (0i64..80).prop_map(Pred::IdEq),
        (0u8..3, 0i64..17).prop_map(|(p, k)| Pred::PartAndVGreater(p, k)),
        Just(Pred::SIsNull),
        (2i64..9).prop_map(Pred::IdMod),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (1u8..25).prop_map(Op::Append),
        3 => (pred(), strategy()).prop_map(|(p, s)| Op::Delete(p, s)),
        3 => (
            pred(),
            prop_oneof![
                (0i64..5).prop_map(Assign::Arith),
                (0i64..5).prop_map(Assign::Text),
                (0u8..3).prop_map(Assign::Move),
            ],
            strategy()
        )
            .prop_map(|(p, a, s)| Op::Update(p, a, s)),
        3 => (
            prop::collection::btree_set(0u16..200, 0..12).prop_map(|s| s.into_iter().collect()),
            0i64..17,
            prop::option::of(0u8..3),
            strategy()
        )
            .prop_map(|(keys, delete_below, by_source, strategy)| Op::Merge {
                keys,
                delete_below,
                by_source,
                strategy,
            }),
        1 => any::<bool>().prop_map(Op::Optimize),
        1 => Just(Op::Checkpoint),
    ]
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("part", DataType::Utf8, true),
        Field::new("v", DataType::Int64, true),
        Field::new("s", DataType::Utf8, true),
    ]))
}

fn row(id: i64) -> (String, i64, Option<String>) {
    (
        PARTS[(id % 3) as usize].to_string(),
        (id * 7) % 17,
        (id % 4 != 0).then(|| format!("s{id}")),
    )
}

fn batch(rows: &Rows) -> RecordBatch {
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from(rows.keys().copied().collect::<Vec<_>>())),
            Arc::new(StringArray::from(
                rows.values().map(|r| r.0.clone()).collect::<Vec<_>>(),
            )),
            Arc::new(Int64Array::from(
                rows.values().map(|r| r.1).collect::<Vec<_>>(),
            )),
            Arc::new(StringArray::from(
                rows.values().map(|r| r.2.clone()).collect::<Vec<_>>(),
            )),
        ],
    )
    .unwrap()
}

async fn rows_of(snapshot: &Snapshot) -> Rows {
    let mut out = Rows::new();
    for b in snapshot.scan().collect().await.unwrap() {
        let b = b.project(&[0, 1, 2, 3]).unwrap();
        let schema = b.schema();
        let index = |name: &str| schema.index_of(name).unwrap();
        let ids = b.column(index("id")).as_primitive::<Int64Type>();
        let parts = b.column(index("part")).as_string::<i32>();
        let vs = b.column(index("v")).as_primitive::<Int64Type>();
        let ss = b.column(index("s")).as_string::<i32>();
        for i in 0..b.num_rows() {
            let s = (!ss.is_null(i)).then(|| ss.value(i).to_string());
            let previous = out.insert(ids.value(i), (parts.value(i).to_string(), vs.value(i), s));
            assert!(previous.is_none(), "id {} read twice", ids.value(i));
        }
    }
    out
}

struct Case {
    location: StoreLocation,
    table: Table,
    model: Rows,
    next_id: i64,
}

async fn step(case: &mut Case, op: &Op) {
    let t = &mut case.table;
    let model = &mut case.model;
    match op {
        Op::Append(n) => {
            let new: Rows = (case.next_id..case.next_id + i64::from(*n))
                .map(|id| (id, row(id)))
                .collect();
            case.next_id += i64::from(*n);
            t.append([batch(&new)]).await.unwrap();
            model.extend(new);
        }
        Op::Delete(p, strategy) => {
            let mut builder = t.delete(p.expr());
            if let Some(s) = strategy {
                builder = builder.with_strategy(*s);
            }
            let outcome = builder.execute().await.unwrap();
            let before = model.len();
            model.retain(|id, r| !p.holds(*id, r));
            assert_eq!(
                outcome.metrics.rows_deleted as usize,
                before - model.len(),
                "rows deleted"
            );
        }
        Op::Update(p, assign, strategy) => {
            let mut builder = t.update().filter(p.expr());
            builder = match assign {
                Assign::Arith(k) => builder.set("v", col("v") * lit(2i64) + lit(*k)),
                Assign::Text(k) => builder.set("s", lit(format!("u{k}"))),
                Assign::Move(part) => builder
                    .set("part", lit(PARTS[*part as usize]))
                    .with_partition_moves(true),
            };
            if let Some(s) = strategy {
                builder = builder.with_strategy(*s);
            }
            let outcome = builder.execute().await.unwrap();
            let mut updated = 0;
            for (id, r) in model.iter_mut() {
                if p.holds(*id, r) {
                    updated += 1;
                    match assign {
                        Assign::Arith(k) => r.1 = r.1 * 2 + k,
                        Assign::Text(k) => r.2 = Some(format!("u{k}")),
                        Assign::Move(part) => r.0 = PARTS[*part as usize].to_string(),
                    }
                }
            }
            assert_eq!(outcome.metrics.rows_updated, updated, "rows updated");
        }
        Op::Merge {
            keys,
            delete_below,
            by_source,
            strategy,
        } => {
            // Keys below 100 land on ids the table may hold; above, mostly new ones.
            let source: Rows = keys
                .iter()
                .map(|k| {
                    let id = if *k < 100 {
                        i64::from(*k) % case.next_id.max(1)
                    } else {
                        case.next_id + i64::from(*k)
                    };
                    let (part, v, _) = row(id);
                    (id, (part, v + 1, Some(format!("m{id}"))))
                })
                .collect();
            let mut builder = t
                .merge([batch(&source)])
                .on(["id"])
                .when_matched_delete(Some(target_col("v").lt(lit(*delete_below))))
                .when_matched_update(None, [("v", source_col("v")), ("s", source_col("s"))])
                .when_not_matched_insert_all(None);
            if let Some(p) = by_source {
                builder = builder.when_not_matched_by_source_delete(Some(
                    target_col("part").eq(lit(PARTS[*p as usize])),
                ));
            }
            if let Some(s) = strategy {
                builder = builder.with_strategy(*s);
            }
            let outcome = builder.execute().await.unwrap();
            let (mut deleted, mut updated, mut inserted) = (0, 0, 0);
            if let Some(p) = by_source {
                let before = model.len();
                model.retain(|id, r| source.contains_key(id) || r.0 != PARTS[*p as usize]);
                deleted += before - model.len();
            }
            for (id, s) in &source {
                match model.get_mut(id) {
                    Some(r) if r.1 < *delete_below => {
                        model.remove(id);
                        deleted += 1;
                    }
                    Some(r) => {
                        r.1 = s.1;
                        r.2 = s.2.clone();
                        updated += 1;
                    }
                    None => {
                        model.insert(*id, s.clone());
                        inserted += 1;
                    }
                }
            }
            let m = &outcome.metrics;
            assert_eq!(
                (
                    m.rows_deleted as usize,
                    m.rows_updated as usize,
                    m.rows_inserted as usize
                ),
                (deleted, updated, inserted),
                "merge counts (deleted, updated, inserted)"
            );
            case.next_id += 300;
        }
        Op::Optimize(purge_all) => {
            let mut builder = t.optimize();
            if *purge_all {
                builder = builder.with_deletion_vector_threshold(0.0);
            }
            let outcome = builder.execute().await.unwrap();
            if *purge_all {
                assert_eq!(
                    t.snapshot()
                        .files()
                        .filter(|a| a.deletion_vector.is_some())
                        .count(),
                    0,
                    "optimize purged every DV"
                );
            }
            assert!(outcome.files_added <= outcome.files_removed.max(1));
        }
        Op::Checkpoint => {
            t.checkpoint().await.unwrap();
        }
    }
}

async fn run(ops: Vec<Op>, on_disk: bool, default: ChangeStrategy, inline: bool) {
    let dir = tempfile::tempdir().unwrap();
    let location = if on_disk {
        tarn_store::open(dir.path().join("t").to_str().unwrap()).unwrap()
    } else {
        tarn_store::open(&format!("memory://dml-model/{}", tarn_tests::unique("t"))).unwrap()
    };
    let default_name = match default {
        ChangeStrategy::CopyOnWrite => "copy-on-write",
        ChangeStrategy::MergeOnRead => "merge-on-read",
    };
    let table = Table::create_at(location.clone())
        .with_arrow_schema(&schema())
        .with_partition_columns(["part"])
        .with_property("delta.enableDeletionVectors", "true")
        .with_property(tarn::protocol::properties::DML_STRATEGY, default_name)
        .with_property(
            tarn::protocol::properties::DV_INLINE_THRESHOLD,
            if inline { "64" } else { "0" },
        )
        .with_property("delta.checkpointInterval", "1000")
        .execute()
        .await
        .unwrap();
    let mut case = Case {
        location,
        table,
        model: Rows::new(),
        next_id: 0,
    };
    for (i, op) in ops.iter().enumerate() {
        step(&mut case, op).await;
        let ours = rows_of(case.table.snapshot()).await;
        assert_eq!(ours, case.model, "after step {i} {op:?}");
        let fresh = Table::open_at(case.location.clone()).await.unwrap();
        assert_eq!(fresh.version(), case.table.version());
        assert_eq!(
            rows_of(fresh.snapshot()).await,
            case.model,
            "fresh handle after step {i} {op:?}"
        );
    }
}

fn property(on_disk: bool) {
    let (mut runner, seed, _) =
        tarn_tests::seeded::runner("TARN_DML_MODEL", 0xD3_1E7E, if on_disk { 48 } else { 128 });
    let runtime = tarn_tests::seeded::runtime();
    let strategy = (
        prop::collection::vec(op(), 1..16),
        prop_oneof![
            Just(ChangeStrategy::CopyOnWrite),
            Just(ChangeStrategy::MergeOnRead)
        ],
        any::<bool>(),
    );
    let result = runner.run(&strategy, |(ops, default, inline)| {
        runtime.block_on(run(ops, on_disk, default, inline));
        Ok(())
    });
    if let Err(e) = result {
        panic!("seed {seed}: {e}");
    }
}

#[test]
fn random_row_level_changes_match_the_model_in_memory() {
    property(false);
}

#[test]
fn random_row_level_changes_match_the_model_on_local_files() {
    property(true);
}
