//! Bitmap indices: for each distinct value, a roaring bitmap of the row addresses that
//! hold it, for columns of few distinct values.
//!
//! Layout (inside the frame of [`crate::format`]):
//!
//! - **bitmaps**: each a `RoaringTreemap` in its portable serialization;
//! - **meta**: an Arrow IPC stream of the value directory, one row per distinct value,
//!   sorted by value with the null value (the bitmap of null rows), if any, last:
//!   `{value: T, rows: UInt64, offset: UInt64, length: UInt64, crc: UInt32}`.
//!
//! A lookup binary-searches the directory (read once, cached with the opened index) and
//! fetches only the bitmaps of the values asked for, in one round of ranged GETs.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, UInt32Array, UInt64Array};
use arrow::compute::{SortOptions, concat, sort_to_indices, take};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, UInt32Type, UInt64Type};
use arrow::row::{RowConverter, SortField};
use bytes::Bytes;
use object_store::ObjectStore;
use object_store::path::Path;
use roaring::RoaringTreemap;

use crate::format::{self, IndexKind, ObjectInfo, ObjectWriter, Opened};
use crate::query::select_sorted;
use crate::{Error, Result, ScalarQuery, is_scalar_type};

/// A fast, non-cryptographic hash for the builder's value maps (values are not chosen
/// by an adversary; SipHash would dominate the build).
#[derive(Default, Clone, Copy)]
struct FxHasher(u64);

impl std::hash::Hasher for FxHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

type FastMap<K> = HashMap<K, usize, std::hash::BuildHasherDefault<FxHasher>>;

/// Builds a Bitmap index from arrays of values and their row addresses.
#[derive(Debug)]
pub struct BitmapBuilder {
    data_type: DataType,
    converter: RowConverter,
    /// Distinct values by their row-format bytes, to their slot.
    slots: FastMap<Box<[u8]>>,
    /// Distinct integer-like values (integers, dates, timestamps) by value, to their slot.
    int_slots: FastMap<i64>,
    /// Distinct strings, to their slot.
    str_slots: FastMap<Box<str>>,
    /// One single-value array per slot.
    values: Vec<ArrayRef>,
    bitmaps: Vec<RoaringTreemap>,
    nulls: RoaringTreemap,
    rows: u64,
}

impl BitmapBuilder {
    /// A builder for values of `data_type`.
    ///
    /// Fails with [`Error::UnsupportedType`] for nested and floating-point types.
    pub fn new(data_type: &DataType) -> Result<Self> {
        if !is_scalar_type(data_type) {
            return Err(Error::UnsupportedType {
                kind: "bitmap",
                data_type: data_type.to_string(),
            });
        }
        let converter = RowConverter::new(vec![SortField::new(data_type.clone())])
            .map_err(Error::arrow("preparing a bitmap index"))?;
        Ok(Self {
            data_type: data_type.clone(),
            converter,
            slots: FastMap::default(),
            int_slots: FastMap::default(),
            str_slots: FastMap::default(),
            values: Vec::new(),
            bitmaps: Vec::new(),
            nulls: RoaringTreemap::new(),
            rows: 0,
        })
    }

