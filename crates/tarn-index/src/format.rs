//! The frame every index object shares, and the helpers to read its parts.
//!
//! An index object is written once and never changed:
//!
//! ```text
//! +--------------------+----------------+-----------------------------------------+
//! | parts (pages,      | meta           | footer, 32 bytes, little-endian:        |
//! |  bitmaps, files)   | (Arrow IPC     |   meta offset     u64                   |
//! |  each with a CRC-32|  stream, or    |   meta length     u64                   |
//! |  kept in the meta  |  JSON for FTS) |   meta CRC-32     u32                   |
//! |                    |                |   format version  u16                   |
//! |                    |                |   kind            u8 (1 BTree, 2 Bitmap,|
//! |                    |                |                       3 full-text)      |
//! |                    |                |   reserved        u8 (0)                |
//! |                    |                |   magic           "TARNIDX1"            |
//! +--------------------+----------------+-----------------------------------------+
//! ```
//!
//! A reader fetches a suffix of the object (the footer and, for most indices, the whole
//! meta) in one GET, checks the magic, kind, version, sizes and the meta's checksum, and
//! then fetches only the parts a query needs, checking each part's checksum. Every check
//! that fails is [`Error::Corrupt`] naming the object; a version above
//! [`FORMAT_VERSION`] is [`Error::UnsupportedVersion`].

use std::ops::Range;
use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::ipc::reader::StreamReader;
use arrow::ipc::writer::StreamWriter;
use bytes::Bytes;
use object_store::path::Path;
use object_store::{GetOptions, GetRange, ObjectStore, ObjectStoreExt, PutPayload};

use crate::{Error, Result};

/// The last 8 bytes of every index object.
pub const MAGIC: &[u8; 8] = b"TARNIDX1";
/// The footer's size in bytes.
pub const FOOTER_LEN: usize = 32;
/// The format version this build writes, and the newest it reads.
pub const FORMAT_VERSION: u16 = 1;
/// Bytes fetched from the end of an object when it is opened: the footer and, for
/// indices up to about ten million rows, the whole meta.
pub const SUFFIX_HINT: u64 = 256 * 1024;

/// The kind of an index: the kind of its objects, and (as `btree`, `bitmap` or `fulltext`)
/// the name tables record it under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IndexKind {
    /// Sorted pages of `(value, address)`: equality, `IN`, ranges and prefixes on any
    /// orderable column.
    #[serde(rename = "btree")]
    BTree,
    /// A bitmap of addresses per distinct value: equality, `IN` and `IS NULL` on columns
    /// of few distinct values.
    Bitmap,
    /// A tantivy full-text index over a string column.
    #[serde(rename = "fulltext")]
    FullText,
}

impl std::fmt::Display for IndexKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl IndexKind {
    /// The kind's name: `btree`, `bitmap` or `fulltext`.
    pub fn name(self) -> &'static str {
        match self {
            Self::BTree => "btree",
            Self::Bitmap => "bitmap",
            Self::FullText => "fulltext",
        }
    }

    fn code(self) -> u8 {
        match self {
            Self::BTree => 1,
            Self::Bitmap => 2,
            Self::FullText => 3,
        }
    }

    fn from_code(code: u8) -> Option<Self> {
        match code {
            1 => Some(Self::BTree),
            2 => Some(Self::Bitmap),
            3 => Some(Self::FullText),
            _ => None,
        }
    }
}

/// What writing an index object produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectInfo {
    /// The object's size in bytes.
    pub size: u64,
    /// Row addresses indexed (nulls included).
    pub rows: u64,
}

/// Writes objects: parts first, then the meta and the footer.
#[derive(Debug, Default)]
pub(crate) struct ObjectWriter {
    buffer: Vec<u8>,
}

impl ObjectWriter {
    /// Appends a part and returns its byte range and checksum.
    pub(crate) fn part(&mut self, bytes: &[u8]) -> (Range<u64>, u32) {
        let start = self.buffer.len() as u64;
        self.buffer.extend_from_slice(bytes);
        (start..self.buffer.len() as u64, crc32fast::hash(bytes))
    }

