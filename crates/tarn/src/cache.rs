//! What a snapshot remembers of immutable objects, shared with the snapshots derived from
//! it (by commits and refreshes): decoded data-file footers and deletion vectors, opened
//! index objects, state
//! derived from one version's log, and the statistics planning parsed for one version.
//! Data files, deletion vectors and index objects never change once written, so nothing
//! here is ever stale; each cache is bounded.

use std::any::{Any, TypeId};
use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::sync::{Arc, Mutex};

use parquet::file::metadata::ParquetMetaData;
use roaring::RoaringTreemap;

/// Bytes of decoded footers kept per table handle.
const FOOTER_BYTES: usize = 64 * 1024 * 1024;
/// Opened index objects kept per table handle.
const OBJECTS: usize = 256;
/// Bytes of decoded deletion vectors kept per table handle.
const DV_BYTES: usize = 64 * 1024 * 1024;

/// A least-recently-used map bounded by a weight.
#[derive(Debug)]
pub(crate) struct Lru<K, V> {
    entries: HashMap<K, (V, u64, usize)>,
    order: BTreeMap<u64, K>,
    tick: u64,
    weight: usize,
    limit: usize,
}

impl<K: Clone + Eq + Hash, V: Clone> Lru<K, V> {
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            entries: HashMap::new(),
            order: BTreeMap::new(),
            tick: 0,
            weight: 0,
            limit,
        }
    }

    pub(crate) fn get(&mut self, key: &K) -> Option<V> {
        let (value, tick, _) = self.entries.get_mut(key)?;
        self.order.remove(tick);
        self.tick += 1;
        *tick = self.tick;
        self.order.insert(self.tick, key.clone());
        Some(value.clone())
    }

    /// Inserts `value` weighing `weight`, evicting the least recently used entries over
    /// the limit.
    pub(crate) fn insert(&mut self, key: K, value: V, weight: usize) {
        if let Some((_, tick, w)) = self.entries.remove(&key) {
            self.order.remove(&tick);
            self.weight -= w;
        }
        self.tick += 1;
        self.order.insert(self.tick, key.clone());
        self.entries.insert(key, (value, self.tick, weight));
        self.weight += weight;
        while self.weight > self.limit && self.entries.len() > 1 {
            let Some((_, oldest)) = self.order.pop_first() else {
                break;
            };
            if let Some((_, _, w)) = self.entries.remove(&oldest) {
                self.weight -= w;
            }
        }
    }
}

type Shared = Arc<dyn Any + Send + Sync>;

/// The caches of one table handle and the snapshots derived from it.
#[derive(Debug)]
pub(crate) struct Caches {
    footers: Mutex<Lru<String, Arc<ParquetMetaData>>>,
    objects: Mutex<Lru<String, Shared>>,
    dvs: Mutex<Lru<String, Arc<RoaringTreemap>>>,
    derived: Mutex<Option<(i64, &'static str, Shared)>>,
    /// One value per type kept for one version at a time (the statistics planning
    /// parsed), so the layers above keep what they derive without this one knowing it.
    per_version: Mutex<HashMap<TypeId, (i64, Shared)>>,
    /// One value per type for the handle's life (the commit contention counters).
    shared: Mutex<HashMap<TypeId, Shared>>,
}

impl Default for Caches {
    fn default() -> Self {
        Self {
            footers: Mutex::new(Lru::new(FOOTER_BYTES)),
            objects: Mutex::new(Lru::new(OBJECTS)),
            dvs: Mutex::new(Lru::new(DV_BYTES)),
            derived: Mutex::new(None),
            per_version: Mutex::new(HashMap::new()),
            shared: Mutex::new(HashMap::new()),
        }
    }
}

impl Caches {
    /// The decoded footer of the data file at `path`, if read before.
    pub(crate) fn footer(&self, path: &str) -> Option<Arc<ParquetMetaData>> {
        self.footers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&path.to_string())
    }

    /// Remembers the decoded footer of the data file at `path`.
    pub(crate) fn keep_footer(&self, path: &str, footer: Arc<ParquetMetaData>) {
        let weight = footer.memory_size();
        self.footers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(path.to_string(), footer, weight);
    }

    /// A deletion vector decoded before, by its unique id.
    pub(crate) fn deletion_vector(&self, id: &str) -> Option<Arc<RoaringTreemap>> {
        self.dvs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&id.to_string())
    }

    /// Remembers a decoded deletion vector.
    pub(crate) fn keep_deletion_vector(&self, id: &str, bitmap: Arc<RoaringTreemap>) {
        let weight = bitmap.serialized_size();
        self.dvs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.to_string(), bitmap, weight);
    }

    /// An object opened before (an index object), by its path.
    pub(crate) fn object<T: Any + Send + Sync>(&self, path: &str) -> Option<Arc<T>> {
        let found = self
            .objects
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&path.to_string())?;
        found.downcast::<T>().ok()
    }

    /// Remembers an opened object.
    pub(crate) fn keep_object<T: Any + Send + Sync>(&self, path: &str, object: Arc<T>) {
        self.objects
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(path.to_string(), object, 1);
    }

    /// The value of type `T` kept for `version`, made by `make` when the one held is of
    /// another version (which it replaces) or none is held.
    pub(crate) fn for_version<T: Any + Send + Sync>(
        &self,
        version: i64,
        make: impl FnOnce() -> T,
    ) -> Arc<T> {
        let mut held = self.per_version.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((v, value)) = held.get(&TypeId::of::<T>())
            && *v == version
            && let Ok(value) = Arc::clone(value).downcast::<T>()
        {
            return value;
        }
        let value = Arc::new(make());
        held.insert(TypeId::of::<T>(), (version, Arc::clone(&value) as Shared));
        value
    }

    /// The one value of type `T` these caches keep, made at first use.
    pub(crate) fn shared<T: Any + Send + Sync + Default>(&self) -> Arc<T> {
        let mut held = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        let value = held
            .entry(TypeId::of::<T>())
            .or_insert_with(|| Arc::new(T::default()) as Shared);
        match Arc::clone(value).downcast::<T>() {
            Ok(value) => value,
            // Entries are keyed by their own type, so this never runs.
            Err(_) => Arc::new(T::default()),
        }
    }

    /// State derived from version `version`'s log under `key`, computed once per version.
    pub(crate) fn derived<T: Any + Send + Sync, E>(
        &self,
        version: i64,
        key: &'static str,
        compute: impl FnOnce() -> Result<T, E>,
    ) -> Result<Arc<T>, E> {
        {
            let held = self.derived.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((v, k, value)) = held.as_ref()
                && *v == version
                && *k == key
                && let Ok(value) = Arc::clone(value).downcast::<T>()
            {
                return Ok(value);
            }
        }
        let value = Arc::new(compute()?);
        *self.derived.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((version, key, Arc::clone(&value) as Shared));
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_least_recently_used_entries_go_first() {
        let mut lru = Lru::new(3);
        lru.insert("a", 1, 1);
        lru.insert("b", 2, 1);
        lru.insert("c", 3, 1);
        assert_eq!(lru.get(&"a"), Some(1));
        lru.insert("d", 4, 1);
        assert_eq!(lru.get(&"b"), None);
        assert_eq!(lru.get(&"a"), Some(1));
        lru.insert("e", 5, 2);
        assert_eq!((lru.get(&"c"), lru.get(&"d")), (None, None));
        assert_eq!(lru.get(&"e"), Some(5));
    }
}
