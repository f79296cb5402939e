//! Deletion vectors in the Delta format: descriptors, Z85, and the RoaringBitmapArray.
//!
//! A DV marks rows of one data file deleted, by their index in the file. It is stored
//! inline in the `add` action (`i`, Z85 text), or in a `deletion_vector_<uuid>.bin` file
//! next to the data (`u`, path encoded with a Z85 UUID; `p`, an absolute path). A DV file
//! starts with a version byte (1); each DV in it is a 4-byte big-endian size, the bitmap
//! data, and a 4-byte big-endian CRC-32 of the data. The data is the magic number
//! 1681511377 (little-endian) followed by a RoaringTreemap in the portable serialization.

use bytes::Bytes;
use object_store::path::Path;
use object_store::{ObjectStoreExt, PutPayload};
use roaring::RoaringTreemap;
use tarn_store::StoreLocation;
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::paths;
use crate::protocol::DeletionVectorDescriptor;

/// Magic number that starts the serialized bitmap.
pub const DV_MAGIC: u32 = 1_681_511_377;
/// Version byte that starts a DV file.
pub const DV_FILE_VERSION: u8 = 1;

const Z85_ALPHABET: &[u8; 85] =
    b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";

/// Decodes Z85 text. The length must be a multiple of 5; each 5 characters give 4 bytes.
pub fn z85_decode(text: &str) -> Option<Vec<u8>> {
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(5) {
        return None;
    }
    let mut table = [u8::MAX; 256];
    for (i, c) in Z85_ALPHABET.iter().enumerate() {
        table[*c as usize] = i as u8;
    }
    let mut out = Vec::with_capacity(bytes.len() / 5 * 4);
    for chunk in bytes.chunks_exact(5) {
        let mut value: u64 = 0;
        for c in chunk {
            let digit = table[*c as usize];
            if digit == u8::MAX {
                return None;
            }
            value = value * 85 + u64::from(digit);
        }
        let value = u32::try_from(value).ok()?;
        out.extend_from_slice(&value.to_be_bytes());
    }
    Some(out)
}

/// Encodes bytes as Z85, padding with zero bytes to a multiple of 4.
pub fn z85_encode(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(4) * 5);
    for chunk in data.chunks(4) {
        let mut word = [0u8; 4];
        word[..chunk.len()].copy_from_slice(chunk);
        let mut value = u32::from_be_bytes(word);
        let mut digits = [0u8; 5];
        for d in digits.iter_mut().rev() {
            *d = Z85_ALPHABET[(value % 85) as usize];
            value /= 85;
        }
        out.extend(digits.iter().map(|d| *d as char));
    }
    out
}

/// Where a DV's bytes are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DvLocation {
    /// Inline data, already decoded.
    Inline(Vec<u8>),
    /// A file relative to the table root, with the record's offset.
    Relative { path: String, offset: u64 },
    /// An absolute URL, with the record's offset.
    Absolute { url: String, offset: u64 },
}

impl DeletionVectorDescriptor {
    /// For `u` DVs, the file name relative to the table root:
    /// `<prefix>/deletion_vector_<uuid>.bin`.
    pub fn relative_path(&self) -> Option<String> {
        if self.storage_type != "u" {
            return None;
        }
        let encoded = &self.path_or_inline_dv;
        let split = encoded.len().checked_sub(20)?;
        let (prefix, uuid_text) = (encoded.get(..split)?, encoded.get(split..)?);
        let uuid = Uuid::from_slice(&z85_decode(uuid_text)?).ok()?;
        let file = format!("deletion_vector_{}.bin", uuid.hyphenated());
        Some(if prefix.is_empty() {
            file
        } else {
            format!("{prefix}/{file}")
        })
    }

    pub(crate) fn location(&self) -> Result<DvLocation> {
        let invalid = |reason: &str| Error::InvalidDeletionVector {
            location: self.describe(),
            reason: reason.to_string(),
        };
        let offset = || -> Result<u64> {
            let offset = self.offset.unwrap_or(1);
            u64::try_from(offset).map_err(|_| invalid("negative offset"))
        };
        match self.storage_type.as_str() {
            "i" => {
                let data = z85_decode(&self.path_or_inline_dv)
                    .ok_or_else(|| invalid("inline data is not valid Z85"))?;
                Ok(DvLocation::Inline(data))
            }
            "u" => Ok(DvLocation::Relative {
                path: self
                    .relative_path()
                    .ok_or_else(|| invalid("path does not end in a Z85-encoded UUID"))?,
                offset: offset()?,
            }),
            "p" => Ok(DvLocation::Absolute {
                url: self.path_or_inline_dv.clone(),
                offset: offset()?,
            }),
            other => Err(invalid(&format!("unknown storage type {other:?}"))),
        }
    }

