//! Single typed values: literals in predicates, partition values, statistics bounds.

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BinaryArray, BooleanArray, Date32Array, Decimal128Array,
    Float32Array, Float64Array, Int8Array, Int16Array, Int32Array, Int64Array, StringArray,
    TimestampMicrosecondArray, new_null_array,
};
use arrow::compute::kernels::cast_utils::parse_decimal;
use arrow::datatypes::{
    DataType as ArrowType, Date32Type, Decimal128Type, DecimalType, Float32Type, Float64Type,
    Int8Type, Int16Type, Int32Type, Int64Type, TimeUnit, TimestampMicrosecondType,
    TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType,
};
use chrono::{DateTime, NaiveDate, NaiveDateTime, SecondsFormat, Utc};

use crate::protocol::PrimitiveType;

const UNIX_EPOCH_DAYS_FROM_CE: i32 = 719_163;

/// Why a value does not fit a type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ValueError {
    /// The value cannot be held by an array of this type.
    #[error("value {value} cannot be represented as {data_type}")]
    NotRepresentable {
        /// The value, as text.
        value: String,
        /// The Arrow type asked for.
        data_type: String,
    },
    /// The text does not parse as a value of this type.
    #[error("{text:?} is not a valid {data_type}")]
    Unparsable {
        /// The text.
        text: String,
        /// The Delta type asked for.
        data_type: String,
    },
}

/// A single typed value, or null.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Scalar {
    /// Null of any type.
    Null,
    /// `boolean`
    Boolean(bool),
    /// `byte`
    Byte(i8),
    /// `short`
    Short(i16),
    /// `integer`
    Integer(i32),
    /// `long`
    Long(i64),
    /// `float`
    Float(f32),
    /// `double`
    Double(f64),
    /// `string`
    String(String),
    /// `binary`
    Binary(Vec<u8>),
    /// `date`, days since 1970-01-01.
    Date(i32),
    /// `timestamp`, microseconds since the epoch, UTC.
    Timestamp(i64),
    /// `timestamp_ntz`, microseconds since 1970-01-01T00:00:00, no time zone.
    TimestampNtz(i64),
    /// `decimal(precision, scale)`: the unscaled value.
    Decimal(i128, u8, i8),
}

impl From<bool> for Scalar {
    fn from(v: bool) -> Self {
        Self::Boolean(v)
    }
}
impl From<i8> for Scalar {
    fn from(v: i8) -> Self {
        Self::Byte(v)
    }
}
impl From<i16> for Scalar {
    fn from(v: i16) -> Self {
        Self::Short(v)
    }
}
impl From<i32> for Scalar {
    fn from(v: i32) -> Self {
        Self::Integer(v)
    }
}
impl From<i64> for Scalar {
    fn from(v: i64) -> Self {
        Self::Long(v)
    }
}
impl From<f32> for Scalar {
    fn from(v: f32) -> Self {
        Self::Float(v)
    }
}
impl From<f64> for Scalar {
    fn from(v: f64) -> Self {
        Self::Double(v)
    }
}
impl From<&str> for Scalar {
    fn from(v: &str) -> Self {
        Self::String(v.to_string())
    }
}
impl From<String> for Scalar {
    fn from(v: String) -> Self {
        Self::String(v)
    }
}
impl From<Vec<u8>> for Scalar {
    fn from(v: Vec<u8>) -> Self {
        Self::Binary(v)
    }
}
impl<T: Into<Scalar>> From<Option<T>> for Scalar {
    fn from(v: Option<T>) -> Self {
        v.map_or(Self::Null, Into::into)
    }
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Null => f.write_str("NULL"),
            Self::Boolean(v) => write!(f, "{v}"),
            Self::Byte(v) => write!(f, "{v}"),
            Self::Short(v) => write!(f, "{v}"),
            Self::Integer(v) => write!(f, "{v}"),
            Self::Long(v) => write!(f, "{v}"),
            Self::Float(v) => write!(f, "{v}"),
            Self::Double(v) => write!(f, "{v}"),
            Self::String(v) => write!(f, "{v:?}"),
            Self::Binary(v) => write!(f, "binary({} bytes)", v.len()),
            Self::Date(_) | Self::Timestamp(_) | Self::TimestampNtz(_) | Self::Decimal(..) => {
                f.write_str(&self.to_partition_string().unwrap_or_default())
            }
        }
    }
}

