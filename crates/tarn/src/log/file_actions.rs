//! Decoding the `add` and `remove` columns of a Parquet checkpoint straight into actions.
//!
//! They are nearly every row of a checkpoint (100,000 files: 100,000 rows), and going by way
//! of JSON (Arrow to JSON text and back through serde) escaped and unescaped every
//! statistics string twice: most of a cold open's time. Here each field is read from its
//! Arrow column. Columns of an unexpected type (or a null where Delta requires a value)
//! return `None`, and the caller decodes that batch the general way, which reports the
//! problem precisely; absent optional columns (older writers) read as nulls.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Int32Array, Int64Array, MapArray, StructArray,
};
use arrow::datatypes::DataType;

use crate::protocol::stats::StatsRows;
use crate::protocol::{Action, Add, DeletionVectorDescriptor, PartitionValues, Remove, Stats};
use crate::stats::lazy::LazySections;
use crate::stats::parsed::ParsedRows;

/// Read access to a string column of any of Arrow's string layouts.
enum Strings<'a> {
    Utf8(&'a arrow::array::StringArray),
    Large(&'a arrow::array::LargeStringArray),
    View(&'a arrow::array::StringViewArray),
}

impl<'a> Strings<'a> {
    fn of(array: &'a ArrayRef) -> Option<Self> {
        match array.data_type() {
            DataType::Utf8 => Some(Self::Utf8(array.as_string::<i32>())),
            DataType::LargeUtf8 => Some(Self::Large(array.as_string::<i64>())),
            DataType::Utf8View => Some(Self::View(array.as_string_view())),
            _ => None,
        }
    }

    fn get(&self, row: usize) -> Option<&'a str> {
        match self {
            Self::Utf8(a) => a.is_valid(row).then(|| a.value(row)),
            Self::Large(a) => a.is_valid(row).then(|| a.value(row)),
            Self::View(a) => a.is_valid(row).then(|| a.value(row)),
        }
    }
}

/// An optional child column: absent, or of the expected kind.
fn child<'a>(parent: &'a StructArray, name: &str) -> Option<Option<&'a ArrayRef>> {
    match parent.column_by_name(name) {
        None => Some(None),
        Some(c) if c.data_type() == &DataType::Null => Some(None),
        Some(c) => Some(Some(c)),
    }
}

fn strings<'a>(parent: &'a StructArray, name: &str) -> Option<Option<Strings<'a>>> {
    match child(parent, name)? {
        None => Some(None),
        Some(c) => Strings::of(c).map(Some),
    }
}

/// Integers stored as 64 or 32 bits.
enum Ints<'a> {
    I64(&'a Int64Array),
    I32(&'a Int32Array),
}

impl Ints<'_> {
    fn get(&self, row: usize) -> Option<i64> {
        match self {
            Self::I64(a) => a.is_valid(row).then(|| a.value(row)),
            Self::I32(a) => a.is_valid(row).then(|| i64::from(a.value(row))),
        }
    }
}

fn ints<'a>(parent: &'a StructArray, name: &str) -> Option<Option<Ints<'a>>> {
    match child(parent, name)? {
        None => Some(None),
        Some(c) => match c.data_type() {
            DataType::Int64 => Some(Some(Ints::I64(c.as_primitive()))),
            DataType::Int32 => Some(Some(Ints::I32(c.as_primitive()))),
            _ => None,
        },
    }
}

fn bools<'a>(parent: &'a StructArray, name: &str) -> Option<Option<&'a BooleanArray>> {
    match child(parent, name)? {
        None => Some(None),
        Some(c) => c.as_boolean_opt().map(Some),
    }
}

/// A `map<string, string>` column (partition values, tags).
struct StringMap<'a> {
    map: &'a MapArray,
    keys: Strings<'a>,
    values: Strings<'a>,
    /// Partition values decoded so far, by the hash of their entries: files of one
    /// partition share one map.
    shared: RefCell<HashMap<u64, Vec<PartitionValues>>>,
}

