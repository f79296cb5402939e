//! Making Arrow data fit a Delta schema.
//!
//! On read, data files use physical names (column mapping), older encodings (INT96 and
//! millisecond timestamps, legacy list names) and may lack columns added later; on write,
//! users hand in Arrow data that may use view or large string types or other timestamp
//! units. Both become arrays of exactly the table's logical Arrow types here.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, ListArray, MapArray, StructArray, new_null_array};
use arrow::compute::{CastOptions, cast_with_options};
use arrow::datatypes::{DataType as ArrowType, Field, Fields, TimeUnit};

use crate::protocol::properties::ColumnMappingMode;
use crate::protocol::schema::{PARQUET_FIELD_ID_KEY, arrow_field};
use crate::protocol::{DataType, PrimitiveType, StructField, StructType};

/// Which side the data comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// A data file: match by physical name (or field id), accept any cast Arrow knows.
    File(ColumnMappingMode),
    /// A user's batch: match by logical name, accept only casts that keep every value.
    Input,
}

/// Finds the child of `fields` holding the data of the logical `field`.
pub(crate) fn find_field(fields: &Fields, field: &StructField, source: Source) -> Option<usize> {
    let by_name = |name: &str| fields.iter().position(|f| f.name() == name);
    match source {
        Source::Input => by_name(&field.name),
        Source::File(mode) => {
            let physical = field.physical_name();
            by_name(physical)
                .or_else(|| {
                    // Id mode: the field id is authoritative when names differ.
                    let id = field
                        .column_id()
                        .filter(|_| mode == ColumnMappingMode::Id)?;
                    fields.iter().position(|f| {
                        f.metadata()
                            .get(PARQUET_FIELD_ID_KEY)
                            .and_then(|v| v.parse::<i64>().ok())
                            == Some(id)
                    })
                })
                .or_else(|| {
                    // Delta column names are case-insensitive; old writers varied the case.
                    (mode == ColumnMappingMode::None)
                        .then(|| {
                            fields
                                .iter()
                                .position(|f| f.name().eq_ignore_ascii_case(physical))
                        })
                        .flatten()
                })
        }
    }
}

/// Converts `array` to the logical type of `field`. Errors describe what does not fit.
pub(crate) fn conform(
    array: &ArrayRef,
    field: &StructField,
    source: Source,
) -> Result<ArrayRef, String> {
    conform_type(array, &field.data_type, &field.name, source)
}

