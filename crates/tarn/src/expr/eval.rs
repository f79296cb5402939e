//! Evaluating predicates on Arrow record batches.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, RecordBatch, new_null_array};
use arrow::compute::kernels::cmp;
use arrow::compute::{and_kleene, is_not_null, is_null, not, or_kleene};
use arrow::datatypes::DataType as ArrowType;

use super::{ArithOp, CmpOp, ColumnName, Expr, Scalar, TextQuery};
use crate::error::{Error, Result};

/// Evaluates a bound predicate on a batch whose columns carry the table's logical names.
/// Rows where the predicate is null come back null; callers keep only `true`.
pub(crate) fn evaluate_predicate(expr: &Expr, batch: &RecordBatch) -> Result<BooleanArray> {
    let rows = batch.num_rows();
    match expr {
        Expr::Column(name) => booleans(column(batch, name)?, name),
        Expr::Literal(Scalar::Boolean(b)) => Ok(BooleanArray::from(vec![*b; rows])),
        Expr::Literal(Scalar::Null) => Ok(BooleanArray::new_null(rows)),
        Expr::Literal(other) => Err(Error::TypeMismatch {
            column: other.to_string(),
            expected: "boolean".into(),
            found: other.data_type().map(|t| t.to_string()).unwrap_or_default(),
        }),
        Expr::Cmp { op, left, right } => compare(*op, left, right, batch),
        Expr::Call { .. } => booleans(value(expr, batch)?, expr),
        Expr::Arith { .. } => Err(Error::TypeMismatch {
            column: expr.to_string(),
            expected: "a boolean predicate".into(),
            found: "a number".into(),
        }),
        Expr::And(a, b) => and_kleene(
            &evaluate_predicate(a, batch)?,
            &evaluate_predicate(b, batch)?,
        )
        .map_err(Error::arrow("evaluating AND")),
        Expr::Or(a, b) => or_kleene(
            &evaluate_predicate(a, batch)?,
            &evaluate_predicate(b, batch)?,
        )
        .map_err(Error::arrow("evaluating OR")),
        Expr::Not(e) => not(&evaluate_predicate(e, batch)?).map_err(Error::arrow("evaluating NOT")),
        Expr::IsNull(e) | Expr::IsNotNull(e) => {
            let array = value(e, batch)?;
            let result = if matches!(expr, Expr::IsNull(_)) {
                is_null(&array)
            } else {
                is_not_null(&array)
            };
            result.map_err(Error::arrow("evaluating IS NULL"))
        }
        Expr::InList {
            expr,
            list,
            negated,
        } => {
            let mut any = BooleanArray::from(vec![false; rows]);
            for v in list {
                let eq = compare(CmpOp::Eq, expr, &Expr::Literal(v.clone()), batch)?;
                any = or_kleene(&any, &eq).map_err(Error::arrow("evaluating IN"))?;
            }
            if *negated {
                not(&any).map_err(Error::arrow("evaluating NOT IN"))
            } else {
                Ok(any)
            }
        }
        Expr::TextMatch {
            column: name,
            query,
            analyzer,
        } => {
            let analyzer = analyzer.ok_or_else(|| Error::TextMatchWithoutIndex {
                column: name.to_string(),
            })?;
            let query = TextQuery::parse(query).map_err(|e| Error::InvalidArgument {
                name: "text_match",
                reason: e.to_string(),
            })?;
            let analyzer = analyzer.analyzer();
            let array = column(batch, name)?;
            let strings = array
                .as_string_opt::<i32>()
                .ok_or_else(|| Error::TypeMismatch {
                    column: name.to_string(),
                    expected: "string".into(),
                    found: array.data_type().to_string(),
                })?;
            Ok(strings
                .iter()
                .map(|v| v.map(|text| query.matches(&analyzer, text)))
                .collect())
        }
    }
}

/// The values of a column or call that must be booleans.
fn booleans(array: ArrayRef, what: &dyn std::fmt::Display) -> Result<BooleanArray> {
    array
        .as_boolean_opt()
        .cloned()
        .ok_or_else(|| Error::TypeMismatch {
            column: what.to_string(),
            expected: "boolean".into(),
            found: array.data_type().to_string(),
        })
}

/// A value expression as an array of the batch's length.
/// Evaluates a value expression (column, literal, arithmetic, or a predicate) to an array
/// of the batch's length.
pub(crate) fn evaluate_value(expr: &Expr, batch: &RecordBatch) -> Result<ArrayRef> {
    value(expr, batch)
}

