//! CHECK constraints (`delta.constraints.<name>` table properties) and column invariants
//! (`delta.invariants` field metadata), enforced on every row a write adds: appends,
//! overwrites, the rows UPDATE and MERGE write, copy-on-write rewrites. A row breaks a
//! constraint when its expression is false or null, as Spark decides; the write then
//! fails before its files are committed.

use std::sync::Arc;

use arrow::array::{Array, RecordBatch};

use crate::error::{Error, Result};
use crate::expr::{Expr, evaluate_predicate, parse_sql};
use crate::protocol::schema::field_path;
use crate::protocol::{Metadata, StructType};

/// Table property prefix of CHECK constraints.
const CONSTRAINT_PREFIX: &str = "delta.constraints.";
/// Field metadata key of a column invariant.
const INVARIANTS_KEY: &str = "delta.invariants";

#[derive(Debug)]
struct Check {
    name: String,
    expression: String,
    predicate: Expr,
}

/// The constraints a table's rows must meet, bound to its schema.
#[derive(Debug, Clone, Default)]
pub(crate) struct Checks(Arc<Vec<Check>>);

impl Checks {
    /// The CHECK constraints and column invariants of a table.
    ///
    /// Fails with [`Error::InvalidExpression`] for one whose SQL Tarn cannot read (a
    /// function, say): rows could not be checked, so nothing may be written. Fails as
    /// [`Expr::bind`] does for one that does not fit the schema.
    pub(crate) fn of(metadata: &Metadata, schema: &StructType) -> Result<Checks> {
        let mut found: Vec<(String, String)> = metadata
            .configuration
            .iter()
            .filter(|(k, _)| k.starts_with(CONSTRAINT_PREFIX))
            .filter_map(|(k, v)| Some((k.clone(), v.clone()?)))
            .collect();
        schema.try_for_each_struct(&mut |path, s| {
            for field in &s.fields {
                if let Some(value) = field.metadata.get(INVARIANTS_KEY) {
                    let name = format!("the invariant of {}", field_path(path, &field.name));
                    found.push((name, invariant_text(value)?));
                }
            }
            Ok::<(), Error>(())
        })?;
        found.sort();
        let checks = found
            .into_iter()
            .map(|(name, expression)| {
                let predicate = parse_sql(&expression)?.bind(schema)?;
                Ok(Check {
                    name,
                    expression,
                    predicate,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Checks(Arc::new(checks)))
    }

    /// Fails with [`Error::ConstraintViolated`] naming the first constraint some row of
    /// `batch` (in the table's schema) breaks.
    pub(crate) fn verify(&self, batch: &RecordBatch) -> Result<()> {
        for check in self.0.iter() {
            let mask = evaluate_predicate(&check.predicate, batch)?;
            // Null counts as broken, as in Spark.
            let kept = match mask.null_count() {
                0 => mask.true_count(),
                _ => arrow::compute::prep_null_mask_filter(&mask).true_count(),
            };
            let broken = mask.len() - kept;
            if broken > 0 {
                return Err(Error::ConstraintViolated {
                    constraint: check.name.clone(),
                    expression: check.expression.clone(),
                    rows: broken,
                });
            }
        }
        Ok(())
    }
}

/// The SQL of an invariant: `{"expression": {"expression": "<sql>"}}`, as JSON text or
/// as an object.
fn invariant_text(value: &serde_json::Value) -> Result<String> {
    let parsed = match value {
        serde_json::Value::String(text) => {
            serde_json::from_str(text).unwrap_or(serde_json::Value::Null)
        }
        other => other.clone(),
    };
    parsed["expression"]["expression"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| Error::InvalidExpression {
            expression: value.to_string(),
            reason: "a column invariant is {\"expression\": {\"expression\": \"<sql>\"}}".into(),
        })
}

impl crate::table::Table {
    /// Adds the CHECK constraint `name` (`delta.constraints.<name>`, SQL text such as
    /// `amount >= 0 AND country IS NOT NULL`) once every row of the table meets it, in one
    /// commit that reads the whole table: a concurrent write conflicts with it.
    ///
    /// Fails with [`Error::InvalidArgument`] for an empty name or one already taken,
    /// [`Error::InvalidExpression`] for SQL Tarn cannot read, as [`Expr::bind`] does for
    /// an expression that does not fit the schema, with [`Error::ConstraintViolated`]
    /// when rows break it, and as [`crate::Transaction::commit`] does.
    pub async fn add_constraint(
        &mut self,
        name: &str,
        expression: &str,
    ) -> Result<crate::CommitOutcome> {
        let key = format!("{CONSTRAINT_PREFIX}{}", name.to_lowercase());
        if name.trim().is_empty() || self.snapshot().metadata().property(&key).is_some() {
            return Err(Error::InvalidArgument {
                name: "name",
                reason: format!("constraint {name:?} is empty or exists already"),
            });
        }
        let mut metadata = self.snapshot().metadata().clone();
        metadata
            .configuration
            .insert(key.clone(), Some(expression.to_string()));
        let only = Checks(Arc::new(vec![Check {
            name: key,
            expression: expression.to_string(),
            predicate: parse_sql(expression)?.bind(self.schema())?,
        }]));
        let mut txn = self
            .transaction()
            .with_operation("ADD CONSTRAINT")
            .with_parameter("name", name)
            .with_parameter("expr", expression);
        txn.record_read_whole_table();
        let mut rows = self.scan().execute().await?;
        while let Some(batch) = futures::TryStreamExt::try_next(&mut rows).await? {
            only.verify(&batch)?;
        }
        let upgraded =
            self.snapshot()
                .protocol()
                .merged_with(&crate::protocol::Protocol::for_new_table(
                    self.schema(),
                    &metadata,
                ));
        if &upgraded != self.snapshot().protocol() {
            txn.add_action(crate::protocol::Action::Protocol(upgraded));
        }
        txn.set_metadata(metadata);
        self.commit(txn).await
    }

    /// Drops the CHECK constraint `name` in one commit.
    ///
    /// Fails with [`Error::InvalidArgument`] when the table has no such constraint, and
    /// as [`crate::Transaction::commit`] does.
    pub async fn drop_constraint(&mut self, name: &str) -> Result<crate::CommitOutcome> {
        let key = format!("{CONSTRAINT_PREFIX}{}", name.to_lowercase());
        let mut metadata = self.snapshot().metadata().clone();
        if metadata.configuration.remove(&key).is_none() {
            return Err(Error::InvalidArgument {
                name: "name",
                reason: format!("the table has no constraint {name:?}"),
            });
        }
        let mut txn = self
            .transaction()
            .with_operation("DROP CONSTRAINT")
            .with_parameter("name", name);
        txn.set_metadata(metadata);
        self.commit(txn).await
    }
}