    /// A short description for messages: the DV's file and offset, or "inline".
    pub fn describe(&self) -> String {
        match self.storage_type.as_str() {
            "i" => "inline".to_string(),
            "u" => format!(
                "{}@{}",
                self.relative_path()
                    .unwrap_or_else(|| self.path_or_inline_dv.clone()),
                self.offset.unwrap_or(1)
            ),
            _ => format!("{}@{}", self.path_or_inline_dv, self.offset.unwrap_or(1)),
        }
    }
}

/// Decodes the bitmap data (magic + RoaringTreemap) of a DV and checks its cardinality.
pub(crate) fn decode_bitmap(
    data: &[u8],
    descriptor: &DeletionVectorDescriptor,
) -> Result<RoaringTreemap> {
    let invalid = |reason: String| Error::InvalidDeletionVector {
        location: descriptor.describe(),
        reason,
    };
    let size = usize::try_from(descriptor.size_in_bytes)
        .map_err(|_| invalid(format!("negative size {}", descriptor.size_in_bytes)))?;
    if data.len() < size || size < 4 {
        return Err(invalid(format!(
            "{} bytes available, descriptor says {size}",
            data.len()
        )));
    }
    let data = &data[..size];
    let magic = u32::from_le_bytes([data[0], data[1], data[2], data[3]]);
    if magic != DV_MAGIC {
        return Err(invalid(format!("bad magic {magic}, expected {DV_MAGIC}")));
    }
    let bitmap = RoaringTreemap::deserialize_from(&data[4..])
        .map_err(|e| invalid(format!("bitmap does not decode: {e}")))?;
    let cardinality = bitmap.len();
    if i64::try_from(cardinality).ok() != Some(descriptor.cardinality) {
        return Err(invalid(format!(
            "bitmap holds {cardinality} rows, descriptor says {}",
            descriptor.cardinality
        )));
    }
    Ok(bitmap)
}

/// Checks one DV record of a DV file (`bytes` start at the descriptor's offset) and
/// returns its bitmap data: size prefix must match, CRC-32 must check.
pub(crate) fn verify_record(
    record: &Bytes,
    descriptor: &DeletionVectorDescriptor,
) -> Result<Bytes> {
    let invalid = |reason: String| Error::InvalidDeletionVector {
        location: descriptor.describe(),
        reason,
    };
    let size = usize::try_from(descriptor.size_in_bytes)
        .map_err(|_| invalid("negative size".to_string()))?;
    if record.len() < size + 8 {
        return Err(invalid(format!(
            "record truncated: {} bytes, expected {}",
            record.len(),
            size + 8
        )));
    }
    let stored_size = u32::from_be_bytes([record[0], record[1], record[2], record[3]]) as usize;
    if stored_size != size {
        return Err(invalid(format!(
            "size prefix {stored_size} does not match descriptor size {size}"
        )));
    }
    let data = record.slice(4..4 + size);
    let crc = u32::from_be_bytes([
        record[4 + size],
        record[5 + size],
        record[6 + size],
        record[7 + size],
    ]);
    let actual = crc32fast::hash(&data);
    if crc != actual {
        return Err(invalid(format!(
            "checksum {crc:#010x} does not match data {actual:#010x}"
        )));
    }
    Ok(data)
}

/// Serializes a bitmap as DV data: magic + RoaringTreemap.
pub fn encode_bitmap(bitmap: &RoaringTreemap) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + bitmap.serialized_size());
    out.extend_from_slice(&DV_MAGIC.to_le_bytes());
    // Writing into a Vec cannot fail.
    let _ = bitmap.serialize_into(&mut out);
    out
}

/// Deletion vectors written together into one `deletion_vector_<uuid>.bin` file: a
/// version byte, then for each DV its size, bitmap data and CRC-32.
#[derive(Debug)]
pub(crate) struct DvFileWriter {
    uuid: Uuid,
    buffer: Vec<u8>,
}

impl DvFileWriter {
    pub(crate) fn new() -> Self {
        Self {
            uuid: Uuid::new_v4(),
            buffer: vec![DV_FILE_VERSION],
        }
    }

    /// The file name relative to the table root.
    pub(crate) fn relative_path(&self) -> String {
        format!("deletion_vector_{}.bin", self.uuid.hyphenated())
    }

    /// Whether no DV has been added.
    pub(crate) fn is_empty(&self) -> bool {
        self.buffer.len() == 1
    }

