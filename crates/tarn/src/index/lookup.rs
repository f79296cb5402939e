//! Answering the parts of a scan's predicate that indices cover: which rows of which
//! files may match.
//!
//! The predicate's top-level `AND` parts are matched against the table's indices:
//! equality, `IN` and ranges with a literal on a BTree (or Bitmap) column, `IS NULL` on a
//! Bitmap (or BTree) column, `text_match` on a full-text column. Each such part, for each
//! candidate file its segments cover, yields the rows it allows; a file's rows are the
//! intersection over the parts that cover it. Files no segment covers are left to
//! statistics pruning. The scan still evaluates the whole predicate on the rows it reads.

use std::collections::{HashMap, HashSet};
use std::ops::Bound;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef};
use futures::{FutureExt, StreamExt, TryStreamExt};
use tarn_index::fts::TextQuery;
use tarn_index::{RoaringTreemap, ScalarQuery, rows_by_file};

use super::meta::{IndexDefinition, TableIndices, canonical_files};
use super::{IndexKind, OpenedIndex};
use crate::error::{Error, Result};
use crate::expr::{CmpOp, Expr, Scalar};
use crate::snapshot::Snapshot;

/// Segments queried at once.
const SEGMENT_CONCURRENCY: usize = 16;

/// What one index did for a scan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexUse {
    /// The index.
    pub index: String,
    /// Its kind.
    pub kind: IndexKind,
    /// The part of the predicate it answered.
    pub predicate: String,
    /// Segments it read.
    pub segments: usize,
    /// Candidate files its segments cover.
    pub files_covered: usize,
    /// Covered files with at least one matching row.
    pub files_hit: usize,
    /// Matching rows in candidate files.
    pub rows: u64,
}

/// The rows indices allow, per covered file.
#[derive(Debug, Clone, Default)]
pub(crate) struct IndexSelection {
    /// The indices used, in predicate order.
    pub(crate) uses: Vec<IndexUse>,
    /// For each candidate file some used index covers (by canonical path): the rows that
    /// may match, deleted rows included.
    pub(crate) rows: HashMap<String, RoaringTreemap>,
    /// Whether the indices answered the whole predicate for every candidate file: the
    /// rows above are then exactly the matching ones (before deletion vectors).
    pub(crate) exact: bool,
}

/// A part of a predicate an index kind can answer.
enum Servable {
    Scalar(ScalarQuery),
    Text(TextQuery),
}

impl Servable {
    fn kinds(&self) -> &'static [IndexKind] {
        match self {
            Servable::Scalar(ScalarQuery::IsNull) => &[IndexKind::Bitmap, IndexKind::BTree],
            Servable::Scalar(_) => &[IndexKind::BTree, IndexKind::Bitmap],
            Servable::Text(_) => &[IndexKind::FullText],
        }
    }
}

fn conjuncts<'a>(expr: &'a Expr, out: &mut Vec<&'a Expr>) {
    match expr {
        Expr::And(a, b) => {
            conjuncts(a, out);
            conjuncts(b, out);
        }
        other => out.push(other),
    }
}

/// The top-level column and query a bound predicate part stands for, if an index could
/// answer it.
fn servable(expr: &Expr, snapshot: &Snapshot) -> Result<Option<(String, Servable)>> {
    let top = |e: &Expr| match e {
        Expr::Column(c) if c.path().len() == 1 => Some(c.root().to_string()),
        _ => None,
    };
    let values = |column: &str, scalars: &[&Scalar]| scalar_array(snapshot, column, scalars);
    Ok(match expr {
        Expr::Cmp { op, left, right } => {
            let (Some(column), Expr::Literal(v)) = (top(left), right.as_ref()) else {
                return Ok(None);
            };
            if v.is_null() || *op == CmpOp::NotEq {
                return Ok(None);
            }
            let one = values(&column, &[v])?;
            let query = match op {
                CmpOp::Eq => ScalarQuery::Equals(one),
                CmpOp::Lt => ScalarQuery::Range {
                    lower: Bound::Unbounded,
                    upper: Bound::Excluded(one),
                },
                CmpOp::LtEq => ScalarQuery::Range {
                    lower: Bound::Unbounded,
                    upper: Bound::Included(one),
                },
                CmpOp::Gt => ScalarQuery::Range {
                    lower: Bound::Excluded(one),
                    upper: Bound::Unbounded,
                },
                CmpOp::GtEq => ScalarQuery::Range {
                    lower: Bound::Included(one),
                    upper: Bound::Unbounded,
                },
                CmpOp::NotEq => return Ok(None),
            };
            Some((column, Servable::Scalar(query)))
        }
        Expr::InList {
            expr,
            list,
            negated: false,
        } => {
            let Some(column) = top(expr) else {
                return Ok(None);
            };
            let listed: Vec<&Scalar> = list.iter().filter(|v| !v.is_null()).collect();
            Some((
                column.clone(),
                Servable::Scalar(ScalarQuery::In(values(&column, &listed)?)),
            ))
        }
        Expr::IsNull(e) => top(e).map(|c| (c, Servable::Scalar(ScalarQuery::IsNull))),
        Expr::TextMatch { column, query, .. } if column.path().len() == 1 => {
            let query = TextQuery::parse(query).map_err(|e| Error::InvalidArgument {
                name: "text_match",
                reason: e.to_string(),
            })?;
            Some((column.root().to_string(), Servable::Text(query)))
        }
        _ => None,
    })
}