impl Scalar {
    /// The value's type; `None` for null.
    pub fn data_type(&self) -> Option<PrimitiveType> {
        use PrimitiveType as P;
        Some(match self {
            Self::Null => return None,
            Self::Boolean(_) => P::Boolean,
            Self::Byte(_) => P::Byte,
            Self::Short(_) => P::Short,
            Self::Integer(_) => P::Integer,
            Self::Long(_) => P::Long,
            Self::Float(_) => P::Float,
            Self::Double(_) => P::Double,
            Self::String(_) => P::String,
            Self::Binary(_) => P::Binary,
            Self::Date(_) => P::Date,
            Self::Timestamp(_) => P::Timestamp,
            Self::TimestampNtz(_) => P::TimestampNtz,
            Self::Decimal(_, p, s) => P::Decimal(*p, *s),
        })
    }

    /// Whether this is null.
    pub fn is_null(&self) -> bool {
        matches!(self, Self::Null)
    }

    /// A timestamp (UTC) from an RFC 3339 string such as `2024-01-31T10:00:00Z`.
    pub fn timestamp(rfc3339: &str) -> Option<Self> {
        parse_timestamp_utc(rfc3339).map(Self::Timestamp)
    }

    /// A date from `YYYY-MM-DD`.
    pub fn date(ymd: &str) -> Option<Self> {
        parse_date(ymd).map(Self::Date)
    }

    /// This value as `target`, if that loses nothing: integers widen or narrow when the
    /// value fits, integers become floats or decimals exactly, strings become dates or
    /// timestamps when they parse. Returns `None` when the value does not fit the type.
    pub fn coerce_to(&self, target: PrimitiveType) -> Option<Scalar> {
        use PrimitiveType as P;
        if self.data_type() == Some(target) || self.is_null() {
            return Some(self.clone());
        }
        let int = match self {
            Self::Byte(v) => Some(i128::from(*v)),
            Self::Short(v) => Some(i128::from(*v)),
            Self::Integer(v) => Some(i128::from(*v)),
            Self::Long(v) => Some(i128::from(*v)),
            _ => None,
        };
        match (target, int, self) {
            (P::Byte, Some(v), _) => i8::try_from(v).ok().map(Self::Byte),
            (P::Short, Some(v), _) => i16::try_from(v).ok().map(Self::Short),
            (P::Integer, Some(v), _) => i32::try_from(v).ok().map(Self::Integer),
            (P::Long, Some(v), _) => i64::try_from(v).ok().map(Self::Long),
            (P::Float, Some(v), _) if v.unsigned_abs() <= 1 << 24 => Some(Self::Float(v as f32)),
            (P::Double, Some(v), _) if v.unsigned_abs() <= 1 << 53 => Some(Self::Double(v as f64)),
            (P::Double, None, Self::Float(v)) => Some(Self::Double(f64::from(*v))),
            // A decimal literal (`10.5` in SQL text) against a floating-point column.
            (P::Double, None, Self::Decimal(v, _, scale)) => {
                Some(Self::Double(*v as f64 / 10f64.powi(i32::from(*scale))))
            }
            (P::Float, None, Self::Double(v)) if f64::from(*v as f32) == *v => {
                Some(Self::Float(*v as f32))
            }
            (P::Decimal(p, s), Some(v), _) => {
                let scaled = v.checked_mul(10i128.checked_pow(s as u32)?)?;
                fits_precision(scaled, p).then_some(Self::Decimal(scaled, p, s))
            }
            (P::Decimal(p, s), None, Self::Decimal(v, _, from_s)) => {
                let diff = i32::from(s) - i32::from(*from_s);
                let scaled = if diff >= 0 {
                    v.checked_mul(10i128.checked_pow(diff as u32)?)?
                } else {
                    let div = 10i128.checked_pow((-diff) as u32)?;
                    if v % div != 0 {
                        return None;
                    }
                    v / div
                };
                fits_precision(scaled, p).then_some(Self::Decimal(scaled, p, s))
            }
            (P::Decimal(p, s), None, Self::String(text)) => {
                parse_decimal::<Decimal128Type>(text, p, s)
                    .ok()
                    .map(|v| Self::Decimal(v, p, s))
            }
            (P::Date, None, Self::String(text)) => parse_date(text).map(Self::Date),
            (P::Timestamp, None, Self::String(text)) => {
                parse_timestamp_utc(text).map(Self::Timestamp)
            }
            (P::TimestampNtz, None, Self::String(text)) => {
                parse_timestamp_ntz(text).map(Self::TimestampNtz)
            }
            (P::Timestamp, None, Self::Date(d)) => {
                Some(Self::Timestamp(i64::from(*d) * 86_400_000_000))
            }
            (P::TimestampNtz, None, Self::Date(d)) => {
                Some(Self::TimestampNtz(i64::from(*d) * 86_400_000_000))
            }
            (P::Binary, None, Self::String(text)) => Some(Self::Binary(text.as_bytes().to_vec())),
            _ => None,
        }
    }

