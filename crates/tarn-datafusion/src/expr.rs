//! DataFusion's expressions in Tarn's terms: the filters a scan, DELETE or UPDATE pushes
//! into Tarn and the values an UPDATE assigns. What has no Tarn equivalent is `None`, and
//! stays with DataFusion (or, for a DELETE or UPDATE, is refused).

use datafusion::common::{Column, ScalarValue};
use datafusion::logical_expr::{BinaryExpr, Expr, Operator};
use tarn::expr::{ArithOp, CmpOp, Expr as TarnExpr, Scalar};

/// How a DataFusion column is named in Tarn's expression, if it can be.
pub(crate) type ColumnMap<'a> = dyn Fn(&Column) -> Option<TarnExpr> + 'a;

/// `expr` as a Tarn expression on the table's columns, or `None` when Tarn has no
/// equivalent.
pub(crate) fn to_tarn(expr: &Expr) -> Option<TarnExpr> {
    to_tarn_with(expr, &|column| Some(tarn::expr::col(column.name.clone())))
}

/// `expr` as a Tarn expression whose columns `column` names (a MERGE's are `target.x`
/// or `source.x`), or `None` when Tarn has no equivalent or `column` has no name for one.
pub(crate) fn to_tarn_with(expr: &Expr, column: &ColumnMap<'_>) -> Option<TarnExpr> {
    let to_tarn = |e: &Expr| to_tarn_with(e, column);
    Some(match expr {
        Expr::Column(c) => column(c)?,
        Expr::Literal(value, _) => TarnExpr::Literal(scalar(value)?),
        Expr::Alias(alias) => to_tarn(&alias.expr)?,
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            let (left, right) = (to_tarn(left)?, to_tarn(right)?);
            let cmp = |op| TarnExpr::Cmp {
                op,
                left: Box::new(left.clone()),
                right: Box::new(right.clone()),
            };
            let arith = |op| TarnExpr::Arith {
                op,
                left: Box::new(left.clone()),
                right: Box::new(right.clone()),
            };
            match op {
                Operator::Eq => cmp(CmpOp::Eq),
                Operator::NotEq => cmp(CmpOp::NotEq),
                Operator::Lt => cmp(CmpOp::Lt),
                Operator::LtEq => cmp(CmpOp::LtEq),
                Operator::Gt => cmp(CmpOp::Gt),
                Operator::GtEq => cmp(CmpOp::GtEq),
                Operator::And => left.and(right),
                Operator::Or => left.or(right),
                Operator::Plus => arith(ArithOp::Add),
                Operator::Minus => arith(ArithOp::Sub),
                Operator::Multiply => arith(ArithOp::Mul),
                Operator::Divide => arith(ArithOp::Div),
                _ => return None,
            }
        }
        Expr::Not(inner) => to_tarn(inner)?.not(),
        Expr::IsNull(inner) => to_tarn(inner)?.is_null(),
        Expr::IsNotNull(inner) => to_tarn(inner)?.is_not_null(),
        Expr::Between(between) => {
            let value = to_tarn(&between.expr)?;
            let (low, high) = (to_tarn(&between.low)?, to_tarn(&between.high)?);
            let inside = value.clone().gt_eq(low).and(value.lt_eq(high));
            match between.negated {
                true => inside.not(),
                false => inside,
            }
        }
        Expr::InList(in_list) => {
            let values = in_list
                .list
                .iter()
                .map(|v| match v {
                    Expr::Literal(value, _) => scalar(value),
                    _ => None,
                })
                .collect::<Option<Vec<Scalar>>>()?;
            TarnExpr::InList {
                expr: Box::new(to_tarn(&in_list.expr)?),
                list: values,
                negated: in_list.negated,
            }
        }
        Expr::ScalarFunction(call) if call.name() == crate::search::TEXT_MATCH => {
            let [Expr::Column(searched), Expr::Literal(query, _)] = call.args.as_slice() else {
                return None;
            };
            let query = match query {
                ScalarValue::Utf8(Some(q))
                | ScalarValue::LargeUtf8(Some(q))
                | ScalarValue::Utf8View(Some(q)) => q.clone(),
                _ => return None,
            };
            // The searched column must be the table's own (not a MERGE's `target.x`).
            match column(searched)? {
                TarnExpr::Column(name) if name.path().len() == 1 => {
                    tarn::expr::text_match(name.root().to_string(), query)
                }
                _ => return None,
            }
        }
        _ => return None,
    })
}

