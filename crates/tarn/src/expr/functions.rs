//! SQL functions of the expressions Delta tables store (generated columns, CHECK
//! constraints): `CAST` and the date, string, number and null functions Spark's generated
//! columns and constraints use most, with Spark's semantics (ANSI casts: a value that
//! does not convert is an error, never a silent null).

use std::fmt;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Int32Array, Int64Array, StringArray, new_null_array,
};
use arrow::compute::kernels::cmp::lt;
use arrow::compute::kernels::numeric::neg;
use arrow::compute::kernels::zip::zip;
use arrow::compute::{CastOptions, DatePart, cast_with_options, date_part, is_not_null};
use arrow::datatypes::DataType as ArrowType;

use crate::error::{Error, Result};
use crate::protocol::PrimitiveType;

/// A function an expression calls (see [`Expr::Call`](super::Expr::Call)). Serialized as
/// its SQL name (`cast` with its type: `cast:date`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum Function {
    /// `CAST(x AS type)`.
    Cast(PrimitiveType),
    /// `year(d)` of a date, timestamp or date text.
    Year,
    /// `month(d)`.
    Month,
    /// `day(d)` (`dayofmonth`).
    Day,
    /// `hour(ts)`.
    Hour,
    /// `lower(s)`.
    Lower,
    /// `upper(s)`.
    Upper,
    /// `length(s)` (`char_length`): characters of text, bytes of binary.
    Length,
    /// `substring(s, pos[, len])` (`substr`): 1-based; a negative `pos` counts from the end.
    Substring,
    /// `concat(s, ...)`: null when any argument is.
    Concat,
    /// `coalesce(x, ...)`: the first argument that is not null.
    Coalesce,
    /// `abs(x)`.
    Abs,
    /// Spark SQL's `a / b`: the quotient as a double, whatever numbers divide (decimals
    /// too); division by zero is an error, as under ANSI.
    Divide,
}

impl Function {
    /// The function Spark SQL calls `name` (any case); `None` for those Tarn lacks.
    pub fn by_name(name: &str) -> Option<Function> {
        Some(match name.to_ascii_lowercase().as_str() {
            "year" => Self::Year,
            "month" => Self::Month,
            "day" | "dayofmonth" => Self::Day,
            "hour" => Self::Hour,
            "lower" | "lcase" => Self::Lower,
            "upper" | "ucase" => Self::Upper,
            "length" | "char_length" | "character_length" => Self::Length,
            "substring" | "substr" => Self::Substring,
            "concat" => Self::Concat,
            "coalesce" => Self::Coalesce,
            "abs" => Self::Abs,
            _ => return None,
        })
    }

    /// The type of the call's result for arguments of `args` types (`None`: a null
    /// literal).
    ///
    /// Fails with [`Error::TypeMismatch`] for a wrong number or type of arguments.
    pub(crate) fn result_type(
        &self,
        args: &[Option<PrimitiveType>],
        call: &str,
    ) -> Result<Option<PrimitiveType>> {
        use PrimitiveType as P;
        let mismatch = |expected: &str| Error::TypeMismatch {
            column: call.to_string(),
            expected: expected.to_string(),
            found: args
                .iter()
                .map(|a| a.map_or_else(|| "null".into(), |t| t.to_string()))
                .collect::<Vec<_>>()
                .join(", "),
        };
        let arity = |range: std::ops::RangeInclusive<usize>, expected: &str| match range
            .contains(&args.len())
        {
            true => Ok(()),
            false => Err(mismatch(expected)),
        };
        let is = |t: Option<PrimitiveType>, ok: &dyn Fn(PrimitiveType) -> bool| t.is_none_or(ok);
        let integer = |t: PrimitiveType| matches!(t, P::Byte | P::Short | P::Integer | P::Long);
        let numeric = |t| integer(t) || matches!(t, P::Float | P::Double | P::Decimal(..));
        match self {
            Self::Cast(to) => {
                arity(1..=1, "one value to cast")?;
                if *to == P::Variant || args[0] == Some(P::Variant) {
                    return Err(mismatch("a cast between primitive types"));
                }
                Ok(Some(*to))
            }
            Self::Year | Self::Month | Self::Day | Self::Hour => {
                arity(1..=1, "one date or timestamp")?;
                let dated = |t| matches!(t, P::Date | P::Timestamp | P::TimestampNtz | P::String);
                match is(args[0], &dated) {
                    true => Ok(Some(P::Integer)),
                    false => Err(mismatch("a date or timestamp")),
                }
            }
            Self::Lower | Self::Upper => {
                arity(1..=1, "one string")?;
                match is(args[0], &|t| t == P::String) {
                    true => Ok(Some(P::String)),
                    false => Err(mismatch("a string")),
                }
            }
            Self::Length => {
                arity(1..=1, "one string or binary")?;
                match is(args[0], &|t| matches!(t, P::String | P::Binary)) {
                    true => Ok(Some(P::Integer)),
                    false => Err(mismatch("a string or binary")),
                }
            }
            Self::Substring => {
                arity(2..=3, "a string, a position and an optional length")?;
                let ok =
                    is(args[0], &|t| t == P::String) && args[1..].iter().all(|a| is(*a, &integer));
                match ok {
                    true => Ok(Some(P::String)),
                    false => Err(mismatch("a string and integers")),
                }
            }
            Self::Concat => {
                arity(1..=usize::MAX, "strings")?;
                match args.iter().all(|a| is(*a, &|t| t == P::String)) {
                    true => Ok(Some(P::String)),
                    false => Err(mismatch("strings")),
                }
            }
            Self::Coalesce => {
                arity(1..=usize::MAX, "values of one type")?;
                let first = args.iter().flatten().next().copied();
                match args.iter().all(|a| a.is_none() || *a == first) {
                    true => Ok(first),
                    false => Err(mismatch("values of one type")),
                }
            }
            Self::Abs => {
                arity(1..=1, "one number")?;
                match is(args[0], &numeric) {
                    true => Ok(args[0]),
                    false => Err(mismatch("a number")),
                }
            }
            Self::Divide => {
                arity(2..=2, "two numbers")?;
                match args.iter().all(|a| is(*a, &numeric)) {
                    true => Ok(Some(P::Double)),
                    false => Err(mismatch("numbers")),
                }
            }
        }
    }

