//! Variant columns (the `variantType` table feature) against Spark, both ways: Tarn reads
//! Spark's variants (top-level and nested) as the canonical `arrow.parquet.variant`
//! extension type that `parquet-variant-compute` decodes, with the values Spark's
//! `to_json` gives; Tarn appends, deletes and merges variants Spark then reads; and tables Tarn
//! creates with variant columns carry the feature and read in Spark.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use arrow::array::StructArray;
use arrow::array::{Array, ArrayRef, AsArray, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Fields, Schema};
use parquet_variant_compute::{VariantArray, json_to_variant, variant_to_json};
use tarn::ChangeStrategy;
use tarn::Table;
use tarn::expr::{col, lit};
use tarn_tests::spark::{delta_table, spark};
use tarn_tests::spark_checks::spark_sql;

/// `(v, s.w)` of each row, as JSON values, by id.
type Variants = BTreeMap<i64, (serde_json::Value, serde_json::Value)>;

fn json(text: Option<&str>) -> serde_json::Value {
    text.map(|t| serde_json::from_str(t).unwrap())
        .unwrap_or(serde_json::Value::Null)
}

/// Spark's `to_json` of every row's variants.
fn spark_variants(dir: &Path) -> Variants {
    let t = delta_table(dir);
    spark()
        .sql(&format!(
            "SELECT id, to_json(v) AS v, to_json(s.w) AS w FROM {t}"
        ))
        .iter()
        .map(|row| {
            (
                row["id"].as_i64().unwrap(),
                (json(row["v"].as_str()), json(row["w"].as_str())),
            )
        })
        .collect()
}

/// Tarn's rows, each variant decoded by `parquet-variant-compute`.
async fn tarn_variants(table: &Table) -> Variants {
    let batches = table.scan().collect().await.unwrap();
    let mut out = Variants::new();
    for batch in &batches {
        let schema = batch.schema();
        let v_field = schema.field_with_name("v").unwrap();
        assert_eq!(
            v_field.extension_type_name(),
            Some("arrow.parquet.variant"),
            "{v_field:?}"
        );
        let ids = batch
            .column_by_name("id")
            .unwrap()
            .as_primitive::<arrow::datatypes::Int64Type>();
        let v = batch.column_by_name("v").unwrap();
        // The arrow-rs variant array takes Tarn's column as it is.
        VariantArray::try_new(v.as_ref()).unwrap();
        let v = variant_to_json(v).unwrap();
        let s = batch.column_by_name("s").unwrap().as_struct();
        let w = variant_to_json(s.column_by_name("w").unwrap()).unwrap();
        for row in 0..batch.num_rows() {
            let w_value = match s.is_null(row) || w.is_null(row) {
                true => None,
                false => Some(w.value(row)),
            };
            let v_value = (!v.is_null(row)).then(|| v.value(row));
            out.insert(ids.value(row), (json(v_value), json(w_value)));
        }
    }
    out
}

/// Rows `(id, v, s: {n, w})` with the variants parsed from JSON (`None`: SQL null).
fn variant_rows(rows: &[(i64, Option<&str>, Option<&str>)]) -> RecordBatch {
    let ids = Int64Array::from_iter_values(rows.iter().map(|r| r.0));
    let to_variant = |name: &str, texts: Vec<Option<&str>>| -> (Field, ArrayRef) {
        let strings: ArrayRef = Arc::new(StringArray::from(texts));
        let variants = json_to_variant(&strings).unwrap();
        (variants.field(name), ArrayRef::from(variants))
    };
    let (v_field, v) = to_variant("v", rows.iter().map(|r| r.1).collect());
    let (w_field, w) = to_variant("w", rows.iter().map(|r| r.2).collect());
    let n: ArrayRef = Arc::new(Int32Array::from_iter_values(
        rows.iter().map(|r| r.0 as i32),
    ));
    let s_fields = Fields::from(vec![Field::new("n", DataType::Int32, true), w_field]);
    let s = StructArray::try_new(s_fields.clone(), vec![n, w], None).unwrap();
    let schema = Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        v_field,
        Field::new("s", DataType::Struct(s_fields), true),
    ]);
    RecordBatch::try_new(Arc::new(schema), vec![Arc::new(ids), v, Arc::new(s)]).unwrap()
}

