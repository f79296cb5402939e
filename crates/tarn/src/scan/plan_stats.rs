//! Statistics kept columnar per snapshot version, parsed once.
//!
//! Planning a predicate on a table of 100,000 files used to parse every file's statistics
//! JSON whole, on every plan. Here the first plan of a version parses, on every core, only
//! the columns its predicate names (every other key of the JSON is skipped without being
//! built), into one vector per column in the snapshot's file order; later plans of the same
//! version, and plans naming the same columns, reuse them. Partition values are parsed once
//! per version the same way. The cache lives with the table handle's other caches, for one
//! version at a time.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::{Arc, Mutex};

use arrow::array::ArrayRef;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::{Map, Value};

use crate::error::Result;
use crate::expr::{ColumnName, Scalar, StatsView};
use crate::protocol::Add;
use crate::snapshot::Snapshot;
use crate::stats::parsed::ParsedRows;
use crate::stats::{ColumnInfo, lookup, typed_row};

/// Below this many files planning parses and prunes on the calling task: spawning threads
/// would cost more than the work.
pub(crate) const PARALLEL_FILES: usize = 1024;

/// Every live file's typed partition values, in file order; files of one partition
/// share one map.
pub(crate) type Partitions = Arc<Vec<Arc<HashMap<ColumnName, Scalar>>>>;

/// One column's statistics for every live file of a version, in file order.
#[derive(Debug, Default)]
pub(crate) struct ColumnBounds {
    min: Vec<Option<Scalar>>,
    max: Vec<Option<Scalar>>,
    /// `None` where absent, or where loose bounds (`tightBounds: false`) make it unsafe.
    null_count: Vec<Option<u64>>,
}

/// What one version's planning has parsed so far.
#[derive(Debug)]
pub(crate) struct VersionStats {
    /// `numRecords` per file, parsed with the first data columns asked for.
    rows: Mutex<Option<Arc<Vec<Option<u64>>>>>,
    columns: Mutex<HashMap<ColumnName, Arc<ColumnBounds>>>,
    partitions: Mutex<Option<Partitions>>,
}

/// The statistics one plan needs, for every file of its snapshot.
#[derive(Debug, Clone)]
pub(crate) struct PlanStats {
    rows: Arc<Vec<Option<u64>>>,
    /// A few columns: found by comparison, cheaper than hashing for every file.
    columns: Vec<(ColumnName, Arc<ColumnBounds>)>,
    pub(crate) partitions: Partitions,
    /// The partition columns, so a data column is not looked up in every file's map.
    partition_names: Arc<Vec<ColumnName>>,
}

impl PlanStats {
    /// The statistics of file `index` (in [`Snapshot::files`] order).
    pub(crate) fn view(&self, index: usize) -> IndexedView<'_> {
        IndexedView { stats: self, index }
    }
}

/// One file's statistics out of a [`PlanStats`].
pub(crate) struct IndexedView<'a> {
    stats: &'a PlanStats,
    index: usize,
}

impl IndexedView<'_> {
    fn partition(&self, column: &ColumnName) -> Option<&Scalar> {
        if !self.stats.partition_names.contains(column) {
            return None;
        }
        self.stats.partitions.get(self.index)?.get(column)
    }

    fn column(&self, column: &ColumnName) -> Option<&ColumnBounds> {
        self.stats
            .columns
            .iter()
            .find(|(c, _)| c == column)
            .map(|(_, b)| b.as_ref())
    }
}

impl StatsView for IndexedView<'_> {
    fn min(&self, column: &ColumnName) -> Option<Scalar> {
        if let Some(v) = self.partition(column) {
            return Some(v.clone());
        }
        self.column(column)?.min.get(self.index)?.clone()
    }

    fn max(&self, column: &ColumnName) -> Option<Scalar> {
        if let Some(v) = self.partition(column) {
            return Some(v.clone());
        }
        self.column(column)?.max.get(self.index)?.clone()
    }

    fn null_count(&self, column: &ColumnName) -> Option<u64> {
        if let Some(v) = self.partition(column) {
            return match v {
                Scalar::Null => self.row_count(),
                _ => Some(0),
            };
        }
        *self.column(column)?.null_count.get(self.index)?
    }

    fn row_count(&self) -> Option<u64> {
        *self.stats.rows.get(self.index)?
    }

    fn all_null(&self, column: &ColumnName) -> bool {
        match self.partition(column) {
            Some(v) => v.is_null(),
            None => {
                matches!((self.null_count(column), self.row_count()), (Some(n), Some(r)) if n == r)
            }
        }
    }
}

