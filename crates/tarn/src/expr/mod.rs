//! Predicates: a small expression type, checked against a schema, evaluated on Arrow
//! batches, and used to skip files and row groups from their statistics.
//!
//! ```
//! use tarn::expr::{col, lit};
//! let p = col("country").eq(lit("NL")).and(col("amount").gt(lit(100)).or(col("vip").is_not_null()));
//! assert_eq!(p.to_string(), "((country = \"NL\") AND ((amount > 100) OR (vip IS NOT NULL)))");
//! ```

mod eval;
mod functions;
mod prune;
mod scalar;
mod sql;
mod types;

use std::collections::BTreeSet;
use std::fmt;

pub(crate) use eval::{evaluate_predicate, evaluate_value};
pub use functions::Function;
pub(crate) use prune::{StatsView, may_match};
pub use scalar::{Scalar, ValueError};
pub use sql::parse_sql;
pub use tarn_index::fts::TextQuery;
pub(crate) use types::{arithmetic_type, resolve_column};

use tarn_index::fts::FullTextOptions;

use crate::error::{Error, Result};
use crate::protocol::{DataType, PrimitiveType, StructType};
use types::{coerce_operand, describe};

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum CmpOp {
    /// `=`
    Eq,
    /// `!=`
    NotEq,
    /// `<`
    Lt,
    /// `<=`
    LtEq,
    /// `>`
    Gt,
    /// `>=`
    GtEq,
}

impl CmpOp {
    /// The operator with its operands swapped: `a < b` is `b > a`.
    pub fn flip(self) -> Self {
        match self {
            Self::Lt => Self::Gt,
            Self::LtEq => Self::GtEq,
            Self::Gt => Self::Lt,
            Self::GtEq => Self::LtEq,
            other => other,
        }
    }

    /// The operator's negation for non-null operands: `NOT (a < b)` is `a >= b`.
    pub fn negate(self) -> Self {
        match self {
            Self::Eq => Self::NotEq,
            Self::NotEq => Self::Eq,
            Self::Lt => Self::GtEq,
            Self::LtEq => Self::Gt,
            Self::Gt => Self::LtEq,
            Self::GtEq => Self::Lt,
        }
    }

    fn symbol(self) -> &'static str {
        match self {
            Self::Eq => "=",
            Self::NotEq => "!=",
            Self::Lt => "<",
            Self::LtEq => "<=",
            Self::Gt => ">",
            Self::GtEq => ">=",
        }
    }
}

/// An arithmetic operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum ArithOp {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Div,
}

impl ArithOp {
    fn symbol(self) -> &'static str {
        match self {
            Self::Add => "+",
            Self::Sub => "-",
            Self::Mul => "*",
            Self::Div => "/",
        }
    }
}

/// A column reference: a top-level column, or a path into nested structs.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct ColumnName(Vec<String>);

impl ColumnName {
    /// A column by path: `["address", "city"]`.
    pub fn new(path: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self(path.into_iter().map(Into::into).collect())
    }

    /// The path segments.
    pub fn path(&self) -> &[String] {
        &self.0
    }

    /// The top-level column this path starts at.
    pub fn root(&self) -> &str {
        self.0.first().map(String::as_str).unwrap_or_default()
    }
}

impl fmt::Display for ColumnName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.join("."))
    }
}

/// A predicate or value expression.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Expr {
    /// A column's value.
    Column(ColumnName),
    /// A constant.
    Literal(Scalar),
    /// `left op right`.
    Cmp {
        /// The operator.
        op: CmpOp,
        /// Left operand.
        left: Box<Expr>,
        /// Right operand.
        right: Box<Expr>,
    },
    /// Both hold (SQL three-valued logic).
    And(Box<Expr>, Box<Expr>),
    /// Either holds.
    Or(Box<Expr>, Box<Expr>),
    /// Negation.
    Not(Box<Expr>),
    /// The operand is null.
    IsNull(Box<Expr>),
    /// The operand is not null.
    IsNotNull(Box<Expr>),
    /// `left op right` on numbers (checked: overflow and division by zero are errors).
    Arith {
        /// The operator.
        op: ArithOp,
        /// Left operand.
        left: Box<Expr>,
        /// Right operand.
        right: Box<Expr>,
    },
    /// The operand equals one of the values (or none of them, when `negated`).
    InList {
        /// The operand.
        expr: Box<Expr>,
        /// The values.
        list: Vec<Scalar>,
        /// `NOT IN`.
        negated: bool,
    },
    /// A call of a SQL function (as stored generated columns and constraints use them).
    Call {
        /// The function.
        function: Function,
        /// Its arguments.
        args: Vec<Expr>,
    },
    /// A full-text match of a string column (see [`text_match`]). Binding against a
    /// snapshot sets `analyzer` to the column's full-text index's; without one the
    /// predicate is [`Error::TextMatchWithoutIndex`].
    TextMatch {
        /// The string column.
        column: ColumnName,
        /// The query, in [`TextQuery`]'s language.
        query: String,
        /// How the column's full-text index analyzes text, once resolved.
        analyzer: Option<FullTextOptions>,
    },
}

