//! `MergeBuilder`: a MERGE INTO from Python, its clauses added one call at a time in
//! the order they are tried (as SQL's WHEN clauses are), then run by `execute()` in one
//! commit. The source is read as a stream when it runs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex as StdMutex};

use arrow::ffi_stream::ArrowArrayStreamReader;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use tarn::expr::Expr;
use tarn::{ChangeStrategy, Table};
use tokio::sync::Mutex;

use crate::errors::{IntoPy, InvalidArgument, internal};
use crate::records;
use crate::runtime::run;
use crate::table::{maybe_predicate, predicate};

/// One WHEN clause.
enum Clause {
    MatchedUpdate(Option<Expr>, Vec<(String, Expr)>),
    MatchedUpdateAll(Option<Expr>),
    MatchedDelete(Option<Expr>),
    NotMatchedInsert(Option<Expr>, Vec<(String, Expr)>),
    NotMatchedInsertAll(Option<Expr>),
    BySourceUpdate(Option<Expr>, Vec<(String, Expr)>),
    BySourceDelete(Option<Expr>),
}

/// The parts of a merge until it runs.
struct Pending {
    source: Option<ArrowArrayStreamReader>,
    clauses: Vec<Clause>,
}

/// A MERGE being built: `table.merge(source, on=["id"])`, then `when_...` clauses, then
/// `execute()`. Expressions are SQL over `source.x` and `target.x`.
#[pyclass(module = "tarn._tarn", name = "MergeBuilder", frozen)]
pub(crate) struct PyMergeBuilder {
    table: Arc<Mutex<Table>>,
    keys: Vec<String>,
    condition: Option<Expr>,
    strategy: Option<ChangeStrategy>,
    pending: StdMutex<Pending>,
}

impl PyMergeBuilder {
    /// A merge of `source` into `table` on `keys`; `source` is taken (its stream
    /// consumed) only once the keys are known to be good.
    pub(crate) fn new(
        table: Arc<Mutex<Table>>,
        keys: Vec<String>,
        condition: Option<Expr>,
        strategy: Option<ChangeStrategy>,
        source: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        if keys.is_empty() {
            return Err(InvalidArgument::new_err("merge: `on` names no key column"));
        }
        let source = crate::input::reader(source)?;
        Ok(PyMergeBuilder {
            table,
            keys,
            condition,
            strategy,
            pending: StdMutex::new(Pending {
                source: Some(source),
                clauses: Vec::new(),
            }),
        })
    }

