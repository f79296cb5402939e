//! BTree indices: every `(value, row address)` pair sorted by value, cut into pages of a
//! fixed row count, plus a page lookup.
//!
//! Layout (inside the frame of [`crate::format`]):
//!
//! - **pages**: each an Arrow IPC stream of one batch `{value: T, address: UInt64}`,
//!   sorted by value then address, nulls last (so null values fill the last pages);
//! - **meta**: an Arrow IPC stream of the page lookup, one row per page:
//!   `{min: T, max: T, nulls: UInt64, rows: UInt32, offset: UInt64, length: UInt64,
//!   crc: UInt32}`: the smallest and largest non-null value of the page (null when the
//!   page holds only nulls), its null count and row count, its byte range in the object
//!   and the CRC-32 of those bytes. The schema's metadata holds `page_rows`.
//!
//! A query reads the lookup once (it is cached with the opened index), picks the pages
//! whose `[min, max]` may hold a match, fetches them in one round of ranged GETs and
//! binary-searches each. Pages read are cached, up to [`PAGE_CACHE`] of them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, UInt32Array, UInt64Array};
use arrow::compute::{SortOptions, concat, take};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, UInt32Type, UInt64Type};
use arrow::row::{RowConverter, SortField};
use bytes::Bytes;
use object_store::ObjectStore;
use object_store::path::Path;
use roaring::RoaringTreemap;

use crate::format::{self, IndexKind, ObjectInfo, ObjectWriter, Opened};
use crate::query::{may_hold, select_sorted};
use crate::{Error, Result, ScalarQuery, is_scalar_type};

/// Decoded pages an opened index keeps.
pub const PAGE_CACHE: usize = 256;

/// How a BTree is cut into pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BTreeOptions {
    /// Rows per page (default 4,096, as Lance uses).
    pub page_rows: usize,
}

impl Default for BTreeOptions {
    fn default() -> Self {
        Self { page_rows: 4096 }
    }
}

/// Builds a BTree from arrays of values and their row addresses.
#[derive(Debug)]
pub struct BTreeBuilder {
    data_type: DataType,
    options: BTreeOptions,
    values: Vec<ArrayRef>,
    addresses: Vec<u64>,
}

impl BTreeBuilder {
    /// A builder for values of `data_type`.
    ///
    /// Fails with [`Error::UnsupportedType`] for types a BTree cannot order (floats,
    /// nested types) and [`Error::InvalidInput`] for zero rows per page.
    pub fn new(data_type: &DataType, options: BTreeOptions) -> Result<Self> {
        if !is_scalar_type(data_type) || matches!(data_type, DataType::Boolean) {
            return Err(Error::UnsupportedType {
                kind: "btree",
                data_type: data_type.to_string(),
            });
        }
        if options.page_rows == 0 {
            return Err(Error::InvalidInput {
                reason: "a BTree page needs at least one row".into(),
            });
        }
        Ok(Self {
            data_type: data_type.clone(),
            options,
            values: Vec::new(),
            addresses: Vec::new(),
        })
    }

    /// Adds values with their row addresses.
    ///
    /// Fails with [`Error::InvalidInput`] when the lengths or the type differ.
    pub fn push(&mut self, values: ArrayRef, addresses: &[u64]) -> Result<()> {
        if values.len() != addresses.len() {
            return Err(Error::InvalidInput {
                reason: format!("{} values with {} addresses", values.len(), addresses.len()),
            });
        }
        if values.data_type() != &self.data_type {
            return Err(Error::InvalidInput {
                reason: format!(
                    "values of type {} for a BTree of {}",
                    values.data_type(),
                    self.data_type
                ),
            });
        }
        self.values.push(values);
        self.addresses.extend_from_slice(addresses);
        Ok(())
    }

    /// Rows pushed so far.
    pub fn len(&self) -> usize {
        self.addresses.len()
    }

    /// Whether nothing was pushed.
    pub fn is_empty(&self) -> bool {
        self.addresses.is_empty()
    }

