//! Deterministic data generators for the workloads: the same seed gives the same rows on
//! every machine, so figures from two buckets compare.
//!
//! - [`merge_rows`]: the LHBench merge-microbenchmark table (CIDR 2023, section 5.3):
//!   `key BIGINT, value DOUBLE = key*7.1+13.4, value2 STRING = key*91, part = key % 1000`.
//! - [`store_sales`]: a TPC-DS `store_sales`-like table of 23 columns, sorted by
//!   `(ss_sold_date_sk, ss_item_sk)`, for loads and the file-count benchmark.
//! - [`sales_batch`]: a wide sales table with a customer key, for the Brooklyn Data mutation
//!   sequence (upserts, deletes, a GDPR delete of one customer).

use std::collections::HashSet;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, Date32Array, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use tarn_store::SplitMix64;

/// Rows per generated batch.
pub const BATCH_ROWS: usize = 64 * 1024;

/// A batch of generated columns. They are built to the schema's types here, so a
/// mismatch is a bug in this module (its test builds every generator), not bad input.
#[allow(clippy::expect_used)]
pub(crate) fn batch(schema: SchemaRef, columns: Vec<ArrayRef>) -> RecordBatch {
    RecordBatch::try_new(schema, columns).expect("generated columns match their schema")
}

/// The LHBench merge table's schema.
pub fn merge_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("key", DataType::Int64, false),
        Field::new("value", DataType::Float64, true),
        Field::new("value2", DataType::Utf8, true),
        Field::new("part", DataType::Int32, true),
    ]))
}

/// LHBench rows for `keys`, with `value` shifted by `bump` (0 for the table, non-zero for
/// a source's updated rows so that an update changes something).
pub fn merge_batch(keys: &[i64], bump: f64) -> RecordBatch {
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(keys.to_vec())),
        Arc::new(Float64Array::from_iter_values(
            keys.iter().map(|k| *k as f64 * 7.1 + 13.4 + bump),
        )),
        Arc::new(StringArray::from_iter_values(
            keys.iter().map(|k| (k.wrapping_mul(91)).to_string()),
        )),
        Arc::new(Int32Array::from_iter_values(
            keys.iter().map(|k| (k % 1000) as i32),
        )),
    ];
    batch(merge_schema(), columns)
}

/// The merge table: keys `0..rows` in order, in batches of [`BATCH_ROWS`].
pub fn merge_rows(rows: u64) -> impl Iterator<Item = RecordBatch> {
    (0..rows).step_by(BATCH_ROWS).map(move |start| {
        let end = (start + BATCH_ROWS as u64).min(rows);
        let keys: Vec<i64> = (start as i64..end as i64).collect();
        merge_batch(&keys, 0.0)
    })
}

/// A streamed upsert source of `source_rows` rows for the `rows`-row merge table, made
/// batch by batch as it is read: half of it updates of existing keys spread over the
/// whole table (key `i * 1_000_003 mod rows`, distinct as the stride is a prime that
/// does not divide `rows`), half inserts of new keys above the table's, alternating.
pub fn upsert_stream(rows: u64, source_rows: u64) -> impl Iterator<Item = RecordBatch> {
    const STRIDE: u64 = 1_000_003;
    (0..source_rows).step_by(BATCH_ROWS).map(move |start| {
        let end = (start + BATCH_ROWS as u64).min(source_rows);
        let keys: Vec<i64> = (start..end)
            .map(|i| match i % 2 {
                0 => ((i / 2).wrapping_mul(STRIDE) % rows.max(1)) as i64,
                _ => (rows + i / 2) as i64,
            })
            .collect();
        merge_batch(&keys, 1.0)
    })
}

/// An LHBench merge source: `fraction` of a `rows`-row table, half updates of existing
/// keys drawn at random (distinct), half inserts of new keys above the table's. Returns
/// the batch and the number of updates in it.
pub fn merge_source(rows: u64, fraction: f64, seed: u64) -> (RecordBatch, usize) {
    upsert_source(rows, fraction, 0.5, seed)
}

/// An upsert batch: `fraction` of a `rows`-row table, `update_share` of it updates of
/// existing keys drawn at random over the whole table (distinct), the rest inserts of new
/// keys above the table's. Returns the batch and the number of updates in it. With an
/// update share of 0.9 and 1% of the table, the production benchmark's CDC batch.
pub fn upsert_source(
    rows: u64,
    fraction: f64,
    update_share: f64,
    seed: u64,
) -> (RecordBatch, usize) {
    let total = ((rows as f64 * fraction).round() as usize).max(1);
    let updates = ((total as f64 * update_share) as usize).min(rows as usize);
    let mut rng = SplitMix64(seed);
    let mut chosen = HashSet::with_capacity(updates);
    while chosen.len() < updates {
        chosen.insert((rng.next_u64() % rows.max(1)) as i64);
    }
    let mut keys: Vec<i64> = chosen.into_iter().collect();
    keys.sort_unstable();
    let inserts = total - updates;
    keys.extend((0..inserts as i64).map(|i| rows as i64 + i));
    (merge_batch(&keys, 1.0), updates)
}