fn conform_type(
    array: &ArrayRef,
    ty: &DataType,
    name: &str,
    source: Source,
) -> Result<ArrayRef, String> {
    let target = ty.to_arrow();
    if array.data_type() == &target {
        if source == Source::Input {
            fits_precision(array, &target, name)?;
        }
        return Ok(Arc::clone(array));
    }
    if array.data_type() == &ArrowType::Null {
        return Ok(new_null_array(&target, array.len()));
    }
    match ty {
        DataType::Primitive(PrimitiveType::Variant) => conform_variant(array, &target, name),
        DataType::Primitive(_) => {
            if source == Source::Input && !lossless(array.data_type(), &target) {
                return Err(format!(
                    "column {name:?} has type {}, the table has {target}",
                    array.data_type()
                ));
            }
            let options = CastOptions {
                safe: false,
                ..Default::default()
            };
            let out = cast_with_options(array, &target, &options).map_err(|e| {
                format!(
                    "column {name:?}: cannot read {} as {target}: {e}",
                    array.data_type()
                )
            })?;
            if source == Source::Input {
                fits_precision(&out, &target, name)?;
            }
            Ok(out)
        }
        DataType::Struct(s) => conform_struct(array, s, name, source),
        DataType::Array(a) => {
            let list = match array.data_type() {
                ArrowType::List(_) => array.as_list::<i32>().clone(),
                ArrowType::LargeList(_) | ArrowType::ListView(_) | ArrowType::FixedSizeList(..) => {
                    let as_list = cast_with_options(
                        array,
                        &ArrowType::List(Arc::new(Field::new("element", values_type(array), true))),
                        &CastOptions::default(),
                    )
                    .map_err(|e| format!("column {name:?}: {e}"))?;
                    as_list.as_list::<i32>().clone()
                }
                other => {
                    return Err(format!(
                        "column {name:?} has type {other}, the table has {target}"
                    ));
                }
            };
            let values = conform_type(list.values(), &a.element_type, name, source)?;
            let field = Arc::new(arrow_field("element", &a.element_type, a.contains_null));
            ListArray::try_new(field, list.offsets().clone(), values, list.nulls().cloned())
                .map(|l| Arc::new(l) as ArrayRef)
                .map_err(|e| format!("column {name:?}: {e}"))
        }
        DataType::Map(m) => {
            let map = array.as_map_opt().ok_or_else(|| {
                format!(
                    "column {name:?} has type {}, the table has {target}",
                    array.data_type()
                )
            })?;
            let keys = conform_type(map.keys(), &m.key_type, name, source)?;
            let values = conform_type(map.values(), &m.value_type, name, source)?;
            let ArrowType::Map(entries_field, _) = &target else {
                return Err(format!("column {name:?}: internal map type mismatch"));
            };
            let ArrowType::Struct(kv) = entries_field.data_type() else {
                return Err(format!("column {name:?}: internal map type mismatch"));
            };
            let entries = StructArray::try_new(kv.clone(), vec![keys, values], None)
                .map_err(|e| format!("column {name:?}: {e}"))?;
            MapArray::try_new(
                Arc::clone(entries_field),
                map.offsets().clone(),
                entries,
                map.nulls().cloned(),
                false,
            )
            .map(|m| Arc::new(m) as ArrayRef)
            .map_err(|e| format!("column {name:?}: {e}"))
        }
    }
}

/// Arrow does not check that decimals fit their precision: a user's value that does not
/// would be written as a number no reader can hold.
fn fits_precision(array: &ArrayRef, target: &ArrowType, name: &str) -> Result<(), String> {
    if let ArrowType::Decimal128(p, s) = target {
        array
            .as_primitive::<arrow::datatypes::Decimal128Type>()
            .validate_decimal_precision(*p)
            .map_err(|e| {
                format!("column {name:?} holds a value that is not a decimal({p},{s}): {e}")
            })?;
    }
    Ok(())
}

/// A variant's `metadata` and `value` binaries, found by name (Spark writes `value`
/// first) in any binary type, as the table's variant struct.
fn conform_variant(array: &ArrayRef, target: &ArrowType, name: &str) -> Result<ArrayRef, String> {
    let input = array.as_struct_opt().ok_or_else(|| {
        format!(
            "column {name:?} has type {}, the table has a variant",
            array.data_type()
        )
    })?;
    let ArrowType::Struct(fields) = target else {
        return Err(format!("column {name:?}: internal variant type mismatch"));
    };
    let mut children = Vec::with_capacity(2);
    for field in fields {
        let child = input.column_by_name(field.name()).ok_or_else(|| {
            format!(
                "column {name:?} is a variant without its {:?} binary",
                field.name()
            )
        })?;
        let binary = cast_with_options(child, &ArrowType::Binary, &CastOptions::default())
            .map_err(|e| format!("column {name:?}: variant {}: {e}", field.name()))?;
        children.push(binary);
    }
    // Shredded variants (a `typed_value` child) would lose values here.
    if input.num_columns() > 2 {
        return Err(format!(
            "column {name:?} is a shredded variant ({}), which Tarn does not read",
            input.data_type()
        ));
    }
    StructArray::try_new(fields.clone(), children, input.nulls().cloned())
        .map(|s| Arc::new(s) as ArrayRef)
        .map_err(|e| format!("column {name:?}: {e}"))
}