/// `text_match(column, query)`: rows whose `column` matches a full-text query (terms all
/// present, `"phrases"`, `OR`, `-excluded`, parentheses), answered by the column's
/// full-text index and, for rows no index segment covers, by the same analyzer on the
/// raw text.
pub fn text_match(column: impl Into<String>, query: impl Into<String>) -> Expr {
    Expr::TextMatch {
        column: ColumnName::new([column.into()]),
        query: query.into(),
        analyzer: None,
    }
}

/// A top-level column. Use [`Expr::Column`] with [`ColumnName::new`] for nested fields.
pub fn col(name: impl Into<String>) -> Expr {
    Expr::Column(ColumnName(vec![name.into()]))
}

/// A nested column by path: `nested_col(["address", "city"])`.
pub fn nested_col(path: impl IntoIterator<Item = impl Into<String>>) -> Expr {
    Expr::Column(ColumnName::new(path))
}

/// A literal.
pub fn lit(value: impl Into<Scalar>) -> Expr {
    Expr::Literal(value.into())
}

/// A column of the target table, in MERGE conditions and assignments.
pub fn target_col(name: impl Into<String>) -> Expr {
    nested_col(["target".to_string(), name.into()])
}

/// A column of the MERGE source, in MERGE conditions and assignments.
pub fn source_col(name: impl Into<String>) -> Expr {
    nested_col(["source".to_string(), name.into()])
}

macro_rules! arith_operator {
    ($trait:ident, $method:ident, $op:expr) => {
        impl std::ops::$trait for Expr {
            type Output = Expr;
            fn $method(self, other: Expr) -> Expr {
                Expr::Arith {
                    op: $op,
                    left: Box::new(self),
                    right: Box::new(other),
                }
            }
        }
    };
}

arith_operator!(Add, add, ArithOp::Add);
arith_operator!(Sub, sub, ArithOp::Sub);
arith_operator!(Mul, mul, ArithOp::Mul);
arith_operator!(Div, div, ArithOp::Div);

impl Expr {
    fn cmp(self, op: CmpOp, other: Expr) -> Expr {
        Expr::Cmp {
            op,
            left: Box::new(self),
            right: Box::new(other),
        }
    }

    /// `self = other`
    #[allow(clippy::should_implement_trait)]
    pub fn eq(self, other: Expr) -> Expr {
        self.cmp(CmpOp::Eq, other)
    }
    /// `self != other`
    pub fn not_eq(self, other: Expr) -> Expr {
        self.cmp(CmpOp::NotEq, other)
    }
    /// `self < other`
    pub fn lt(self, other: Expr) -> Expr {
        self.cmp(CmpOp::Lt, other)
    }
    /// `self <= other`
    pub fn lt_eq(self, other: Expr) -> Expr {
        self.cmp(CmpOp::LtEq, other)
    }
    /// `self > other`
    pub fn gt(self, other: Expr) -> Expr {
        self.cmp(CmpOp::Gt, other)
    }
    /// `self >= other`
    pub fn gt_eq(self, other: Expr) -> Expr {
        self.cmp(CmpOp::GtEq, other)
    }
    /// `self AND other`
    pub fn and(self, other: Expr) -> Expr {
        Expr::And(Box::new(self), Box::new(other))
    }
    /// `self OR other`
    pub fn or(self, other: Expr) -> Expr {
        Expr::Or(Box::new(self), Box::new(other))
    }
    /// `NOT self`
    #[allow(clippy::should_implement_trait)]
    pub fn not(self) -> Expr {
        Expr::Not(Box::new(self))
    }
    /// `self IS NULL`
    pub fn is_null(self) -> Expr {
        Expr::IsNull(Box::new(self))
    }
    /// `self IS NOT NULL`
    pub fn is_not_null(self) -> Expr {
        Expr::IsNotNull(Box::new(self))
    }
    /// `self IN (values)`
    pub fn is_in(self, values: impl IntoIterator<Item = impl Into<Scalar>>) -> Expr {
        Expr::InList {
            expr: Box::new(self),
            list: values.into_iter().map(Into::into).collect(),
            negated: false,
        }
    }
    /// `self NOT IN (values)`
    pub fn not_in(self, values: impl IntoIterator<Item = impl Into<Scalar>>) -> Expr {
        Expr::InList {
            expr: Box::new(self),
            list: values.into_iter().map(Into::into).collect(),
            negated: true,
        }
    }

