//! Indices never change the rows a scan returns. Random histories of appends, deletes,
//! updates and merges (copy-on-write and merge-on-read), optimize, index creation (every
//! kind, inline and deferred), index maintenance and drops; after every step each query
//! on an indexed column returns the same rows as with `use_indices(false)`, through the
//! writer's handle and through a fresh one. On memory and local files.
//!
//! `TARN_INDEX_MODEL_SEED` replays one run, `TARN_INDEX_MODEL_CASES` sets the cases per
//! store.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use arrow::array::{Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestRunner};
use tarn::ChangeStrategy;
use tarn::expr::{Expr, col, lit, source_col, text_match};
use tarn::{IndexKind, IndexMode, StoreLocation, Table};
use tarn_tests::rows::canonical_rows;

const TAGS: [Option<&str>; 4] = [Some("a"), Some("b"), Some("c"), None];
const WORDS: [&str; 5] = ["fox", "dog", "red", "blue", "fast"];

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("k", DataType::Int64, true),
        Field::new("tag", DataType::Utf8, true),
        Field::new("text", DataType::Utf8, true),
    ]))
}

/// Rows for ids `start..start+n`, with `salt` varying the values.
fn rows(start: i64, n: i64, salt: i64) -> RecordBatch {
    let ids: Vec<i64> = (start..start + n).collect();
    let k: Int64Array = ids
        .iter()
        .map(|i| (i % 9 != 4).then_some((i * 37 + salt) % 101))
        .collect();
    let tag: StringArray = ids
        .iter()
        .map(|i| TAGS[((i + salt) % 4) as usize])
        .collect();
    let text: StringArray = ids
        .iter()
        .map(|i| {
            (i % 7 != 2).then(|| {
                (0..3)
                    .map(|w| WORDS[((i + salt + w * 3) % 5) as usize])
                    .collect::<Vec<_>>()
                    .join(" ")
            })
        })
        .collect();
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from(ids)),
            Arc::new(k),
            Arc::new(tag),
            Arc::new(text),
        ],
    )
    .unwrap()
}

#[derive(Debug, Clone)]
enum Op {
    Append(i64, i64),
    DeleteK(i64, Option<ChangeStrategy>),
    DeleteTag(u8, Option<ChangeStrategy>),
    UpdateK(i64, i64, Option<ChangeStrategy>),
    Merge(i64, i64, Option<ChangeStrategy>),
    Optimize,
    Create(u8, bool),
    OptimizeIndices,
    Drop(u8),
    Checkpoint,
}

fn strategy() -> impl Strategy<Value = Option<ChangeStrategy>> {
    prop_oneof![
        Just(None),
        Just(Some(ChangeStrategy::CopyOnWrite)),
        Just(Some(ChangeStrategy::MergeOnRead)),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (1i64..40, 0i64..5).prop_map(|(n, s)| Op::Append(n, s)),
        2 => (0i64..101, strategy()).prop_map(|(k, s)| Op::DeleteK(k, s)),
        1 => (0u8..4, strategy()).prop_map(|(t, s)| Op::DeleteTag(t, s)),
        2 => (0i64..101, 0i64..101, strategy()).prop_map(|(a, b, s)| Op::UpdateK(a, b, s)),
        2 => (0i64..200, 1i64..20, strategy()).prop_map(|(a, n, s)| Op::Merge(a, n, s)),
        1 => Just(Op::Optimize),
        3 => (0u8..3, any::<bool>()).prop_map(|(i, d)| Op::Create(i, d)),
        1 => Just(Op::OptimizeIndices),
        1 => (0u8..3).prop_map(Op::Drop),
        1 => Just(Op::Checkpoint),
    ]
}

/// The three indices a run may create: (column, kind).
const INDICES: [(&str, IndexKind); 3] = [
    ("k", IndexKind::BTree),
    ("tag", IndexKind::Bitmap),
    ("text", IndexKind::FullText),
];

fn queries(with_text: bool) -> Vec<Expr> {
    let mut q = vec![
        col("k").eq(lit(37i64)),
        col("k").is_in([3i64, 40, 77, 1000]),
        col("k").lt(lit(20i64)),
        col("k").gt_eq(lit(90i64)).and(col("tag").eq(lit("a"))),
        col("k").is_null(),
        col("tag").eq(lit("b")),
        col("tag").is_null(),
        col("tag").is_in(["a", "c"]),
        col("k").gt(lit(50i64)).and(col("id").lt(lit(100i64))),
    ];
    if with_text {
        q.push(text_match("text", "fox red"));
        q.push(text_match("text", "\"dog blue\" OR fast"));
        q.push(text_match("text", "-fox").and(col("tag").eq(lit("c"))));
    }
    q
}

