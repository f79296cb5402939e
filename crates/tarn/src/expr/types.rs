//! Typing expressions: the type arithmetic gives, literals converted to the type of the
//! operand they meet, and the types of column paths.

use super::{ColumnName, Expr};
use crate::error::{Error, Result};
use crate::protocol::{DataType, PrimitiveType, StructType};

/// The type of `a op b`: integers widen to the wider one, any float gives a double,
/// decimals only meet decimals of the same type.
pub(crate) fn arithmetic_type(
    a: Option<PrimitiveType>,
    b: Option<PrimitiveType>,
) -> Option<PrimitiveType> {
    use PrimitiveType as P;
    let rank = |t: PrimitiveType| match t {
        P::Byte => Some(1),
        P::Short => Some(2),
        P::Integer => Some(3),
        P::Long => Some(4),
        P::Float => Some(5),
        P::Double => Some(6),
        _ => None,
    };
    match (a?, b?) {
        (P::Decimal(p1, s1), P::Decimal(p2, s2)) if (p1, s1) == (p2, s2) => {
            Some(P::Decimal(p1, s1))
        }
        (x, y) => {
            let (rx, ry) = (rank(x)?, rank(y)?);
            Some(match rx.max(ry) {
                5 | 6 if rx.min(ry) < 5 || rx.max(ry) == 6 => P::Double,
                5 => P::Float,
                _ if rx >= ry => x,
                _ => y,
            })
        }
    }
}

/// Converts the right operand to the left one's type where it is a literal.
pub(super) fn coerce_operand(
    left: &Expr,
    lt: Option<PrimitiveType>,
    right: Expr,
    rt: Option<PrimitiveType>,
) -> Result<Expr> {
    match (lt, rt, &right) {
        (Some(l), Some(r), _) if l == r => Ok(right),
        (_, None, _) | (None, _, _) => Ok(right),
        (Some(l), Some(r), Expr::Literal(v)) => {
            v.coerce_to(l)
                .map(Expr::Literal)
                .ok_or_else(|| Error::TypeMismatch {
                    column: left.to_string(),
                    expected: l.to_string(),
                    found: format!("{v} ({r})"),
                })
        }
        (Some(l), Some(r), _) => Err(Error::TypeMismatch {
            column: left.to_string(),
            expected: l.to_string(),
            found: format!("{right} ({r})"),
        }),
    }
}

pub(super) fn describe(ty: Option<PrimitiveType>) -> String {
    ty.map_or_else(|| "null".to_string(), |t| t.to_string())
}

/// The type of a column path in a schema.
pub(crate) fn resolve_column<'a>(
    schema: &'a StructType,
    name: &ColumnName,
) -> Result<&'a DataType> {
    let unknown = || Error::UnknownColumn {
        column: name.to_string(),
        available: schema.field_names(),
    };
    let mut fields = schema;
    let mut found: Option<&DataType> = None;
    for segment in name.path() {
        let field = fields.field(segment).ok_or_else(unknown)?;
        found = Some(&field.data_type);
        if let DataType::Struct(s) = &field.data_type {
            fields = s;
        } else {
            fields = &EMPTY_STRUCT;
        }
    }
    found.ok_or_else(unknown)
}

static EMPTY_STRUCT: StructType = StructType {
    type_name: String::new(),
    fields: Vec::new(),
};