    /// The columns the expression reads.
    pub fn columns(&self) -> BTreeSet<ColumnName> {
        let mut out = BTreeSet::new();
        self.collect_columns(&mut out);
        out
    }

    fn collect_columns(&self, out: &mut BTreeSet<ColumnName>) {
        match self {
            Expr::Column(c) => {
                out.insert(c.clone());
            }
            Expr::Literal(_) => {}
            Expr::Cmp { left, right, .. }
            | Expr::Arith { left, right, .. }
            | Expr::And(left, right)
            | Expr::Or(left, right) => {
                left.collect_columns(out);
                right.collect_columns(out);
            }
            Expr::Not(e) | Expr::IsNull(e) | Expr::IsNotNull(e) => e.collect_columns(out),
            Expr::InList { expr, .. } => expr.collect_columns(out),
            Expr::Call { args, .. } => args.iter().for_each(|a| a.collect_columns(out)),
            Expr::TextMatch { column, .. } => {
                out.insert(column.clone());
            }
        }
    }

    /// Checks the expression against a schema and returns it with every literal converted
    /// to the type of the column it meets, and `literal op column` turned into
    /// `column op' literal`.
    ///
    /// Fails with [`Error::UnknownColumn`] for a column the schema lacks, and with
    /// [`Error::TypeMismatch`] for a literal that does not fit its column, comparisons of
    /// columns of different types, or a non-boolean operand of AND/OR/NOT.
    pub fn bind(&self, schema: &StructType) -> Result<Expr> {
        let (bound, ty) = self.bind_inner(schema)?;
        if !matches!(ty, Some(PrimitiveType::Boolean) | None) {
            return Err(Error::TypeMismatch {
                column: self.to_string(),
                expected: "a boolean predicate".into(),
                found: describe(ty),
            });
        }
        Ok(bound)
    }

    /// Checks a value expression (a column, literal or arithmetic) against a schema and
    /// returns it bound, with its type (`None` for a null literal).
    pub(crate) fn bind_value(&self, schema: &StructType) -> Result<(Expr, Option<PrimitiveType>)> {
        self.bind_inner(schema)
    }

