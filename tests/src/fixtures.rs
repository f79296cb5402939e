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

/// One column of every Delta type Tarn writes: the primitives (boolean to decimal,
/// timestamps with and without zone), a struct, an array and a map. `id` is never null;
/// other columns are null on every seventh row.
pub fn all_types_schema() -> SchemaRef {
    use arrow::datatypes::Fields;
    let point = Fields::from(vec![
        Field::new("x", DataType::Int32, true),
        Field::new("label", DataType::Utf8, true),
    ]);
    let entries = Field::new(
        "key_value",
        DataType::Struct(Fields::from(vec![
            Field::new("key", DataType::Utf8, false),
            Field::new("value", DataType::Int64, true),
        ])),
        false,
    );
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("flag", DataType::Boolean, true),
        Field::new("tiny", DataType::Int8, true),
        Field::new("small", DataType::Int16, true),
        Field::new("int", DataType::Int32, true),
        Field::new("float", DataType::Float32, true),
        Field::new("double", DataType::Float64, true),
        Field::new("text", DataType::Utf8, true),
        Field::new("bytes", DataType::Binary, true),
        Field::new("day", DataType::Date32, true),
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            true,
        ),
        Field::new(
            "ts_ntz",
            DataType::Timestamp(TimeUnit::Microsecond, None),
            true,
        ),
        Field::new("price", DataType::Decimal128(10, 2), true),
        Field::new("point", DataType::Struct(point), true),
        Field::new(
            "tags",
            DataType::List(Arc::new(Field::new("element", DataType::Int32, true))),
            true,
        ),
        Field::new("attrs", DataType::Map(Arc::new(entries), false), true),
    ]))
}

/// Rows `start..end` of [`all_types_schema`], every value a function of the id.
pub fn all_types_batch(start: i64, end: i64) -> RecordBatch {
    use arrow::array::{
        ArrayRef, BinaryArray, BooleanArray, Decimal128Array, Float32Array, Int8Array, Int16Array,
        Int32Array, Int32Builder, Int64Builder, ListBuilder, MapBuilder, StringBuilder,
        StructArray,
    };
    let ids: Vec<i64> = (start..end).collect();
    let some = |i: &i64| i % 7 != 3;
    let schema = all_types_schema();
    let arrow::datatypes::DataType::Struct(point_fields) = schema.field(13).data_type().clone()
    else {
        unreachable!("point is a struct")
    };
    let point = StructArray::new(
        point_fields,
        vec![
            Arc::new(Int32Array::from_iter(
                ids.iter().map(|i| Some(*i as i32 * 3)),
            )) as ArrayRef,
            Arc::new(StringArray::from_iter(
                ids.iter().map(|i| (i % 2 == 0).then(|| format!("p{i}"))),
            )),
        ],
        Some(ids.iter().map(some).collect::<Vec<bool>>().into()),
    );
    let mut tags = ListBuilder::new(Int32Builder::new()).with_field(Arc::new(Field::new(
        "element",
        DataType::Int32,
        true,
    )));
    for i in &ids {
        if some(i) {
            for k in 0..(i % 4) {
                tags.values()
                    .append_option((k != 1).then_some(*i as i32 + k as i32));
            }
            tags.append(true);
        } else {
            tags.append(false);
        }
    }
    let names = arrow::array::MapFieldNames {
        entry: "key_value".into(),
        key: "key".into(),
        value: "value".into(),
    };
    let mut attrs = MapBuilder::new(Some(names), StringBuilder::new(), Int64Builder::new());
    for i in &ids {
        if some(i) {
            for k in 0..(i % 3) {
                attrs.keys().append_value(format!("k{k}"));
                attrs.values().append_value(i * 10 + k);
            }
            attrs.append(true).expect("a map entry");
        } else {
            attrs.append(false).expect("a null map");
        }
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(ids.clone())),
        Arc::new(BooleanArray::from_iter(
            ids.iter().map(|i| some(i).then_some(i % 2 == 0)),
        )),
        Arc::new(Int8Array::from_iter(
            ids.iter().map(|i| some(i).then_some((i % 100) as i8 - 50)),
        )),
        Arc::new(Int16Array::from_iter(
            ids.iter().map(|i| some(i).then_some((i * 7) as i16)),
        )),
        Arc::new(Int32Array::from_iter(
            ids.iter().map(|i| some(i).then_some(*i as i32 - 1000)),
        )),
        Arc::new(Float32Array::from_iter(
            ids.iter().map(|i| some(i).then_some(*i as f32 / 4.0)),
        )),
        Arc::new(Float64Array::from_iter(
            ids.iter().map(|i| some(i).then_some(*i as f64 * 1.25)),
        )),
        Arc::new(StringArray::from_iter(
            ids.iter().map(|i| some(i).then(|| format!("text é/{i}"))),
        )),
        Arc::new(BinaryArray::from_iter(
            ids.iter()
                .map(|i| some(i).then(|| i.to_le_bytes().to_vec())),
        )),
        Arc::new(Date32Array::from_iter(
            ids.iter().map(|i| some(i).then_some(19_000 + *i as i32)),
        )),
        Arc::new(
            TimestampMicrosecondArray::from_iter(
                ids.iter()
                    .map(|i| some(i).then_some(1_700_000_000_123_456 + i * 1_000_001)),
            )
            .with_timezone("UTC"),
        ),
        Arc::new(TimestampMicrosecondArray::from_iter(
            ids.iter()
                .map(|i| some(i).then_some(1_600_000_000_000_001 + i * 999)),
        )),
        Arc::new(
            Decimal128Array::from_iter(
                ids.iter()
                    .map(|i| some(i).then_some(i128::from(*i) * 101 - 5000)),
            )
            .with_precision_and_scale(10, 2)
            .expect("decimal(10, 2)"),
        ),
        Arc::new(point),
        Arc::new(tags.finish()),
        Arc::new(attrs.finish()),
    ];
    RecordBatch::try_new(schema, columns).expect("a valid batch")
}