fn value(expr: &Expr, batch: &RecordBatch) -> Result<ArrayRef> {
    match expr {
        Expr::Arith { op, left, right } => arithmetic(*op, left, right, batch),
        Expr::Column(name) => column(batch, name),
        Expr::Call { function, args } => {
            let args = args
                .iter()
                .map(|a| value(a, batch))
                .collect::<Result<Vec<_>>>()?;
            function.evaluate(&args, batch.num_rows(), &expr.to_string())
        }
        Expr::Literal(Scalar::Null) => Ok(new_null_array(&ArrowType::Null, batch.num_rows())),
        Expr::Literal(v) => {
            let ty = v
                .data_type()
                .map(|t| t.to_arrow())
                .unwrap_or(ArrowType::Null);
            v.to_array(&ty, batch.num_rows())
                .map_err(|reason| Error::TypeMismatch {
                    column: v.to_string(),
                    expected: ty.to_string(),
                    found: reason.to_string(),
                })
        }
        predicate => Ok(Arc::new(evaluate_predicate(predicate, batch)?)),
    }
}

fn arithmetic(op: ArithOp, left: &Expr, right: &Expr, batch: &RecordBatch) -> Result<ArrayRef> {
    let (l, r) = (value(left, batch)?, value(right, batch)?);
    let context = || format!("computing {left} {op:?} {right}");
    let (l, r) = in_one_type(l, r).map_err(Error::arrow(context()))?;
    use arrow::compute::kernels::numeric;
    let result = match op {
        ArithOp::Add => numeric::add(&l, &r),
        ArithOp::Sub => numeric::sub(&l, &r),
        ArithOp::Mul => numeric::mul(&l, &r),
        ArithOp::Div => numeric::div(&l, &r),
    };
    result.map_err(Error::arrow(context()))
}

fn compare(op: CmpOp, left: &Expr, right: &Expr, batch: &RecordBatch) -> Result<BooleanArray> {
    let rows = batch.num_rows();
    if let (Expr::Literal(a), Expr::Literal(b)) = (left, right) {
        let result = a.compare(b).map(|o| match op {
            CmpOp::Eq => o.is_eq(),
            CmpOp::NotEq => o.is_ne(),
            CmpOp::Lt => o.is_lt(),
            CmpOp::LtEq => o.is_le(),
            CmpOp::Gt => o.is_gt(),
            CmpOp::GtEq => o.is_ge(),
        });
        return Ok(match result {
            Some(b) => BooleanArray::from(vec![b; rows]),
            None => BooleanArray::new_null(rows),
        });
    }
    let l = value(left, batch)?;
    let context = || format!("comparing {left} with {right}");
    let result = match right {
        Expr::Literal(Scalar::Null) => return Ok(BooleanArray::new_null(rows)),
        Expr::Literal(v) => {
            let scalar = v
                .to_array(l.data_type(), 1)
                .map_err(|reason| Error::TypeMismatch {
                    column: left.to_string(),
                    expected: l.data_type().to_string(),
                    found: reason.to_string(),
                })?;
            let r = arrow::array::Scalar::new(scalar);
            apply(op, &l, &r)
        }
        other => {
            let r = value(other, batch)?;
            in_one_type(l, r).and_then(|(l, r)| apply(op, &l, &r))
        }
    };
    result.map_err(|e| Error::Arrow {
        context: context(),
        source: e,
    })
}

/// Both sides in one type: the wider, as binding decided (the same type stays).
fn in_one_type(
    l: ArrayRef,
    r: ArrayRef,
) -> std::result::Result<(ArrayRef, ArrayRef), arrow_schema::ArrowError> {
    let ty = match (l.data_type(), r.data_type()) {
        (a, b) if a == b => return Ok((l, r)),
        (ArrowType::Null, b) => b.clone(),
        (a, ArrowType::Null) => a.clone(),
        (ArrowType::Float64, _)
        | (_, ArrowType::Float64)
        | (ArrowType::Float32, _)
        | (_, ArrowType::Float32) => ArrowType::Float64,
        (a, b) if a.primitive_width() >= b.primitive_width() => a.clone(),
        (_, b) => b.clone(),
    };
    let cast = |a: &ArrayRef| arrow::compute::cast(a, &ty);
    Ok((cast(&l)?, cast(&r)?))
}

