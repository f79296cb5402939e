//! Predicates against a snapshot: binding one to the schema and the full-text indices,
//! and judging from statistics alone which files may hold rows matching one (the
//! conflict checker's question about files added concurrently).

use crate::error::Result;
use crate::expr::{Expr, may_match};
use crate::index::{IndexKind, table_indices};
use crate::protocol::Add;
use crate::snapshot::Snapshot;
use crate::stats::{AnyStats, FileStatsView};

/// Whether every column `expr` names is a partition column of `snapshot` (so each
/// file's rows all meet it or none does).
pub(crate) fn names_partitions_only(snapshot: &Snapshot, expr: &Expr) -> bool {
    expr.columns().iter().all(|c| {
        snapshot
            .partition_columns()
            .iter()
            .any(|p| p.name.as_str() == c.root())
    })
}

/// Binds a predicate to a snapshot: checks it against the schema and gives each
/// `text_match` the analyzer of its column's full-text index.
///
/// Fails as [`Expr::bind`] does, and with [`Error::TextMatchWithoutIndex`].
pub(crate) fn bind_predicate(snapshot: &Snapshot, predicate: &Expr) -> Result<Expr> {
    let bound = predicate.bind(snapshot.schema())?;
    if !bound.has_text_match() {
        return Ok(bound);
    }
    let indices = table_indices(snapshot)?;
    bound.resolve_text_matches(&|column| {
        indices
            .on_column(column.root(), &[IndexKind::FullText])
            .filter(|_| column.path().len() == 1)
            .map(|(_, def)| def.options.full_text.unwrap_or_default())
    })
}

/// The first of `adds` whose statistics and partition values may hold rows matching one
/// of `predicates`, with that predicate. Each predicate is bound once and each file's
/// statistics are parsed once, however many of both there are: the conflict checker
/// runs this for every pair of a group commit's members.
pub(crate) fn first_file_matching<'a, 'p>(
    snapshot: &Snapshot,
    predicates: &'p [Expr],
    adds: &[&'a Add],
) -> Result<Option<(&'a Add, &'p Expr)>> {
    if adds.is_empty() || predicates.is_empty() {
        return Ok(None);
    }
    let contexts = predicates
        .iter()
        .map(|p| Ok((p, snapshot.scan().filter(p.clone()).context()?)))
        .collect::<Result<Vec<_>>>()?;
    for add in adds {
        let stats = AnyStats::of(add);
        for (predicate, ctx) in &contexts {
            let partitions = ctx.partition_values(add)?;
            let view = FileStatsView {
                stats: stats.as_ref(),
                columns: &ctx.columns,
                partitions: &partitions,
            };
            if ctx.predicate.as_ref().is_none_or(|p| may_match(p, &view)) {
                return Ok(Some((add, predicate)));
            }
        }
    }
    Ok(None)
}
