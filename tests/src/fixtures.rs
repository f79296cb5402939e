//! Deterministic test data.

use std::sync::Arc;

use arrow::array::{
    Date32Array, Float64Array, Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};

/// Partition values the sales fixture cycles through: plain ones, a null, and one with
/// every character Hive escapes or that would escape a folder if it were not.
pub const COUNTRIES: [Option<&str>; 5] = [
    Some("NL"),
    Some("FR"),
    None,
    Some("DE"),
    Some("../x y=z%/:#"),
];

/// `id` (non-null), `customer`, `country` (the partition column of the sales tables),
/// `amount`, `ts` (UTC), `day`.
pub fn sales_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("customer", DataType::Utf8, true),
        Field::new("country", DataType::Utf8, true),
        Field::new("amount", DataType::Float64, true),
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
        Field::new("day", DataType::Date32, true),
    ]))
}

/// Sales rows for ids `start..end`: every column a function of the id.
pub fn sales_batch(start: i64, end: i64) -> RecordBatch {
    let ids: Vec<i64> = (start..end).collect();
    let customer: StringArray = ids
        .iter()
        .map(|i| (i % 13 != 0).then(|| format!("customer-{}", i % 7)))
        .collect();
    let country: StringArray = ids.iter().map(|i| COUNTRIES[(*i % 5) as usize]).collect();
    let amount: Float64Array = ids.iter().map(|i| Some(*i as f64 * 1.5)).collect();
    let ts = TimestampMicrosecondArray::from(
        ids.iter()
            .map(|i| 1_700_000_000_000_000 + i * 1_000_123)
            .collect::<Vec<_>>(),
    )
    .with_timezone("UTC");
    let day = Date32Array::from(
        ids.iter()
            .map(|i| 19_000 + (*i % 10) as i32)
            .collect::<Vec<_>>(),
    );
    RecordBatch::try_new(
        sales_schema(),
        vec![
            Arc::new(Int64Array::from(ids.clone())),
            Arc::new(customer),
            Arc::new(country),
            Arc::new(amount),
            Arc::new(ts),
            Arc::new(day),
        ],
    )
    .expect("a valid batch")
}

/// The rows of a sales batch whose country is `country`.
pub fn only_country(batch: &RecordBatch, country: &str) -> RecordBatch {
    let mask = arrow::compute::kernels::cmp::eq(
        batch.column(2),
        &arrow::array::Scalar::new(StringArray::from(vec![country])),
    )
    .expect("compare countries");
    arrow::compute::filter_record_batch(batch, &mask).expect("filter rows")
}

/// The rows of a sales batch whose country is not `country` (null countries included).
pub fn except_country(batch: &RecordBatch, country: &str) -> RecordBatch {
    let equal = arrow::compute::kernels::cmp::eq(
        batch.column(2),
        &arrow::array::Scalar::new(StringArray::from(vec![country])),
    )
    .expect("compare countries");
    let keep = arrow::compute::not(&arrow::compute::prep_null_mask_filter(&equal)).expect("negate");
    arrow::compute::filter_record_batch(batch, &keep).expect("filter rows")
}

/// The batch with one more column at the end.
pub fn with_column(
    batch: &RecordBatch,
    field: Field,
    values: arrow::array::ArrayRef,
) -> RecordBatch {
    let mut fields: Vec<Field> = batch
        .schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields.push(field);
    let mut columns = batch.columns().to_vec();
    columns.push(values);
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).expect("a valid batch")
}
