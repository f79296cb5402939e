//! The cache's files on local disk: one directory per object, holding a metadata file and
//! its blocks, and the LRU bookkeeping that keeps their total under the capacity.
//!
//! Layout under the cache directory:
//!
//! ```text
//! v1/<object hash, 16 hex digits>/meta      the object's path, size, modified time, e-tag
//! v1/<object hash, 16 hex digits>/<block>   one block: its bytes, then a CRC-32 (4 bytes LE)
//! ```
//!
//! Every file is written under a temporary name and renamed into place, so a reader (in this
//! process or another) sees a whole file or none. A block's CRC covers its bytes and the
//! identity of the object it came from (path, size, e-tag or modified time), so a block of
//! another object (a hash collision) or of an earlier object at the same path never passes
//! for this one. Blocks are checked against the CRC and their expected length on every read;
//! anything that fails is a miss and is removed. A file that
//! vanishes between lookup and read (another process evicted it) is a miss too. Every method
//! here does blocking file I/O: callers run them off the async threads.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io::{self, Write};
use std::path::{Path as FsPath, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use chrono::DateTime;
use object_store::ObjectMeta;
use object_store::path::Path;

const LAYOUT: &str = "v1";
const META: &str = "meta";
const META_HEADER: &str = "tarn-cache-meta 1";

/// One block of one object: the object's hash and the block's index.
pub(super) type BlockKey = (u64, u64);

/// FNV-1a, 64 bits: stable across builds and processes (unlike `DefaultHasher`), which
/// matters because the hash names directories other processes read. Collisions are caught
/// by the path stored in each object's metadata.
pub(super) fn object_hash(path: &Path) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in path.as_ref().bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

#[derive(Debug, Default)]
struct Lru {
    tick: u64,
    /// Length on disk and last use of each block this process knows of.
    blocks: HashMap<BlockKey, (u64, u64)>,
    /// Last use -> block, oldest first.
    order: BTreeMap<u64, BlockKey>,
    total: u64,
}

impl Lru {
    fn touch(&mut self, key: BlockKey) {
        if let Some((_, tick)) = self.blocks.get_mut(&key) {
            self.order.remove(tick);
            self.tick += 1;
            *tick = self.tick;
            self.order.insert(self.tick, key);
        }
    }

    fn insert(&mut self, key: BlockKey, len: u64) {
        self.remove(key);
        self.tick += 1;
        self.blocks.insert(key, (len, self.tick));
        self.order.insert(self.tick, key);
        self.total += len;
    }

    fn remove(&mut self, key: BlockKey) {
        if let Some((len, tick)) = self.blocks.remove(&key) {
            self.order.remove(&tick);
            self.total -= len;
        }
    }

    /// Takes the least recently used blocks out until the total fits `capacity`.
    fn over(&mut self, capacity: u64) -> Vec<BlockKey> {
        let mut out = Vec::new();
        while self.total > capacity {
            let Some((_, key)) = self.order.pop_first() else {
                break;
            };
            if let Some((len, _)) = self.blocks.remove(&key) {
                self.total -= len;
            }
            out.push(key);
        }
        out
    }
}

/// The cache directory and what this process knows of its contents.
#[derive(Debug)]
pub(super) struct DiskCache {
    root: PathBuf,
    capacity: u64,
    lru: Mutex<Lru>,
    /// Bytes written since the directory was last scanned, to rescan now and then and so
    /// see (and count against the capacity) blocks other processes wrote.
    written_since_scan: AtomicU64,
    temp_counter: AtomicU64,
    pub(super) evictions: AtomicU64,
}

impl DiskCache {
    /// Opens (creating if needed) the cache under `dir`, learns what is already there and
    /// evicts down to `capacity`.
    pub(super) fn open(dir: &FsPath, capacity: u64) -> io::Result<Self> {
        let root = dir.join(LAYOUT);
        fs::create_dir_all(&root)?;
        let cache = Self {
            root,
            capacity,
            lru: Mutex::new(Lru::default()),
            written_since_scan: AtomicU64::new(0),
            temp_counter: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
        };
        cache.rescan()?;
        Ok(cache)
    }

    fn lru(&self) -> std::sync::MutexGuard<'_, Lru> {
        // The bookkeeping stays consistent even if a holder panicked: every update is a
        // few map operations that complete or do not start.
        self.lru.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn object_dir(&self, hash: u64) -> PathBuf {
        self.root.join(format!("{hash:016x}"))
    }

    /// Walks the directory: blocks this process had not seen join the LRU as older than
    /// any it has used (oldest modified first), vanished ones leave it; then evicts.
    pub(super) fn rescan(&self) -> io::Result<()> {
        let mut found: Vec<(std::time::SystemTime, BlockKey, u64)> = Vec::new();
        for object in fs::read_dir(&self.root)? {
            let object = object?;
            let Some(hash) = object
                .file_name()
                .to_str()
                .and_then(|n| u64::from_str_radix(n, 16).ok())
            else {
                continue;
            };
            let Ok(entries) = fs::read_dir(object.path()) else {
                continue; // removed meanwhile
            };
            for entry in entries.flatten() {
                let name = entry.file_name();
                let Some(name) = name.to_str() else { continue };
                if name.contains(".tmp.") {
                    remove_stale_temp(&entry.path());
                    continue;
                }
                let (Ok(block), Ok(meta)) = (name.parse::<u64>(), entry.metadata()) else {
                    continue;
                };
                let modified = meta.modified().unwrap_or(std::time::UNIX_EPOCH);
                found.push((modified, (hash, block), meta.len()));
            }
        }
        found.sort_by_key(|(modified, _, _)| *modified);
        let evicted = {
            let mut lru = self.lru();
            let known: HashMap<BlockKey, (u64, u64)> = std::mem::take(&mut lru.blocks);
            let mut order: BTreeMap<u64, BlockKey> = BTreeMap::new();
            let mut blocks = HashMap::with_capacity(found.len());
            let mut total = 0;
            // Unknown blocks take ticks below every known one, in modification order.
            let unknown_span = found.len() as u64;
            let mut next_unknown = 0u64;
            for (_, key, len) in &found {
                let tick = match known.get(key) {
                    Some((_, tick)) => unknown_span + 1 + *tick,
                    None => {
                        next_unknown += 1;
                        next_unknown
                    }
                };
                blocks.insert(*key, (*len, tick));
                order.insert(tick, *key);
                total += len;
            }
            lru.tick += unknown_span + 1;
            lru.blocks = blocks;
            lru.order = order;
            lru.total = total;
            lru.over(self.capacity)
        };
        self.written_since_scan.store(0, Ordering::Relaxed);
        self.delete_blocks(&evicted);
        Ok(())
    }

    fn delete_blocks(&self, keys: &[BlockKey]) {
        for &(hash, block) in keys {
            let _ = fs::remove_file(self.object_dir(hash).join(block.to_string()));
            self.evictions.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The cached metadata of `path`, if present, whole, and really of `path`.
    pub(super) fn read_meta(&self, path: &Path) -> Option<ObjectMeta> {
        let text = fs::read_to_string(self.object_dir(object_hash(path)).join(META)).ok()?;
        let meta = parse_meta(&text)?;
        (meta.location == *path).then_some(meta)
    }

    /// Records the metadata of an object. Fails only on I/O errors, which callers ignore:
    /// the cache is an optimisation.
    pub(super) fn write_meta(&self, meta: &ObjectMeta) -> io::Result<()> {
        let dir = self.object_dir(object_hash(&meta.location));
        fs::create_dir_all(&dir)?;
        let text = format!(
            "{META_HEADER}\n{}\n{}\n{}\n{}\n{}",
            meta.size,
            meta.last_modified.timestamp_nanos_opt().unwrap_or_default(),
            meta.e_tag.as_deref().unwrap_or(""),
            meta.version.as_deref().unwrap_or(""),
            meta.location.as_ref(),
        );
        self.write_atomically(&dir.join(META), text.as_bytes(), None)
    }

    /// Reads block `block` of the object `meta` describes, expecting `len` bytes. `None` on
    /// a miss, a torn or corrupt file or one of another object (which is removed), or any
    /// I/O error.
    pub(super) fn read_block(&self, meta: &ObjectMeta, block: u64, len: u64) -> Option<Bytes> {
        let key = (object_hash(&meta.location), block);
        let file = self.object_dir(key.0).join(block.to_string());
        let raw = match fs::read(&file) {
            Ok(raw) => raw,
            Err(_) => {
                self.lru().remove(key);
                return None;
            }
        };
        let valid = raw.len() as u64 == len + 4 && {
            let (data, crc) = raw.split_at(raw.len() - 4);
            block_crc(meta, data).to_le_bytes() == crc
        };
        if !valid {
            self.lru().remove(key);
            let _ = fs::remove_file(&file);
            return None;
        }
        let mut lru = self.lru();
        if lru.blocks.contains_key(&key) {
            lru.touch(key);
        } else {
            // Written by another process: it now counts against our bound too.
            lru.insert(key, raw.len() as u64);
        }
        drop(lru);
        let mut raw = raw;
        raw.truncate(len as usize);
        Some(Bytes::from(raw))
    }

    /// Stores block `block` of the object `meta` describes and evicts least recently used
    /// blocks past the capacity. I/O errors (a full disk) leave the block uncached.
    pub(super) fn write_block(&self, meta: &ObjectMeta, block: u64, data: &[u8]) -> io::Result<()> {
        let key = (object_hash(&meta.location), block);
        let dir = self.object_dir(key.0);
        fs::create_dir_all(&dir)?;
        let crc = block_crc(meta, data).to_le_bytes();
        self.write_atomically(&dir.join(block.to_string()), data, Some(&crc))?;
        let on_disk = data.len() as u64 + 4;
        let evicted = {
            let mut lru = self.lru();
            lru.insert(key, on_disk);
            lru.over(self.capacity)
        };
        self.delete_blocks(&evicted);
        let written = self
            .written_since_scan
            .fetch_add(on_disk, Ordering::Relaxed)
            + on_disk;
        if written > self.capacity / 8 {
            self.rescan()?;
        }
        Ok(())
    }

    /// Forgets everything cached for `path`, in every process sharing the directory.
    pub(super) fn remove_object(&self, path: &Path) {
        let hash = object_hash(path);
        let dir = self.object_dir(hash);
        // Only if the directory really holds `path`, not a colliding one: the other path's
        // blocks stay valid.
        if let Ok(text) = fs::read_to_string(dir.join(META))
            && parse_meta(&text).is_some_and(|m| m.location != *path)
        {
            return;
        }
        let _ = fs::remove_dir_all(&dir);
        let mut lru = self.lru();
        let keys: Vec<BlockKey> = lru
            .blocks
            .keys()
            .filter(|(h, _)| *h == hash)
            .copied()
            .collect();
        for key in keys {
            lru.remove(key);
        }
    }

    /// Bytes of blocks this process counts against the capacity.
    pub(super) fn bytes_cached(&self) -> u64 {
        self.lru().total
    }

    fn write_atomically(&self, to: &FsPath, data: &[u8], trailer: Option<&[u8]>) -> io::Result<()> {
        let n = self.temp_counter.fetch_add(1, Ordering::Relaxed);
        let name = to.file_name().and_then(|n| n.to_str()).unwrap_or("file");
        let temp = to.with_file_name(format!("{name}.tmp.{}.{n}", std::process::id()));
        let written = (|| {
            let mut file = fs::File::create(&temp)?;
            file.write_all(data)?;
            if let Some(trailer) = trailer {
                file.write_all(trailer)?;
            }
            fs::rename(&temp, to)
        })();
        if written.is_err() {
            let _ = fs::remove_file(&temp);
        }
        written
    }
}

/// Removes a temporary file left by a writer that died, once it is clearly not being
/// written any more (older than a minute).
fn remove_stale_temp(path: &FsPath) {
    let stale = fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age.as_secs() > 60);
    if stale {
        let _ = fs::remove_file(path);
    }
}

/// The CRC of a block: its bytes, then the identity of its object.
fn block_crc(meta: &ObjectMeta, data: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(data);
    hasher.update(meta.location.as_ref().as_bytes());
    hasher.update(&meta.size.to_le_bytes());
    match &meta.e_tag {
        Some(e_tag) => hasher.update(e_tag.as_bytes()),
        None => hasher.update(
            &meta
                .last_modified
                .timestamp_nanos_opt()
                .unwrap_or_default()
                .to_le_bytes(),
        ),
    }
    hasher.finalize()
}

fn parse_meta(text: &str) -> Option<ObjectMeta> {
    let mut lines = text.splitn(6, '\n');
    if lines.next()? != META_HEADER {
        return None;
    }
    let size = lines.next()?.parse().ok()?;
    let nanos: i64 = lines.next()?.parse().ok()?;
    let e_tag = Some(lines.next()?)
        .filter(|s| !s.is_empty())
        .map(String::from);
    let version = Some(lines.next()?)
        .filter(|s| !s.is_empty())
        .map(String::from);
    let location = Path::from(lines.next()?);
    Some(ObjectMeta {
        location,
        last_modified: DateTime::from_timestamp_nanos(nanos),
        size,
        e_tag,
        version,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(path: &str, size: u64) -> ObjectMeta {
        ObjectMeta {
            location: Path::from(path),
            last_modified: DateTime::from_timestamp_nanos(1_700_000_000_123_456_789),
            size,
            e_tag: Some("\"abc\"".into()),
            version: None,
        }
    }

    #[test]
    fn metadata_round_trips_and_is_checked_against_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let cache = DiskCache::open(dir.path(), 1 << 20).unwrap();
        let m = meta("t/part-1.parquet", 12_345);
        cache.write_meta(&m).unwrap();
        assert_eq!(cache.read_meta(&m.location), Some(m));
        assert_eq!(cache.read_meta(&Path::from("t/other.parquet")), None);
    }

    #[test]
    fn blocks_are_checked_and_evicted_least_recently_used_first() {
        let dir = tempfile::tempdir().unwrap();
        // Room for two 100-byte blocks (plus their CRCs), not three.
        let cache = DiskCache::open(dir.path(), 210).unwrap();
        let m = meta("t/a.parquet", 300);
        for block in 0..2 {
            cache.write_block(&m, block, &[block as u8; 100]).unwrap();
        }
        assert!(cache.read_block(&m, 0, 100).is_some()); // 0 is now newer than 1
        cache.write_block(&m, 2, &[2; 100]).unwrap();
        assert_eq!(cache.read_block(&m, 1, 100), None);
        assert_eq!(cache.read_block(&m, 0, 100).unwrap(), vec![0u8; 100]);
        assert_eq!(cache.read_block(&m, 2, 100).unwrap(), vec![2u8; 100]);
        assert_eq!(cache.bytes_cached(), 208);
        // A wrong expected length, a block of another version of the object, or a flipped
        // byte is a miss and removes the block.
        assert_eq!(cache.read_block(&m, 2, 99), None);
        cache.write_block(&m, 1, &[1; 100]).unwrap();
        let rewritten = ObjectMeta {
            e_tag: Some("\"def\"".into()),
            ..m.clone()
        };
        assert_eq!(cache.read_block(&rewritten, 1, 100), None);
        cache.write_block(&m, 0, &[7; 100]).unwrap();
        let file = dir
            .path()
            .join(LAYOUT)
            .join(format!("{:016x}/0", object_hash(&m.location)));
        let mut raw = fs::read(&file).unwrap();
        raw[10] ^= 1;
        fs::write(&file, raw).unwrap();
        assert_eq!(cache.read_block(&m, 0, 100), None);
        assert!(!file.exists());
    }

    #[test]
    fn a_reopened_cache_knows_its_blocks_and_removing_an_object_clears_them() {
        let dir = tempfile::tempdir().unwrap();
        let m = meta("t/b.parquet", 200);
        {
            let cache = DiskCache::open(dir.path(), 1 << 20).unwrap();
            cache.write_meta(&m).unwrap();
            cache.write_block(&m, 0, &[1; 100]).unwrap();
            cache.write_block(&m, 1, &[2; 100]).unwrap();
        }
        let cache = DiskCache::open(dir.path(), 1 << 20).unwrap();
        assert_eq!(cache.bytes_cached(), 208);
        assert_eq!(cache.read_block(&m, 1, 100).unwrap(), vec![2u8; 100]);
        cache.remove_object(&m.location);
        assert_eq!(cache.bytes_cached(), 0);
        assert_eq!(cache.read_block(&m, 0, 100), None);
        assert_eq!(cache.read_meta(&m.location), None);
        // Reopening with a smaller bound evicts down to it.
        cache.write_block(&m, 0, &[1; 100]).unwrap();
        cache.write_block(&m, 1, &[2; 100]).unwrap();
        let small = DiskCache::open(dir.path(), 150).unwrap();
        assert_eq!(small.bytes_cached(), 104);
    }
}
