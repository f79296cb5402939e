//! Whether two engines' answers to a query are the same rows: each value as text, numbers
//! of any type (integers, decimals, doubles) rounded to two decimals, so DuckDB's
//! `HUGEINT` sums and `DOUBLE` averages compare with DataFusion's decimals; rows compared
//! as sorted lists, since engines break `ORDER BY` ties differently.

use arrow::array::{Array, RecordBatch};
use arrow::compute::cast;
use arrow::datatypes::DataType;
use arrow::util::display::{ArrayFormatter, FormatOptions};

/// The rows of `batches` as sorted lines of canonical values.
pub fn canonical(batches: &[RecordBatch]) -> Vec<String> {
    let mut rows: Vec<String> = Vec::new();
    for batch in batches {
        let columns: Vec<Vec<String>> = batch.columns().iter().map(|c| values(c)).collect();
        for row in 0..batch.num_rows() {
            let line: Vec<&str> = columns.iter().map(|c| c[row].as_str()).collect();
            rows.push(line.join("|"));
        }
    }
    rows.sort();
    rows
}

/// A column's values as text.
fn values(array: &dyn Array) -> Vec<String> {
    let numeric = array.data_type().is_numeric();
    if numeric && let Ok(doubles) = cast(array, &DataType::Float64) {
        let doubles = doubles
            .as_any()
            .downcast_ref::<arrow::array::Float64Array>()
            .map(|d| {
                (0..d.len())
                    .map(|i| match d.is_null(i) {
                        true => "NULL".to_string(),
                        // -0.00 and 0.00 are one value.
                        false => format!("{:.2}", d.value(i) + 0.0).replace("-0.00", "0.00"),
                    })
                    .collect::<Vec<_>>()
            });
        if let Some(values) = doubles {
            return values;
        }
    }
    let options = FormatOptions::default().with_null("NULL");
    match ArrayFormatter::try_new(array, &options) {
        Ok(formatter) => (0..array.len())
            .map(|i| formatter.value(i).to_string().trim_end().to_string())
            .collect(),
        Err(_) => vec!["?".to_string(); array.len()],
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Decimal128Array, Float64Array, Int64Array, StringArray};
    use arrow::datatypes::{Field, Schema};

    use super::*;

    #[test]
    fn numbers_of_any_type_compare_and_row_order_does_not_matter() {
        let ours = RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("n", DataType::Int64, true),
                Field::new("d", DataType::Decimal128(7, 2), true),
                Field::new("s", DataType::Utf8, true),
            ])),
            vec![
                Arc::new(Int64Array::from(vec![Some(2), None])),
                Arc::new(
                    Decimal128Array::from(vec![Some(150), Some(-1)])
                        .with_precision_and_scale(7, 2)
                        .unwrap(),
                ),
                Arc::new(StringArray::from(vec![Some("b"), None])),
            ],
        )
        .unwrap();
        let theirs = RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("n", DataType::Float64, true),
                Field::new("d", DataType::Float64, true),
                Field::new("s", DataType::Utf8, true),
            ])),
            vec![
                Arc::new(Float64Array::from(vec![None, Some(2.0)])),
                Arc::new(Float64Array::from(vec![Some(-0.01), Some(1.5)])),
                Arc::new(StringArray::from(vec![None, Some("b")])),
            ],
        )
        .unwrap();
        assert_eq!(canonical(std::slice::from_ref(&ours)), canonical(&[theirs]));
        let other = ours.slice(0, 1);
        assert_ne!(canonical(&[ours]), canonical(&[other]));
    }
}
