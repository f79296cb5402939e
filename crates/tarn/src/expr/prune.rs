//! Skipping data from statistics: can a file or row group hold a row matching a predicate?

use std::cmp::Ordering;

use super::{CmpOp, ColumnName, Expr, Scalar};

/// Statistics of one container (a file, a row group): per-column bounds and null counts.
/// Any answer may be `None` (unknown); bounds are inclusive and may be loose.
pub(crate) trait StatsView {
    /// A lower bound of the column's non-null values.
    fn min(&self, column: &ColumnName) -> Option<Scalar>;
    /// An upper bound of the column's non-null values.
    fn max(&self, column: &ColumnName) -> Option<Scalar>;
    /// How many values of the column are null.
    fn null_count(&self, column: &ColumnName) -> Option<u64>;
    /// How many rows the container holds.
    fn row_count(&self) -> Option<u64>;

    /// Whether every value of the column is null (a null partition value, or as many
    /// nulls as rows).
    fn all_null(&self, column: &ColumnName) -> bool {
        matches!((self.null_count(column), self.row_count()), (Some(n), Some(rows)) if n == rows)
    }
}

/// Whether the container may hold a row for which the bound predicate is true. `false`
/// means it certainly holds none, so it can be skipped.
pub(crate) fn may_match(expr: &Expr, stats: &dyn StatsView) -> bool {
    match expr {
        Expr::Literal(Scalar::Boolean(b)) => *b,
        Expr::Literal(_) => false,
        Expr::Arith { .. } | Expr::Call { .. } => true,
        Expr::Column(c) => may_compare(c, CmpOp::Eq, &Scalar::Boolean(true), stats),
        Expr::And(a, b) => may_match(a, stats) && may_match(b, stats),
        Expr::Or(a, b) => may_match(a, stats) || may_match(b, stats),
        Expr::Not(e) => may_match_negated(e, stats),
        Expr::Cmp { op, left, right } => match (left.as_ref(), right.as_ref()) {
            (Expr::Column(c), Expr::Literal(v)) => may_compare(c, *op, v, stats),
            (Expr::Literal(v), Expr::Column(c)) => may_compare(c, op.flip(), v, stats),
            _ => true,
        },
        Expr::IsNull(e) => match e.as_ref() {
            Expr::Column(c) => stats.null_count(c) != Some(0),
            _ => true,
        },
        Expr::IsNotNull(e) => match e.as_ref() {
            Expr::Column(c) => !all_null(c, stats),
            _ => true,
        },
        Expr::InList {
            expr,
            list,
            negated,
        } => match (expr.as_ref(), negated) {
            (Expr::Column(c), false) => list.iter().any(|v| may_compare(c, CmpOp::Eq, v, stats)),
            (Expr::Column(c), true) => {
                // NOT IN matches nothing when a null is listed, or when every value of
                // the column equals one listed value.
                !list.iter().any(Scalar::is_null)
                    && list.iter().all(|v| may_compare(c, CmpOp::NotEq, v, stats))
            }
            _ => true,
        },
        // Statistics say nothing of words.
        Expr::TextMatch { .. } => true,
    }
}

/// Whether the container may hold a row for which the predicate is false (so `NOT e` is
/// true).
fn may_match_negated(expr: &Expr, stats: &dyn StatsView) -> bool {
    match expr {
        Expr::Literal(Scalar::Boolean(b)) => !*b,
        Expr::Literal(_) => false,
        Expr::Arith { .. } | Expr::Call { .. } => true,
        Expr::Column(c) => may_compare(c, CmpOp::Eq, &Scalar::Boolean(false), stats),
        Expr::Not(e) => may_match(e, stats),
        Expr::And(a, b) => may_match_negated(a, stats) || may_match_negated(b, stats),
        Expr::Or(a, b) => may_match_negated(a, stats) && may_match_negated(b, stats),
        Expr::Cmp { op, left, right } => may_match(
            &Expr::Cmp {
                op: op.negate(),
                left: left.clone(),
                right: right.clone(),
            },
            stats,
        ),
        Expr::IsNull(e) => may_match(&Expr::IsNotNull(e.clone()), stats),
        Expr::IsNotNull(e) => may_match(&Expr::IsNull(e.clone()), stats),
        Expr::InList {
            expr,
            list,
            negated,
        } => may_match(
            &Expr::InList {
                expr: expr.clone(),
                list: list.clone(),
                negated: !negated,
            },
            stats,
        ),
        Expr::TextMatch { .. } => true,
    }
}