impl VersionStats {
    fn new() -> Self {
        Self {
            rows: Mutex::new(None),
            columns: Mutex::new(HashMap::new()),
            partitions: Mutex::new(None),
        }
    }
}

fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The statistics of `columns` and the partition values of every live file of `snapshot`,
/// parsing (on every core, off the async threads) only what this version has not parsed.
///
/// Fails with [`crate::Error::InvalidPartitionValue`] when a file's partition value does
/// not parse as its column's type.
pub(crate) async fn plan_stats(
    snapshot: &Snapshot,
    columns: &HashMap<ColumnName, ColumnInfo>,
) -> Result<PlanStats> {
    let version = snapshot
        .caches()
        .for_version(snapshot.version(), VersionStats::new);
    let partitions = version_partitions(snapshot, &version).await?;
    // Partition columns have no statistics: their values are exact.
    let partition_names: Vec<ColumnName> = snapshot
        .partition_columns()
        .iter()
        .map(|pc| ColumnName::new([pc.name.clone()]))
        .collect();
    let partition_columns: HashSet<&ColumnName> = partition_names.iter().collect();
    let missing: HashMap<ColumnName, ColumnInfo> = {
        let held = locked(&version.columns);
        columns
            .iter()
            .filter(|(c, _)| !held.contains_key(*c) && !partition_columns.contains(c))
            .map(|(c, i)| (c.clone(), i.clone()))
            .collect()
    };
    if !missing.is_empty() {
        let (rows, parsed) = if snapshot.file_count() < PARALLEL_FILES {
            parse_columns(snapshot, &missing)
        } else {
            let owned = snapshot.clone();
            crate::tasks::blocking("parsing file statistics", move || {
                Ok(parse_columns(&owned, &missing))
            })
            .await?
        };
        locked(&version.rows).get_or_insert(Arc::new(rows));
        locked(&version.columns).extend(parsed.into_iter().map(|(c, b)| (c, Arc::new(b))));
    }
    let rows = locked(&version.rows).clone().unwrap_or_default();
    let held = locked(&version.columns);
    Ok(PlanStats {
        rows,
        columns: columns
            .keys()
            .filter_map(|c| held.get(c).map(|b| (c.clone(), Arc::clone(b))))
            .collect(),
        partitions,
        partition_names: Arc::new(partition_names),
    })
}

/// The parsed partition values of every live file of `snapshot`, in
/// [`Snapshot::files`] order: parsed once per version (on every core, off the async
/// threads), then shared.
///
/// Fails with [`crate::Error::InvalidPartitionValue`] when a file's partition value does
/// not parse as its column's type.
pub(crate) async fn partition_values_of(snapshot: &Snapshot) -> Result<Partitions> {
    let version = snapshot
        .caches()
        .for_version(snapshot.version(), VersionStats::new);
    version_partitions(snapshot, &version).await
}

async fn version_partitions(snapshot: &Snapshot, version: &VersionStats) -> Result<Partitions> {
    if let Some(parsed) = locked(&version.partitions).clone() {
        return Ok(parsed);
    }
    let parsed = if snapshot.file_count() < PARALLEL_FILES {
        partition_values(snapshot)?
    } else {
        let owned = snapshot.clone();
        crate::tasks::blocking("parsing partition values", move || partition_values(&owned)).await?
    };
    let parsed = Arc::new(parsed);
    *locked(&version.partitions) = Some(Arc::clone(&parsed));
    Ok(parsed)
}

fn partition_values(snapshot: &Snapshot) -> Result<Vec<Arc<HashMap<ColumnName, Scalar>>>> {
    let files: Vec<&Add> = snapshot.files().collect();
    let parts = on_every_core(&files, |chunk| {
        // Files of one partition share its parsed values.
        let mut seen: HashMap<&crate::protocol::PartitionValues, Arc<HashMap<ColumnName, Scalar>>> =
            HashMap::new();
        chunk
            .iter()
            .map(|add| {
                if let Some(values) = seen.get(&add.partition_values) {
                    return Ok(Arc::clone(values));
                }
                let values = Arc::new(file_partition_values(snapshot, add)?);
                seen.insert(&add.partition_values, Arc::clone(&values));
                Ok(values)
            })
            .collect::<Result<Vec<_>>>()
    });
    let mut out = Vec::with_capacity(files.len());
    for part in parts {
        out.extend(part?);
    }
    Ok(out)
}

/// Runs `work` over `items` split into one run per core, in order (on this thread
/// below [`PARALLEL_FILES`] items).
fn on_every_core<T: Sync, R: Send>(items: &[T], work: impl Fn(&[T]) -> R + Sync) -> Vec<R> {
    crate::tasks::on_cores(items, PARALLEL_FILES, work)
}