/// Distinct partition-value maps shared per batch; past this, further ones are built
/// per file (a table partitioned that finely gains little from sharing).
const SHARED_MAPS: usize = 4096;

impl<'a> StringMap<'a> {
    fn of(parent: &'a StructArray, name: &str) -> Option<Option<Self>> {
        let Some(column) = child(parent, name)? else {
            return Some(None);
        };
        let map = column.as_map_opt()?;
        Some(Some(Self {
            map,
            keys: Strings::of(map.keys())?,
            values: Strings::of(map.values())?,
            shared: RefCell::default(),
        }))
    }

    /// The entries of `row`, or `None` when the map is null or a key is.
    fn entries(&self, row: usize) -> Option<impl Iterator<Item = (&'a str, Option<&'a str>)>> {
        if !self.map.is_valid(row) {
            return None;
        }
        let offsets = self.map.value_offsets();
        let range = offsets[row] as usize..offsets[row + 1] as usize;
        if range.clone().any(|i| self.keys.get(i).is_none()) {
            return None;
        }
        Some(range.map(|i| (self.keys.get(i).unwrap_or_default(), self.values.get(i))))
    }

    fn partition_values(&self, row: usize) -> Option<PartitionValues> {
        let mut hasher = std::hash::DefaultHasher::new();
        let mut len = 0;
        for entry in self.entries(row)? {
            entry.hash(&mut hasher);
            len += 1;
        }
        let hash = hasher.finish();
        let mut shared = self.shared.borrow_mut();
        let same = |values: &&PartitionValues| {
            values.len() == len
                && self.entries(row).is_some_and(|entries| {
                    entries
                        .zip(values.iter())
                        .all(|((k, v), (key, value))| k == key && v == value.as_deref())
                })
        };
        if let Some(values) = shared.get(&hash).and_then(|c| c.iter().find(same)) {
            return Some(values.clone());
        }
        // Entries of a Delta map are unique by key; sorting is the map's.
        let values: PartitionValues = self
            .entries(row)?
            .map(|(k, v)| (k.to_string(), v.map(str::to_string)))
            .collect();
        if shared.len() < SHARED_MAPS {
            shared.entry(hash).or_default().push(values.clone());
        }
        Some(values)
    }

    fn tags(&self, row: usize) -> Option<HashMap<String, Option<String>>> {
        Some(
            self.entries(row)?
                .map(|(k, v)| (k.to_string(), v.map(str::to_string)))
                .collect(),
        )
    }
}

/// The `deletionVector` struct column.
struct Dvs<'a> {
    dv: &'a StructArray,
    storage_type: Strings<'a>,
    path: Strings<'a>,
    offset: Option<Ints<'a>>,
    size: Ints<'a>,
    cardinality: Ints<'a>,
}

impl<'a> Dvs<'a> {
    fn of(parent: &'a StructArray) -> Option<Option<Self>> {
        let Some(column) = child(parent, "deletionVector")? else {
            return Some(None);
        };
        let dv = column.as_struct_opt()?;
        Some(Some(Self {
            dv,
            storage_type: strings(dv, "storageType")??,
            path: strings(dv, "pathOrInlineDv")??,
            offset: ints(dv, "offset")?,
            size: ints(dv, "sizeInBytes")??,
            cardinality: ints(dv, "cardinality")??,
        }))
    }

    /// `Err(())` when the DV is present but a required field is null.
    fn get(&self, row: usize) -> Result<Option<DeletionVectorDescriptor>, ()> {
        if !self.dv.is_valid(row) {
            return Ok(None);
        }
        Ok(Some(DeletionVectorDescriptor {
            storage_type: self.storage_type.get(row).ok_or(())?.to_string(),
            path_or_inline_dv: self.path.get(row).ok_or(())?.to_string(),
            offset: self
                .offset
                .as_ref()
                .and_then(|o| o.get(row))
                .map(|o| o as i32),
            size_in_bytes: self.size.get(row).ok_or(())? as i32,
            cardinality: self.cardinality.get(row).ok_or(())?,
        }))
    }
}