    /// Adds values with their row addresses.
    ///
    /// Fails with [`Error::InvalidInput`] when the lengths or the type differ.
    pub fn push(&mut self, values: ArrayRef, addresses: &[u64]) -> Result<()> {
        if values.len() != addresses.len() || values.data_type() != &self.data_type {
            return Err(Error::InvalidInput {
                reason: format!(
                    "{} values of type {} with {} addresses, for a bitmap of {}",
                    values.len(),
                    values.data_type(),
                    addresses.len(),
                    self.data_type
                ),
            });
        }
        // Integers, dates and timestamps are keyed by their value and strings by their
        // text, without converting each row; other types by their row-format bytes.
        if let Some(ints) = crate::values::as_i64s(&values) {
            for (i, address) in addresses.iter().enumerate() {
                if values.is_null(i) {
                    self.nulls.insert(*address);
                    continue;
                }
                let slot = match self.int_slots.get(&ints[i]) {
                    Some(slot) => *slot,
                    None => {
                        let slot = self.new_slot(&values, i);
                        self.int_slots.insert(ints[i], slot);
                        slot
                    }
                };
                push(&mut self.bitmaps[slot], *address);
            }
        } else if let Some(strings) = values.as_string_opt::<i32>() {
            for (i, address) in addresses.iter().enumerate() {
                if values.is_null(i) {
                    self.nulls.insert(*address);
                    continue;
                }
                let text = strings.value(i);
                let slot = match self.str_slots.get(text) {
                    Some(slot) => *slot,
                    None => {
                        let slot = self.new_slot(&values, i);
                        self.str_slots.insert(text.into(), slot);
                        slot
                    }
                };
                push(&mut self.bitmaps[slot], *address);
            }
        } else {
            let rows = self
                .converter
                .convert_columns(&[Arc::clone(&values)])
                .map_err(Error::arrow("hashing bitmap values"))?;
            for (i, address) in addresses.iter().enumerate() {
                if values.is_null(i) {
                    self.nulls.insert(*address);
                    continue;
                }
                let key = rows.row(i);
                let slot = match self.slots.get(key.as_ref()) {
                    Some(slot) => *slot,
                    None => {
                        let slot = self.new_slot(&values, i);
                        self.slots.insert(key.as_ref().into(), slot);
                        slot
                    }
                };
                push(&mut self.bitmaps[slot], *address);
            }
        }
        self.rows += addresses.len() as u64;
        Ok(())
    }

    fn new_slot(&mut self, values: &ArrayRef, i: usize) -> usize {
        self.values.push(values.slice(i, 1));
        self.bitmaps.push(RoaringTreemap::new());
        self.values.len() - 1
    }

    /// Distinct non-null values so far.
    pub fn distinct_values(&self) -> usize {
        self.values.len()
    }

    /// Sorts the directory and encodes the index: CPU work, to run off the async threads.
    ///
    /// Fails with [`Error::Arrow`] when sorting or encoding fails.
    pub fn finish(self) -> Result<(Bytes, ObjectInfo)> {
        let refs: Vec<&dyn Array> = self.values.iter().map(|a| a.as_ref()).collect();
        let distinct = if refs.is_empty() {
            arrow::array::new_empty_array(&self.data_type)
        } else {
            concat(&refs).map_err(Error::arrow("gathering bitmap values"))?
        };
        let order = sort_to_indices(distinct.as_ref(), Some(SortOptions::default()), None)
            .map_err(Error::arrow("sorting bitmap values"))?;
        let mut sorted = take(distinct.as_ref(), &order, None).map_err(Error::arrow("sorting"))?;
        let mut writer = ObjectWriter::default();
        let (mut counts, mut offsets, mut lengths, mut crcs) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut add = |bitmap: &RoaringTreemap| {
            let mut bytes = Vec::with_capacity(bitmap.serialized_size());
            // Serializing into a Vec cannot fail.
            let _ = bitmap.serialize_into(&mut bytes);
            let (range, crc) = writer.part(&bytes);
            counts.push(bitmap.len());
            offsets.push(range.start);
            lengths.push(range.end - range.start);
            crcs.push(crc);
        };
        for slot in order.values() {
            add(&self.bitmaps[*slot as usize]);
        }
        if !self.nulls.is_empty() {
            add(&self.nulls);
            sorted = concat(&[
                sorted.as_ref(),
                arrow::array::new_null_array(&self.data_type, 1).as_ref(),
            ])
            .map_err(Error::arrow("adding the null bitmap"))?;
        }
        let directory = RecordBatch::try_new(
            directory_schema(&self.data_type),
            vec![
                sorted,
                Arc::new(UInt64Array::from(counts)),
                Arc::new(UInt64Array::from(offsets)),
                Arc::new(UInt64Array::from(lengths)),
                Arc::new(UInt32Array::from(crcs)),
            ],
        )
        .map_err(Error::arrow("building the bitmap directory"))?;
        let bytes = writer.finish(&format::encode_batch(&directory)?, IndexKind::Bitmap);
        let info = ObjectInfo {
            size: bytes.len() as u64,
            rows: self.rows,
        };
        Ok((bytes, info))
    }

