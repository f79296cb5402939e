//! SQL `MERGE INTO` in Tarn's terms: the ON condition's equalities between a target and a
//! source column become the merge keys and the rest its condition; each WHEN clause
//! becomes the Tarn clause of the same meaning, with columns named `target.x` or
//! `source.x`. What Tarn cannot express is refused while planning, before any row is read.

use datafusion::common::{Column, DFSchema, Result, plan_err};
use datafusion::logical_expr::dml::{MergeIntoAction, MergeIntoClause, MergeIntoClauseKind};
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::{BinaryExpr, Expr, Operator};
use tarn::expr::{Expr as TarnExpr, source_col, target_col};
use tarn::{DmlOutcome, MergeBuilder};

use crate::expr::to_tarn_with;

/// A MERGE statement translated for Tarn's [`MergeBuilder`].
#[derive(Debug, Clone)]
pub(crate) struct SqlMerge {
    /// (target column, source column) pairs the rows are matched on.
    keys: Vec<(String, String)>,
    /// The rest of the ON condition.
    condition: Option<TarnExpr>,
    clauses: Vec<SqlClause>,
}

/// One WHEN clause: its condition and action.
#[derive(Debug, Clone)]
enum SqlClause {
    MatchedUpdate(Option<TarnExpr>, Vec<(String, TarnExpr)>),
    MatchedDelete(Option<TarnExpr>),
    NotMatchedInsert(Option<TarnExpr>, Vec<(String, TarnExpr)>),
    BySourceUpdate(Option<TarnExpr>, Vec<(String, TarnExpr)>),
    BySourceDelete(Option<TarnExpr>),
}

/// Which side of the merge a column of the combined schema is on.
enum Side {
    Target(String),
    Source(String),
}

impl SqlMerge {
    /// Translates a MERGE planned by DataFusion: `schema` holds the target's `targets`
    /// columns followed by the source's.
    ///
    /// Fails (a plan error naming the part) when the ON condition has no equality between
    /// a target and a source column, or when a condition or value has no Tarn equivalent
    /// (subqueries, functions other than `text_match`, casts).
    pub(crate) fn new(
        schema: &DFSchema,
        targets: usize,
        on: &Expr,
        clauses: &[MergeIntoClause],
    ) -> Result<Self> {
        let side = |column: &Column| {
            let index = schema.index_of_column(column).ok()?;
            let name = schema.field(index).name().clone();
            Some(match index < targets {
                true => Side::Target(name),
                false => Side::Source(name),
            })
        };
        let translate = |expr: &Expr, what: &str| {
            let named = |column: &Column| match side(column)? {
                Side::Target(name) => Some(target_col(name)),
                Side::Source(name) => Some(source_col(name)),
            };
            match to_tarn_with(expr, &named) {
                Some(translated) => Ok(translated),
                None => plan_err!(
                    "MERGE INTO a Tarn table: the {what} {expr} has no Tarn equivalent (Tarn \
                     takes comparisons, AND, OR, NOT, IS NULL, IN lists, BETWEEN and \
                     arithmetic on the target's and the source's columns)"
                ),
            }
        };

        let mut keys = Vec::new();
        let mut condition: Option<TarnExpr> = None;
        for part in split_conjunction(on) {
            if let Some((key, cast)) = key_pair(part, &side) {
                if !cast {
                    keys.push(key);
                    continue;
                }
                let (target, source) = key;
                return plan_err!(
                    "MERGE INTO a Tarn table matches keys of one type: the target's {target} \
                     and the source's {source} differ; cast {source} to {target}'s type in \
                     the USING query"
                );
            }
            let part = translate(part, "ON condition")?;
            condition = Some(match condition {
                Some(c) => c.and(part),
                None => part,
            });
        }
        if keys.is_empty() {
            return plan_err!(
                "MERGE INTO a Tarn table needs an ON condition with an equality between a \
                 target and a source column (the keys rows are matched on), not {on}"
            );
        }

        let mut translated = Vec::with_capacity(clauses.len());
        for clause in clauses {
            let predicate = clause
                .predicate
                .as_ref()
                .map(|p| translate(p, "WHEN condition"))
                .transpose()?;
            let assigned = |sets: &[(String, Expr)]| {
                sets.iter()
                    .map(|(column, value)| Ok((column.clone(), translate(value, "value")?)))
                    .collect::<Result<Vec<_>>>()
            };
            let by_source = matches!(clause.kind, MergeIntoClauseKind::NotMatchedBySource);
            let matched = matches!(clause.kind, MergeIntoClauseKind::Matched);
            translated.push(match (&clause.action, matched, by_source) {
                (MergeIntoAction::Update(sets), true, _) => {
                    SqlClause::MatchedUpdate(predicate, assigned(sets)?)
                }
                (MergeIntoAction::Delete, true, _) => SqlClause::MatchedDelete(predicate),
                (MergeIntoAction::Update(sets), _, true) => {
                    SqlClause::BySourceUpdate(predicate, assigned(sets)?)
                }
                (MergeIntoAction::Delete, _, true) => SqlClause::BySourceDelete(predicate),
                (MergeIntoAction::Insert { columns, values }, false, false) => {
                    let columns: Vec<String> = match columns.is_empty() {
                        true => (0..targets)
                            .map(|i| schema.field(i).name().clone())
                            .collect(),
                        false => columns.clone(),
                    };
                    let sets: Vec<(String, Expr)> =
                        columns.into_iter().zip(values.iter().cloned()).collect();
                    SqlClause::NotMatchedInsert(predicate, assigned(&sets)?)
                }
                (action, _, _) => {
                    return plan_err!(
                        "MERGE INTO a Tarn table: {action:?} cannot follow WHEN {:?}",
                        clause.kind
                    );
                }
            });
        }
        Ok(Self {
            keys,
            condition,
            clauses: translated,
        })
    }

