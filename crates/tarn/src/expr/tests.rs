//! Binding: literal coercion, column placement and the errors it names.

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