/// The 23 columns of the `store_sales`-like table.
pub fn store_sales_schema() -> SchemaRef {
    let mut fields = vec![
        Field::new("ss_sold_date_sk", DataType::Int32, false),
        Field::new("ss_sold_time_sk", DataType::Int32, true),
        Field::new("ss_item_sk", DataType::Int32, false),
        Field::new("ss_customer_sk", DataType::Int32, true),
        Field::new("ss_cdemo_sk", DataType::Int32, true),
        Field::new("ss_hdemo_sk", DataType::Int32, true),
        Field::new("ss_addr_sk", DataType::Int32, true),
        Field::new("ss_store_sk", DataType::Int32, true),
        Field::new("ss_promo_sk", DataType::Int32, true),
        Field::new("ss_ticket_number", DataType::Int64, false),
        Field::new("ss_quantity", DataType::Int32, true),
    ];
    for name in [
        "ss_wholesale_cost",
        "ss_list_price",
        "ss_sales_price",
        "ss_ext_discount_amt",
        "ss_ext_sales_price",
        "ss_ext_wholesale_cost",
        "ss_ext_list_price",
        "ss_ext_tax",
        "ss_coupon_amt",
        "ss_net_paid",
        "ss_net_paid_inc_tax",
        "ss_net_profit",
    ] {
        fields.push(Field::new(name, DataType::Float64, true));
    }
    Arc::new(Schema::new(fields))
}

/// Items sold per day in the `store_sales`-like table.
const ITEMS_PER_DAY: u64 = 2_000;

/// `store_sales`-like rows `start..end` (row `i` is a sale on day `i / 2000` of item
/// `i % 2000`, so rows come sorted by `(ss_sold_date_sk, ss_item_sk)`).
pub fn store_sales_batch(start: u64, end: u64, seed: u64) -> RecordBatch {
    let n = (end - start) as usize;
    let mut rng = SplitMix64(seed ^ start.wrapping_mul(0x9E37_79B9));
    let mut ints = |modulo: u64| -> Vec<Option<i32>> {
        (0..n)
            .map(|_| {
                let r = rng.next_u64();
                (!r.is_multiple_of(50)).then_some(((r >> 8) % modulo) as i32)
            })
            .collect()
    };
    let rows: Vec<u64> = (start..end).collect();
    let mut columns: Vec<ArrayRef> = vec![
        Arc::new(Int32Array::from_iter_values(
            rows.iter().map(|i| 2_450_816 + (i / ITEMS_PER_DAY) as i32),
        )),
        Arc::new(Int32Array::from(ints(86_400))),
        Arc::new(Int32Array::from_iter_values(
            rows.iter().map(|i| (i % ITEMS_PER_DAY) as i32 + 1),
        )),
        Arc::new(Int32Array::from(ints(100_000))),
        Arc::new(Int32Array::from(ints(1_920_800))),
        Arc::new(Int32Array::from(ints(7_200))),
        Arc::new(Int32Array::from(ints(50_000))),
        Arc::new(Int32Array::from(ints(12))),
        Arc::new(Int32Array::from(ints(300))),
        Arc::new(Int64Array::from_iter_values(
            rows.iter().map(|i| (i / 8) as i64),
        )),
        Arc::new(Int32Array::from(ints(100))),
    ];
    for _ in 0..12 {
        let values: Float64Array = (0..n)
            .map(|_| {
                let r = rng.next_u64();
                (!r.is_multiple_of(40)).then(|| ((r >> 16) % 2_000_000) as f64 / 100.0)
            })
            .collect();
        columns.push(Arc::new(values));
    }
    batch(store_sales_schema(), columns)
}

/// `rows` rows of `store_sales` in batches.
pub fn store_sales(rows: u64, seed: u64) -> impl Iterator<Item = RecordBatch> {
    (0..rows)
        .step_by(BATCH_ROWS)
        .map(move |start| store_sales_batch(start, (start + BATCH_ROWS as u64).min(rows), seed))
}

/// The wide sales table of the mutation benchmark.
pub fn sales_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("sale_id", DataType::Int64, false),
        Field::new("customer_id", DataType::Int64, false),
        Field::new("sold_date", DataType::Date32, false),
        Field::new("item_id", DataType::Int32, true),
        Field::new("store_id", DataType::Int32, true),
        Field::new("channel", DataType::Utf8, true),
        Field::new("quantity", DataType::Int32, true),
        Field::new("list_price", DataType::Float64, true),
        Field::new("discount", DataType::Float64, true),
        Field::new("tax", DataType::Float64, true),
        Field::new("net_paid", DataType::Float64, true),
        Field::new("comment", DataType::Utf8, true),
    ]))
}