    /// Orders two values of the same type; `None` across types, with nulls, or for NaN.
    pub fn compare(&self, other: &Scalar) -> Option<Ordering> {
        match (self, other) {
            (Self::Boolean(a), Self::Boolean(b)) => Some(a.cmp(b)),
            (Self::Byte(a), Self::Byte(b)) => Some(a.cmp(b)),
            (Self::Short(a), Self::Short(b)) => Some(a.cmp(b)),
            (Self::Integer(a), Self::Integer(b)) => Some(a.cmp(b)),
            (Self::Long(a), Self::Long(b)) => Some(a.cmp(b)),
            (Self::Float(a), Self::Float(b)) => a.partial_cmp(b),
            (Self::Double(a), Self::Double(b)) => a.partial_cmp(b),
            (Self::String(a), Self::String(b)) => Some(a.cmp(b)),
            (Self::Binary(a), Self::Binary(b)) => Some(a.cmp(b)),
            (Self::Date(a), Self::Date(b)) => Some(a.cmp(b)),
            (Self::Timestamp(a), Self::Timestamp(b)) => Some(a.cmp(b)),
            (Self::TimestampNtz(a), Self::TimestampNtz(b)) => Some(a.cmp(b)),
            (Self::Decimal(a, _, sa), Self::Decimal(b, _, sb)) if sa == sb => Some(a.cmp(b)),
            _ => None,
        }
    }

    /// An Arrow array of `len` copies of this value, of type `ty`.
    ///
    /// Fails with [`ValueError::NotRepresentable`] when the value cannot be represented as
    /// `ty`.
    pub fn to_array(&self, ty: &ArrowType, len: usize) -> Result<ArrayRef, ValueError> {
        let not_representable = || ValueError::NotRepresentable {
            value: self.to_string(),
            data_type: ty.to_string(),
        };
        let array: ArrayRef = match (self, ty) {
            (Self::Null, _) => return Ok(new_null_array(ty, len)),
            (Self::Boolean(v), ArrowType::Boolean) => Arc::new(BooleanArray::from(vec![*v; len])),
            (Self::Byte(v), ArrowType::Int8) => Arc::new(Int8Array::from_value(*v, len)),
            (Self::Short(v), ArrowType::Int16) => Arc::new(Int16Array::from_value(*v, len)),
            (Self::Integer(v), ArrowType::Int32) => Arc::new(Int32Array::from_value(*v, len)),
            (Self::Long(v), ArrowType::Int64) => Arc::new(Int64Array::from_value(*v, len)),
            (Self::Float(v), ArrowType::Float32) => Arc::new(Float32Array::from_value(*v, len)),
            (Self::Double(v), ArrowType::Float64) => Arc::new(Float64Array::from_value(*v, len)),
            (Self::String(v), ArrowType::Utf8) => {
                Arc::new(StringArray::from_iter_values(std::iter::repeat_n(v, len)))
            }
            (Self::Binary(v), ArrowType::Binary) => {
                Arc::new(BinaryArray::from_iter_values(std::iter::repeat_n(v, len)))
            }
            (Self::Date(v), ArrowType::Date32) => Arc::new(Date32Array::from_value(*v, len)),
            (
                Self::Timestamp(v) | Self::TimestampNtz(v),
                ArrowType::Timestamp(TimeUnit::Microsecond, tz),
            ) => Arc::new(
                TimestampMicrosecondArray::from_value(*v, len).with_timezone_opt(tz.clone()),
            ),
            (Self::Decimal(v, _, s), ArrowType::Decimal128(p, ts)) if s == ts => Arc::new(
                Decimal128Array::from_value(*v, len)
                    .with_precision_and_scale(*p, *s)
                    .map_err(|_| not_representable())?,
            ),
            _ => return Err(not_representable()),
        };
        Ok(array)
    }