    /// Binds and returns the expression's primitive type (`None` for a null literal).
    // Long by design: one arm per expression kind, the typing rules side by side.
    fn bind_inner(&self, schema: &StructType) -> Result<(Expr, Option<PrimitiveType>)> {
        use PrimitiveType as P;
        match self {
            Expr::Column(name) => {
                let ty = resolve_column(schema, name)?;
                let prim = ty.as_primitive().ok_or_else(|| Error::TypeMismatch {
                    column: name.to_string(),
                    expected: "a column of a primitive type".into(),
                    found: ty.to_string(),
                })?;
                Ok((self.clone(), Some(prim)))
            }
            Expr::Literal(v) => Ok((self.clone(), v.data_type())),
            Expr::Cmp { op, left, right } => {
                let (mut l, mut lt) = left.bind_inner(schema)?;
                let (mut r, mut rt) = right.bind_inner(schema)?;
                let mut op = *op;
                if matches!(l, Expr::Literal(_)) && !matches!(r, Expr::Literal(_)) {
                    std::mem::swap(&mut l, &mut r);
                    std::mem::swap(&mut lt, &mut rt);
                    op = op.flip();
                }
                // Numbers of different types compare in the wider one, as in Spark.
                let numbers =
                    !matches!(r, Expr::Literal(_)) && lt != rt && arithmetic_type(lt, rt).is_some();
                let r = match numbers {
                    true => r,
                    false => coerce_operand(&l, lt, r, rt)?,
                };
                Ok((r_cmp(op, l, r), Some(P::Boolean)))
            }
            Expr::Arith { op, left, right } => {
                let (mut l, mut lt) = left.bind_inner(schema)?;
                let (mut r, mut rt) = right.bind_inner(schema)?;
                // A literal takes the type of the other side.
                if matches!(l, Expr::Literal(_)) && !matches!(r, Expr::Literal(_)) {
                    l = coerce_operand(&r, rt, l, lt)?;
                    lt = rt;
                } else if matches!(r, Expr::Literal(_)) {
                    r = coerce_operand(&l, lt, r, rt)?;
                    rt = lt;
                }
                // Two columns of different numbers meet in the wider type, as in Spark.
                let ty = arithmetic_type(lt, rt).ok_or_else(|| Error::TypeMismatch {
                    column: self.to_string(),
                    expected: "numbers of one kind".into(),
                    found: format!("{} and {}", describe(lt), describe(rt)),
                })?;
                let e = Expr::Arith {
                    op: *op,
                    left: Box::new(l),
                    right: Box::new(r),
                };
                Ok((e, Some(ty)))
            }
            Expr::And(a, b) | Expr::Or(a, b) => {
                let a = a.bind(schema)?;
                let b = b.bind(schema)?;
                let e = if matches!(self, Expr::And(..)) {
                    a.and(b)
                } else {
                    a.or(b)
                };
                Ok((e, Some(P::Boolean)))
            }
            Expr::Not(e) => Ok((e.bind(schema)?.not(), Some(P::Boolean))),
            Expr::IsNull(e) | Expr::IsNotNull(e) => {
                let (inner, _) = match e.as_ref() {
                    // IS NULL applies to any column, nested types included.
                    Expr::Column(name) => {
                        resolve_column(schema, name)?;
                        (e.as_ref().clone(), None)
                    }
                    other => other.bind_inner(schema)?,
                };
                let inner = Box::new(inner);
                let e = if matches!(self, Expr::IsNull(_)) {
                    Expr::IsNull(inner)
                } else {
                    Expr::IsNotNull(inner)
                };
                Ok((e, Some(P::Boolean)))
            }
            Expr::InList {
                expr,
                list,
                negated,
            } => {
                let (e, ty) = expr.bind_inner(schema)?;
                let list = list
                    .iter()
                    .map(|v| match ty {
                        Some(t) => v.coerce_to(t).ok_or_else(|| Error::TypeMismatch {
                            column: e.to_string(),
                            expected: t.to_string(),
                            found: format!("{v} ({})", describe(v.data_type())),
                        }),
                        None => Ok(v.clone()),
                    })
                    .collect::<Result<Vec<_>>>()?;
                Ok((
                    Expr::InList {
                        expr: Box::new(e),
                        list,
                        negated: *negated,
                    },
                    Some(P::Boolean),
                ))
            }
            Expr::Call { function, args } => {
                let mut bound = Vec::with_capacity(args.len());
                let mut types: Vec<Option<PrimitiveType>> = Vec::with_capacity(args.len());
                for arg in args {
                    let (e, t) = arg.bind_inner(schema)?;
                    // Literals take the type of the first typed argument (coalesce).
                    let e = match (*function, &e) {
                        (Function::Coalesce, Expr::Literal(_)) => {
                            let first = types.iter().flatten().next().copied();
                            coerce_operand(self, first, e, t)?
                        }
                        _ => e,
                    };
                    types.push(match &e {
                        Expr::Literal(v) => v.data_type(),
                        _ => t,
                    });
                    bound.push(e);
                }
                let ty = function.result_type(&types, &self.to_string())?;
                let args = bound;
                Ok((
                    Expr::Call {
                        function: *function,
                        args,
                    },
                    ty,
                ))
            }
            Expr::TextMatch { column, query, .. } => {
                let ty = resolve_column(schema, column)?;
                if ty != &DataType::Primitive(P::String) {
                    return Err(Error::TypeMismatch {
                        column: column.to_string(),
                        expected: "a string column for text_match".into(),
                        found: ty.to_string(),
                    });
                }
                TextQuery::parse(query).map_err(|e| Error::InvalidArgument {
                    name: "text_match",
                    reason: e.to_string(),
                })?;
                Ok((self.clone(), Some(P::Boolean)))
            }
        }
    }