    /// Sorts, pages and encodes the index: CPU work, to run off the async threads.
    ///
    /// Fails with [`Error::Arrow`] when sorting or encoding fails.
    pub fn finish(self) -> Result<(Bytes, ObjectInfo)> {
        let rows = self.addresses.len();
        let refs: Vec<&dyn Array> = self.values.iter().map(|a| a.as_ref()).collect();
        let values = if refs.is_empty() {
            arrow::array::new_empty_array(&self.data_type)
        } else {
            concat(&refs).map_err(Error::arrow("gathering BTree values"))?
        };
        let order = sort_order(&values, &self.addresses)?;
        let addresses: ArrayRef = Arc::new(UInt64Array::from(self.addresses));
        let values = take(values.as_ref(), &order, None).map_err(Error::arrow("sorting"))?;
        let addresses = take(addresses.as_ref(), &order, None).map_err(Error::arrow("sorting"))?;
        let page_schema = page_schema(&self.data_type);
        let mut writer = ObjectWriter::default();
        let (mut mins, mut maxes) = (Vec::new(), Vec::new());
        let (mut nulls, mut counts, mut offsets, mut lengths, mut crcs) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut start = 0;
        while start < rows {
            let len = self.options.page_rows.min(rows - start);
            let page_values = values.slice(start, len);
            let page = RecordBatch::try_new(
                Arc::clone(&page_schema),
                vec![Arc::clone(&page_values), addresses.slice(start, len)],
            )
            .map_err(Error::arrow("building a BTree page"))?;
            let (range, crc) = writer.part(&format::encode_batch(&page)?);
            let null_count = page_values.null_count();
            let non_null = len - null_count;
            if non_null > 0 {
                mins.push(page_values.slice(0, 1));
                maxes.push(page_values.slice(non_null - 1, 1));
            } else {
                mins.push(arrow::array::new_null_array(&self.data_type, 1));
                maxes.push(arrow::array::new_null_array(&self.data_type, 1));
            }
            nulls.push(null_count as u64);
            counts.push(len as u32);
            offsets.push(range.start);
            lengths.push(range.end - range.start);
            crcs.push(crc);
            start += len;
        }
        let bounds = |parts: &[ArrayRef]| -> Result<ArrayRef> {
            if parts.is_empty() {
                return Ok(arrow::array::new_empty_array(&self.data_type));
            }
            let refs: Vec<&dyn Array> = parts.iter().map(|a| a.as_ref()).collect();
            concat(&refs).map_err(Error::arrow("building the BTree lookup"))
        };
        let lookup = RecordBatch::try_new(
            lookup_schema(&self.data_type, self.options.page_rows),
            vec![
                bounds(&mins)?,
                bounds(&maxes)?,
                Arc::new(UInt64Array::from(nulls)),
                Arc::new(UInt32Array::from(counts)),
                Arc::new(UInt64Array::from(offsets)),
                Arc::new(UInt64Array::from(lengths)),
                Arc::new(UInt32Array::from(crcs)),
            ],
        )
        .map_err(Error::arrow("building the BTree lookup"))?;
        let bytes = writer.finish(&format::encode_batch(&lookup)?, IndexKind::BTree);
        let info = ObjectInfo {
            size: bytes.len() as u64,
            rows: rows as u64,
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
                task: "BTree build",
                source,
            })??;
        format::put(store, path, bytes).await?;
        Ok(info)
    }
}

/// The order of `(value, address)` pairs, nulls last: integer-like values and strings are
/// sorted as native keys, other types through Arrow's row format.
fn sort_order(values: &ArrayRef, addresses: &[u64]) -> Result<UInt32Array> {
    let n = values.len();
    let valid = |i: usize| values.is_valid(i);
    let nulls = || {
        (0..n)
            .filter(|i| !valid(*i))
            .map(|i| (addresses[i], i as u32))
    };
    let order = if let Some(ints) = crate::values::as_i64s(values) {
        by_key(
            (0..n)
                .filter(|i| valid(*i))
                .map(|i| (ints[i], addresses[i], i as u32))
                .collect(),
            nulls(),
        )
    } else if let Some(strings) = values.as_string_opt::<i32>() {
        by_key(
            (0..n)
                .filter(|i| valid(*i))
                .map(|i| (strings.value(i), addresses[i], i as u32))
                .collect(),
            nulls(),
        )
    } else {
        let mut order: Vec<u32> = (0..n as u32).collect();
        let converter = RowConverter::new(vec![SortField::new_with_options(
            values.data_type().clone(),
            SortOptions {
                descending: false,
                nulls_first: false,
            },
        )])
        .map_err(Error::arrow("sorting BTree values"))?;
        let rows = converter
            .convert_columns(&[Arc::clone(values)])
            .map_err(Error::arrow("sorting BTree values"))?;
        order.sort_unstable_by(|a, b| {
            let (a, b) = (*a as usize, *b as usize);
            (rows.row(a), addresses[a]).cmp(&(rows.row(b), addresses[b]))
        });
        order
    };
    Ok(UInt32Array::from(order))
}

/// The rows of `keys` (value, address, row) in key order, then the null rows of `nulls`
/// (address, row) in address order. Keys are sorted in place beside their row rather
/// than through an index into the columns, so the comparisons stay in cache.
fn by_key<K: Ord + Copy + Send>(
    keys: Vec<(K, u64, u32)>,
    nulls: impl Iterator<Item = (u64, u32)>,
) -> Vec<u32> {
    let keys = sort_on_cores(keys);
    let mut nulls: Vec<(u64, u32)> = nulls.collect();
    nulls.sort_unstable();
    let mut order: Vec<u32> = keys.into_iter().map(|(_, _, i)| i).collect();
    order.extend(nulls.into_iter().map(|(_, i)| i));
    order
}