    /// Configures `merge` with the keys, condition and clauses, and runs it.
    pub(crate) async fn execute(self, merge: MergeBuilder<'_>) -> tarn::Result<DmlOutcome> {
        let mut merge = merge.on_columns(self.keys);
        if let Some(condition) = self.condition {
            merge = merge.condition(condition);
        }
        for clause in self.clauses {
            merge = match clause {
                SqlClause::MatchedUpdate(when, sets) => merge.when_matched_update(when, sets),
                SqlClause::MatchedDelete(when) => merge.when_matched_delete(when),
                SqlClause::NotMatchedInsert(when, values) => {
                    merge.when_not_matched_insert(when, values)
                }
                SqlClause::BySourceUpdate(when, sets) => {
                    merge.when_not_matched_by_source_update(when, sets)
                }
                SqlClause::BySourceDelete(when) => merge.when_not_matched_by_source_delete(when),
            };
        }
        merge.execute().await
    }
}

impl std::fmt::Display for SqlMerge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let keys: Vec<String> = self
            .keys
            .iter()
            .map(|(t, s)| format!("target.{t} = source.{s}"))
            .collect();
        write!(f, "on=[{}]", keys.join(", "))?;
        if let Some(condition) = &self.condition {
            write!(f, ", condition={condition}")?;
        }
        write!(f, ", clauses={}", self.clauses.len())
    }
}

/// `expr` as a (target column, source column) key when it is an equality between one
/// column of each side, and whether DataFusion cast either column to the other's type
/// (Tarn matches keys of one type only).
fn key_pair(
    expr: &Expr,
    side: &dyn Fn(&Column) -> Option<Side>,
) -> Option<((String, String), bool)> {
    let Expr::BinaryExpr(BinaryExpr {
        left,
        op: Operator::Eq,
        right,
    }) = expr
    else {
        return None;
    };
    let column = |e: &Expr| match e {
        Expr::Cast(cast) => match cast.expr.as_ref() {
            Expr::Column(c) => Some(c.clone()),
            _ => None,
        },
        Expr::Column(c) => Some(c.clone()),
        _ => None,
    };
    let cast = matches!(left.as_ref(), Expr::Cast(_)) || matches!(right.as_ref(), Expr::Cast(_));
    match (side(&column(left)?)?, side(&column(right)?)?) {
        (Side::Target(t), Side::Source(s)) | (Side::Source(s), Side::Target(t)) => {
            Some(((t, s), cast))
        }
        _ => None,
    }
}