    /// Appends a DV and returns its descriptor (`u`, relative to the table root).
    pub(crate) fn add(&mut self, bitmap: &RoaringTreemap) -> DeletionVectorDescriptor {
        let data = encode_bitmap(bitmap);
        let offset = self.buffer.len();
        self.buffer
            .extend_from_slice(&(data.len() as u32).to_be_bytes());
        self.buffer.extend_from_slice(&data);
        self.buffer
            .extend_from_slice(&crc32fast::hash(&data).to_be_bytes());
        DeletionVectorDescriptor {
            storage_type: "u".into(),
            path_or_inline_dv: z85_encode(self.uuid.as_bytes()),
            offset: Some(offset as i32),
            size_in_bytes: data.len() as i32,
            cardinality: bitmap.len() as i64,
        }
    }

    /// The file's bytes.
    pub(crate) fn into_bytes(self) -> Bytes {
        Bytes::from(self.buffer)
    }

    /// Uploads the file under the table root, unless it holds no DV, and returns the bytes
    /// written. Fails with [`Error::Store`] when the PUT fails.
    pub(crate) async fn upload(self, location: &StoreLocation) -> Result<u64> {
        if self.is_empty() {
            return Ok(0);
        }
        let path = paths::join_relative(location.root(), &self.relative_path())?;
        let bytes = self.into_bytes();
        let size = bytes.len() as u64;
        location
            .store()
            .put(&path, PutPayload::from_bytes(bytes))
            .await
            .map_err(Error::store("put", &path))?;
        Ok(size)
    }
}

/// The deletion vector `dv` of a file of `snapshot`'s table, decoded once per table handle:
/// a change that reads a file's rows, then its matches, then extends its deletion vector
/// loads it once (deletion vectors never change once written).
///
/// Fails as [`load_deletion_vector`] does.
pub(crate) async fn deletion_vector_of(
    snapshot: &crate::snapshot::Snapshot,
    dv: &DeletionVectorDescriptor,
) -> Result<RoaringTreemap> {
    let id = dv.unique_id();
    if let Some(known) = snapshot.caches().deletion_vector(&id) {
        return Ok(known.as_ref().clone());
    }
    let bitmap = load_deletion_vector(snapshot.location(), dv).await?;
    snapshot
        .caches()
        .keep_deletion_vector(&id, std::sync::Arc::new(bitmap.clone()));
    Ok(bitmap)
}

/// Reads a file's deletion vector (inline, or one record of a DV file, by a ranged GET)
/// and checks it.
///
/// Fails with [`Error::InvalidDeletionVector`] naming the DV when it is missing, truncated
/// or corrupt (size, checksum, magic, cardinality), and [`Error::Store`] for other store
/// failures.
pub(crate) async fn load_deletion_vector(
    location: &StoreLocation,
    dv: &DeletionVectorDescriptor,
) -> Result<RoaringTreemap> {
    let (path, offset) = match dv.location()? {
        DvLocation::Inline(data) => return decode_bitmap(&data, dv),
        DvLocation::Relative { path, offset } => (dv_store_path(location.root(), &path)?, offset),
        DvLocation::Absolute { url, offset } => (paths::resolve(location, &url)?, offset),
    };
    let size = u64::try_from(dv.size_in_bytes).unwrap_or(0);
    let end = offset + size + 8;
    let record = match location.store().get_range(&path, offset..end).await {
        Ok(record) => record,
        Err(e) => return Err(read_failure(location, &path, dv, end, e).await),
    };
    let data = verify_record(&record, dv)?;
    decode_bitmap(&data, dv)
}

/// What a failed read of a DV's record means: a missing file, or one shorter than the
/// record's `end`, is an invalid DV; anything else (a throttle, a 5xx after retries, a
/// broken connection) is the store's failure. Stores report reads past the end as
/// `Generic`, as they do server errors, so a `Generic` failure asks for the file's size.
async fn read_failure(
    location: &StoreLocation,
    path: &object_store::path::Path,
    dv: &DeletionVectorDescriptor,
    end: u64,
    error: object_store::Error,
) -> Error {
    let invalid = |reason: String| Error::InvalidDeletionVector {
        location: dv.describe(),
        reason,
    };
    match error {
        object_store::Error::NotFound { .. } => invalid(format!("cannot read {path}: {error}")),
        object_store::Error::Generic { .. } => match location.store().head(path).await {
            Ok(meta) if meta.size < end => invalid(format!(
                "{path} holds {} bytes, the record ends at byte {end}",
                meta.size
            )),
            Err(object_store::Error::NotFound { .. }) => {
                invalid(format!("cannot read {path}: {error}"))
            }
            _ => Error::store("get", path)(error),
        },
        other => Error::store("get", path)(other),
    }
}