fn all_null(c: &ColumnName, stats: &dyn StatsView) -> bool {
    stats.all_null(c)
}

fn may_compare(c: &ColumnName, op: CmpOp, v: &Scalar, stats: &dyn StatsView) -> bool {
    if v.is_null() {
        // A comparison with null is never true.
        return false;
    }
    if all_null(c, stats) {
        return false;
    }
    let min = stats.min(c).filter(|m| !m.is_null());
    let max = stats.max(c).filter(|m| !m.is_null()).map(widen_max);
    let cmp = |bound: &Option<Scalar>| bound.as_ref().and_then(|b| b.compare(v));
    let (vs_min, vs_max) = (cmp(&min), cmp(&max));
    // A truncated string maximum is a prefix of the true maximum: values extending it may
    // lie above it.
    let max_may_be_truncated_below = matches!((&max, v), (Some(Scalar::String(m)), Scalar::String(s)) if s.starts_with(m.as_str()));
    let above_max = vs_max == Some(Ordering::Less) && !max_may_be_truncated_below;
    let at_or_above_max =
        matches!(vs_max, Some(Ordering::Less | Ordering::Equal)) && !max_may_be_truncated_below;
    // Statistics leave NaN out, and rows compare in IEEE total order, where NaN lies above
    // +inf (or, negative, below -inf): a file's NaN rows may meet any ordering or `<>`,
    // so only an equality with a number can skip a file of floats.
    if matches!(v, Scalar::Float(_) | Scalar::Double(_)) && op != CmpOp::Eq {
        return true;
    }
    match op {
        CmpOp::Eq => !(vs_min == Some(Ordering::Greater) || above_max),
        // Skippable only when every value equals v: min = max = v, and the maximum is not
        // a prefix of longer values.
        CmpOp::NotEq => {
            !(vs_min == Some(Ordering::Equal)
                && vs_max == Some(Ordering::Equal)
                && !max_may_be_truncated_below)
        }
        CmpOp::Lt => !matches!(vs_min, Some(Ordering::Greater | Ordering::Equal)),
        CmpOp::LtEq => vs_min != Some(Ordering::Greater),
        CmpOp::Gt => !at_or_above_max,
        CmpOp::GtEq => !above_max,
    }
}

