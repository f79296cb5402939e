//! Deletion vectors' IO: reading a file's DV (inline, or a record of a DV file by a
//! ranged GET), checked and kept once per table handle, and writing DV files. The codec
//! itself is `protocol::dv`.

use bytes::Bytes;
use object_store::path::Path;
use object_store::{ObjectStoreExt, PutPayload};
use roaring::RoaringTreemap;
use tarn_store::StoreLocation;
use uuid::Uuid;

use crate::cache::Caches;
use crate::error::{Error, Result};
use crate::paths;
use crate::protocol::DeletionVectorDescriptor;
use crate::protocol::dv::{
    DV_FILE_VERSION, DvLocation, decode_bitmap, encode_bitmap, inline_descriptor, verify_record,
    z85_encode,
};

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
            .map_err(Error::store(tarn_store::StoreOp::Put, &path))?;
        Ok(size)
    }
}

/// The deletion vector `dv` of a file of the table at `location`, decoded once per table
/// handle (`caches`):
/// a change that reads a file's rows, then its matches, then extends its deletion vector
/// loads it once (deletion vectors never change once written).
///
/// Fails as [`load_deletion_vector`] does.
pub(crate) async fn deletion_vector_of(
    location: &StoreLocation,
    caches: &Caches,
    dv: &DeletionVectorDescriptor,
) -> Result<RoaringTreemap> {
    let id = dv.unique_id();
    if let Some(known) = caches.deletion_vector(&id) {
        return Ok(known.as_ref().clone());
    }
    let bitmap = load_deletion_vector(location, dv).await?;
    caches.keep_deletion_vector(&id, std::sync::Arc::new(bitmap.clone()));
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
        DvLocation::Relative { path, offset } => {
            let joined = dv_store_path(location.root(), &path)?;
            (paths::confine_on_disk(location, &path, joined)?, offset)
        }
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
            _ => Error::store(tarn_store::StoreOp::Get, path)(error),
        },
        other => Error::store(tarn_store::StoreOp::Get, path)(other),
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
    use crate::protocol::dv::z85_decode;

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