/// A DV stored inline in its descriptor (Z85 of the bitmap data).
pub(crate) fn inline_descriptor(bitmap: &RoaringTreemap) -> DeletionVectorDescriptor {
    let data = encode_bitmap(bitmap);
    DeletionVectorDescriptor {
        storage_type: "i".into(),
        path_or_inline_dv: z85_encode(&data),
        offset: None,
        size_in_bytes: data.len() as i32,
        cardinality: bitmap.len() as i64,
    }
}

/// A DV for `bitmap`: inline when its data is at most `inline_threshold` bytes, else in
/// `file`.
pub(crate) fn describe_bitmap(
    bitmap: &RoaringTreemap,
    inline_threshold: usize,
    file: &mut DvFileWriter,
) -> DeletionVectorDescriptor {
    if 4 + bitmap.serialized_size() <= inline_threshold {
        inline_descriptor(bitmap)
    } else {
        file.add(bitmap)
    }
}

/// The store path of a relative DV file under the table root.
pub(crate) fn dv_store_path(root: &Path, relative: &str) -> Result<Path> {
    paths::join_relative(root, relative)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn z85_round_trips_and_decodes_a_known_uuid() {
        let data: Vec<u8> = (0..16).collect();
        assert_eq!(z85_decode(&z85_encode(&data)).unwrap(), data);
        assert_eq!(
            z85_encode(&[0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B]),
            "HelloWorld"
        );
        assert!(z85_decode("abc").is_none());
        assert!(z85_decode("abc d").is_none());
        // From the golden table log-replay-dv-key-cases.
        let dv = DeletionVectorDescriptor {
            storage_type: "u".into(),
            path_or_inline_dv: "h{&8fAg]=QYJvl-}c!yH".into(),
            offset: Some(1),
            size_in_bytes: 34,
            cardinality: 1,
        };
        let path = dv.relative_path().unwrap();
        assert!(path.starts_with("deletion_vector_37d10da3-"), "{path}");
    }

    #[test]
    fn files_of_several_dvs_read_back_each_one() {
        let a: RoaringTreemap = [1u64, 5, 9].into_iter().collect();
        let b: RoaringTreemap = (0u64..1000).step_by(3).collect();
        let mut file = DvFileWriter::new();
        let (da, db) = (file.add(&a), file.add(&b));
        assert_eq!(da.relative_path().unwrap(), file.relative_path());
        let bytes = file.into_bytes();
        for (d, bitmap) in [(da, a.clone()), (db, b)] {
            let offset = d.offset.unwrap() as usize;
            let record = bytes.slice(offset..offset + d.size_in_bytes as usize + 8);
            let data = verify_record(&record, &d).unwrap();
            assert_eq!(decode_bitmap(&data, &d).unwrap(), bitmap);
        }
        let inline = inline_descriptor(&a);
        let DvLocation::Inline(data) = inline.location().unwrap() else {
            panic!()
        };
        assert_eq!(decode_bitmap(&data, &inline).unwrap(), a);
    }

    #[test]
    fn records_are_checked_for_size_checksum_magic_and_cardinality() {
        let bitmap: RoaringTreemap = [0u64, 7, 14, 1 << 33].into_iter().collect();
        let data = encode_bitmap(&bitmap);
        let mut descriptor = DeletionVectorDescriptor {
            storage_type: "i".into(),
            path_or_inline_dv: z85_encode(&data),
            offset: None,
            size_in_bytes: data.len() as i32,
            cardinality: 4,
        };
        let DvLocation::Inline(inline) = descriptor.location().unwrap() else {
            panic!()
        };
        assert_eq!(decode_bitmap(&inline, &descriptor).unwrap(), bitmap);

        let mut record = (data.len() as u32).to_be_bytes().to_vec();
        record.extend_from_slice(&data);
        record.extend_from_slice(&crc32fast::hash(&data).to_be_bytes());
        let record = Bytes::from(record);
        assert_eq!(
            verify_record(&record, &descriptor).unwrap(),
            Bytes::from(data.clone())
        );

        let mut corrupt = record.to_vec();
        corrupt[6] ^= 0xff;
        let err = verify_record(&Bytes::from(corrupt), &descriptor).unwrap_err();
        assert!(err.to_string().contains("checksum"), "{err}");
        let err = verify_record(&record.slice(..record.len() - 2), &descriptor).unwrap_err();
        assert!(err.to_string().contains("truncated"), "{err}");

        descriptor.cardinality = 3;
        let err = decode_bitmap(&data, &descriptor).unwrap_err();
        assert!(err.to_string().contains("holds 4 rows"), "{err}");
        let mut bad_magic = data.clone();
        bad_magic[0] ^= 1;
        descriptor.cardinality = 4;
        let err = decode_bitmap(&bad_magic, &descriptor).unwrap_err();
        assert!(err.to_string().contains("bad magic"), "{err}");
    }
}