fn apply(
    op: CmpOp,
    l: &dyn arrow::array::Datum,
    r: &dyn arrow::array::Datum,
) -> std::result::Result<BooleanArray, arrow_schema::ArrowError> {
    match op {
        CmpOp::Eq => cmp::eq(l, r),
        CmpOp::NotEq => cmp::neq(l, r),
        CmpOp::Lt => cmp::lt(l, r),
        CmpOp::LtEq => cmp::lt_eq(l, r),
        CmpOp::Gt => cmp::gt(l, r),
        CmpOp::GtEq => cmp::gt_eq(l, r),
    }
}

/// A (possibly nested) column of the batch.
fn column(batch: &RecordBatch, name: &ColumnName) -> Result<ArrayRef> {
    let missing = || Error::UnknownColumn {
        column: name.to_string(),
        available: batch
            .schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect(),
    };
    let mut path = name.path().iter();
    let root = path.next().ok_or_else(missing)?;
    let mut array = batch.column_by_name(root).cloned().ok_or_else(missing)?;
    for segment in path {
        let s = array.as_struct_opt().ok_or_else(missing)?;
        let child = s.column_by_name(segment).cloned().ok_or_else(missing)?;
        // A null struct makes its children null too.
        array = match s.nulls() {
            Some(nulls) if s.null_count() > 0 => {
                let merged = arrow::buffer::NullBuffer::union(Some(nulls), child.nulls());
                arrow::array::make_array(
                    child
                        .to_data()
                        .into_builder()
                        .nulls(merged)
                        .build()
                        .map_err(Error::arrow(format!("reading nested column {name}")))?,
                )
            }
            _ => child,
        };
    }
    Ok(array)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::{col, lit};
    use arrow::array::{Int64Array, StringArray};
    use arrow::datatypes::{Field, Schema};

    fn batch() -> RecordBatch {
        RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("id", ArrowType::Int64, true),
                Field::new("name", ArrowType::Utf8, true),
            ])),
            vec![
                Arc::new(Int64Array::from(vec![Some(1), Some(2), None, Some(4)])),
                Arc::new(StringArray::from(vec![
                    Some("a"),
                    None,
                    Some("c"),
                    Some("d"),
                ])),
            ],
        )
        .unwrap()
    }

    fn eval(e: Expr) -> Vec<Option<bool>> {
        evaluate_predicate(&e, &batch()).unwrap().iter().collect()
    }

    #[test]
    fn comparisons_follow_sql_null_semantics() {
        assert_eq!(
            eval(col("id").gt(lit(1i64))),
            vec![Some(false), Some(true), None, Some(true)]
        );
        assert_eq!(
            eval(col("id").gt(lit(1i64)).or(col("name").eq(lit("a")))),
            vec![Some(true), Some(true), None, Some(true)]
        );
        assert_eq!(
            eval(col("name").is_null()),
            vec![Some(false), Some(true), Some(false), Some(false)]
        );
        assert_eq!(
            eval(col("id").is_in([1i64, 4])),
            vec![Some(true), Some(false), None, Some(true)]
        );
        assert_eq!(
            eval(col("id").not_in([1i64]).and(col("id").lt_eq(lit(2i64)))),
            vec![Some(false), Some(true), None, Some(false)]
        );
        assert_eq!(eval(col("id").eq(lit(Scalar::Null))), vec![None; 4]);
    }

    #[test]
    fn arithmetic_is_checked_and_widens() {
        let schema =
            crate::protocol::StructType::try_from_arrow(batch().schema().as_ref()).unwrap();
        let e = (col("id") * lit(2) + lit(1)).bind(&schema);
        assert!(
            matches!(e, Err(Error::TypeMismatch { .. })),
            "a number is not a predicate"
        );
        let value = (col("id") * lit(2) + lit(1))
            .gt(lit(4))
            .bind(&schema)
            .unwrap();
        assert_eq!(
            evaluate_predicate(&value, &batch())
                .unwrap()
                .iter()
                .collect::<Vec<_>>(),
            vec![Some(false), Some(true), None, Some(true)]
        );
        let doubled = evaluate_value(&(col("id") + lit(0.5)), &batch()).unwrap();
        assert_eq!(doubled.data_type(), &ArrowType::Float64);
        let err = evaluate_value(&(col("id") / lit(0i64)), &batch()).unwrap_err();
        assert!(matches!(err, Error::Arrow { .. }), "{err}");
        let err = (col("name") + lit(1)).gt(lit(1)).bind(&schema).unwrap_err();
        assert!(matches!(err, Error::TypeMismatch { .. }), "{err}");
    }
}