    /// The value at `index` of an array, read as the Delta type `ty`. Nulls and types that
    /// do not match give `Null` or `None` respectively.
    pub fn from_array(array: &dyn Array, index: usize, ty: PrimitiveType) -> Option<Scalar> {
        use PrimitiveType as P;
        if index >= array.len() {
            return None;
        }
        if array.is_null(index) {
            return Some(Self::Null);
        }
        let i = index;
        Some(match (ty, array.data_type()) {
            (P::Boolean, ArrowType::Boolean) => Self::Boolean(array.as_boolean().value(i)),
            (P::Byte, ArrowType::Int8) => Self::Byte(array.as_primitive::<Int8Type>().value(i)),
            (P::Short, ArrowType::Int16) => Self::Short(array.as_primitive::<Int16Type>().value(i)),
            (P::Integer, ArrowType::Int32) => {
                Self::Integer(array.as_primitive::<Int32Type>().value(i))
            }
            (P::Long, ArrowType::Int64) => Self::Long(array.as_primitive::<Int64Type>().value(i)),
            (P::Float, ArrowType::Float32) => {
                Self::Float(array.as_primitive::<Float32Type>().value(i))
            }
            (P::Double, ArrowType::Float64) => {
                Self::Double(array.as_primitive::<Float64Type>().value(i))
            }
            (P::String, ArrowType::Utf8) => Self::String(array.as_string::<i32>().value(i).into()),
            (P::String, ArrowType::LargeUtf8) => {
                Self::String(array.as_string::<i64>().value(i).into())
            }
            (P::String, ArrowType::Utf8View) => {
                Self::String(array.as_string_view().value(i).into())
            }
            (P::Binary, ArrowType::Binary) => {
                Self::Binary(array.as_binary::<i32>().value(i).to_vec())
            }
            (P::Binary, ArrowType::LargeBinary) => {
                Self::Binary(array.as_binary::<i64>().value(i).to_vec())
            }
            (P::Binary, ArrowType::BinaryView) => {
                Self::Binary(array.as_binary_view().value(i).to_vec())
            }
            (P::Date, ArrowType::Date32) => Self::Date(array.as_primitive::<Date32Type>().value(i)),
            (P::Timestamp | P::TimestampNtz, ArrowType::Timestamp(unit, _)) => {
                let micros = match unit {
                    TimeUnit::Second => array
                        .as_primitive::<TimestampSecondType>()
                        .value(i)
                        .checked_mul(1_000_000)?,
                    TimeUnit::Millisecond => array
                        .as_primitive::<TimestampMillisecondType>()
                        .value(i)
                        .checked_mul(1_000)?,
                    TimeUnit::Microsecond => {
                        array.as_primitive::<TimestampMicrosecondType>().value(i)
                    }
                    TimeUnit::Nanosecond => {
                        array.as_primitive::<TimestampNanosecondType>().value(i) / 1_000
                    }
                };
                if ty == P::Timestamp {
                    Self::Timestamp(micros)
                } else {
                    Self::TimestampNtz(micros)
                }
            }
            (P::Decimal(p, s), ArrowType::Decimal128(_, array_scale)) if *array_scale == s => {
                Self::Decimal(array.as_primitive::<Decimal128Type>().value(i), p, s)
            }
            _ => return None,
        })
    }