    /// The expression with every `text_match` given the analyzer of its column's
    /// full-text index, as `analyzer_of` finds it.
    ///
    /// Fails with [`Error::TextMatchWithoutIndex`] for a column without one.
    pub(crate) fn resolve_text_matches(
        &self,
        analyzer_of: &dyn Fn(&ColumnName) -> Option<FullTextOptions>,
    ) -> Result<Expr> {
        let r = |e: &Expr| e.resolve_text_matches(analyzer_of).map(Box::new);
        Ok(match self {
            Expr::TextMatch { column, query, .. } => Expr::TextMatch {
                column: column.clone(),
                query: query.clone(),
                analyzer: Some(analyzer_of(column).ok_or_else(|| {
                    Error::TextMatchWithoutIndex {
                        column: column.to_string(),
                    }
                })?),
            },
            Expr::Cmp { op, left, right } => Expr::Cmp {
                op: *op,
                left: r(left)?,
                right: r(right)?,
            },
            Expr::Arith { op, left, right } => Expr::Arith {
                op: *op,
                left: r(left)?,
                right: r(right)?,
            },
            Expr::And(a, b) => Expr::And(r(a)?, r(b)?),
            Expr::Or(a, b) => Expr::Or(r(a)?, r(b)?),
            Expr::Not(e) => Expr::Not(r(e)?),
            Expr::IsNull(e) => Expr::IsNull(r(e)?),
            Expr::IsNotNull(e) => Expr::IsNotNull(r(e)?),
            Expr::InList {
                expr,
                list,
                negated,
            } => Expr::InList {
                expr: r(expr)?,
                list: list.clone(),
                negated: *negated,
            },
            Expr::Call { function, args } => Expr::Call {
                function: *function,
                args: args
                    .iter()
                    .map(|a| a.resolve_text_matches(analyzer_of))
                    .collect::<Result<_>>()?,
            },
            Expr::Column(_) | Expr::Literal(_) => self.clone(),
        })
    }

    /// Whether the expression holds a `text_match`.
    pub(crate) fn has_text_match(&self) -> bool {
        match self {
            Expr::TextMatch { .. } => true,
            Expr::Cmp { left, right, .. }
            | Expr::Arith { left, right, .. }
            | Expr::And(left, right)
            | Expr::Or(left, right) => left.has_text_match() || right.has_text_match(),
            Expr::Not(e) | Expr::IsNull(e) | Expr::IsNotNull(e) => e.has_text_match(),
            Expr::InList { expr, .. } => expr.has_text_match(),
            Expr::Call { args, .. } => args.iter().any(Expr::has_text_match),
            Expr::Column(_) | Expr::Literal(_) => false,
        }
    }
}

fn r_cmp(op: CmpOp, left: Expr, right: Expr) -> Expr {
    Expr::Cmp {
        op,
        left: Box::new(left),
        right: Box::new(right),
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Column(c) => write!(f, "{c}"),
            Expr::Literal(v) => write!(f, "{v}"),
            Expr::Cmp { op, left, right } => write!(f, "({left} {} {right})", op.symbol()),
            Expr::Arith { op, left, right } => write!(f, "({left} {} {right})", op.symbol()),
            Expr::And(a, b) => write!(f, "({a} AND {b})"),
            Expr::Or(a, b) => write!(f, "({a} OR {b})"),
            Expr::Not(e) => write!(f, "(NOT {e})"),
            Expr::IsNull(e) => write!(f, "({e} IS NULL)"),
            Expr::IsNotNull(e) => write!(f, "({e} IS NOT NULL)"),
            Expr::InList {
                expr,
                list,
                negated,
            } => {
                let values: Vec<String> = list.iter().map(ToString::to_string).collect();
                let not = if *negated { "NOT " } else { "" };
                write!(f, "({expr} {not}IN ({}))", values.join(", "))
            }
            Expr::TextMatch { column, query, .. } => {
                write!(f, "text_match({column}, {query:?})")
            }
            Expr::Call {
                function: Function::Cast(to),
                args,
            } => write!(f, "CAST({} AS {to})", args[0]),
            Expr::Call {
                function: Function::Divide,
                args,
            } => write!(f, "({} / {})", args[0], args[1]),
            Expr::Call { function, args } => {
                let args: Vec<String> = args.iter().map(ToString::to_string).collect();
                write!(f, "{function}({})", args.join(", "))
            }
        }
    }
}

#[cfg(test)]
mod tests;
