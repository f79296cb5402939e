//! What a snapshot remembers of immutable objects, shared with the snapshots derived from
//! it (by commits and refreshes): decoded data-file footers and deletion vectors, opened
//! index objects, state
//! derived from one version's log, and the statistics planning parsed for one version.
//! Data files, deletion vectors and index objects never change once written, so nothing
//! here is ever stale; each cache is bounded.

use std::any::{Any, TypeId};
use std::borrow::Borrow;
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasher, Hash, RandomState};
use std::ops::Bound::{Excluded, Unbounded};
use std::sync::{Arc, Mutex};

use object_store::path::Path;
use parquet::arrow::arrow_reader::ArrowReaderMetadata;
use roaring::RoaringTreemap;

/// Bytes of decoded footers kept per table handle.
const FOOTER_BYTES: usize = 64 * 1024 * 1024;
/// Opened index objects kept per table handle.
const OBJECTS: usize = 256;
/// Bytes of decoded deletion vectors kept per table handle.
const DV_BYTES: usize = 64 * 1024 * 1024;

/// A least-recently-used map bounded by a weight, which admits a new entry over the limit
/// only when its key has been asked for more often of late than the entry it would
/// evict (TinyLFU's admission) or that entry has gone unread for a while. A plain LRU
/// keeps nothing a scan of more files than fit comes back for: each pass evicts what the
/// next one reads first.
#[derive(Debug)]
pub(crate) struct Lru<K, V> {
    entries: HashMap<K, Entry<V>>,
    /// Keys by the tick they were placed at: oldest first once each entry used since it
    /// was placed is moved to its last use, which eviction does as it walks. A hit only
    /// stamps its entry, so a lookup neither clones its key nor touches this map.
    order: BTreeMap<u64, K>,
    tick: u64,
    /// Requests (`get`s) so far: an entry's age is counted in them.
    requests: u64,
    weight: usize,
    limit: usize,
    /// How often each key was asked for, made when the map first fills.
    frequency: Option<Sketch>,
    hasher: RandomState,
}

#[derive(Debug)]
struct Entry<V> {
    value: V,
    weight: usize,
    /// The tick it is under in `order`.
    placed: u64,
    /// The tick of its last use.
    used: u64,
    /// The request that last touched it.
    touched: u64,
}

impl<K: Clone + Eq + Hash, V: Clone> Lru<K, V> {
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            entries: HashMap::new(),
            order: BTreeMap::new(),
            tick: 0,
            requests: 0,
            weight: 0,
            limit,
            frequency: None,
            hasher: RandomState::new(),
        }
    }

    /// The value under `key`, if kept; counts the request either way.
    pub(crate) fn get<Q>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        if let Some(sketch) = &mut self.frequency {
            sketch.add(self.hasher.hash_one(key));
        }
        self.requests += 1;
        let entry = self.entries.get_mut(key)?;
        self.tick += 1;
        entry.used = self.tick;
        entry.touched = self.requests;
        Some(entry.value.clone())
    }

    /// Inserts `value` weighing `weight` and returns whether it was kept. Over the limit,
    /// the least recently used entries make room only while each is idle (untouched for
    /// twice as many requests as there are entries: a scan that reads it again would have
    /// come back by then) or the new key was asked for more often; otherwise the new
    /// value is not kept. A value heavier than the limit is never kept.
    pub(crate) fn insert(&mut self, key: K, value: V, weight: usize) -> bool {
        if let Some(old) = self.entries.remove(&key) {
            self.order.remove(&old.placed);
            self.weight -= old.weight;
        }
        if weight > self.limit {
            return false;
        }
        if self.weight + weight > self.limit {
            let entries = self.entries.len();
            let sketch = self.frequency.get_or_insert_with(|| Sketch::new(entries));
            let wanted = sketch.estimate(self.hasher.hash_one(&key));
            // The victims, oldest first, until the new value fits.
            let mut freed = 0;
            let mut victims = Vec::new();
            let idle_after = 2 * entries as u64;
            let mut after = None;
            while self.weight - freed + weight > self.limit {
                let next = match after {
                    None => self.order.iter().next(),
                    Some(t) => self.order.range((Excluded(t), Unbounded)).next(),
                };
                let Some((&placed, old)) = next else {
                    break;
                };
                let old = old.clone();
                let Some(entry) = self.entries.get_mut(&old) else {
                    after = Some(placed);
                    continue;
                };
                if entry.used != placed {
                    // Used since it was placed: it belongs further back.
                    self.order.remove(&placed);
                    self.order.insert(entry.used, old);
                    entry.placed = entry.used;
                    continue;
                }
                let idle = self.requests - entry.touched > idle_after;
                if !idle && sketch.estimate(self.hasher.hash_one(&old)) >= wanted {
                    return false;
                }
                freed += entry.weight;
                victims.push(old);
                after = Some(placed);
            }
            for old in victims {
                if let Some(entry) = self.entries.remove(&old) {
                    self.order.remove(&entry.placed);
                    self.weight -= entry.weight;
                }
            }
        }
        self.tick += 1;
        self.order.insert(self.tick, key.clone());
        let entry = Entry {
            value,
            weight,
            placed: self.tick,
            used: self.tick,
            touched: self.requests,
        };
        self.entries.insert(key, entry);
        self.weight += weight;
        true
    }
}

/// A count-min sketch of recent requests: four rows of counters up to 15, halved every
/// ten requests per entry of the map, so old popularity fades.
#[derive(Debug)]
struct Sketch {
    counters: Vec<u8>,
    mask: u64,
    added: usize,
    /// Requests between halvings: ten per entry, as TinyLFU samples.
    period: usize,
}

