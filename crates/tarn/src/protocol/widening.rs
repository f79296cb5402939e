//! Type widening (the `typeWidening` table feature): a column's type may have been
//! widened (`int` to `long`, `float` to `double`, a decimal to a wider one, `date` to
//! `timestamp_ntz`...) after files were written with the narrower one. Readers cast such
//! files' values to the table's type (as `conform` does for any file); this module checks
//! that every recorded change (`delta.typeChanges` in a field's metadata) is one the
//! protocol allows, and tells which columns changed, whose older statistics are then not
//! trusted for pruning (a `float` bound read as a `double` is not the stored value).

use crate::error::{Error, Result};
use crate::protocol::schema::{PrimitiveType, StructField, StructType, field_path};

/// Field metadata key of a field's type changes.
pub const TYPE_CHANGES_KEY: &str = "delta.typeChanges";

/// Whether `field` (or a field nested in it) had its type widened.
pub(crate) fn widened(field: &StructField) -> bool {
    field.metadata.contains_key(TYPE_CHANGES_KEY)
}

/// Fails with [`Error::InvalidSchema`] naming the column and both types when a recorded
/// type change is not one the Delta protocol allows (or does not parse): its files could
/// not be read as the table's type.
pub fn ensure_allowed(schema: &StructType) -> Result<()> {
    schema.try_for_each_struct(&mut |path, s| {
        for field in &s.fields {
            let Some(changes) = field.metadata.get(TYPE_CHANGES_KEY) else {
                continue;
            };
            let name = field_path(path, &field.name);
            let list = changes.as_array().ok_or_else(|| Error::InvalidSchema {
                reason: format!("column {name:?}: {TYPE_CHANGES_KEY} is not a list"),
            })?;
            for change in list {
                let from = change["fromType"].as_str().unwrap_or_default();
                let to = change["toType"].as_str().unwrap_or_default();
                let allowed = match (PrimitiveType::parse(from), PrimitiveType::parse(to)) {
                    (Some(from), Some(to)) => is_allowed(from, to),
                    _ => false,
                };
                if !allowed {
                    return Err(Error::InvalidSchema {
                        reason: format!(
                            "column {name:?}: the type change from {from:?} to {to:?} is not \
                             one Delta's type widening allows"
                        ),
                    });
                }
            }
        }
        Ok(())
    })
}

/// The widenings the protocol allows.
fn is_allowed(from: PrimitiveType, to: PrimitiveType) -> bool {
    use PrimitiveType as P;
    let integer_rank = |t: P| match t {
        P::Byte => Some(0),
        P::Short => Some(1),
        P::Integer => Some(2),
        P::Long => Some(3),
        _ => None,
    };
    match (from, to) {
        (P::Float, P::Double) | (P::Date, P::TimestampNtz) => true,
        (P::Byte | P::Short | P::Integer, P::Double) => true,
        (P::Decimal(p1, s1), P::Decimal(p2, s2)) => {
            let (k1, k2) = (p2 as i16 - p1 as i16, s2 as i16 - s1 as i16);
            k1 >= k2 && k2 >= 0
        }
        // A decimal that holds every value of the integer type.
        (P::Byte | P::Short | P::Integer, P::Decimal(p, s)) => p as i16 - 10 >= s as i16 && s >= 0,
        (P::Long, P::Decimal(p, s)) => p as i16 - 20 >= s as i16 && s >= 0,
        (a, b) => matches!(
            (integer_rank(a), integer_rank(b)),
            (Some(x), Some(y)) if x < y
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(from: &str, to: &str) -> StructType {
        let json = format!(
            r#"{{"type":"struct","fields":[{{"name":"c","type":"{to}","nullable":true,
            "metadata":{{"delta.typeChanges":[{{"fromType":"{from}","toType":"{to}"}}]}}}}]}}"#
        );
        StructType::from_json(&json).unwrap()
    }

    #[test]
    fn allowed_widenings_pass_and_others_are_named() {
        for (from, to) in [
            ("byte", "long"),
            ("integer", "long"),
            ("float", "double"),
            ("integer", "double"),
            ("date", "timestamp_ntz"),
            ("decimal(6,2)", "decimal(10,4)"),
            ("integer", "decimal(12,2)"),
            ("long", "decimal(20,0)"),
        ] {
            ensure_allowed(&table(from, to)).unwrap_or_else(|e| panic!("{from} -> {to}: {e}"));
        }
        for (from, to) in [
            ("long", "integer"),
            ("string", "long"),
            ("long", "double"),
            ("decimal(6,2)", "decimal(8,5)"),
            ("integer", "decimal(10,2)"),
            ("timestamp", "timestamp_ntz"),
        ] {
            let err = ensure_allowed(&table(from, to)).unwrap_err();
            assert!(err.to_string().contains(from), "{err}");
        }
    }
}