    fn push(slf: PyRef<'_, Self>, clause: Clause) -> PyResult<PyRef<'_, Self>> {
        slf.pending
            .lock()
            .map_err(|_| internal("the merge's lock is poisoned"))?
            .clauses
            .push(clause);
        Ok(slf)
    }
}

/// `{"column": "SQL expression"}` as assignments.
fn assignments(set: HashMap<String, String>) -> PyResult<Vec<(String, Expr)>> {
    if set.is_empty() {
        return Err(InvalidArgument::new_err(
            "merge: an assignment names no column",
        ));
    }
    set.into_iter()
        .map(|(c, e)| Ok((c, predicate(&e)?)))
        .collect()
}

#[pymethods]
impl PyMergeBuilder {
    /// WHEN MATCHED [AND condition] THEN UPDATE SET the `set` columns.
    #[pyo3(signature = (set, condition=None))]
    fn when_matched_update<'py>(
        slf: PyRef<'py, Self>,
        set: HashMap<String, String>,
        condition: Option<&str>,
    ) -> PyResult<PyRef<'py, Self>> {
        let clause = Clause::MatchedUpdate(maybe_predicate(condition)?, assignments(set)?);
        Self::push(slf, clause)
    }

    /// WHEN MATCHED [AND condition] THEN UPDATE every column from the source's.
    #[pyo3(signature = (condition=None))]
    fn when_matched_update_all<'py>(
        slf: PyRef<'py, Self>,
        condition: Option<&str>,
    ) -> PyResult<PyRef<'py, Self>> {
        let clause = Clause::MatchedUpdateAll(maybe_predicate(condition)?);
        Self::push(slf, clause)
    }

    /// WHEN MATCHED [AND condition] THEN DELETE.
    #[pyo3(signature = (condition=None))]
    fn when_matched_delete<'py>(
        slf: PyRef<'py, Self>,
        condition: Option<&str>,
    ) -> PyResult<PyRef<'py, Self>> {
        let clause = Clause::MatchedDelete(maybe_predicate(condition)?);
        Self::push(slf, clause)
    }

    /// WHEN NOT MATCHED [AND condition] THEN INSERT the `values` (others are null).
    #[pyo3(signature = (values, condition=None))]
    fn when_not_matched_insert<'py>(
        slf: PyRef<'py, Self>,
        values: HashMap<String, String>,
        condition: Option<&str>,
    ) -> PyResult<PyRef<'py, Self>> {
        let clause = Clause::NotMatchedInsert(maybe_predicate(condition)?, assignments(values)?);
        Self::push(slf, clause)
    }

    /// WHEN NOT MATCHED [AND condition] THEN INSERT the source row.
    #[pyo3(signature = (condition=None))]
    fn when_not_matched_insert_all<'py>(
        slf: PyRef<'py, Self>,
        condition: Option<&str>,
    ) -> PyResult<PyRef<'py, Self>> {
        let clause = Clause::NotMatchedInsertAll(maybe_predicate(condition)?);
        Self::push(slf, clause)
    }

    /// WHEN NOT MATCHED BY SOURCE [AND condition] THEN UPDATE SET the `set` columns.
    #[pyo3(signature = (set, condition=None))]
    fn when_not_matched_by_source_update<'py>(
        slf: PyRef<'py, Self>,
        set: HashMap<String, String>,
        condition: Option<&str>,
    ) -> PyResult<PyRef<'py, Self>> {
        let clause = Clause::BySourceUpdate(maybe_predicate(condition)?, assignments(set)?);
        Self::push(slf, clause)
    }

    /// WHEN NOT MATCHED BY SOURCE [AND condition] THEN DELETE.
    #[pyo3(signature = (condition=None))]
    fn when_not_matched_by_source_delete<'py>(
        slf: PyRef<'py, Self>,
        condition: Option<&str>,
    ) -> PyResult<PyRef<'py, Self>> {
        let clause = Clause::BySourceDelete(maybe_predicate(condition)?);
        Self::push(slf, clause)
    }

    /// Runs the merge in one commit and returns its metrics. A builder runs once.
    fn execute<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let (source, clauses) = {
            let mut pending = self
                .pending
                .lock()
                .map_err(|_| internal("the merge's lock is poisoned"))?;
            // Checked before the source is taken, so the builder can still run.
            if pending.source.is_some() && pending.clauses.is_empty() {
                return Err(InvalidArgument::new_err(
                    "merge: add at least one when_... clause before execute()",
                ));
            }
            let source = pending
                .source
                .take()
                .ok_or_else(|| InvalidArgument::new_err("merge: this builder has already run"))?;
            (source, std::mem::take(&mut pending.clauses))
        };
        let table = self.table.clone();
        let keys = self.keys.clone();
        let condition = self.condition.clone();
        let strategy = self.strategy;
        let outcome = run(py, async move {
            let mut t = table.lock().await;
            let mut builder = t.merge_reader(source).on(keys);
            if let Some(c) = condition {
                builder = builder.condition(c);
            }
            if let Some(s) = strategy {
                builder = builder.with_strategy(s);
            }
            for clause in clauses {
                builder = match clause {
                    Clause::MatchedUpdate(c, sets) => builder.when_matched_update(c, sets),
                    Clause::MatchedUpdateAll(c) => builder.when_matched_update_all(c),
                    Clause::MatchedDelete(c) => builder.when_matched_delete(c),
                    Clause::NotMatchedInsert(c, values) => {
                        builder.when_not_matched_insert(c, values)
                    }
                    Clause::NotMatchedInsertAll(c) => builder.when_not_matched_insert_all(c),
                    Clause::BySourceUpdate(c, sets) => {
                        builder.when_not_matched_by_source_update(c, sets)
                    }
                    Clause::BySourceDelete(c) => builder.when_not_matched_by_source_delete(c),
                };
            }
            builder.execute().await.py_err()
        })?;
        records::dml(py, &outcome)
    }
}