/// Fewest items worth a sorting thread of their own.
const SORT_RUN_MIN: usize = 32 * 1024;

/// Sorts `items`: in runs on every core (scoped threads), merged pairwise, once there are
/// enough of them to pay for the threads.
fn sort_on_cores<T: Ord + Copy + Send>(mut items: Vec<T>) -> Vec<T> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let runs = cores.min(items.len() / SORT_RUN_MIN).max(1);
    if runs == 1 {
        items.sort_unstable();
        return items;
    }
    let len = items.len().div_ceil(runs);
    std::thread::scope(|scope| {
        for run in items.chunks_mut(len) {
            scope.spawn(move || run.sort_unstable());
        }
    });
    // The first pass merges straight from the runs in place, so at most two copies of
    // the items are alive at once.
    let mut sorted: Vec<Vec<T>> = items
        .chunks(len)
        .collect::<Vec<_>>()
        .chunks(2)
        .map(|pair| match pair {
            [a, b] => merge(a, b),
            _ => pair.concat(),
        })
        .collect();
    drop(items);
    while sorted.len() > 1 {
        let mut next = Vec::with_capacity(sorted.len().div_ceil(2));
        let mut pairs = sorted.into_iter();
        while let Some(a) = pairs.next() {
            next.push(match pairs.next() {
                Some(b) => merge(&a, &b),
                None => a,
            });
        }
        sorted = next;
    }
    sorted.pop().unwrap_or_default()
}

/// Two sorted runs merged into one.
fn merge<T: Ord + Copy>(a: &[T], b: &[T]) -> Vec<T> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if b[j] < a[i] {
            out.push(b[j]);
            j += 1;
        } else {
            out.push(a[i]);
            i += 1;
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out
}

fn page_schema(data_type: &DataType) -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("value", data_type.clone(), true),
        Field::new("address", DataType::UInt64, false),
    ]))
}

fn lookup_schema(data_type: &DataType, page_rows: usize) -> SchemaRef {
    Arc::new(Schema::new_with_metadata(
        vec![
            Field::new("min", data_type.clone(), true),
            Field::new("max", data_type.clone(), true),
            Field::new("nulls", DataType::UInt64, false),
            Field::new("rows", DataType::UInt32, false),
            Field::new("offset", DataType::UInt64, false),
            Field::new("length", DataType::UInt64, false),
            Field::new("crc", DataType::UInt32, false),
        ],
        HashMap::from([("page_rows".to_string(), page_rows.to_string())]),
    ))
}

/// An opened BTree: its page lookup, and the pages read so far.
#[derive(Debug)]
pub struct BTreeIndex {
    store: Arc<dyn ObjectStore>,
    object: Opened,
    data_type: DataType,
    lookup: RecordBatch,
    pages: Mutex<HashMap<usize, Arc<RecordBatch>>>,
}

impl BTreeIndex {
    /// Opens the BTree at `path`: one suffix GET for the footer and the lookup.
    ///
    /// Fails with [`Error::NotFound`] when the object is missing, [`Error::Corrupt`] when
    /// it is truncated or damaged, [`Error::UnsupportedVersion`] when a newer format
    /// wrote it, and [`Error::WrongKind`] for another kind of index.
    pub async fn open(store: Arc<dyn ObjectStore>, path: &Path) -> Result<Self> {
        let object = format::open(store.as_ref(), path, IndexKind::BTree).await?;
        let lookup = format::decode_batch(path, &object.meta)?;
        let expected = ["min", "max", "nulls", "rows", "offset", "length", "crc"];
        let names: Vec<&str> = lookup
            .schema_ref()
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .collect();
        if names != expected
            || lookup.column(2).data_type() != &DataType::UInt64
            || lookup.column(3).data_type() != &DataType::UInt32
            || lookup.column(4).data_type() != &DataType::UInt64
            || lookup.column(5).data_type() != &DataType::UInt64
            || lookup.column(6).data_type() != &DataType::UInt32
        {
            return Err(Error::corrupt(
                path,
                "the page lookup has the wrong columns",
            ));
        }
        let data_type = lookup.column(0).data_type().clone();
        Ok(Self {
            store,
            object,
            data_type,
            lookup,
            pages: Mutex::new(HashMap::new()),
        })
    }

    /// The indexed values' type.
    pub fn data_type(&self) -> &DataType {
        &self.data_type
    }

    /// Pages in the index.
    pub fn page_count(&self) -> usize {
        self.lookup.num_rows()
    }