async fn check(table: &Table, location: &StoreLocation, step: usize) {
    let with_text = table
        .indices()
        .unwrap()
        .iter()
        .any(|i| i.definition.kind == IndexKind::FullText);
    let fresh = Table::open_at(location.clone()).await.unwrap();
    for handle in [table, &fresh] {
        for q in queries(with_text) {
            let with = handle.scan().filter(q.clone()).collect().await.unwrap();
            let without = handle
                .scan()
                .filter(q.clone())
                .with_indices(false)
                .collect()
                .await
                .unwrap();
            assert_eq!(
                canonical_rows(&with),
                canonical_rows(&without),
                "step {step}: {q}"
            );
        }
    }
}

async fn apply(table: &mut Table, op: &Op, next_id: &mut i64) {
    match op {
        Op::Append(n, salt) => {
            table.append([rows(*next_id, *n, *salt)]).await.unwrap();
            *next_id += n;
        }
        Op::DeleteK(k, s) => {
            let mut d = table.delete(col("k").eq(lit(*k)));
            if let Some(s) = s {
                d = d.with_strategy(*s);
            }
            d.execute().await.unwrap();
        }
        Op::DeleteTag(t, s) => {
            let predicate = match TAGS[*t as usize] {
                Some(tag) => col("tag").eq(lit(tag)),
                None => col("tag").is_null(),
            };
            let mut d = table.delete(predicate.and(col("id").lt(lit(*next_id / 2))));
            if let Some(s) = s {
                d = d.with_strategy(*s);
            }
            d.execute().await.unwrap();
        }
        Op::UpdateK(from, to, s) => {
            let mut u = table
                .update()
                .filter(col("k").eq(lit(*from)))
                .set("k", lit(*to))
                .set("tag", lit("c"));
            if let Some(s) = s {
                u = u.with_strategy(*s);
            }
            u.execute().await.unwrap();
        }
        Op::Merge(start, n, s) => {
            let source = rows(*start, *n, 3);
            let mut m = table
                .merge([source])
                .on(["id"])
                .when_matched_update(None, [("k", source_col("k")), ("text", source_col("text"))])
                .when_not_matched_insert_all(None);
            if let Some(s) = s {
                m = m.with_strategy(*s);
            }
            m.execute().await.unwrap();
            *next_id = (*next_id).max(start + n);
        }
        Op::Optimize => {
            table
                .optimize()
                .with_target_file_size(1 << 20)
                .execute()
                .await
                .unwrap();
        }
        Op::Create(i, deferred) => {
            let (column, kind) = INDICES[*i as usize];
            let exists = table
                .indices()
                .unwrap()
                .iter()
                .any(|x| x.definition.column == column);
            if !exists {
                let mode = if *deferred {
                    IndexMode::Deferred
                } else {
                    IndexMode::Inline
                };
                table
                    .create_index(column)
                    .with_kind(kind)
                    .with_mode(mode)
                    .with_options(tarn::IndexOptions {
                        page_rows: Some(7),
                        full_text: None,
                    })
                    .execute()
                    .await
                    .unwrap();
            }
        }
        Op::OptimizeIndices => {
            table.optimize_indices().await.unwrap();
        }
        Op::Drop(i) => {
            let name = format!("{}_idx", INDICES[*i as usize].0);
            if table.indices().unwrap().iter().any(|x| x.name == name) {
                let _ = table.drop_index(&name).await.unwrap();
            }
        }
        Op::Checkpoint => {
            table.checkpoint().await.unwrap();
        }
    }
}

fn run(location_of: impl Fn() -> (StoreLocation, Option<tempfile::TempDir>)) {
    let cases = std::env::var("TARN_INDEX_MODEL_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(24);
    let mut config = Config::with_cases(cases);
    config.failure_persistence = None;
    if let Some(seed) = std::env::var("TARN_INDEX_MODEL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        config.rng_seed = RngSeed::Fixed(seed);
    }
    let mut runner = TestRunner::new(config);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runner
        .run(&proptest::collection::vec(op(), 1..14), |ops| {
            let (location, _dir) = location_of();
            rt.block_on(async {
                let mut table = Table::create_at(location.clone())
                    .with_arrow_schema(&schema())
                    .with_property("delta.enableDeletionVectors", "true")
                    .with_property("delta.checkpointInterval", "5")
                    .execute()
                    .await
                    .unwrap();
                let mut next_id = 0;
                table.append([rows(0, 30, 0)]).await.unwrap();
                next_id += 30;
                for (step, op) in ops.iter().enumerate() {
                    apply(&mut table, op, &mut next_id).await;
                    check(&table, &location, step).await;
                }
            });
            Ok(())
        })
        .unwrap();
}

#[test]
fn indices_never_change_the_rows_in_memory() {
    run(|| {
        let name = tarn_tests::unique("index-model");
        (tarn_store::open(&format!("memory://{name}")).unwrap(), None)
    });
}

#[test]
fn indices_never_change_the_rows_on_local_files() {
    run(|| {
        let dir = tempfile::tempdir().unwrap();
        (
            tarn_store::open(dir.path().to_str().unwrap()).unwrap(),
            Some(dir),
        )
    });
}