    /// The bytes written so far.
    #[cfg_attr(not(feature = "fts"), allow(dead_code))]
    pub(crate) fn snapshot(&self) -> Bytes {
        Bytes::copy_from_slice(&self.buffer)
    }

    /// Appends the meta and the footer; returns the whole object.
    pub(crate) fn finish(mut self, meta: &[u8], kind: IndexKind) -> Bytes {
        let offset = self.buffer.len() as u64;
        self.buffer.extend_from_slice(meta);
        self.buffer.extend_from_slice(&offset.to_le_bytes());
        self.buffer
            .extend_from_slice(&(meta.len() as u64).to_le_bytes());
        self.buffer
            .extend_from_slice(&crc32fast::hash(meta).to_le_bytes());
        self.buffer.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        self.buffer.push(kind.code());
        self.buffer.push(0);
        self.buffer.extend_from_slice(MAGIC);
        Bytes::from(self.buffer)
    }
}

/// Uploads a finished object.
pub(crate) async fn put(store: &dyn ObjectStore, path: &Path, bytes: Bytes) -> Result<u64> {
    let size = bytes.len() as u64;
    store
        .put(path, PutPayload::from_bytes(bytes))
        .await
        .map_err(Error::store(tarn_store::StoreOp::Put, path))?;
    Ok(size)
}

/// An opened object: where it is, its size, and its checked meta.
#[derive(Debug, Clone)]
pub(crate) struct Opened {
    pub(crate) path: Path,
    pub(crate) size: u64,
    pub(crate) meta: Bytes,
    /// The suffix fetched on open, starting at `size - tail.len()`: parts inside it are
    /// served without another request.
    pub(crate) tail: Bytes,
}

/// Opens an object of `kind`: one suffix GET (two when the meta is larger than the hint).
pub(crate) async fn open(store: &dyn ObjectStore, path: &Path, kind: IndexKind) -> Result<Opened> {
    let options = GetOptions {
        range: Some(GetRange::Suffix(SUFFIX_HINT)),
        ..Default::default()
    };
    let got = store
        .get_opts(path, options)
        .await
        .map_err(Error::store(tarn_store::StoreOp::Get, path))?;
    let size = got.meta.size;
    let tail = got
        .bytes()
        .await
        .map_err(Error::store(tarn_store::StoreOp::Get, path))?;
    if tail.len() < FOOTER_LEN {
        return Err(Error::corrupt(
            path,
            format!("{size} bytes is too short for an index object"),
        ));
    }
    let footer = &tail[tail.len() - FOOTER_LEN..];
    if &footer[24..32] != MAGIC {
        return Err(Error::corrupt(path, "bad magic: not a Tarn index object"));
    }
    let u64_at = |at: usize| u64::from_le_bytes(footer[at..at + 8].try_into().unwrap_or([0; 8]));
    let (meta_offset, meta_len) = (u64_at(0), u64_at(8));
    let meta_crc = u32::from_le_bytes(footer[16..20].try_into().unwrap_or([0; 4]));
    let version = u16::from_le_bytes([footer[20], footer[21]]);
    if version > FORMAT_VERSION || version == 0 {
        return Err(Error::UnsupportedVersion {
            path: path.to_string(),
            version,
            supported: FORMAT_VERSION,
        });
    }
    let found = IndexKind::from_code(footer[22])
        .ok_or_else(|| Error::corrupt(path, format!("unknown index kind {}", footer[22])))?;
    if found != kind {
        return Err(Error::WrongKind {
            path: path.to_string(),
            expected: kind.name().into(),
            found: found.name().into(),
        });
    }
    if meta_offset
        .checked_add(meta_len)
        .and_then(|e| e.checked_add(FOOTER_LEN as u64))
        != Some(size)
    {
        return Err(Error::corrupt(
            path,
            format!(
                "footer says meta at {meta_offset}+{meta_len}, object has {size} bytes (truncated?)"
            ),
        ));
    }
    let tail_start = size - tail.len() as u64;
    let meta = if meta_offset >= tail_start {
        let start = (meta_offset - tail_start) as usize;
        tail.slice(start..start + meta_len as usize)
    } else {
        store
            .get_range(path, meta_offset..meta_offset + meta_len)
            .await
            .map_err(Error::store(tarn_store::StoreOp::Get, path))?
    };
    if crc32fast::hash(&meta) != meta_crc {
        return Err(Error::corrupt(path, "the meta's checksum does not match"));
    }
    Ok(Opened {
        path: path.clone(),
        size,
        meta,
        tail,
    })
}