fn values_type(array: &ArrayRef) -> ArrowType {
    match array.data_type() {
        ArrowType::LargeList(f) | ArrowType::ListView(f) | ArrowType::FixedSizeList(f, _) => {
            f.data_type().clone()
        }
        other => other.clone(),
    }
}

fn conform_struct(
    array: &ArrayRef,
    s: &StructType,
    name: &str,
    source: Source,
) -> Result<ArrayRef, String> {
    let input = array.as_struct_opt().ok_or_else(|| {
        format!(
            "column {name:?} has type {}, the table has a struct",
            array.data_type()
        )
    })?;
    let extra = input.fields().iter().find(|f| s.field(f.name()).is_none());
    if let (Source::Input, Some(extra)) = (source, extra) {
        return Err(format!(
            "struct column {name:?} has field {:?}, which the table does not",
            extra.name()
        ));
    }
    let mut columns = Vec::with_capacity(s.fields.len());
    for child in &s.fields {
        let path = format!("{name}.{}", child.name);
        let column = match find_field(input.fields(), child, source) {
            Some(i) => conform_type(input.column(i), &child.data_type, &path, source)?,
            None if child.nullable || source != Source::Input => {
                new_null_array(&child.data_type.to_arrow(), input.len())
            }
            None => {
                return Err(format!(
                    "struct column {name:?} lacks non-nullable field {:?}",
                    child.name
                ));
            }
        };
        columns.push(column);
    }
    let ArrowType::Struct(fields) = DataType::Struct(s.clone()).to_arrow() else {
        return Err(format!("column {name:?}: internal struct type mismatch"));
    };
    StructArray::try_new(fields, columns, input.nulls().cloned())
        .map(|a| Arc::new(a) as ArrayRef)
        .map_err(|e| format!("column {name:?}: {e}"))
}