    /// Parses a serialized partition value of type `ty`, as the Delta protocol encodes them.
    /// `None` input (a null partition) gives `Null`.
    ///
    /// Fails with [`ValueError::Unparsable`] when the text is not a value of `ty`.
    pub fn parse_partition(value: Option<&str>, ty: PrimitiveType) -> Result<Scalar, ValueError> {
        use PrimitiveType as P;
        let Some(text) = value else {
            return Ok(Self::Null);
        };
        let bad = || ValueError::Unparsable {
            text: text.to_string(),
            data_type: ty.to_string(),
        };
        let parsed = match ty {
            // An empty string is how Spark writes a null string partition.
            P::String if text.is_empty() => Self::Null,
            P::String => Self::String(text.to_string()),
            _ if text.is_empty() => Self::Null,
            P::Boolean => match text.to_ascii_lowercase().as_str() {
                "true" => Self::Boolean(true),
                "false" => Self::Boolean(false),
                _ => return Err(bad()),
            },
            P::Byte => Self::Byte(text.parse().map_err(|_| bad())?),
            P::Short => Self::Short(text.parse().map_err(|_| bad())?),
            P::Integer => Self::Integer(text.parse().map_err(|_| bad())?),
            P::Long => Self::Long(text.parse().map_err(|_| bad())?),
            P::Float => Self::Float(text.parse().map_err(|_| bad())?),
            P::Double => Self::Double(text.parse().map_err(|_| bad())?),
            P::Binary => Self::Binary(text.as_bytes().to_vec()),
            P::Date => Self::Date(parse_date(text).ok_or_else(bad)?),
            P::Timestamp => Self::Timestamp(parse_timestamp_utc(text).ok_or_else(bad)?),
            P::TimestampNtz => Self::TimestampNtz(parse_timestamp_ntz(text).ok_or_else(bad)?),
            P::Decimal(p, s) => Self::Decimal(
                parse_decimal::<Decimal128Type>(text, p, s).map_err(|_| bad())?,
                p,
                s,
            ),
            // Variants have no partition-value encoding.
            P::Variant => return Err(bad()),
        };
        Ok(parsed)
    }

    /// The value serialized as a Delta partition value; `None` for null.
    pub fn to_partition_string(&self) -> Option<String> {
        Some(match self {
            Self::Null => return None,
            Self::Boolean(v) => v.to_string(),
            Self::Byte(v) => v.to_string(),
            Self::Short(v) => v.to_string(),
            Self::Integer(v) => v.to_string(),
            Self::Long(v) => v.to_string(),
            Self::Float(v) => v.to_string(),
            Self::Double(v) => v.to_string(),
            Self::String(v) => v.clone(),
            Self::Binary(v) => String::from_utf8_lossy(v).into_owned(),
            Self::Date(d) => format_date(*d)?,
            Self::Timestamp(us) | Self::TimestampNtz(us) => {
                let dt = DateTime::from_timestamp_micros(*us)?.naive_utc();
                dt.format("%Y-%m-%d %H:%M:%S%.6f").to_string()
            }
            Self::Decimal(v, p, s) => Decimal128Type::format_decimal(*v, *p, *s),
        })
    }