impl Opened {
    /// Reads parts by their ranges (from the tail when inside it, else with coalesced
    /// ranged GETs in one round trip) and checks their checksums.
    pub(crate) async fn parts(
        &self,
        store: &dyn ObjectStore,
        parts: &[(Range<u64>, u32)],
    ) -> Result<Vec<Bytes>> {
        let tail_start = self.size - self.tail.len() as u64;
        let missing: Vec<Range<u64>> = parts
            .iter()
            .filter(|(r, _)| r.start < tail_start)
            .map(|(r, _)| r.clone())
            .collect();
        let mut fetched = if missing.is_empty() {
            Vec::new()
        } else {
            store
                .get_ranges(&self.path, &missing)
                .await
                .map_err(Error::store(tarn_store::StoreOp::Get, &self.path))?
        }
        .into_iter();
        let mut out = Vec::with_capacity(parts.len());
        for (range, crc) in parts {
            if range.end > self.size || range.start > range.end {
                return Err(Error::corrupt(
                    &self.path,
                    format!("part {range:?} lies outside the object"),
                ));
            }
            let bytes = if range.start >= tail_start {
                let s = (range.start - tail_start) as usize;
                self.tail.slice(s..s + (range.end - range.start) as usize)
            } else {
                fetched
                    .next()
                    .ok_or_else(|| Error::corrupt(&self.path, "a part was not returned"))?
            };
            if bytes.len() as u64 != range.end - range.start {
                return Err(Error::corrupt(
                    &self.path,
                    format!("part {range:?} is truncated"),
                ));
            }
            if crc32fast::hash(&bytes) != *crc {
                return Err(Error::corrupt(
                    &self.path,
                    format!("the checksum of part {range:?} does not match"),
                ));
            }
            out.push(bytes);
        }
        Ok(out)
    }
}

/// A batch as an Arrow IPC stream.
pub(crate) fn encode_batch(batch: &RecordBatch) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut writer = StreamWriter::try_new(&mut out, &batch.schema())
        .map_err(Error::arrow("encoding an index part"))?;
    writer
        .write(batch)
        .map_err(Error::arrow("encoding an index part"))?;
    writer
        .finish()
        .map_err(Error::arrow("encoding an index part"))?;
    drop(writer);
    Ok(out)
}

/// The single batch of an Arrow IPC stream.
pub(crate) fn decode_batch(path: &Path, bytes: &Bytes) -> Result<RecordBatch> {
    let reader = StreamReader::try_new(std::io::Cursor::new(bytes.as_ref()), None)
        .map_err(|e| Error::corrupt(path, format!("a part does not decode: {e}")))?;
    let schema = reader.schema();
    let batches: Vec<RecordBatch> = reader
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| Error::corrupt(path, format!("a part does not decode: {e}")))?;
    match batches.len() {
        0 => Ok(RecordBatch::new_empty(schema)),
        1 => Ok(batches
            .into_iter()
            .next()
            .unwrap_or_else(|| RecordBatch::new_empty(Arc::clone(&schema)))),
        _ => arrow::compute::concat_batches(&schema, &batches)
            .map_err(|e| Error::corrupt(path, format!("a part does not decode: {e}"))),
    }
}