/// Customers in the sales table.
pub const CUSTOMERS: u64 = 50_000;

const CHANNELS: [&str; 4] = ["store", "web", "catalog", "phone"];

/// Sales rows for `ids` (sold dates rise with the id; customers spread at random).
pub fn sales_batch(ids: &[i64], seed: u64) -> RecordBatch {
    let hash = |id: i64, salt: u64| {
        let mut rng = SplitMix64(seed ^ (id as u64).wrapping_mul(0x2545_F491_4F6C_DD1D) ^ salt);
        rng.next_u64()
    };
    let quantity: Vec<i32> = ids.iter().map(|i| (hash(*i, 3) % 20) as i32 + 1).collect();
    let price: Vec<f64> = ids
        .iter()
        .map(|i| (hash(*i, 4) % 50_000) as f64 / 100.0)
        .collect();
    let discount: Vec<f64> = ids
        .iter()
        .map(|i| (hash(*i, 5) % 30) as f64 / 100.0)
        .collect();
    let net: Vec<f64> = (0..ids.len())
        .map(|j| f64::from(quantity[j]) * price[j] * (1.0 - discount[j]))
        .collect();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(ids.to_vec())),
        Arc::new(Int64Array::from_iter_values(
            ids.iter().map(|i| (hash(*i, 1) % CUSTOMERS) as i64),
        )),
        Arc::new(Date32Array::from_iter_values(
            ids.iter().map(|i| 18_000 + (*i / 10_000) as i32),
        )),
        Arc::new(Int32Array::from_iter_values(
            ids.iter().map(|i| (hash(*i, 2) % 20_000) as i32),
        )),
        Arc::new(Int32Array::from_iter_values(
            ids.iter().map(|i| (*i % 100) as i32),
        )),
        Arc::new(StringArray::from_iter_values(
            ids.iter().map(|i| CHANNELS[(hash(*i, 6) % 4) as usize]),
        )),
        Arc::new(Int32Array::from(quantity)),
        Arc::new(Float64Array::from(price)),
        Arc::new(Float64Array::from(discount)),
        Arc::new(Float64Array::from_iter_values(net.iter().map(|n| n * 0.08))),
        Arc::new(Float64Array::from(net)),
        Arc::new(StringArray::from_iter(ids.iter().map(|i| {
            (hash(*i, 7) % 3 == 0).then(|| format!("sale {i} noted"))
        }))),
    ];
    batch(sales_schema(), columns)
}

/// Whether a sale is held back from the initial load, to be upserted later (1.5%).
pub fn held_back(id: i64) -> bool {
    (id.wrapping_mul(0x9E37_79B9) as u64 >> 7) % 1000 < 15
}

/// The sales table's initial load: ids `0..rows` except the held-back ones, in batches.
pub fn sales_initial(rows: u64, seed: u64) -> impl Iterator<Item = RecordBatch> {
    (0..rows).step_by(BATCH_ROWS).map(move |start| {
        let end = (start + BATCH_ROWS as u64).min(rows);
        let ids: Vec<i64> = (start as i64..end as i64)
            .filter(|i| !held_back(*i))
            .collect();
        sales_batch(&ids, seed)
    })
}

/// The held-back sales, to upsert.
pub fn sales_held_back(rows: u64, seed: u64) -> RecordBatch {
    let ids: Vec<i64> = (0..rows as i64).filter(|i| held_back(*i)).collect();
    sales_batch(&ids, seed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generators_are_deterministic_and_shaped_as_documented() {
        let (a, updates) = merge_source(1_000_000, 0.001, 7);
        let (b, _) = merge_source(1_000_000, 0.001, 7);
        assert_eq!(a, b);
        assert_eq!((a.num_rows(), updates), (1000, 500));
        let keys = a.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
        assert_eq!(keys.iter().filter(|k| k.unwrap() >= 1_000_000).count(), 500);
        let t = merge_batch(&[10], 0.0);
        let value = t.column(1).as_any().downcast_ref::<Float64Array>().unwrap();
        assert!((value.value(0) - 84.4).abs() < 1e-9);
        let value2 = t.column(2).as_any().downcast_ref::<StringArray>().unwrap();
        assert_eq!(value2.value(0), "910");
        assert_eq!(store_sales_batch(0, 10, 1).num_columns(), 23);
        assert_eq!(store_sales_batch(0, 10, 1), store_sales_batch(0, 10, 1));
        let held = (0..100_000).filter(|i| held_back(*i)).count();
        assert!((1_300..1_700).contains(&held), "{held}");
    }
}