/// The `add` column of a checkpoint batch.
pub(super) struct AddColumns<'a> {
    add: &'a StructArray,
    path: Strings<'a>,
    partition_values: Option<StringMap<'a>>,
    size: Ints<'a>,
    modification_time: Option<Ints<'a>>,
    data_change: Option<&'a BooleanArray>,
    stats: Option<Strings<'a>>,
    /// The batch's typed statistics, which rows point into when there is no JSON.
    stats_parsed: Option<Arc<ParsedRows>>,
    tags: Option<StringMap<'a>>,
    dv: Option<Dvs<'a>>,
    base_row_id: Option<Ints<'a>>,
    default_row_commit_version: Option<Ints<'a>>,
    clustering_provider: Option<Strings<'a>>,
}

impl<'a> AddColumns<'a> {
    /// The columns of `add`, or `None` when one has an unexpected type.
    pub(super) fn of(add: &'a StructArray, lazy: Option<LazySections>) -> Option<Self> {
        Some(Self {
            add,
            path: strings(add, "path")??,
            partition_values: StringMap::of(add, "partitionValues")?,
            size: ints(add, "size")??,
            modification_time: ints(add, "modificationTime")?,
            data_change: bools(add, "dataChange")?,
            stats: strings(add, "stats")?,
            stats_parsed: match child(add, "stats_parsed")? {
                Some(c) => {
                    let all = c.as_struct_opt()?;
                    Some(Arc::new(match lazy {
                        Some(lazy) => ParsedRows::lazy(all, lazy),
                        None => ParsedRows::new(all),
                    }))
                }
                None => None,
            },
            tags: StringMap::of(add, "tags")?,
            dv: Dvs::of(add)?,
            base_row_id: ints(add, "baseRowId")?,
            default_row_commit_version: ints(add, "defaultRowCommitVersion")?,
            clustering_provider: strings(add, "clusteringProvider")?,
        })
    }

    pub(super) fn is_valid(&self, row: usize) -> bool {
        self.add.is_valid(row)
    }

    /// The `add` of `row`, or `None` when a required field is null.
    pub(super) fn get(&self, row: usize) -> Option<Add> {
        Some(Add {
            path: self.path.get(row)?.to_string(),
            partition_values: self
                .partition_values
                .as_ref()
                .and_then(|m| m.partition_values(row))
                .unwrap_or_default(),
            size: self.size.get(row)?,
            modification_time: opt_int(&self.modification_time, row).unwrap_or_default(),
            data_change: self
                .data_change
                .is_some_and(|a| a.is_valid(row) && a.value(row)),
            stats: match opt_str(&self.stats, row) {
                Some(json) => Some(Stats::from(json)),
                None => self
                    .stats_parsed
                    .as_ref()
                    .filter(|p| p.is_valid(row))
                    .map(|p| Stats::parsed(Arc::clone(p) as Arc<dyn StatsRows>, row)),
            },
            tags: self.tags.as_ref().and_then(|m| m.tags(row)),
            deletion_vector: match &self.dv {
                Some(dv) => dv.get(row).ok()?,
                None => None,
            },
            base_row_id: opt_int(&self.base_row_id, row),
            default_row_commit_version: opt_int(&self.default_row_commit_version, row),
            clustering_provider: opt_str(&self.clustering_provider, row),
        })
    }
}

