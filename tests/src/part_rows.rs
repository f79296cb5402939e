//! The `(id, part)` tables the model tests write and read back: the schema, a batch of
//! rows, and the rows of a snapshot as a set.

use std::collections::BTreeSet;
use std::sync::Arc;

use arrow::array::{AsArray, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef};
use tarn::Snapshot;

/// The partition values the model tests write.
pub const PARTS: [&str; 3] = ["p0", "p1", "p2"];

/// A table's rows: `(id, part)`, order-insensitive.
pub type Rows = BTreeSet<(i64, String)>;

/// `id: Int64 not null, part: Utf8` (the tests partition by `part`).
pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("part", DataType::Utf8, true),
    ]))
}

/// One batch of `rows`.
pub fn batch(rows: &[(i64, String)]) -> RecordBatch {
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from(
                rows.iter().map(|r| r.0).collect::<Vec<_>>(),
            )),
            Arc::new(StringArray::from(
                rows.iter().map(|r| r.1.clone()).collect::<Vec<_>>(),
            )),
        ],
    )
    .unwrap()
}

/// Every row of `snapshot`; fails as its scan does.
pub async fn rows_of(snapshot: &Snapshot) -> tarn::Result<Rows> {
    let mut out = Rows::new();
    for b in snapshot.scan().collect().await? {
        let ids = b.column(0).as_primitive::<Int64Type>();
        let parts = b.column(1).as_string::<i32>();
        for i in 0..b.num_rows() {
            out.insert((ids.value(i), parts.value(i).to_string()));
        }
    }
    Ok(out)
}
