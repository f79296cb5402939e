//! The deletion-vector codec of the Delta protocol, with no IO: descriptors and where
//! their bytes are, Z85, the RoaringBitmapArray encoding and the DV file record.
//!
//! A DV marks rows of one data file deleted, by their index in the file. It is stored
//! inline in the `add` action (`i`, Z85 text), or in a `deletion_vector_<uuid>.bin` file
//! next to the data (`u`, path encoded with a Z85 UUID; `p`, an absolute path). A DV file
//! starts with a version byte (1); each DV in it is a 4-byte big-endian size, the bitmap
//! data, and a 4-byte big-endian CRC-32 of the data. The data is the magic number
//! 1681511377 (little-endian) followed by a RoaringTreemap in the portable serialization.

use bytes::Bytes;
use roaring::RoaringTreemap;
use uuid::Uuid;

use super::DeletionVectorDescriptor;
use crate::error::{Error, Result};

/// Magic number that starts the serialized bitmap.
pub(crate) const DV_MAGIC: u32 = 1_681_511_377;
/// Version byte that starts a DV file.
pub(crate) const DV_FILE_VERSION: u8 = 1;

const Z85_ALPHABET: &[u8; 85] =
    b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";

/// Decodes Z85 text. The length must be a multiple of 5; each 5 characters give 4 bytes.
pub(crate) fn z85_decode(text: &str) -> Option<Vec<u8>> {
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
pub(crate) fn z85_encode(data: &[u8]) -> String {
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
pub(crate) fn encode_bitmap(bitmap: &RoaringTreemap) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + bitmap.serialized_size());
    out.extend_from_slice(&DV_MAGIC.to_le_bytes());
    // Writing into a Vec cannot fail.
    let _ = bitmap.serialize_into(&mut out);
    out
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