/// Spark writes timestamp statistics truncated to milliseconds, so a maximum stands for
/// anything up to the end of its millisecond.
fn widen_max(max: Scalar) -> Scalar {
    match max {
        Scalar::Timestamp(us) => Scalar::Timestamp(us.saturating_add(999)),
        Scalar::TimestampNtz(us) => Scalar::TimestampNtz(us.saturating_add(999)),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::{col, lit};

    struct Stats {
        min: Scalar,
        max: Scalar,
        nulls: u64,
        rows: u64,
    }

    impl StatsView for Stats {
        fn min(&self, _: &ColumnName) -> Option<Scalar> {
            Some(self.min.clone())
        }
        fn max(&self, _: &ColumnName) -> Option<Scalar> {
            Some(self.max.clone())
        }
        fn null_count(&self, _: &ColumnName) -> Option<u64> {
            Some(self.nulls)
        }
        fn row_count(&self) -> Option<u64> {
            Some(self.rows)
        }
    }

    fn range(min: i64, max: i64) -> Stats {
        Stats {
            min: Scalar::Long(min),
            max: Scalar::Long(max),
            nulls: 0,
            rows: 10,
        }
    }

    #[test]
    fn comparisons_skip_outside_the_bounds() {
        let s = range(10, 20);
        let m = |e: Expr| may_match(&e, &s);
        assert!(!m(col("x").eq(lit(9i64))));
        assert!(m(col("x").eq(lit(10i64))));
        assert!(!m(col("x").gt(lit(20i64))));
        assert!(m(col("x").gt_eq(lit(20i64))));
        assert!(!m(col("x").lt(lit(10i64))));
        assert!(m(col("x").lt(lit(11i64))));
        assert!(!m(col("x").lt_eq(lit(9i64))));
        assert!(m(col("x").lt_eq(lit(10i64))));
        assert!(m(col("x").gt(lit(19i64))));
        assert!(!m(col("x").gt_eq(lit(21i64))));
        assert!(!m(col("x").is_in([1i64, 30])));
        assert!(m(col("x").is_in([1i64, 15])));
        assert!(!m(col("x").is_null()));
        assert!(m(col("x").is_not_null()));
        assert!(!m(col("x").gt(lit(5i64)).not()));
        assert!(m(col("x").gt(lit(15i64)).not()));
        assert!(!m(col("x").eq(lit(1i64)).or(col("x").eq(lit(50i64)))));
        assert!(!m(col("x").eq(lit(15i64)).and(col("x").eq(lit(50i64)))));
        assert!(!may_match(&col("x").not_eq(lit(5i64)), &range(5, 5)));
        assert!(!may_match(&col("x").not_in([5i64]), &range(5, 5)));
        assert!(!m(col("x").eq(lit(Scalar::Null))));
    }

    #[test]
    fn all_null_containers_match_only_is_null() {
        let s = Stats {
            min: Scalar::Null,
            max: Scalar::Null,
            nulls: 10,
            rows: 10,
        };
        assert!(!may_match(&col("x").eq(lit(1i64)), &s));
        assert!(!may_match(&col("x").is_not_null(), &s));
        assert!(may_match(&col("x").is_null(), &s));
    }

    #[test]
    fn truncated_bounds_stay_safe() {
        let s = Stats {
            min: Scalar::from("abc"),
            max: Scalar::from("abc"),
            nulls: 0,
            rows: 1,
        };
        // "abcd" > "abc", but the true maximum may be "abcz...".
        assert!(may_match(&col("x").eq(lit("abcd")), &s));
        assert!(!may_match(&col("x").eq(lit("abd")), &s));
        // min = max = "abc" may stand for longer values, which are not "abc".
        assert!(may_match(&col("x").not_eq(lit("abc")), &s));
        assert!(may_match(&col("x").not_in(["abc"]), &s));
        let t = Stats {
            min: Scalar::Timestamp(1_000),
            max: Scalar::Timestamp(1_000),
            nulls: 0,
            rows: 1,
        };
        assert!(may_match(&col("t").eq(lit(Scalar::Timestamp(1_500))), &t));
        assert!(!may_match(&col("t").eq(lit(Scalar::Timestamp(2_000))), &t));
    }

    #[test]
    fn floats_skip_only_on_equality_since_statistics_leave_nan_out() {
        let s = Stats {
            min: Scalar::Double(1.0),
            max: Scalar::Double(5.0),
            nulls: 0,
            rows: 10,
        };
        let m = |e: Expr| may_match(&e, &s);
        // A NaN row is above every number (a negative NaN below): it meets each of these.
        assert!(m(col("f").gt(lit(5.0f64))));
        assert!(m(col("f").gt_eq(lit(6.0f64))));
        assert!(m(col("f").lt(lit(1.0f64))));
        assert!(m(col("f").lt_eq(lit(0.0f64))));
        assert!(m(col("f").gt(lit(5.0f64)).not()));
        let one = Stats {
            min: Scalar::Double(5.0),
            max: Scalar::Double(5.0),
            nulls: 0,
            rows: 10,
        };
        assert!(may_match(&col("f").not_eq(lit(5.0f64)), &one));
        // NaN equals no number.
        assert!(!m(col("f").eq(lit(6.0f64))));
        assert!(!m(col("f").eq(lit(0.5f64))));
        assert!(m(col("f").eq(lit(3.0f64))));
    }
}
