//! Criterion front end of the workloads, at small default sizes: load, the LHBench merge
//! under both strategies, a cold open of a 1,000-file table, and cold against warm reads.
//!
//! Configured by the environment:
//! - `TARN_BENCH_URL`: where tables go (default: a temporary directory); `s3://bucket/prefix`
//!   takes credentials and endpoint from `AWS_*`, `gs://` from `GOOGLE_*`, `az://` from
//!   `AZURE_STORAGE_*`.
//! - `TARN_BENCH_PROFILE`: latency replayed on measured operations (`none`, `s3-standard`,
//!   `s3-express`, `gcs-standard`, `azure-blob`; default `none`).
//! - `TARN_BENCH_SCALE`: multiplies the sizes (default 0.1: 100K-row tables).

#![allow(clippy::expect_used)] // A benchmark that cannot set up has nothing to measure.

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use tarn::{ChangeStrategy, Snapshot, Table};
use tarn_bench::queries::Query;
use tarn_bench::workloads::create;
use tarn_bench::{Bench, r#gen};
use tarn_store::{LatencyProfile, StoreOptions};

struct Setup {
    bench: Bench,
    runtime: tokio::runtime::Runtime,
    _dir: Option<tempfile::TempDir>,
}

fn setup() -> Setup {
    let (root, dir) = match std::env::var("TARN_BENCH_URL") {
        Ok(url) => (url, None),
        Err(_) => {
            let dir = tempfile::tempdir().expect("a temporary directory");
            (dir.path().to_string_lossy().into_owned(), Some(dir))
        }
    };
    let profile = std::env::var("TARN_BENCH_PROFILE").unwrap_or_else(|_| "none".into());
    let scale = std::env::var("TARN_BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0.1);
    Setup {
        bench: Bench {
            root,
            options: StoreOptions::default(),
            profile: LatencyProfile::by_name(&profile).expect("a known latency profile"),
            scale,
            runs: 1,
            seed: 42,
            cache: None,
        },
        runtime: tokio::runtime::Runtime::new().expect("a runtime"),
        _dir: dir,
    }
}

fn load(c: &mut Criterion) {
    let s = setup();
    let rows = s.bench.scaled(1_000_000, 10_000);
    let batches: Vec<_> = r#gen::merge_rows(rows).collect();
    let mut group = c.benchmark_group("load");
    group.sample_size(10);
    group.throughput(criterion::Throughput::Elements(rows));
    group.bench_function(format!("lhbench/{rows}-rows"), |b| {
        b.to_async(&s.runtime).iter_custom(|iterations| {
            let (bench, batches) = (&s.bench, &batches);
            async move {
                let mut total = Duration::ZERO;
                for run in 0..iterations {
                    bench.clear("criterion/load").await.expect("clear");
                    let measured = bench
                        .measured("criterion/load", run as usize)
                        .expect("location");
                    let started = Instant::now();
                    let mut table = Table::create_at(measured.location.clone())
                        .with_arrow_schema(&r#gen::merge_schema())
                        .execute()
                        .await
                        .expect("create");
                    table
                        .write(batches.iter().cloned())
                        .execute()
                        .await
                        .expect("write");
                    total += started.elapsed();
                }
                total
            }
        })
    });
    group.finish();
}

fn merge(c: &mut Criterion) {
    let s = setup();
    let rows = s.bench.scaled(1_000_000, 10_000);
    s.runtime.block_on(async {
        let mut table = create(
            &s.bench,
            "criterion/merge-base",
            &r#gen::merge_schema(),
            1 << 20,
        )
        .await
        .expect("create");
        table
            .write(r#gen::merge_rows(rows))
            .execute()
            .await
            .expect("write");
    });
    let (source, _) = r#gen::merge_source(rows, 0.001, 42);
    let mut group = c.benchmark_group("merge/0.1%");
    group.sample_size(10);
    for strategy in [ChangeStrategy::CopyOnWrite, ChangeStrategy::MergeOnRead] {
        let name = match strategy {
            ChangeStrategy::CopyOnWrite => "copy-on-write",
            ChangeStrategy::MergeOnRead => "merge-on-read",
        };
        group.bench_function(name, |b| {
            b.to_async(&s.runtime).iter_custom(|iterations| {
                let (bench, source) = (&s.bench, &source);
                async move {
                    let mut total = Duration::ZERO;
                    for run in 0..iterations {
                        bench
                            .copy_table("criterion/merge-base", "criterion/merge")
                            .await
                            .expect("copy");
                        let measured = bench
                            .measured("criterion/merge", run as usize)
                            .expect("location");
                        let mut table = Table::open_at(measured.location.clone())
                            .await
                            .expect("open");
                        let started = Instant::now();
                        tarn_bench::workloads::upsert(&mut table, vec![source.clone()], strategy)
                            .await
                            .expect("merge");
                        total += started.elapsed();
                    }
                    total
                }
            })
        });
    }
    group.finish();
}

fn reads(c: &mut Criterion) {
    let s = setup();
    let rows = s.bench.scaled(1_000_000, 10_000);
    let warm = s.runtime.block_on(async {
        let mut table = create(
            &s.bench,
            "criterion/reads",
            &r#gen::merge_schema(),
            128 << 20,
        )
        .await
        .expect("create");
        table
            .write(r#gen::merge_rows(rows))
            .execute()
            .await
            .expect("write");
        let measured = s.bench.measured("criterion/reads", 0).expect("location");
        Snapshot::builder(measured.location)
            .build()
            .await
            .expect("snapshot")
    });
    let mut group = c.benchmark_group("reads");
    group.sample_size(10);
    group.throughput(criterion::Throughput::Elements(rows));
    group.bench_function("cold open + SUM(value)", |b| {
        b.to_async(&s.runtime).iter(|| async {
            let measured = s.bench.measured("criterion/reads", 0).expect("location");
            let snapshot = Snapshot::builder(measured.location)
                .build()
                .await
                .expect("snapshot");
            Query::SumValue.run(&snapshot).await.expect("query")
        })
    });
    group.bench_function("warm SUM(value)", |b| {
        b.to_async(&s.runtime)
            .iter(|| async { Query::SumValue.run(&warm).await.expect("query") })
    });
    group.finish();
}

fn files(c: &mut Criterion) {
    let s = setup();
    let count = 1_000;
    s.runtime
        .block_on(tarn_bench::workloads::small_files_table(
            &s.bench,
            "criterion/files",
            count,
        ))
        .expect("a table of small files");
    let mut group = c.benchmark_group("files");
    group.sample_size(10);
    group.bench_function(format!("cold open/{count} files"), |b| {
        b.to_async(&s.runtime).iter(|| async {
            let measured = s.bench.measured("criterion/files", 0).expect("location");
            Snapshot::builder(measured.location)
                .build()
                .await
                .expect("snapshot")
        })
    });
    group.finish();
}

criterion_group!(benches, load, merge, files, reads);
criterion_main!(benches);