/// The `remove` column of a checkpoint batch.
pub(super) struct RemoveColumns<'a> {
    remove: &'a StructArray,
    path: Strings<'a>,
    deletion_timestamp: Option<Ints<'a>>,
    data_change: Option<&'a BooleanArray>,
    extended_file_metadata: Option<&'a BooleanArray>,
    partition_values: Option<StringMap<'a>>,
    size: Option<Ints<'a>>,
    stats: Option<Strings<'a>>,
    tags: Option<StringMap<'a>>,
    dv: Option<Dvs<'a>>,
    base_row_id: Option<Ints<'a>>,
    default_row_commit_version: Option<Ints<'a>>,
}

impl<'a> RemoveColumns<'a> {
    /// The columns of `remove`, or `None` when one has an unexpected type.
    pub(super) fn of(remove: &'a StructArray) -> Option<Self> {
        Some(Self {
            remove,
            path: strings(remove, "path")??,
            deletion_timestamp: ints(remove, "deletionTimestamp")?,
            data_change: bools(remove, "dataChange")?,
            extended_file_metadata: bools(remove, "extendedFileMetadata")?,
            partition_values: StringMap::of(remove, "partitionValues")?,
            size: ints(remove, "size")?,
            stats: strings(remove, "stats")?,
            tags: StringMap::of(remove, "tags")?,
            dv: Dvs::of(remove)?,
            base_row_id: ints(remove, "baseRowId")?,
            default_row_commit_version: ints(remove, "defaultRowCommitVersion")?,
        })
    }

    pub(super) fn is_valid(&self, row: usize) -> bool {
        self.remove.is_valid(row)
    }

    /// The `remove` of `row`, or `None` when a required field is null.
    pub(super) fn get(&self, row: usize) -> Option<Remove> {
        Some(Remove {
            path: self.path.get(row)?.to_string(),
            deletion_timestamp: opt_int(&self.deletion_timestamp, row),
            data_change: self
                .data_change
                .is_some_and(|a| a.is_valid(row) && a.value(row)),
            extended_file_metadata: self
                .extended_file_metadata
                .and_then(|a| a.is_valid(row).then(|| a.value(row))),
            partition_values: self
                .partition_values
                .as_ref()
                .and_then(|m| m.partition_values(row)),
            size: opt_int(&self.size, row),
            stats: opt_str(&self.stats, row),
            tags: self.tags.as_ref().and_then(|m| m.tags(row)),
            deletion_vector: match &self.dv {
                Some(dv) => dv.get(row).ok()?,
                None => None,
            },
            base_row_id: opt_int(&self.base_row_id, row),
            default_row_commit_version: opt_int(&self.default_row_commit_version, row),
        })
    }
}

fn opt_int(column: &Option<Ints<'_>>, row: usize) -> Option<i64> {
    column.as_ref().and_then(|c| c.get(row))
}

fn opt_str(column: &Option<Strings<'_>>, row: usize) -> Option<String> {
    column.as_ref().and_then(|c| c.get(row)).map(str::to_string)
}

/// The `add` and `remove` actions of a batch decoded from their columns, and the rows
/// holding any other action; `None` when the columns cannot be decoded this way. `lazy`
/// gives the typed statistics' sections when the batch holds only their row counts.
pub(super) fn decode(
    add: Option<&StructArray>,
    remove: Option<&StructArray>,
    rows: usize,
    lazy: Option<LazySections>,
) -> Option<(Vec<Action>, Vec<u32>)> {
    let adds = match add {
        Some(a) => Some(AddColumns::of(a, lazy)?),
        None => None,
    };
    let removes = match remove {
        Some(r) => Some(RemoveColumns::of(r)?),
        None => None,
    };
    let mut actions = Vec::with_capacity(rows);
    let mut others = Vec::new();
    for row in 0..rows {
        if let Some(a) = adds.as_ref().filter(|a| a.is_valid(row)) {
            actions.push(Action::Add(a.get(row)?));
        } else if let Some(r) = removes.as_ref().filter(|r| r.is_valid(row)) {
            actions.push(Action::Remove(r.get(row)?));
        } else {
            others.push(row as u32);
        }
    }
    Some((actions, others))
}