/// A DataFusion constant as Tarn's, or `None` for types Tarn's expressions lack.
pub(crate) fn scalar(value: &ScalarValue) -> Option<Scalar> {
    if value.is_null() {
        return Some(Scalar::Null);
    }
    Some(match value {
        ScalarValue::Boolean(Some(v)) => Scalar::Boolean(*v),
        ScalarValue::Int8(Some(v)) => Scalar::Byte(*v),
        ScalarValue::Int16(Some(v)) => Scalar::Short(*v),
        ScalarValue::Int32(Some(v)) => Scalar::Integer(*v),
        ScalarValue::Int64(Some(v)) => Scalar::Long(*v),
        ScalarValue::UInt8(Some(v)) => Scalar::Short(i16::from(*v)),
        ScalarValue::UInt16(Some(v)) => Scalar::Integer(i32::from(*v)),
        ScalarValue::UInt32(Some(v)) => Scalar::Long(i64::from(*v)),
        ScalarValue::UInt64(Some(v)) => Scalar::Long(i64::try_from(*v).ok()?),
        ScalarValue::Float32(Some(v)) => Scalar::Float(*v),
        ScalarValue::Float64(Some(v)) => Scalar::Double(*v),
        ScalarValue::Utf8(Some(v))
        | ScalarValue::LargeUtf8(Some(v))
        | ScalarValue::Utf8View(Some(v)) => Scalar::String(v.clone()),
        ScalarValue::Binary(Some(v))
        | ScalarValue::LargeBinary(Some(v))
        | ScalarValue::BinaryView(Some(v)) => Scalar::Binary(v.clone()),
        ScalarValue::Date32(Some(v)) => Scalar::Date(*v),
        ScalarValue::TimestampMicrosecond(Some(v), tz) => timestamp(*v, tz.is_some()),
        ScalarValue::TimestampMillisecond(Some(v), tz) => {
            timestamp(v.checked_mul(1_000)?, tz.is_some())
        }
        ScalarValue::TimestampSecond(Some(v), tz) => {
            timestamp(v.checked_mul(1_000_000)?, tz.is_some())
        }
        // Nanoseconds that are not whole microseconds have no Delta value.
        ScalarValue::TimestampNanosecond(Some(v), tz) if v % 1_000 == 0 => {
            timestamp(v / 1_000, tz.is_some())
        }
        ScalarValue::Decimal128(Some(v), precision, scale) => {
            Scalar::Decimal(*v, *precision, *scale)
        }
        _ => return None,
    })
}

fn timestamp(micros: i64, zoned: bool) -> Scalar {
    match zoned {
        true => Scalar::Timestamp(micros),
        false => Scalar::TimestampNtz(micros),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::logical_expr::{col, lit};

    #[test]
    fn comparisons_ranges_and_lists_translate_and_the_rest_does_not() {
        let translated = to_tarn(&col("a").gt(lit(5i64)).and(col("b").eq(lit("x")))).unwrap();
        assert_eq!(translated.to_string(), r#"((a > 5) AND (b = "x"))"#);
        let between = to_tarn(&col("a").between(lit(1i32), lit(3i32))).unwrap();
        assert_eq!(between.to_string(), "((a >= 1) AND (a <= 3))");
        let listed = to_tarn(&col("a").in_list(vec![lit(1i64), lit(2i64)], true)).unwrap();
        assert_eq!(listed.to_string(), "(a NOT IN (1, 2))");
        // A LIKE has no Tarn equivalent: it stays with DataFusion.
        assert!(to_tarn(&col("b").like(lit("x%"))).is_none());
        // An IN list of non-constants neither.
        assert!(to_tarn(&col("a").in_list(vec![col("b")], false)).is_none());
    }

    #[test]
    fn constants_keep_their_values_and_unrepresentable_ones_are_refused() {
        assert_eq!(scalar(&ScalarValue::UInt64(Some(7))), Some(Scalar::Long(7)));
        assert_eq!(scalar(&ScalarValue::UInt64(Some(u64::MAX))), None);
        assert_eq!(
            scalar(&ScalarValue::TimestampMillisecond(Some(2), None)),
            Some(Scalar::TimestampNtz(2_000))
        );
        assert_eq!(
            scalar(&ScalarValue::TimestampNanosecond(
                Some(1_500),
                Some("UTC".into())
            )),
            None
        );
        assert_eq!(scalar(&ScalarValue::Int32(None)), Some(Scalar::Null));
    }
}