    /// Reads a statistics bound (`minValues` / `maxValues` entry) of type `ty`. Returns
    /// `None` when the JSON value does not hold a value of that type.
    pub fn from_stats_json(value: &serde_json::Value, ty: PrimitiveType) -> Option<Scalar> {
        use PrimitiveType as P;
        use serde_json::Value as J;
        Some(match (ty, value) {
            (_, J::Null) => Self::Null,
            (P::Boolean, J::Bool(b)) => Self::Boolean(*b),
            (P::Byte, J::Number(n)) => Self::Byte(i8::try_from(n.as_i64()?).ok()?),
            (P::Short, J::Number(n)) => Self::Short(i16::try_from(n.as_i64()?).ok()?),
            (P::Integer, J::Number(n)) => Self::Integer(i32::try_from(n.as_i64()?).ok()?),
            (P::Long, J::Number(n)) => Self::Long(n.as_i64()?),
            (P::Float, J::Number(n)) => Self::Float(n.as_f64()? as f32),
            (P::Double, J::Number(n)) => Self::Double(n.as_f64()?),
            (P::String, J::String(s)) => Self::String(s.clone()),
            (P::Date, J::String(s)) => Self::Date(parse_date(s)?),
            (P::Timestamp, J::String(s)) => Self::Timestamp(parse_timestamp_utc(s)?),
            (P::TimestampNtz, J::String(s)) => Self::TimestampNtz(parse_timestamp_ntz(s)?),
            // JSON numbers lose digits past ~15; only trust decimals that fit in a double.
            (P::Decimal(p, s), J::Number(n)) if p <= 15 => Self::Decimal(
                parse_decimal::<Decimal128Type>(&n.to_string(), p, s).ok()?,
                p,
                s,
            ),
            (P::Decimal(p, s), J::String(text)) => {
                Self::Decimal(parse_decimal::<Decimal128Type>(text, p, s).ok()?, p, s)
            }
            _ => return None,
        })
    }

    /// This value as JSON text for statistics, the way Spark writes them; `None` for
    /// values statistics do not record (null, binary, NaN and infinities).
    pub fn to_stats_json(&self) -> Option<String> {
        Some(match self {
            Self::Null | Self::Binary(_) => return None,
            Self::Boolean(v) => v.to_string(),
            Self::Byte(v) => v.to_string(),
            Self::Short(v) => v.to_string(),
            Self::Integer(v) => v.to_string(),
            Self::Long(v) => v.to_string(),
            Self::Float(v) if v.is_finite() => {
                serde_json::Number::from_f64(f64::from(*v))?.to_string()
            }
            Self::Double(v) if v.is_finite() => serde_json::Number::from_f64(*v)?.to_string(),
            Self::Float(_) | Self::Double(_) => return None,
            Self::String(v) => serde_json::Value::String(v.clone()).to_string(),
            Self::Date(d) => format!("\"{}\"", format_date(*d)?),
            Self::Timestamp(us) => {
                let dt = DateTime::from_timestamp_micros(*us)?;
                format!("\"{}\"", dt.to_rfc3339_opts(SecondsFormat::Millis, true))
            }
            Self::TimestampNtz(us) => {
                let dt = DateTime::from_timestamp_micros(*us)?.naive_utc();
                format!("\"{}\"", dt.format("%Y-%m-%dT%H:%M:%S%.3f"))
            }
            Self::Decimal(v, p, s) => Decimal128Type::format_decimal(*v, *p, *s),
        })
    }
}

fn fits_precision(v: i128, precision: u8) -> bool {
    10i128
        .checked_pow(u32::from(precision))
        .is_some_and(|limit| v.abs() < limit)
}

fn format_date(days: i32) -> Option<String> {
    let date = NaiveDate::from_num_days_from_ce_opt(days.checked_add(UNIX_EPOCH_DAYS_FROM_CE)?)?;
    Some(date.format("%Y-%m-%d").to_string())
}

/// Days since the epoch of a `YYYY-MM-DD` date.
pub(crate) fn parse_date(text: &str) -> Option<i32> {
    let date = NaiveDate::parse_from_str(text.trim(), "%Y-%m-%d").ok()?;
    Some(date.num_days_from_ce() - UNIX_EPOCH_DAYS_FROM_CE)
}

use chrono::Datelike;