/// A part of a predicate an index may answer: a conjunct as it is, or the comparisons of
/// one column with literals folded into one range (so `a >= x AND a < y` reads the pages
/// of `[x, y)`, not those of `a >= x` and then those of `a < y`).
enum Part<'a> {
    Expr(&'a Expr),
    Range {
        column: String,
        lower: Option<(Scalar, bool)>,
        upper: Option<(Scalar, bool)>,
        text: Vec<String>,
    },
}

impl Part<'_> {
    fn text(&self) -> String {
        match self {
            Part::Expr(e) => e.to_string(),
            Part::Range { text, .. } => text.join(" AND "),
        }
    }
}

/// Folds range comparisons of a top-level column with non-null literals into one range
/// per column, keeping the tightest bound on each side.
fn merge_ranges(parts: Vec<&Expr>) -> Vec<Part<'_>> {
    let mut out: Vec<Part<'_>> = Vec::new();
    for part in parts {
        let range = match part {
            Expr::Cmp { op, left, right } => match (left.as_ref(), right.as_ref()) {
                (Expr::Column(c), Expr::Literal(v)) if c.path().len() == 1 && !v.is_null() => {
                    match op {
                        CmpOp::Gt => Some((c.root().to_string(), Some((v.clone(), false)), None)),
                        CmpOp::GtEq => Some((c.root().to_string(), Some((v.clone(), true)), None)),
                        CmpOp::Lt => Some((c.root().to_string(), None, Some((v.clone(), false)))),
                        CmpOp::LtEq => Some((c.root().to_string(), None, Some((v.clone(), true)))),
                        _ => None,
                    }
                }
                _ => None,
            },
            _ => None,
        };
        let Some((column, lo, hi)) = range else {
            out.push(Part::Expr(part));
            continue;
        };
        let existing = out.iter_mut().find_map(|p| match p {
            Part::Range {
                column: c,
                lower,
                upper,
                text,
            } if *c == column => Some((lower, upper, text)),
            _ => None,
        });
        match existing {
            Some((lower, upper, text)) => {
                text.push(part.to_string());
                if let Some(lo) = lo {
                    *lower = Some(tighter(lower.take(), lo, std::cmp::Ordering::Greater));
                }
                if let Some(hi) = hi {
                    *upper = Some(tighter(upper.take(), hi, std::cmp::Ordering::Less));
                }
            }
            None => out.push(Part::Range {
                column,
                lower: lo,
                upper: hi,
                text: vec![part.to_string()],
            }),
        }
    }
    out
}

/// The tighter of two bounds: the one further in `direction`, the exclusive one on a tie.
fn tighter(
    old: Option<(Scalar, bool)>,
    new: (Scalar, bool),
    direction: std::cmp::Ordering,
) -> (Scalar, bool) {
    let Some(old) = old else {
        return new;
    };
    match new.0.compare(&old.0) {
        Some(o) if o == direction => new,
        Some(std::cmp::Ordering::Equal) => (new.0, new.1 && old.1),
        _ => old,
    }
}

/// The range query of folded bounds.
fn range_query(
    snapshot: &Snapshot,
    column: &str,
    lower: &Option<(Scalar, bool)>,
    upper: &Option<(Scalar, bool)>,
) -> Result<Servable> {
    let bound = |b: &Option<(Scalar, bool)>| -> Result<Bound<ArrayRef>> {
        Ok(match b {
            None => Bound::Unbounded,
            Some((v, inclusive)) => {
                let one = scalar_array(snapshot, column, &[v])?;
                if *inclusive {
                    Bound::Included(one)
                } else {
                    Bound::Excluded(one)
                }
            }
        })
    };
    Ok(Servable::Scalar(ScalarQuery::Range {
        lower: bound(lower)?,
        upper: bound(upper)?,
    }))
}