impl Sketch {
    const ROWS: usize = 4;

    /// A sketch for a map of about `entries` entries.
    fn new(entries: usize) -> Self {
        let width = (entries * 2).next_power_of_two().clamp(256, 1 << 16);
        Self {
            counters: vec![0; width * Self::ROWS],
            mask: width as u64 - 1,
            added: 0,
            period: entries.max(16) * 10,
        }
    }

    fn slots(&self, hash: u64) -> [usize; Self::ROWS] {
        let width = self.mask as usize + 1;
        std::array::from_fn(|row| {
            let h = hash.rotate_left(16 * row as u32)
                ^ (row as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            row * width + (h & self.mask) as usize
        })
    }

    fn add(&mut self, hash: u64) {
        for slot in self.slots(hash) {
            self.counters[slot] = (self.counters[slot] + 1).min(15);
        }
        self.added += 1;
        if self.added >= self.period {
            self.added = 0;
            self.counters.iter_mut().for_each(|c| *c /= 2);
        }
    }

    fn estimate(&self, hash: u64) -> u8 {
        self.slots(hash)
            .iter()
            .map(|s| self.counters[*s])
            .min()
            .unwrap_or(0)
    }
}

type Shared = Arc<dyn Any + Send + Sync>;

/// A data file's decoded footer with its Arrow schema, and the object it was read from:
/// a file found here is neither resolved nor confined again.
#[derive(Debug, Clone)]
pub(crate) struct KeptFooter {
    pub(crate) object: Path,
    pub(crate) metadata: ArrowReaderMetadata,
}

/// The caches of one table handle and the snapshots derived from it.
#[derive(Debug)]
pub(crate) struct Caches {
    footers: Mutex<Lru<String, KeptFooter>>,
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
    /// The decoded footer of the data file the log names `file` (its `add` path), with
    /// its Arrow schema and the object it was read from, if read before.
    pub(crate) fn footer(&self, file: &str) -> Option<KeptFooter> {
        self.footers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(file)
    }

    /// Remembers the decoded footer of the data file the log names `file`, read from
    /// `object`.
    pub(crate) fn keep_footer(&self, file: &str, object: Path, metadata: ArrowReaderMetadata) {
        let weight = metadata.metadata().memory_size();
        self.footers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(file.to_string(), KeptFooter { object, metadata }, weight);
    }

    /// A deletion vector decoded before, by its unique id.
    pub(crate) fn deletion_vector(&self, id: &str) -> Option<Arc<RoaringTreemap>> {
        self.dvs.lock().unwrap_or_else(|p| p.into_inner()).get(id)
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
            .get(path)?;
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

    /// Asks for `key` as a reader does: a get, and on a miss an insert.
    fn read(lru: &mut Lru<u32, u32>, key: u32, weight: usize) -> bool {
        let hit = lru.get(&key).is_some();
        if !hit {
            lru.insert(key, key * 10, weight);
        }
        hit
    }

    #[test]
    fn the_least_recently_used_entries_go_first() {
        let mut lru = Lru::new(3);
        for key in [1, 2, 3, 1] {
            read(&mut lru, key, 1);
        }
        // 4 has been asked for twice, more than 2 (the oldest), so it takes 2's place.
        read(&mut lru, 4, 1);
        read(&mut lru, 4, 1);
        assert_eq!(lru.get(&2), None);
        assert_eq!(
            (lru.get(&1), lru.get(&3), lru.get(&4)),
            (Some(10), Some(30), Some(40))
        );
    }

    #[test]
    fn a_key_asked_for_no_more_often_than_the_oldest_is_not_kept() {
        let mut lru = Lru::new(2);
        for key in [1, 2, 1, 2] {
            read(&mut lru, key, 1);
        }
        assert!(!read(&mut lru, 3, 1));
        assert_eq!(lru.get(&3), None);
        assert_eq!((lru.get(&1), lru.get(&2)), (Some(10), Some(20)));
        assert!(!lru.insert(9, 90, 3), "heavier than the whole limit");
    }

    #[test]
    fn repeated_scans_of_more_than_fit_keep_hitting() {
        let mut lru = Lru::new(100);
        let mut hits = 0;
        for pass in 0..6 {
            hits = (0..150).filter(|key| read(&mut lru, *key, 1)).count();
            assert!(pass > 0 || hits == 0);
        }
        // A plain LRU hits nothing here: each pass evicts what the next reads first.
        assert!(hits >= 90, "{hits} hits of 150 with room for 100");
    }

    #[test]
    fn entries_no_longer_read_give_way_to_new_ones() {
        let mut lru = Lru::new(10);
        for key in 0..11 {
            read(&mut lru, key, 1);
        }
        // Counted to the top while the sketch exists, then never read again.
        for _ in 0..20 {
            (0..10).for_each(|key| _ = read(&mut lru, key, 1));
        }
        for _ in 0..3 {
            (100..110).for_each(|key| _ = read(&mut lru, key, 1));
        }
        let kept = (100..110).filter(|key| lru.get(key).is_some()).count();
        assert_eq!(kept, 10);
    }

    #[test]
    fn a_new_working_set_replaces_the_old_one() {
        let mut lru = Lru::new(10);
        for _ in 0..5 {
            (0..10).for_each(|key| _ = read(&mut lru, key, 1));
        }
        for _ in 0..20 {
            (100..110).for_each(|key| _ = read(&mut lru, key, 1));
        }
        let kept = (100..110).filter(|key| lru.get(key).is_some()).count();
        assert_eq!(kept, 10);
    }
}