/// Microseconds since the epoch of a timestamp written with an offset (`Z`, `+01:00`), or
/// without one, in which case it is taken as UTC (how Delta writes timestamp partition
/// values).
pub(crate) fn parse_timestamp_utc(text: &str) -> Option<i64> {
    let text = text.trim();
    if let Ok(dt) = DateTime::parse_from_rfc3339(text) {
        return Some(dt.with_timezone(&Utc).timestamp_micros());
    }
    for format in [
        "%Y-%m-%d %H:%M:%S%.f%:z",
        "%Y-%m-%d %H:%M:%S%.f%#z",
        "%Y-%m-%dT%H:%M:%S%.f%#z",
    ] {
        if let Ok(dt) = DateTime::parse_from_str(text, format) {
            return Some(dt.with_timezone(&Utc).timestamp_micros());
        }
    }
    parse_timestamp_ntz(text)
}

/// Microseconds since 1970-01-01T00:00:00 of a timestamp without time zone.
pub(crate) fn parse_timestamp_ntz(text: &str) -> Option<i64> {
    let text = text.trim();
    for format in [
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M",
        "%Y-%m-%dT%H:%M",
    ] {
        if let Ok(dt) = NaiveDateTime::parse_from_str(text, format) {
            return Some(dt.and_utc().timestamp_micros());
        }
    }
    parse_date(text).map(|d| i64::from(d) * 86_400_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;
    use PrimitiveType as P;

    #[test]
    fn literals_coerce_only_when_nothing_is_lost() {
        assert_eq!(Scalar::Integer(5).coerce_to(P::Long), Some(Scalar::Long(5)));
        assert_eq!(Scalar::Long(300).coerce_to(P::Byte), None);
        assert_eq!(
            Scalar::Integer(3).coerce_to(P::Decimal(5, 2)),
            Some(Scalar::Decimal(300, 5, 2))
        );
        assert_eq!(
            Scalar::from("2024-02-29").coerce_to(P::Date),
            Scalar::date("2024-02-29")
        );
        assert_eq!(Scalar::from("abc").coerce_to(P::Long), None);
        assert_eq!(Scalar::Double(0.1).coerce_to(P::Float), None);
    }

    #[test]
    fn partition_values_round_trip_through_their_strings() {
        for (value, ty) in [
            (Scalar::Long(-12), P::Long),
            (Scalar::date("1970-01-02").unwrap(), P::Date),
            (Scalar::Timestamp(1_000_001), P::Timestamp),
            (Scalar::Decimal(-12345, 7, 3), P::Decimal(7, 3)),
            (Scalar::Boolean(true), P::Boolean),
            (Scalar::from("a b/c=d"), P::String),
        ] {
            let text = value.to_partition_string();
            assert_eq!(
                Scalar::parse_partition(text.as_deref(), ty).unwrap(),
                value,
                "{text:?}"
            );
        }
        assert_eq!(
            Scalar::parse_partition(Some("1970-01-01 00:00:01.000001"), P::Timestamp).unwrap(),
            Scalar::Timestamp(1_000_001)
        );
        assert_eq!(
            Scalar::parse_partition(None, P::Integer).unwrap(),
            Scalar::Null
        );
        assert!(Scalar::parse_partition(Some("x"), P::Integer).is_err());
    }

    #[test]
    fn stats_json_reads_spark_formats() {
        let ts = serde_json::json!("2021-02-03T04:05:06.789Z");
        assert_eq!(
            Scalar::from_stats_json(&ts, P::Timestamp),
            Scalar::timestamp("2021-02-03T04:05:06.789Z")
        );
        let offset = serde_json::json!("2021-02-03T05:05:06.789+01:00");
        assert_eq!(
            Scalar::from_stats_json(&offset, P::Timestamp),
            Scalar::from_stats_json(&ts, P::Timestamp)
        );
        let dec = serde_json::json!(12.5);
        assert_eq!(
            Scalar::from_stats_json(&dec, P::Decimal(5, 2)),
            Some(Scalar::Decimal(1250, 5, 2))
        );
        assert_eq!(Scalar::from_stats_json(&dec, P::Decimal(30, 2)), None);
        assert_eq!(
            Scalar::Timestamp(1_500).to_stats_json().unwrap(),
            "\"1970-01-01T00:00:00.001Z\""
        );
    }
}
