//! Criterion benchmarks of index lookups on a warm table handle: a BTree point lookup and
//! a 100-key `IN` on an unsorted key, a Bitmap equality and a full-text term, each beside
//! the same scan without indices. 500,000 rows in 20 files on local disk.

#![allow(clippy::expect_used)] // A benchmark that cannot set up has nothing to measure.

use criterion::{Criterion, criterion_group, criterion_main};
use tarn::expr::{Expr, col, lit, text_match};
use tarn::{IndexKind, Table};

fn lookups(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let dir = tempfile::tempdir().expect("temp dir");
    let url = dir.path().to_str().expect("utf-8").to_string();
    let table = runtime.block_on(async {
        let mut table = Table::create(&url)
            .with_arrow_schema(&tarn_bench::r#gen::sales_schema())
            .execute()
            .await
            .expect("create");
        for f in 0..20i64 {
            let ids: Vec<i64> = (f * 25_000..(f + 1) * 25_000).collect();
            table
                .append([tarn_bench::r#gen::sales_batch(&ids, 7)])
                .await
                .expect("append");
        }
        table
            .create_index("customer_id")
            .execute()
            .await
            .expect("btree");
        table
            .create_index("store_id")
            .with_kind(IndexKind::Bitmap)
            .execute()
            .await
            .expect("bitmap");
        table
            .create_index("comment")
            .with_kind(IndexKind::FullText)
            .execute()
            .await
            .expect("full text");
        table
    });
    let keys: Vec<i64> = (0..100).map(|i| i * 487).collect();
    let cases: [(&str, Expr); 4] = [
        ("btree-point", col("customer_id").eq(lit(4_242i64))),
        ("btree-in-100", col("customer_id").is_in(keys)),
        ("bitmap-eq", col("store_id").eq(lit(7i32))),
        ("fulltext-term", text_match("comment", "123457")),
    ];
    let mut group = c.benchmark_group("index/500K-rows-20-files");
    group.sample_size(20);
    for (name, predicate) in cases {
        for indices in [true, false] {
            let label = format!("{name}/{}", if indices { "index" } else { "scan" });
            group.bench_function(label, |b| {
                b.to_async(&runtime).iter(|| async {
                    table
                        .scan()
                        .filter(predicate.clone())
                        .with_indices(indices)
                        .collect()
                        .await
                        .expect("scan")
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, lookups);
criterion_main!(benches);
