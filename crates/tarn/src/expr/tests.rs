//! Binding: literal coercion, column placement and the errors it names; SQL functions
//! evaluated.

use super::*;
use crate::protocol::StructField;

fn schema() -> StructType {
    StructType::new(vec![
        StructField::new("id", DataType::Primitive(PrimitiveType::Long), false),
        StructField::new("name", DataType::Primitive(PrimitiveType::String), true),
        StructField::new(
            "s",
            DataType::Struct(StructType::new(vec![StructField::new(
                "d",
                DataType::Primitive(PrimitiveType::Date),
                true,
            )])),
            true,
        ),
    ])
}

#[test]
fn binding_coerces_literals_and_puts_columns_left() {
    let bound = lit(5).lt(col("id")).bind(&schema()).unwrap();
    assert_eq!(bound, col("id").gt(lit(5i64)));
    let bound = nested_col(["s", "d"])
        .eq(lit("2024-01-02"))
        .bind(&schema())
        .unwrap();
    assert_eq!(
        bound,
        nested_col(["s", "d"]).eq(Expr::Literal(Scalar::date("2024-01-02").unwrap()))
    );
}

#[test]
fn binding_names_unknown_columns_and_mistyped_literals() {
    let err = col("nope").eq(lit(1)).bind(&schema()).unwrap_err();
    assert!(
        matches!(&err, Error::UnknownColumn { column, .. } if column == "nope"),
        "{err}"
    );
    let err = col("id").eq(lit("x")).bind(&schema()).unwrap_err();
    assert!(
        matches!(&err, Error::TypeMismatch { column, .. } if column == "id"),
        "{err}"
    );
    let err = col("id").is_in(["a"]).bind(&schema()).unwrap_err();
    assert!(matches!(err, Error::TypeMismatch { .. }));
    let err = col("id").and(lit(true)).bind(&schema()).unwrap_err();
    assert!(matches!(err, Error::TypeMismatch { .. }));
    let err = col("s").eq(lit(1)).bind(&schema()).unwrap_err();
    assert!(matches!(err, Error::TypeMismatch { .. }));
    assert!(col("s").is_null().bind(&schema()).is_ok());
}

/// The value of stored SQL `text` for each row of `(id, name, s.d)`, as text.
fn values_of(text: &str) -> Vec<Option<String>> {
    use arrow::array::{Array, ArrayRef, Date32Array, Int64Array, StringArray, StructArray};
    use arrow::util::display::{ArrayFormatter, FormatOptions};
    let schema = schema();
    let arrow_schema = std::sync::Arc::new(schema.to_arrow());
    let arrow::datatypes::DataType::Struct(s_fields) = arrow_schema.field(2).data_type().clone()
    else {
        unreachable!("s is a struct")
    };
    let days: ArrayRef = std::sync::Arc::new(Date32Array::from(vec![Some(19_723), None, Some(0)]));
    let batch = arrow::array::RecordBatch::try_new(
        arrow_schema,
        vec![
            std::sync::Arc::new(Int64Array::from(vec![-3, 0, 7])),
            std::sync::Arc::new(StringArray::from(vec![
                Some("Spark SQL"),
                None,
                Some("héllo"),
            ])),
            std::sync::Arc::new(StructArray::new(s_fields, vec![days], None)),
        ],
    )
    .unwrap();
    let (bound, _) = parse_sql(text).unwrap().bind_value(&schema).unwrap();
    let array = evaluate_value(&bound, &batch).unwrap();
    let format = ArrayFormatter::try_new(array.as_ref(), &FormatOptions::default()).unwrap();
    (0..array.len())
        .map(|i| (!array.is_null(i)).then(|| format.value(i).to_string()))
        .collect()
}

fn some(values: &[&str]) -> Vec<Option<String>> {
    values.iter().map(|v| Some(v.to_string())).collect()
}

#[test]
fn functions_evaluate_as_spark_does() {
    assert_eq!(
        values_of("CAST(s.d AS STRING)"),
        vec![Some("2024-01-01".into()), None, Some("1970-01-01".into())]
    );
    assert_eq!(values_of("year(s.d)")[0].as_deref(), Some("2024"));
    assert_eq!(values_of("month(s.d) + day(s.d)")[2].as_deref(), Some("2"));
    assert_eq!(
        values_of("upper(substring(name, 1, 5))"),
        vec![Some("SPARK".into()), None, Some("HÉLLO".into())]
    );
    assert_eq!(
        values_of("length(name)"),
        vec![Some("9".into()), None, Some("5".into())]
    );
    assert_eq!(
        values_of("concat(lower(name), '-', CAST(id AS STRING))"),
        vec![Some("spark sql--3".into()), None, Some("héllo-7".into())]
    );
    assert_eq!(
        values_of("coalesce(name, 'none')"),
        some(&["Spark SQL", "none", "héllo"])
    );
    assert_eq!(values_of("abs(id)"), some(&["3", "0", "7"]));
    // Spark's `/` divides as doubles, integers included.
    assert_eq!(values_of("id / 2"), some(&["-1.5", "0.0", "3.5"]));
    // Numbers of different types meet in the wider one, columns included (Spark's
    // generated columns mix them).
    assert_eq!(
        values_of("id * 2 + length(name)"),
        vec![Some("3".into()), None, Some("19".into())]
    );
    assert_eq!(
        values_of("length(name) > id"),
        vec![Some("true".into()), None, Some("false".into())]
    );
    assert_eq!(
        values_of("CAST(id AS DECIMAL(5, 1))"),
        some(&["-3.0", "0.0", "7.0"])
    );
    // Predicates over calls, and a typed error for a cast that does not convert.
    let (bound, ty) = parse_sql("year(s.d) >= 2000 AND length(name) > 5")
        .unwrap()
        .bind_value(&schema())
        .unwrap();
    assert_eq!(ty, Some(PrimitiveType::Boolean));
    assert!(bound.to_string().contains("year(s.d)"));
    let err = parse_sql("CAST(name AS INT) > 0")
        .unwrap()
        .bind(&schema())
        .unwrap();
    let batch = arrow::array::RecordBatch::try_new(
        std::sync::Arc::new(arrow::datatypes::Schema::new(vec![
            arrow::datatypes::Field::new("name", arrow::datatypes::DataType::Utf8, true),
        ])),
        vec![std::sync::Arc::new(arrow::array::StringArray::from(vec![
            "x",
        ]))],
    )
    .unwrap();
    let err = evaluate_predicate(&err, &batch).unwrap_err();
    assert!(matches!(err, Error::InvalidExpression { .. }), "{err}");
    let (by_zero, _) = parse_sql("1 / (id - id)")
        .unwrap()
        .bind_value(&schema())
        .unwrap();
    let ids = arrow::array::RecordBatch::try_new(
        std::sync::Arc::new(arrow::datatypes::Schema::new(vec![
            arrow::datatypes::Field::new("id", arrow::datatypes::DataType::Int64, false),
        ])),
        vec![std::sync::Arc::new(arrow::array::Int64Array::from(vec![4]))],
    )
    .unwrap();
    let err = evaluate_value(&by_zero, &ids).unwrap_err();
    assert!(matches!(err, Error::InvalidExpression { .. }), "{err}");
    let err = parse_sql("lower(id) = 'x'")
        .unwrap()
        .bind(&schema())
        .unwrap_err();
    assert!(matches!(err, Error::TypeMismatch { .. }), "{err}");
}