/// A table at `url` with one commit of every kind Tarn writes: create, append, overwrite
/// of a partition, metadata-only partition delete, property change, added columns, a
/// write that adds a column, copy-on-write and merge-on-read DELETE, UPDATE and MERGE,
/// optimize, an exactly-once application write, and a hand-built transaction with
/// parameters of several JSON types.
pub async fn every_commit_kind(url: &str) -> tarn::Table {
    use tarn::ChangeStrategy;
    use tarn::expr::{col, lit, source_col};
    use tarn::protocol::{DataType as Delta, PrimitiveType, StructField};
    let mut table = tarn::Table::create(url)
        .with_arrow_schema(&sales_schema())
        .with_partition_columns(["country"])
        .with_property("delta.enableDeletionVectors", "true")
        .execute()
        .await
        .expect("create");
    table.append([sales_batch(0, 60)]).await.expect("append");
    table
        .write([only_country(&sales_batch(100, 120), "NL")])
        .with_mode(tarn::WriteMode::Overwrite)
        .replace_where(col("country").eq(lit("NL")))
        .execute()
        .await
        .expect("replace where");
    table
        .delete_partitions(col("country").eq(lit("FR")))
        .await
        .expect("delete partitions");
    let _ = table
        .set_properties([("owner", "tests"), ("delta.checkpointInterval", "100")])
        .await
        .expect("set properties");
    let _ = table
        .add_columns([StructField::new(
            "note",
            Delta::Primitive(PrimitiveType::String),
            true,
        )])
        .await
        .expect("add columns");
    let wider = with_column(
        &sales_batch(200, 210),
        Field::new("rank", DataType::Int64, true),
        Arc::new(Int64Array::from_iter((0..10).map(Some))),
    );
    table
        .write([wider])
        .with_schema_mode(tarn::SchemaMode::AddColumns)
        .execute()
        .await
        .expect("write adding a column");
    for strategy in [ChangeStrategy::CopyOnWrite, ChangeStrategy::MergeOnRead] {
        table
            .delete(col("customer").eq(lit("customer-1")))
            .with_strategy(strategy)
            .execute()
            .await
            .expect("delete");
        table
            .update()
            .filter(col("id").lt(lit(20i64)))
            .set("amount", col("amount") + lit(1.0))
            .with_strategy(strategy)
            .execute()
            .await
            .expect("update");
        table
            .merge([sales_batch(40, 80)])
            .on(["id"])
            .when_matched_update(None, [("amount", source_col("amount"))])
            .when_not_matched_insert_all(None)
            .with_strategy(strategy)
            .execute()
            .await
            .expect("merge");
    }
    table.optimize().execute().await.expect("optimize");
    table
        .write([sales_batch(300, 305)])
        .with_app_transaction("stream-1", 7)
        .execute()
        .await
        .expect("application transaction");
    let mut txn = table
        .transaction()
        .with_operation("CUSTOM")
        .with_parameter("count", 3)
        .with_parameter("flags", serde_json::json!([true, false]))
        .with_parameter("nothing", serde_json::Value::Null)
        .with_metric("numThings", 2);
    txn.set_domain_metadata("tests.domain", "{\"a\":1}");
    let _ = table.commit(txn).await.expect("custom commit");
    table
}

/// A sales table at `dir`, partitioned by country, holding ids 0..100 in one commit.
pub async fn country_sales_table(dir: &std::path::Path) -> tarn::Table {
    let mut table = tarn::Table::create(dir.to_str().expect("a UTF-8 path"))
        .with_arrow_schema(&sales_schema())
        .with_partition_columns(["country"])
        .execute()
        .await
        .expect("create the table");
    table
        .append([sales_batch(0, 100)])
        .await
        .expect("append to the table");
    table
}

/// An unpartitioned sales table at `dir` with no properties, holding ids `0..rows` in one
/// commit (version 1).
pub async fn sales_table_of(dir: &std::path::Path, rows: i64) -> tarn::Table {
    let mut table = tarn::Table::create(dir.to_str().expect("a UTF-8 path"))
        .with_arrow_schema(&sales_schema())
        .execute()
        .await
        .expect("create the table");
    table
        .append([sales_batch(0, rows)])
        .await
        .expect("append to the table");
    table
}

/// The snapshot of the table at `dir` at `version`.
pub async fn snapshot_at(dir: &std::path::Path, version: i64) -> tarn::Snapshot {
    let location = tarn_store::open(dir.to_str().expect("a UTF-8 path")).expect("open the store");
    tarn::Snapshot::builder(location)
        .at_version(version)
        .build()
        .await
        .expect("read the version")
}