/// Whether a user's Arrow type converts to the table's type without changing any value.
fn lossless(from: &ArrowType, to: &ArrowType) -> bool {
    use ArrowType as T;
    match (from, to) {
        (a, b) if a == b => true,
        (T::Null, _) => true,
        (T::LargeUtf8 | T::Utf8View, T::Utf8) => true,
        (T::Dictionary(_, v), to) => lossless(v, to),
        (T::LargeBinary | T::BinaryView | T::FixedSizeBinary(_), T::Binary) => true,
        (T::Int8, T::Int16 | T::Int32 | T::Int64) => true,
        (T::Int16, T::Int32 | T::Int64) => true,
        (T::Int32, T::Int64) => true,
        (T::UInt8, T::Int16 | T::Int32 | T::Int64) => true,
        (T::UInt16, T::Int32 | T::Int64) => true,
        (T::UInt32, T::Int64) => true,
        (T::Float16 | T::Float32, T::Float64) => true,
        (T::Decimal128(p1, s1), T::Decimal128(p2, s2)) => s1 == s2 && p1 <= p2,
        (T::Date64, T::Date32) => false,
        // Any unit becomes microseconds; nanosecond values are truncated, as delta-rs does.
        (T::Timestamp(_, Some(_)), T::Timestamp(TimeUnit::Microsecond, Some(_))) => true,
        (T::Timestamp(_, None), T::Timestamp(TimeUnit::Microsecond, None)) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{ArrayType, PrimitiveType};
    use arrow::array::{
        Int32Array, Int64Array, StringArray, StringViewArray, TimestampNanosecondArray,
    };

    fn long(name: &str) -> StructField {
        StructField::new(name, DataType::Primitive(PrimitiveType::Long), true)
    }

    #[test]
    fn input_decimals_must_fit_their_precision() {
        let field = StructField::new(
            "price",
            DataType::Primitive(PrimitiveType::Decimal(5, 2)),
            true,
        );
        let fits: ArrayRef = Arc::new(
            arrow::array::Decimal128Array::from(vec![Some(99_999i128), None])
                .with_precision_and_scale(5, 2)
                .unwrap(),
        );
        assert!(conform(&fits, &field, Source::Input).is_ok());
        let too_wide: ArrayRef = Arc::new(
            arrow::array::Decimal128Array::from(vec![Some(100_000i128)])
                .with_precision_and_scale(5, 2)
                .unwrap(),
        );
        let err = conform(&too_wide, &field, Source::Input).unwrap_err();
        assert!(
            err.contains("price") && err.contains("decimal(5,2)"),
            "{err}"
        );
        // A narrower input type whose values overflow it is caught after the cast too.
        let narrow: ArrayRef = Arc::new(
            arrow::array::Decimal128Array::from(vec![Some(100_000i128)])
                .with_precision_and_scale(4, 2)
                .unwrap(),
        );
        assert!(conform(&narrow, &field, Source::Input).is_err());
    }

    #[test]
    fn input_casts_only_when_values_are_kept() {
        let ints: ArrayRef = Arc::new(Int32Array::from(vec![1, 2]));
        let out = conform(&ints, &long("x"), Source::Input).unwrap();
        assert_eq!(
            out.as_primitive::<arrow::datatypes::Int64Type>()
                .values()
                .to_vec(),
            vec![1, 2]
        );
        let strings: ArrayRef = Arc::new(StringArray::from(vec!["1"]));
        let err = conform(&strings, &long("x"), Source::Input).unwrap_err();
        assert!(err.contains("column \"x\""), "{err}");
        let view: ArrayRef = Arc::new(StringViewArray::from(vec!["a"]));
        let s = StructField::new("s", DataType::Primitive(PrimitiveType::String), true);
        assert_eq!(
            conform(&view, &s, Source::Input).unwrap().data_type(),
            &ArrowType::Utf8
        );
        let longs: ArrayRef = Arc::new(Int64Array::from(vec![1]));
        let narrow = StructField::new("n", DataType::Primitive(PrimitiveType::Integer), true);
        assert!(conform(&longs, &narrow, Source::Input).is_err());
    }

    #[test]
    fn files_get_logical_names_types_and_missing_children() {
        // An INT96 timestamp reads as nanoseconds without zone.
        let ns: ArrayRef = Arc::new(TimestampNanosecondArray::from(vec![1_500_000]));
        let ts = StructField::new("t", DataType::Primitive(PrimitiveType::Timestamp), true);
        let out = conform(&ns, &ts, Source::File(ColumnMappingMode::None)).unwrap();
        assert_eq!(out.data_type(), &PrimitiveType::Timestamp.to_arrow());

        let mut renamed = long("logical");
        renamed.metadata.insert(
            crate::protocol::schema::PHYSICAL_NAME_KEY.into(),
            serde_json::json!("col-1"),
        );
        let schema = StructType::new(vec![renamed, long("added_later")]);
        let physical: ArrayRef = Arc::new(StructArray::from(vec![(
            Arc::new(Field::new("col-1", ArrowType::Int64, true)),
            Arc::new(Int64Array::from(vec![7])) as ArrayRef,
        )]));
        let field = StructField::new("s", DataType::Struct(schema), true);
        let out = conform(&physical, &field, Source::File(ColumnMappingMode::Name)).unwrap();
        let s = out.as_struct();
        assert_eq!(s.column_names(), vec!["logical", "added_later"]);
        assert_eq!(s.column(1).null_count(), 1);

        // Legacy list element names become "element".
        let legacy = ListArray::from_iter_primitive::<arrow::datatypes::Int64Type, _, _>(vec![
            Some(vec![Some(1)]),
        ]);
        let legacy: ArrayRef = Arc::new(legacy);
        let list = StructField::new(
            "l",
            DataType::Array(Box::new(ArrayType {
                type_name: "array".into(),
                element_type: DataType::Primitive(PrimitiveType::Long),
                contains_null: true,
            })),
            true,
        );
        let out = conform(&legacy, &list, Source::File(ColumnMappingMode::None)).unwrap();
        assert_eq!(out.data_type(), &list.data_type.to_arrow());
    }
}
