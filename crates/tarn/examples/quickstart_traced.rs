//! The quickstart, instrumented: create a table, append twice, read it at both versions,
//! and print what happened, with the object-store requests each step made.
//!
//! ```text
//! cargo run -p tarn --example quickstart_traced               # a fresh local directory
//! cargo run -p tarn --example quickstart_traced -- /data/sales  # or any path / URL
//! cargo run -p tarn --example quickstart_traced -- --profile s3-standard   # replay S3 latency
//! ```
//!
//! Round trips (requests waited on one after another) are shown with a latency profile:
//! on a local disk every request finishes before the next starts, so they say nothing.

use std::sync::Arc;
use std::time::Instant;

use arrow::array::{Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use tarn::expr::{col, lit};
use tarn::{Snapshot, Table};
use tarn_store::{CountingStore, LatencyProfile, LatencyStore, RequestCounter};

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("country", DataType::Utf8, true),
        Field::new("amount", DataType::Float64, true),
    ]))
}

fn batch(ids: std::ops::Range<i64>) -> Result<RecordBatch, arrow::error::ArrowError> {
    const COUNTRIES: [&str; 4] = ["NL", "FR", "DE", "JP"];
    let ids: Vec<i64> = ids.collect();
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from(ids.clone())),
            Arc::new(StringArray::from_iter_values(
                ids.iter().map(|i| COUNTRIES[(*i % 4) as usize]),
            )),
            Arc::new(Float64Array::from_iter_values(
                ids.iter().map(|i| (*i % 250) as f64 * 1.25),
            )),
        ],
    )
}

fn rows(batches: &[RecordBatch]) -> usize {
    batches.iter().map(RecordBatch::num_rows).sum()
}

fn report(step: &str, started: Instant, counter: &RequestCounter, with_latency: bool) {
    let counts = counter.take();
    let round_trips = if with_latency {
        format!(", {} round trips", counts.critical_path)
    } else {
        String::new()
    };
    println!(
        "  {step:<44} {:>7.1} ms  {:>3} requests ({} GET, {} PUT, {} LIST){round_trips}",
        started.elapsed().as_secs_f64() * 1e3,
        counts.requests(),
        counts.gets,
        counts.puts,
        counts.lists,
    );
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (mut target, mut profile) = (None, LatencyProfile::none());
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--profile" => profile = LatencyProfile::by_name(&args.next().unwrap_or_default())?,
            _ => target = Some(arg),
        }
    }
    let target = target.unwrap_or_else(|| {
        std::env::temp_dir()
            .join(format!("tarn-quickstart-{}", std::process::id()))
            .display()
            .to_string()
    });
    let location = tarn_store::open(&target)?;
    let with_latency = profile.name != "none";
    let store = LatencyStore::new(Arc::clone(location.store()), profile, 42);
    let counting = CountingStore::new(Arc::new(store) as Arc<dyn object_store::ObjectStore>);
    let counter = counting.counter();
    let location = location.with_store(Arc::new(counting));
    println!("Tarn quickstart: a Delta table at {}", location.url());

    let started = Instant::now();
    let mut table = Table::create_at(location.clone())
        .with_arrow_schema(&schema())
        .with_partition_columns(["country"])
        .execute()
        .await?;
    report("create (version 0)", started, &counter, with_latency);

    let started = Instant::now();
    let first = table.append([batch(0..10_000)?]).await?;
    report(
        &format!(
            "append 10000 rows in {} files -> version {}",
            first.files_added, first.commit.version
        ),
        started,
        &counter,
        with_latency,
    );
    let started = Instant::now();
    let second = table.append([batch(10_000..15_000)?]).await?;
    report(
        &format!(
            "append 5000 rows in {} files -> version {}",
            second.files_added, second.commit.version
        ),
        started,
        &counter,
        with_latency,
    );

    for version in [first.commit.version, second.commit.version] {
        let started = Instant::now();
        let snapshot = Snapshot::builder(location.clone())
            .at_version(version)
            .build()
            .await?;
        let batches = snapshot.scan().collect().await?;
        report(
            &format!(
                "read version {version}: {} rows, {} files",
                rows(&batches),
                snapshot.file_count()
            ),
            started,
            &counter,
            with_latency,
        );
    }

    let started = Instant::now();
    let scan = table.scan().select(["id", "amount"]).filter(
        col("country")
            .eq(lit("NL"))
            .and(col("amount").gt(lit(300.0))),
    );
    let plan = scan.plan().await?;
    let selected = scan.collect().await?;
    report(
        &format!("country = 'NL' AND amount > 300: {} rows", rows(&selected)),
        started,
        &counter,
        with_latency,
    );
    println!(
        "    read {} of {} files ({} skipped by partition, {} by statistics)",
        plan.files.len(),
        plan.total_files,
        plan.skipped_by_partition,
        plan.skipped_by_stats
    );
    println!(
        "The table is a Delta table: Spark and delta-rs (both in the test suite) read it as it is."
    );
    Ok(())
}