    /// Row addresses indexed.
    pub fn rows(&self) -> u64 {
        self.lookup
            .column(3)
            .as_primitive::<UInt32Type>()
            .values()
            .iter()
            .map(|r| u64::from(*r))
            .sum()
    }

    /// The object's size in bytes.
    pub fn size(&self) -> u64 {
        self.object.size
    }

    /// The pages a query reads, judged from the lookup alone.
    ///
    /// Fails with [`Error::InvalidInput`] for values of another type than the index's.
    pub fn pages_for(&self, query: &ScalarQuery) -> Result<Vec<usize>> {
        query.check(&self.data_type)?;
        let (min, max) = (self.lookup.column(0), self.lookup.column(1));
        let nulls = self.lookup.column(2).as_primitive::<UInt64Type>();
        let mut pages = Vec::new();
        for i in 0..self.lookup.num_rows() {
            let hit = match query {
                ScalarQuery::IsNull => nulls.value(i) > 0,
                q => may_hold(min.as_ref(), max.as_ref(), i, q)?,
            };
            if hit {
                pages.push(i);
            }
        }
        Ok(pages)
    }

    /// The row addresses whose value the query selects. Reads the pages it needs that are
    /// not cached yet, in one round of parallel ranged GETs.
    ///
    /// Fails with [`Error::InvalidInput`] for values of another type than the index's,
    /// and with [`Error::Corrupt`] / [`Error::NotFound`] / [`Error::Store`] when a page
    /// cannot be read.
    pub async fn query(&self, query: &ScalarQuery) -> Result<RoaringTreemap> {
        let pages = self.pages_for(query)?;
        let loaded = self.load_pages(&pages).await?;
        let mut out = RoaringTreemap::new();
        for page in loaded {
            let values = page.column(0);
            let addresses = page.column(1).as_primitive::<UInt64Type>();
            let non_null = values.len() - values.null_count();
            for range in select_sorted(values.as_ref(), non_null, query)? {
                out.extend(addresses.values()[range].iter().copied());
            }
        }
        Ok(out)
    }

    async fn load_pages(&self, pages: &[usize]) -> Result<Vec<Arc<RecordBatch>>> {
        let cached: HashMap<usize, Arc<RecordBatch>> = {
            let cache = self.pages.lock().unwrap_or_else(|p| p.into_inner());
            pages
                .iter()
                .filter_map(|p| cache.get(p).map(|b| (*p, Arc::clone(b))))
                .collect()
        };
        let missing: Vec<usize> = pages
            .iter()
            .copied()
            .filter(|p| !cached.contains_key(p))
            .collect();
        let offsets = self.lookup.column(4).as_primitive::<UInt64Type>();
        let lengths = self.lookup.column(5).as_primitive::<UInt64Type>();
        let crcs = self.lookup.column(6).as_primitive::<UInt32Type>();
        let parts: Vec<_> = missing
            .iter()
            .map(|p| {
                let start = offsets.value(*p);
                (start..start + lengths.value(*p), crcs.value(*p))
            })
            .collect();
        let bytes = self.object.parts(self.store.as_ref(), &parts).await?;
        let mut fresh = HashMap::new();
        for (page, bytes) in missing.iter().zip(bytes) {
            let batch = format::decode_batch(&self.object.path, &bytes)?;
            if batch.num_columns() != 2 || batch.column(0).data_type() != &self.data_type {
                return Err(Error::corrupt(
                    &self.object.path,
                    format!("page {page} has the wrong columns"),
                ));
            }
            fresh.insert(*page, Arc::new(batch));
        }
        {
            let mut cache = self.pages.lock().unwrap_or_else(|p| p.into_inner());
            for (page, batch) in &fresh {
                if cache.len() >= PAGE_CACHE {
                    cache.clear();
                }
                cache.insert(*page, Arc::clone(batch));
            }
        }
        Ok(pages
            .iter()
            .filter_map(|p| cached.get(p).or_else(|| fresh.get(p)).cloned())
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorting_on_cores_matches_one_sort() {
        // Past the threshold (several runs on a multi-core machine) and below it, with
        // repeated keys so run boundaries split equal values.
        for n in [10usize, SORT_RUN_MIN * 2 + 7, SORT_RUN_MIN * 5 + 3] {
            let items: Vec<(i64, u64, u32)> = (0..n as u64)
                .map(|i| {
                    let h = i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
                    ((h % 1000) as i64 - 500, h >> 40, i as u32)
                })
                .collect();
            let mut expected = items.clone();
            expected.sort_unstable();
            assert_eq!(sort_on_cores(items), expected, "{n} items");
        }
        assert_eq!(merge(&[1, 3, 5], &[2, 3, 6, 7]), vec![1, 2, 3, 3, 5, 6, 7]);
        assert!(sort_on_cores(Vec::<(i64, u64, u32)>::new()).is_empty());
    }
}
