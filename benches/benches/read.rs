//! Criterion benchmarks of reads: a cold snapshot open and a full scan of the largest
//! Spark-written golden table (1,000,000 rows of dictionary-encoded decimals), and a
//! selective scan that pruning narrows to one file.

#![allow(clippy::expect_used)] // A benchmark that cannot set up has nothing to measure.

use std::sync::Arc;

use arrow::array::{Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema};
use criterion::{Criterion, criterion_group, criterion_main};
use tarn::expr::{col, lit};
use tarn::{Snapshot, Table};

fn golden(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let dir = tarn_bench::golden_root()
        .join("parquet-decimal-dictionaries")
        .join("delta");
    let url = dir.to_string_lossy().into_owned();
    let mut group = c.benchmark_group("golden/parquet-decimal-dictionaries");
    group.sample_size(10);
    group.bench_function("open", |b| {
        b.to_async(&runtime).iter(|| async {
            let location = tarn_store::open(&url).expect("location");
            Snapshot::builder(location).build().await.expect("snapshot")
        })
    });
    let snapshot = runtime.block_on(async {
        Snapshot::builder(tarn_store::open(&url).expect("location"))
            .build()
            .await
            .expect("snapshot")
    });
    group.bench_function("scan", |b| {
        b.to_async(&runtime)
            .iter(|| async { snapshot.scan().collect().await.expect("scan") })
    });
    group.finish();
}

fn selective(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let dir = tempfile::tempdir().expect("temp dir");
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("value", DataType::Int64, true),
    ]));
    let table = runtime.block_on(async {
        let mut table = Table::create(dir.path().to_str().expect("utf-8"))
            .with_arrow_schema(&schema)
            .execute()
            .await
            .expect("create");
        for i in 0..20i64 {
            let ids: Vec<i64> = (i * 50_000..(i + 1) * 50_000).collect();
            let batch = RecordBatch::try_new(
                Arc::clone(&schema),
                vec![
                    Arc::new(Int64Array::from(ids.clone())),
                    Arc::new(Int64Array::from(
                        ids.iter().map(|v| v * 3).collect::<Vec<_>>(),
                    )),
                ],
            )
            .expect("batch");
            table.append([batch]).await.expect("append");
        }
        table
    });
    c.bench_function("scan/one-key-of-1M-rows-in-20-files", |b| {
        b.to_async(&runtime).iter(|| async {
            table
                .scan()
                .filter(col("id").eq(lit(777_777i64)))
                .collect()
                .await
                .expect("scan")
        })
    });
}

criterion_group!(benches, golden, selective);
criterion_main!(benches);
