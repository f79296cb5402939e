//! A file's partition values, shared between the files of one partition.
//!
//! A table of 100,000 files in a few hundred partitions held 100,000 copies of a one-entry
//! map, each a B-tree leaf of some 550 bytes: a fifth of a cold open's memory. Here the
//! map sits behind an `Arc`, so a checkpoint reader hands every file of a partition the
//! same one, and the empty map of an unpartitioned table is no allocation at all.

use std::collections::BTreeMap;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The map itself: partition column (physical name) to its serialized value.
type Map = BTreeMap<String, Option<String>>;

static EMPTY: Map = BTreeMap::new();

/// Partition values of a file: partition column (physical name) to its serialized value,
/// `None` for null. Reads go through `Deref` to the `BTreeMap`; clones share the map.
#[derive(Clone, Default)]
pub struct PartitionValues(Option<Arc<Map>>);

impl PartitionValues {
    /// No partition values.
    pub const fn new() -> Self {
        Self(None)
    }

    /// Sets `column` to `value`, returning the value it had. Copies the map first when
    /// another file shares it.
    pub fn insert(&mut self, column: String, value: Option<String>) -> Option<Option<String>> {
        Arc::make_mut(self.0.get_or_insert_with(Default::default)).insert(column, value)
    }

    /// Whether both hold the very same map (not merely equal ones).
    #[cfg(test)]
    pub(crate) fn shares_map_with(&self, other: &Self) -> bool {
        matches!((&self.0, &other.0), (Some(a), Some(b)) if Arc::ptr_eq(a, b))
    }

    /// The map, copied only when it is shared.
    pub fn into_map(self) -> Map {
        self.0.map(Arc::unwrap_or_clone).unwrap_or_default()
    }
}

impl Deref for PartitionValues {
    type Target = Map;

    fn deref(&self) -> &Map {
        self.0.as_deref().unwrap_or(&EMPTY)
    }
}

impl From<Map> for PartitionValues {
    fn from(map: Map) -> Self {
        Self((!map.is_empty()).then(|| Arc::new(map)))
    }
}

impl<const N: usize> From<[(String, Option<String>); N]> for PartitionValues {
    fn from(entries: [(String, Option<String>); N]) -> Self {
        Map::from(entries).into()
    }
}

impl FromIterator<(String, Option<String>)> for PartitionValues {
    fn from_iter<I: IntoIterator<Item = (String, Option<String>)>>(entries: I) -> Self {
        entries.into_iter().collect::<Map>().into()
    }
}

impl<'a> IntoIterator for &'a PartitionValues {
    type Item = (&'a String, &'a Option<String>);
    type IntoIter = std::collections::btree_map::Iter<'a, String, Option<String>>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

// Equality, order and hash are the map's: an empty `Some` (never built here) and `None`
// are the same values.
impl PartialEq for PartitionValues {
    fn eq(&self, other: &Self) -> bool {
        let same = match (&self.0, &other.0) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        };
        same || **self == **other
    }
}

impl Eq for PartitionValues {}

impl PartialOrd for PartitionValues {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for PartitionValues {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (**self).cmp(&**other)
    }
}

impl Hash for PartitionValues {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (**self).hash(state);
    }
}

impl fmt::Debug for PartitionValues {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (**self).fmt(f)
    }
}

impl Serialize for PartitionValues {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        (**self).serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for PartitionValues {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Map::deserialize(deserializer).map(Self::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(value: Option<&str>) -> PartitionValues {
        [("p".to_string(), value.map(str::to_string))].into()
    }

    #[test]
    fn empty_maps_are_equal_however_built_and_serialize_as_an_empty_object() {
        let built: PartitionValues = Vec::new().into_iter().collect();
        assert_eq!(built, PartitionValues::new());
        assert!(built.is_empty());
        assert_eq!(serde_json::to_string(&built).unwrap(), "{}");
        let read: PartitionValues = serde_json::from_str("{}").unwrap();
        assert_eq!(read, PartitionValues::default());
    }

    #[test]
    fn an_insert_into_a_shared_map_leaves_the_other_holder_alone() {
        let a = one(Some("x"));
        let mut b = a.clone();
        assert_eq!(b.insert("q".into(), None), None);
        assert_eq!(a.len(), 1);
        assert_eq!(b.len(), 2);
        assert_eq!(b.get("q"), Some(&None));
        assert_ne!(a, b);
    }

    #[test]
    fn json_round_trips_with_nulls() {
        let values = one(None);
        let text = serde_json::to_string(&values).unwrap();
        assert_eq!(text, r#"{"p":null}"#);
        let back: PartitionValues = serde_json::from_str(&text).unwrap();
        assert_eq!(back, values);
        assert_eq!(back.get("p"), Some(&None));
        assert!(one(Some("a")) < one(Some("b")));
    }
}