const OBJECT: &str = r#"{"a": 1, "b": [true, null, "x"], "c": {"d": "e"}}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spark_variants_read_in_tarn_and_take_tarn_writes() {
    let spark = spark();
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("spark-variants");
    spark_sql(
        spark,
        &dir,
        &[
            "CREATE TABLE {t} (id BIGINT, v VARIANT, s STRUCT<n: INT, w: VARIANT>) USING delta",
            &format!(
                "INSERT INTO {{t}} VALUES \
                 (1, PARSE_JSON('{OBJECT}'), named_struct('n', 1, 'w', PARSE_JSON('2.5'))), \
                 (2, PARSE_JSON('[1, 2, 3]'), named_struct('n', 2, 'w', PARSE_JSON('\"text\"'))), \
                 (3, PARSE_JSON('null'), NULL), \
                 (4, NULL, named_struct('n', 4, 'w', PARSE_JSON('{{}}')))"
            ),
        ],
    );
    let mut table = Table::open(dir.to_str().unwrap()).await.unwrap();
    assert!(
        table
            .snapshot()
            .protocol()
            .reader_features
            .iter()
            .flatten()
            .any(|f| f.starts_with("variantType"))
    );
    let theirs = spark_variants(&dir);
    assert_eq!(theirs.len(), 4);
    assert_eq!(theirs[&1].0["b"][2], "x");
    assert_eq!(tarn_variants(&table).await, theirs);

    // Tarn appends variants, top-level and nested, and Spark reads them.
    table
        .append([variant_rows(&[
            (10, Some(r#"{"tarn": [1.5, "two"]}"#), Some("7")),
            (11, Some(r#""plain""#), None),
            (12, None, Some(r#"{"deep": {"er": [null]}}"#)),
        ])])
        .await
        .unwrap();
    let after_append = spark_variants(&dir);
    assert_eq!(after_append.len(), 7);
    assert_eq!(
        after_append[&10].0,
        serde_json::json!({"tarn": [1.5, "two"]})
    );
    assert_eq!(
        after_append[&12].1,
        serde_json::json!({"deep": {"er": [null]}})
    );
    assert_eq!(tarn_variants(&table).await, after_append);

    // Rewrites carry the variants of the rows they keep.
    for id in [2i64, 11] {
        table
            .delete(col("id").eq(lit(id)))
            .with_strategy(ChangeStrategy::CopyOnWrite)
            .execute()
            .await
            .unwrap();
    }
    let after_delete = spark_variants(&dir);
    assert_eq!(after_delete.len(), 5);
    assert_eq!(after_delete[&1], theirs[&1]);
    assert_eq!(tarn_variants(&table).await, after_delete);

    // A merge updates a Spark row's variants and inserts new ones.
    table
        .merge([variant_rows(&[
            (1, Some(r#"{"merged": true}"#), Some("[1]")),
            (20, Some("20"), None),
        ])])
        .on(["id"])
        .when_matched_update_all(None)
        .when_not_matched_insert_all(None)
        .execute()
        .await
        .unwrap();
    let after_merge = spark_variants(&dir);
    assert_eq!(after_merge.len(), 6);
    assert_eq!(after_merge[&1].0, serde_json::json!({"merged": true}));
    assert_eq!(after_merge[&20].0, serde_json::json!(20));
    assert_eq!(after_merge[&10], after_delete[&10]);
    assert_eq!(tarn_variants(&table).await, after_merge);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_tarn_creates_with_variants_read_in_spark() {
    let spark = spark();
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("tarn-variants");
    let rows = variant_rows(&[
        (1, Some(OBJECT), Some("[]")),
        (2, Some("-3"), None),
        (3, None, Some(r#""w""#)),
    ]);
    let mut table = Table::create(dir.to_str().unwrap())
        .with_arrow_schema(&rows.schema())
        .execute()
        .await
        .unwrap();
    let protocol = table.snapshot().protocol().clone();
    assert!(protocol.has_reader_feature("variantType"), "{protocol:?}");
    assert!(protocol.has_writer_feature("variantType"), "{protocol:?}");
    table.append([rows]).await.unwrap();
    let theirs = spark_variants(&dir);
    assert_eq!(theirs[&1].0, json(Some(OBJECT)));
    assert_eq!(theirs[&2].0, serde_json::json!(-3));
    assert_eq!(theirs[&3].0, serde_json::Value::Null);
    assert_eq!(tarn_variants(&table).await, theirs);
    // Spark writes to Tarn's table too.
    spark_sql(
        spark,
        &dir,
        &["INSERT INTO {t} VALUES (4, PARSE_JSON('{\"spark\": true}'), NULL)"],
    );
    table.refresh().await.unwrap();
    let both = tarn_variants(&table).await;
    assert_eq!(both[&4].0, serde_json::json!({"spark": true}));
    assert_eq!(both, spark_variants(&dir));
}