    /// Applies the function to argument arrays of `rows` rows (a null literal comes as
    /// an array of Arrow's null type), giving an array of the type
    /// [`result_type`](Self::result_type) gave.
    ///
    /// Fails with [`Error::InvalidExpression`] when a value does not convert (`CAST`) or
    /// an argument is not of the type binding checked.
    pub(crate) fn evaluate(&self, args: &[ArrayRef], rows: usize, call: &str) -> Result<ArrayRef> {
        let failed = |reason: String| Error::InvalidExpression {
            expression: call.to_string(),
            reason,
        };
        let target = self.output_type(args);
        if args.iter().any(|a| a.data_type() == &ArrowType::Null) && *self != Self::Coalesce {
            return Ok(new_null_array(&target, rows));
        }
        let cast = |array: &ArrayRef, to: &ArrowType| {
            let options = CastOptions {
                safe: false,
                ..Default::default()
            };
            cast_with_options(array, to, &options).map_err(|e| failed(e.to_string()))
        };
        let strings = |array: &ArrayRef| -> Result<StringArray> {
            Ok(cast(array, &ArrowType::Utf8)?.as_string::<i32>().clone())
        };
        match self {
            Self::Cast(_) => cast(&args[0], &target),
            Self::Year | Self::Month | Self::Day | Self::Hour => {
                let part = match self {
                    Self::Year => DatePart::Year,
                    Self::Month => DatePart::Month,
                    Self::Day => DatePart::Day,
                    _ => DatePart::Hour,
                };
                let dated = match args[0].data_type() {
                    ArrowType::Utf8 | ArrowType::LargeUtf8 | ArrowType::Utf8View => {
                        cast(&args[0], &ArrowType::Date32)?
                    }
                    _ => Arc::clone(&args[0]),
                };
                date_part(&dated, part).map_err(|e| failed(e.to_string()))
            }
            Self::Lower | Self::Upper => {
                let lower = *self == Self::Lower;
                let out: StringArray = strings(&args[0])?
                    .iter()
                    .map(|v| {
                        v.map(|s| match lower {
                            true => s.to_lowercase(),
                            false => s.to_uppercase(),
                        })
                    })
                    .collect();
                Ok(Arc::new(out))
            }
            Self::Length => {
                let out: Int32Array = match args[0].data_type() {
                    ArrowType::Binary | ArrowType::LargeBinary | ArrowType::BinaryView => {
                        let bytes = cast(&args[0], &ArrowType::Binary)?;
                        bytes
                            .as_binary::<i32>()
                            .iter()
                            .map(|v| v.map(|b| b.len() as i32))
                            .collect()
                    }
                    _ => strings(&args[0])?
                        .iter()
                        .map(|v| v.map(|s| s.chars().count() as i32))
                        .collect(),
                };
                Ok(Arc::new(out))
            }
            Self::Substring => {
                let text = strings(&args[0])?;
                let int = |a: &ArrayRef| -> Result<Int64Array> {
                    Ok(cast(a, &ArrowType::Int64)?.as_primitive().clone())
                };
                let pos = int(&args[1])?;
                let len = args.get(2).map(int).transpose()?;
                let out: StringArray = (0..rows)
                    .map(|i| {
                        if text.is_null(i)
                            || pos.is_null(i)
                            || len.as_ref().is_some_and(|l| l.is_null(i))
                        {
                            return None;
                        }
                        let length = len.as_ref().map(|l| l.value(i));
                        Some(spark_substring(text.value(i), pos.value(i), length))
                    })
                    .collect();
                Ok(Arc::new(out))
            }
            Self::Concat => {
                let parts = args.iter().map(strings).collect::<Result<Vec<_>>>()?;
                let out: StringArray = (0..rows)
                    .map(|i| {
                        parts
                            .iter()
                            .map(|p| (!p.is_null(i)).then(|| p.value(i)))
                            .collect::<Option<String>>()
                    })
                    .collect();
                Ok(Arc::new(out))
            }
            Self::Coalesce => {
                let mut out = new_null_array(&target, rows);
                for arg in args.iter().rev() {
                    if arg.data_type() == &ArrowType::Null {
                        continue;
                    }
                    let arg = cast(arg, &target)?;
                    let present = is_not_null(&arg).map_err(|e| failed(e.to_string()))?;
                    out = zip(&present, &arg, &out).map_err(|e| failed(e.to_string()))?;
                }
                Ok(out)
            }
            Self::Divide => {
                let (l, r) = (cast(&args[0], &target)?, cast(&args[1], &target)?);
                let zero = arrow::array::Scalar::new(arrow::array::Float64Array::from(vec![0.0]));
                let by_zero = arrow::compute::kernels::cmp::eq(&r, &zero)
                    .map_err(|e| failed(e.to_string()))?;
                if by_zero.true_count() > 0 {
                    return Err(failed("division by zero".into()));
                }
                arrow::compute::kernels::numeric::div(&l, &r).map_err(|e| failed(e.to_string()))
            }
            Self::Abs => {
                let value = &args[0];
                let zero = cast(
                    &(Arc::new(Int64Array::from(vec![0; rows])) as ArrayRef),
                    value.data_type(),
                )?;
                let negative: BooleanArray = lt(value, &zero).map_err(|e| failed(e.to_string()))?;
                let negated = neg(value).map_err(|e| failed(e.to_string()))?;
                zip(&negative, &negated, value).map_err(|e| failed(e.to_string()))
            }
        }
    }
}

