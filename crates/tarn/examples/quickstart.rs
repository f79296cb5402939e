//! The README's example: create a partitioned table, append, scan with a filter, replace
//! one partition, and read the first version again.
//!
//! ```text
//! cargo run -p tarn --example quickstart                       # a fresh local directory
//! cargo run -p tarn --example quickstart -- s3://bucket/sales  # or any path or URL
//! ```
//!
//! `quickstart_traced` does the same with the requests of each step counted.

use std::sync::Arc;

use arrow::array::{Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use tarn::expr::{col, lit};
use tarn::{Table, WriteMode};

#[tokio::main]
async fn main() -> tarn::Result<()> {
    let url = std::env::args().nth(1).unwrap_or_else(|| {
        let dir = std::env::temp_dir().join(format!("tarn-quickstart-{}", std::process::id()));
        dir.display().to_string()
    });

    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("country", DataType::Utf8, true),
    ]));
    let mut table = Table::create(&url)
        .with_arrow_schema(&schema)
        .with_partition_columns(["country"])
        .with_property("delta.checkpointInterval", "10")
        .execute()
        .await?;

    let batch = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from(vec![1, 2, 3])),
            Arc::new(StringArray::from(vec!["NL", "FR", "NL"])),
        ],
    )?;
    table.append([batch.clone()]).await?;
    println!(
        "version {}: {} files",
        table.version(),
        table.snapshot().file_count()
    );

    let dutch = table
        .scan()
        .select(["id"])
        .filter(col("country").eq(lit("NL")).and(col("id").gt(lit(1))))
        .collect()
        .await?;
    let rows: usize = dutch.iter().map(|b| b.num_rows()).sum();
    println!("{rows} Dutch row(s) with id > 1");

    let fixed = RecordBatch::try_new(
        batch.schema(),
        vec![
            Arc::new(Int64Array::from(vec![1, 3])),
            Arc::new(StringArray::from(vec!["NL", "NL"])),
        ],
    )?;
    table
        .write([fixed])
        .with_mode(WriteMode::Overwrite)
        .replace_where(col("country").eq(lit("NL")))
        .execute()
        .await?;
    println!("version {}: the NL partition replaced", table.version());

    table.load_version(1).await?;
    println!(
        "version {} again: {} rows",
        table.version(),
        table.scan().count().await?
    );
    println!("the table is at {url}");
    Ok(())
}
