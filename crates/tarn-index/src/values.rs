//! Reading Arrow values as native keys, for builders that hash or sort many of them.

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::DataType;

/// The values of an integer-like array as `i64`s (nulls as 0), when its type is one.
pub(crate) fn as_i64s(values: &ArrayRef) -> Option<std::borrow::Cow<'_, [i64]>> {
    use arrow::datatypes::{
        Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type, UInt16Type, UInt32Type,
    };
    let widen = |v: Vec<i64>| Some(std::borrow::Cow::Owned(v));
    match values.data_type() {
        DataType::Int64 => Some(std::borrow::Cow::Borrowed(
            values.as_primitive::<Int64Type>().values(),
        )),
        DataType::Int32 => widen(
            values
                .as_primitive::<Int32Type>()
                .values()
                .iter()
                .map(|v| i64::from(*v))
                .collect(),
        ),
        DataType::Int16 => widen(
            values
                .as_primitive::<Int16Type>()
                .values()
                .iter()
                .map(|v| i64::from(*v))
                .collect(),
        ),
        DataType::Int8 => widen(
            values
                .as_primitive::<Int8Type>()
                .values()
                .iter()
                .map(|v| i64::from(*v))
                .collect(),
        ),
        DataType::UInt32 => widen(
            values
                .as_primitive::<UInt32Type>()
                .values()
                .iter()
                .map(|v| i64::from(*v))
                .collect(),
        ),
        DataType::UInt16 => widen(
            values
                .as_primitive::<UInt16Type>()
                .values()
                .iter()
                .map(|v| i64::from(*v))
                .collect(),
        ),
        DataType::UInt8 => widen(
            values
                .as_primitive::<UInt8Type>()
                .values()
                .iter()
                .map(|v| i64::from(*v))
                .collect(),
        ),
        DataType::Date32 => widen(
            values
                .as_primitive::<arrow::datatypes::Date32Type>()
                .values()
                .iter()
                .map(|v| i64::from(*v))
                .collect(),
        ),
        DataType::Date64 | DataType::Timestamp(..) => {
            let cast = arrow::compute::cast(values, &DataType::Int64).ok()?;
            widen(cast.as_primitive::<Int64Type>().values().to_vec())
        }
        _ => None,
    }
}