/// `numRecords` and the bounds of `columns` for every file, in file order.
fn parse_columns(
    snapshot: &Snapshot,
    columns: &HashMap<ColumnName, ColumnInfo>,
) -> (Vec<Option<u64>>, Vec<(ColumnName, ColumnBounds)>) {
    let files: Vec<&Add> = snapshot.files().collect();
    let roots: HashSet<String> = columns
        .values()
        .filter_map(|i| i.physical.first().cloned())
        .collect();
    let wanted: Vec<(&ColumnName, &ColumnInfo)> = columns.iter().collect();
    let parts = on_every_core(&files, |chunk| {
        let mut rows = Vec::with_capacity(chunk.len());
        let mut bounds: Vec<ColumnBounds> =
            wanted.iter().map(|_| ColumnBounds::default()).collect();
        // The wanted columns' arrays in the typed batch the last file pointed into.
        let mut typed: Option<TypedColumns<'_>> = None;
        for add in chunk {
            if let Some((batch, row)) = add.stats.as_ref().and_then(typed_row) {
                let held = match &mut typed {
                    Some(t) if std::ptr::eq(t.batch, batch) => t,
                    slot => slot.insert(TypedColumns::of(batch, &wanted)),
                };
                rows.push(held.push_row(row, &wanted, &mut bounds));
                continue;
            }
            let parsed = add
                .stats
                .as_ref()
                .and_then(|s| parse_some(&s.json(), &roots));
            rows.push(parsed.as_ref().and_then(|p| p.num_records));
            for ((_, info), out) in wanted.iter().zip(bounds.iter_mut()) {
                let Some(p) = &parsed else {
                    out.min.push(None);
                    out.max.push(None);
                    out.null_count.push(None);
                    continue;
                };
                let bound = |map: &Map<String, Value>| {
                    Scalar::from_stats_json(lookup(map, &info.physical)?, info.ty)
                };
                out.min.push(bound(&p.min_values));
                out.max.push(bound(&p.max_values));
                out.null_count.push(if p.tight_bounds == Some(false) {
                    None
                } else {
                    lookup(&p.null_count, &info.physical).and_then(Value::as_u64)
                });
            }
        }
        (rows, bounds)
    });
    let mut rows = Vec::with_capacity(files.len());
    let mut merged: Vec<ColumnBounds> = wanted.iter().map(|_| ColumnBounds::default()).collect();
    for (part_rows, part_bounds) in parts {
        rows.extend(part_rows);
        for (into, from) in merged.iter_mut().zip(part_bounds) {
            into.min.extend(from.min);
            into.max.extend(from.max);
            into.null_count.extend(from.null_count);
        }
    }
    let named = wanted
        .into_iter()
        .map(|(c, _)| c.clone())
        .zip(merged)
        .collect();
    (rows, named)
}

/// The arrays of the wanted columns in one batch of typed statistics, resolved once for
/// all the files that point into it.
struct TypedColumns<'a> {
    batch: &'a ParsedRows,
    /// Per wanted column: min, max and null-count arrays, when present.
    arrays: Vec<[Option<&'a ArrayRef>; 3]>,
}

impl<'a> TypedColumns<'a> {
    fn of(batch: &'a ParsedRows, wanted: &[(&ColumnName, &ColumnInfo)]) -> Self {
        let arrays = wanted
            .iter()
            .map(|(_, info)| {
                [
                    batch.bounds(false, &info.physical),
                    batch.bounds(true, &info.physical),
                    batch.null_counts(&info.physical),
                ]
            })
            .collect();
        Self { batch, arrays }
    }

    /// Appends `row`'s bounds of every wanted column; returns its `numRecords`.
    fn push_row(
        &self,
        row: usize,
        wanted: &[(&ColumnName, &ColumnInfo)],
        out: &mut [ColumnBounds],
    ) -> Option<u64> {
        let loose = self.batch.tight_bounds(row) == Some(false);
        for (((_, info), [min, max, nulls]), out) in wanted.iter().zip(&self.arrays).zip(out) {
            // A null bound is an absent one (no statistic, or only nulls).
            let bound = |a: &Option<&ArrayRef>| {
                Scalar::from_array(a.as_ref()?.as_ref(), row, info.ty).filter(|v| !v.is_null())
            };
            out.min.push(bound(min));
            out.max.push(bound(max));
            out.null_count.push(match nulls {
                Some(a) if !loose => ParsedRows::count_at(a, row),
                _ => None,
            });
        }
        crate::protocol::stats::StatsRows::num_records(self.batch, row)
    }
}