impl Function {
    /// The Arrow type of the result for these arguments.
    fn output_type(&self, args: &[ArrayRef]) -> ArrowType {
        match self {
            Self::Cast(to) => to.to_arrow(),
            Self::Year | Self::Month | Self::Day | Self::Hour | Self::Length => ArrowType::Int32,
            Self::Divide => ArrowType::Float64,
            Self::Lower | Self::Upper | Self::Substring | Self::Concat => ArrowType::Utf8,
            Self::Coalesce | Self::Abs => args
                .iter()
                .map(|a| a.data_type())
                .find(|t| **t != ArrowType::Null)
                .cloned()
                .unwrap_or(ArrowType::Null),
        }
    }
}

/// Spark's `substring(text, pos, len)` on characters: `pos` is 1-based (0 counts as 1,
/// negative counts from the end), and the range is cut to the text.
fn spark_substring(text: &str, pos: i64, len: Option<i64>) -> String {
    let chars = text.chars().count() as i64;
    let start = match pos {
        p if p > 0 => p - 1,
        p if p < 0 => chars + p,
        _ => 0,
    };
    let end = match len {
        Some(l) => start.saturating_add(l),
        None => chars,
    }
    .min(chars);
    let start = start.max(0);
    if start >= end {
        return String::new();
    }
    text.chars()
        .skip(start as usize)
        .take((end - start) as usize)
        .collect()
}

impl From<Function> for String {
    fn from(function: Function) -> String {
        match function {
            Function::Cast(to) => format!("cast:{to}"),
            other => other.to_string(),
        }
    }
}

impl TryFrom<String> for Function {
    type Error = String;

    fn try_from(text: String) -> std::result::Result<Function, String> {
        match text.strip_prefix("cast:") {
            Some(to) => PrimitiveType::parse(to).map(Function::Cast),
            None if text == "divide" => Some(Function::Divide),
            None => Function::by_name(&text),
        }
        .ok_or_else(|| format!("unknown function {text:?}"))
    }
}

impl fmt::Display for Function {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Cast(_) => "cast",
            Self::Year => "year",
            Self::Month => "month",
            Self::Day => "day",
            Self::Hour => "hour",
            Self::Lower => "lower",
            Self::Upper => "upper",
            Self::Length => "length",
            Self::Substring => "substring",
            Self::Concat => "concat",
            Self::Coalesce => "coalesce",
            Self::Abs => "abs",
            Self::Divide => "divide",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn substring_follows_spark() {
        assert_eq!(spark_substring("Spark SQL", 5, None), "k SQL");
        assert_eq!(spark_substring("Spark SQL", -3, None), "SQL");
        assert_eq!(spark_substring("Spark SQL", 5, Some(1)), "k");
        assert_eq!(spark_substring("Spark SQL", 0, Some(2)), "Sp");
        assert_eq!(spark_substring("Spark", -10, Some(3)), "");
        assert_eq!(spark_substring("Spark", -7, Some(4)), "Sp");
        assert_eq!(spark_substring("Spark", 9, Some(2)), "");
        assert_eq!(spark_substring("héllo", 2, Some(2)), "él");
    }
}