    /// Builds the index on a blocking thread and uploads it to `path`.
    ///
    /// Fails as [`finish`](Self::finish) does, and with [`Error::Store`] when the upload
    /// fails.
    pub async fn write(self, store: &dyn ObjectStore, path: &Path) -> Result<ObjectInfo> {
        let (bytes, info) = tokio::task::spawn_blocking(move || self.finish())
            .await
            .map_err(|source| Error::TaskFailed {
                task: "bitmap build",
                source,
            })??;
        format::put(store, path, bytes).await?;
        Ok(info)
    }
}

/// Adds an address; addresses usually arrive in order, and appending is cheap where
/// inserting is not.
fn push(bitmap: &mut RoaringTreemap, address: u64) {
    if bitmap.try_push(address).is_err() {
        bitmap.insert(address);
    }
}

fn directory_schema(data_type: &DataType) -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("value", data_type.clone(), true),
        Field::new("rows", DataType::UInt64, false),
        Field::new("offset", DataType::UInt64, false),
        Field::new("length", DataType::UInt64, false),
        Field::new("crc", DataType::UInt32, false),
    ]))
}

/// An opened Bitmap index: its value directory.
#[derive(Debug)]
pub struct BitmapIndex {
    store: Arc<dyn ObjectStore>,
    object: Opened,
    data_type: DataType,
    directory: RecordBatch,
}

impl BitmapIndex {
    /// Opens the Bitmap index at `path`: one suffix GET for the footer and the directory.
    ///
    /// Fails with [`Error::NotFound`] when the object is missing, [`Error::Corrupt`] when
    /// it is truncated or damaged, [`Error::UnsupportedVersion`] when a newer format
    /// wrote it, and [`Error::WrongKind`] for another kind of index.
    pub async fn open(store: Arc<dyn ObjectStore>, path: &Path) -> Result<Self> {
        let object = format::open(store.as_ref(), path, IndexKind::Bitmap).await?;
        let directory = format::decode_batch(path, &object.meta)?;
        let names: Vec<&str> = directory
            .schema_ref()
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        if names != ["value", "rows", "offset", "length", "crc"]
            || directory.column(1).data_type() != &DataType::UInt64
            || directory.column(2).data_type() != &DataType::UInt64
            || directory.column(3).data_type() != &DataType::UInt64
            || directory.column(4).data_type() != &DataType::UInt32
        {
            return Err(Error::corrupt(
                path,
                "the value directory has the wrong columns",
            ));
        }
        let data_type = directory.column(0).data_type().clone();
        Ok(Self {
            store,
            object,
            data_type,
            directory,
        })
    }

    /// The indexed values' type.
    pub fn data_type(&self) -> &DataType {
        &self.data_type
    }

    /// Distinct values (the null value included, when there are nulls).
    pub fn distinct_values(&self) -> usize {
        self.directory.num_rows()
    }

    /// The object's size in bytes.
    pub fn size(&self) -> u64 {
        self.object.size
    }

    /// The row addresses whose value the query selects: equality, `IN`, ranges, prefixes
    /// and `IS NULL`. Reads only the bitmaps of the selected values.
    ///
    /// Fails with [`Error::InvalidInput`] for values of another type than the index's,
    /// and with [`Error::Corrupt`] / [`Error::NotFound`] / [`Error::Store`] when a bitmap
    /// cannot be read.
    pub async fn query(&self, query: &ScalarQuery) -> Result<RoaringTreemap> {
        query.check(&self.data_type)?;
        let values = self.directory.column(0);
        let non_null = values.len() - values.null_count();
        let offsets = self.directory.column(2).as_primitive::<UInt64Type>();
        let lengths = self.directory.column(3).as_primitive::<UInt64Type>();
        let crcs = self.directory.column(4).as_primitive::<UInt32Type>();
        let parts: Vec<_> = select_sorted(values.as_ref(), non_null, query)?
            .into_iter()
            .flatten()
            .map(|i| {
                let start = offsets.value(i);
                (start..start + lengths.value(i), crcs.value(i))
            })
            .collect();
        let mut out = RoaringTreemap::new();
        for bytes in self.object.parts(self.store.as_ref(), &parts).await? {
            let bitmap = RoaringTreemap::deserialize_from(bytes.as_ref()).map_err(|e| {
                Error::corrupt(&self.object.path, format!("a bitmap does not decode: {e}"))
            })?;
            out |= bitmap;
        }
        Ok(out)
    }
}
