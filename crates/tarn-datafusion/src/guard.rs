//! A check on DELETE and UPDATE statements against Tarn tables, made before DataFusion
//! plans them: DataFusion hands a table provider only the conditions on the table itself
//! (`extract_dml_filters`), so a WHERE that joins other rows (`IN`, `EXISTS` or scalar
//! subqueries, `UPDATE ... FROM`) would arrive with its other parts gone, and the
//! statement would change more rows than it names. The same holds for a `LIMIT`
//! (`DELETE ... LIMIT n` would delete every matching row). Such statements are refused
//! while their plan still shows the subqueries or the limit; the provider refuses DELETE
//! and UPDATE in sessions without this check ([`crate::register`] installs it).

use datafusion::catalog::Session;
use datafusion::catalog::default_table_source::DefaultTableSource;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::common::{Result, plan_err};
use datafusion::execution::session_state::SessionState;
use datafusion::logical_expr::{Expr, LogicalPlan, WriteOp};
use datafusion::optimizer::AnalyzerRule;

use crate::TarnTableProvider;

/// The guard's name among the session's analyzer rules.
pub(crate) const DML_GUARD: &str = "tarn_dml_guard";

/// The analyzer rule that refuses DELETE and UPDATE statements on Tarn tables whose
/// plan reaches other rows.
#[derive(Debug, Default)]
pub(crate) struct DmlGuard;

impl AnalyzerRule for DmlGuard {
    fn name(&self) -> &str {
        DML_GUARD
    }

    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        plan.apply(|node| {
            let LogicalPlan::Dml(dml) = node else {
                return Ok(TreeNodeRecursion::Continue);
            };
            let statement = match dml.op {
                WriteOp::Delete => "DELETE",
                WriteOp::Update => "UPDATE",
                _ => return Ok(TreeNodeRecursion::Continue),
            };
            let tarn = dml
                .target
                .downcast_ref::<DefaultTableSource>()
                .is_some_and(|s| {
                    s.table_provider
                        .downcast_ref::<TarnTableProvider>()
                        .is_some()
                });
            if !tarn {
                return Ok(TreeNodeRecursion::Continue);
            }
            if let Some(node) = beyond_a_filter(&dml.input)? {
                return plan_err!(
                    "{statement} on the Tarn table {}: {node} is not supported (only the \
                     WHERE conditions on the table reach it, so the rest would be dropped \
                     and more rows changed than the statement names)",
                    dml.table_name
                );
            }
            if reaches_other_rows(&dml.input)? {
                return plan_err!(
                    "{statement} on the Tarn table {}: a WHERE or SET with subqueries (IN, \
                     EXISTS, scalar) or other tables (UPDATE ... FROM) is not supported, \
                     since only the conditions on the table itself would reach it; name \
                     the rows with conditions on the table's columns",
                    dml.table_name
                );
            }
            Ok(TreeNodeRecursion::Continue)
        })?;
        Ok(plan)
    }
}

/// The first node of a DML statement's input that is more than a scan of its table, a
/// filter, a projection (UPDATE's SET) or an alias: a `LIMIT` (`DELETE ... LIMIT n`),
/// a sort, an aggregate. DataFusion hands the provider only the filters, so such a node
/// would be silently dropped.
fn beyond_a_filter(input: &LogicalPlan) -> Result<Option<String>> {
    let mut found = None;
    input.apply(|node| {
        match node {
            LogicalPlan::Filter(_)
            | LogicalPlan::TableScan(_)
            | LogicalPlan::Projection(_)
            | LogicalPlan::SubqueryAlias(_) => {}
            // Subqueries and joins get their own message below.
            LogicalPlan::Join(_) | LogicalPlan::Subquery(_) => {
                return Ok(TreeNodeRecursion::Jump);
            }
            LogicalPlan::Limit(_) => found = Some("LIMIT".to_string()),
            other => found = Some(format!("a {} in its plan", other.display())),
        }
        Ok(if found.is_some() {
            TreeNodeRecursion::Stop
        } else {
            TreeNodeRecursion::Continue
        })
    })?;
    Ok(found)
}

/// Whether a DML statement's input joins or looks up anything beyond its table.
fn reaches_other_rows(input: &LogicalPlan) -> Result<bool> {
    input.exists(|node| {
        if matches!(node, LogicalPlan::Join(_) | LogicalPlan::Subquery(_)) {
            return Ok(true);
        }
        let mut found = false;
        node.apply_expressions(|e| {
            found |= e.exists(|e| {
                Ok(matches!(
                    e,
                    Expr::Exists(_)
                        | Expr::InSubquery(_)
                        | Expr::ScalarSubquery(_)
                        | Expr::SetComparison(_)
                ))
            })?;
            Ok(TreeNodeRecursion::Continue)
        })?;
        Ok(found)
    })
}

/// Whether `state` runs the guard before planning (a session [`crate::register`] set up).
pub(crate) fn installed(state: &dyn Session) -> bool {
    state
        .as_any()
        .downcast_ref::<SessionState>()
        .is_some_and(|s| s.analyzer().rules.iter().any(|r| r.name() == DML_GUARD))
}