/// The parts of a stats JSON one plan reads.
#[derive(Debug, Default)]
struct SomeStats {
    num_records: Option<u64>,
    tight_bounds: Option<bool>,
    min_values: Map<String, Value>,
    max_values: Map<String, Value>,
    null_count: Map<String, Value>,
}

/// Parses `numRecords`, `tightBounds` and, of `minValues`, `maxValues` and `nullCount`,
/// only the top-level keys in `roots`; malformed stats count as absent.
fn parse_some(json: &str, roots: &HashSet<String>) -> Option<SomeStats> {
    let mut de = serde_json::Deserializer::from_str(json);
    let stats = StatsSeed(roots).deserialize(&mut de).ok()?;
    de.end().ok()?;
    Some(stats)
}

/// A map key, borrowed from the input when it holds no escapes.
struct Key<'de>(Cow<'de, str>);

impl<'de> serde::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string key")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_string())))
            }
            fn visit_string<E>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

struct StatsSeed<'a>(&'a HashSet<String>);

impl<'de> DeserializeSeed<'de> for StatsSeed<'_> {
    type Value = SomeStats;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<SomeStats, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for StatsSeed<'_> {
    type Value = SomeStats;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a stats object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<SomeStats, A::Error> {
        let mut out = SomeStats::default();
        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
            match key.as_ref() {
                "numRecords" => out.num_records = map.next_value()?,
                "tightBounds" => out.tight_bounds = map.next_value()?,
                "minValues" => out.min_values = map.next_value_seed(Section(self.0))?,
                "maxValues" => out.max_values = map.next_value_seed(Section(self.0))?,
                "nullCount" => out.null_count = map.next_value_seed(Section(self.0))?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(out)
    }
}

/// One of `minValues`, `maxValues`, `nullCount`: only the wanted top-level keys are built.
struct Section<'a>(&'a HashSet<String>);

impl<'de> DeserializeSeed<'de> for Section<'_> {
    type Value = Map<String, Value>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Section<'_> {
    type Value = Map<String, Value>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object of column statistics")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = Map::new();
        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
            if self.0.contains(key.as_ref()) {
                out.insert(key.into_owned(), map.next_value::<Value>()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(out)
    }

    // A null section is an empty one, as the whole-JSON parse treats it.
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Map::new())
    }
}

/// The partition values of a file, typed by the table's partition columns.
///
/// Fails with [`crate::Error::InvalidPartitionValue`] when one does not parse as its column's type.
pub(crate) fn file_partition_values(
    snapshot: &Snapshot,
    add: &Add,
) -> Result<HashMap<ColumnName, Scalar>> {
    snapshot
        .partition_columns()
        .iter()
        .map(|pc| {
            let raw = add
                .partition_values
                .get(&pc.physical_name)
                .and_then(|v| v.as_deref());
            let value = Scalar::parse_partition(raw, pc.data_type).map_err(|reason| {
                crate::Error::InvalidPartitionValue {
                    column: pc.name.clone(),
                    value: raw.unwrap_or_default().to_string(),
                    reason: format!("{reason} (in file {})", add.path),
                }
            })?;
            Ok((ColumnName::new([pc.name.clone()]), value))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::FileStats;

    #[test]
    fn only_the_wanted_columns_are_parsed_and_they_agree_with_the_whole_parse() {
        let json = r#"{"numRecords":10,"minValues":{"a":1,"b\u0020c":"x","n":{"x":2}},
            "maxValues":{"a":9,"b c":"y","n":{"x":3}},"nullCount":{"a":0,"b c":4,"n":{"x":1}},
            "tightBounds":false,"other":[1,{"z":null}]}"#;
        let roots: HashSet<String> = ["b c", "n"].into_iter().map(String::from).collect();
        let some = parse_some(json, &roots).unwrap();
        let whole = FileStats::parse(json).unwrap();
        assert_eq!(some.num_records, whole.num_records);
        assert_eq!(some.tight_bounds, Some(false));
        assert!(!some.min_values.contains_key("a"));
        for key in ["b c", "n"] {
            assert_eq!(some.min_values.get(key), whole.min_values.get(key));
            assert_eq!(some.max_values.get(key), whole.max_values.get(key));
            assert_eq!(some.null_count.get(key), whole.null_count.get(key));
        }
        assert!(parse_some("{\"numRecords\":", &roots).is_none());
        assert!(parse_some("{} trailing", &roots).is_none());
        let nulls = parse_some(r#"{"numRecords":3,"minValues":null}"#, &roots).unwrap();
        assert_eq!((nulls.num_records, nulls.min_values.len()), (Some(3), 0));
    }
}