/// Literals as an array of a column's type.
fn scalar_array(snapshot: &Snapshot, column: &str, scalars: &[&Scalar]) -> Result<ArrayRef> {
    let ty = snapshot
        .arrow_schema()
        .field_with_name(column)
        .map(|f| f.data_type().clone())
        .map_err(|_| Error::UnknownColumn {
            column: column.to_string(),
            available: snapshot.schema().field_names(),
        })?;
    let arrays = scalars
        .iter()
        .map(|v| {
            v.to_array(&ty, 1).map_err(|e| Error::TypeMismatch {
                column: column.to_string(),
                expected: ty.to_string(),
                found: e.to_string(),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    if arrays.is_empty() {
        return Ok(arrow::array::new_empty_array(&ty));
    }
    let refs: Vec<&dyn Array> = arrays.iter().map(|a| a.as_ref()).collect();
    arrow::compute::concat(&refs).map_err(Error::arrow("preparing an index query"))
}

/// The rows the table's indices allow for the bound predicate in the candidate files
/// (live files, by canonical path), or nothing when no index covers any part of it.
///
/// Fails with [`Error::UnsupportedIndexFormat`] for an index a newer build wrote,
/// [`Error::Index`] when an index object cannot be read, and
/// [`Error::InvalidIndexMetadata`] for records that do not parse.
pub(crate) async fn select_rows(
    snapshot: &Snapshot,
    indices: &TableIndices,
    predicate: &Expr,
    candidates: &[String],
) -> Result<Option<IndexSelection>> {
    if indices.registry.indices.is_empty() {
        return Ok(None);
    }
    let mut conjunct_list = Vec::new();
    conjuncts(predicate, &mut conjunct_list);
    let candidate_set: HashSet<&str> = candidates.iter().map(String::as_str).collect();
    let mut selection = IndexSelection {
        exact: true,
        ..IndexSelection::default()
    };
    let mut any = false;
    for part in merge_ranges(conjunct_list) {
        let served = match &part {
            Part::Expr(e) => servable(e, snapshot)?,
            Part::Range {
                column,
                lower,
                upper,
                ..
            } => Some((column.clone(), range_query(snapshot, column, lower, upper)?)),
        };
        let index = served.as_ref().and_then(|(column, s)| {
            indices
                .on_column(column, s.kinds())
                .map(|(name, def)| (name.to_string(), def.clone()))
        });
        let (Some((_, servable)), Some((name, def))) = (served, index) else {
            selection.exact = false;
            continue;
        };
        indices.check_format(&name)?;
        let (covered, hits, segments) =
            query_index(snapshot, indices, &name, &def, &servable, &candidate_set).await?;
        if covered.len() < candidates.len() {
            selection.exact = false;
        }
        let mut files_hit = 0;
        let mut rows = 0;
        for file in &covered {
            let allowed = hits.get(file).cloned().unwrap_or_default();
            let narrowed = match selection.rows.remove(file) {
                Some(before) => before & allowed,
                None => allowed,
            };
            files_hit += usize::from(!narrowed.is_empty());
            rows += hits.get(file).map_or(0, |h| h.len());
            selection.rows.insert(file.clone(), narrowed);
        }
        selection.uses.push(IndexUse {
            index: name,
            kind: def.kind,
            predicate: part.text(),
            segments,
            files_covered: covered.len(),
            files_hit,
            rows,
        });
        any = true;
    }
    Ok(any.then_some(selection))
}

/// Queries every segment of one index that covers a candidate: the candidates it
/// covers, their hits, and the segments read.
async fn query_index(
    snapshot: &Snapshot,
    indices: &TableIndices,
    name: &str,
    def: &IndexDefinition,
    servable: &Servable,
    candidates: &HashSet<&str>,
) -> Result<(HashSet<String>, HashMap<String, RoaringTreemap>, usize)> {
    let mut covered = HashSet::new();
    let mut work = Vec::new();
    for (_, segment) in indices.segments_of(name) {
        let files = canonical_files(snapshot, segment);
        let live: Vec<bool> = files
            .iter()
            .map(|f| candidates.contains(f.as_str()))
            .collect();
        if !live.contains(&true) {
            continue;
        }
        covered.extend(
            files
                .iter()
                .zip(&live)
                .filter(|(_, l)| **l)
                .map(|(f, _)| f.clone()),
        );
        work.push((segment.object.clone(), files, live));
    }
    let segments = work.len();
    let answers: Vec<(Vec<String>, Vec<bool>, RoaringTreemap)> = futures::stream::iter(work)
        .map(|(object, files, live)| {
            async move {
                let opened = OpenedIndex::open(snapshot, name, def.kind, &object).await?;
                let found = match servable {
                    Servable::Scalar(q) => opened.query(q).await,
                    Servable::Text(q) => opened.search(q).await,
                }
                .map_err(|source| Error::Index {
                    index: name.to_string(),
                    source: Box::new(source),
                })?;
                Ok::<_, Error>((files, live, found))
            }
            .boxed()
        })
        .buffer_unordered(SEGMENT_CONCURRENCY)
        .try_collect()
        .await?;
    let mut hits: HashMap<String, RoaringTreemap> = HashMap::new();
    for (files, live, found) in answers {
        for (ordinal, rows) in rows_by_file(&found) {
            let ordinal = ordinal as usize;
            if ordinal < files.len() && live[ordinal] {
                *hits.entry(files[ordinal].clone()).or_default() |= rows;
            }
        }
    }
    Ok((covered, hits, segments))
}

/// The table's indices, parsed once per snapshot version.
pub(crate) fn table_indices(snapshot: &Snapshot) -> Result<Arc<TableIndices>> {
    snapshot
        .caches()
        .derived(snapshot.version(), "indices", || TableIndices::of(snapshot))
}
