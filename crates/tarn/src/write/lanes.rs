//! Lanes of a partitioned write: each partition's rows go to one encoder for the whole
//! write, chosen by a hash of the partition's values, so a partition's rows end in one
//! file (per target size) however the input orders them, while every core encodes.
//!
//! Cutting the input into runs of consecutive rows, as an unpartitioned write does, gives
//! each run a file of every partition it meets: TPC-DS's `store_sales`, 1,824 dates in
//! every 64 MiB run, became 11 files per date, and its scans paid per file. Input whose
//! first batch spans few partitions ([`LANE_PARTITIONS`] per lane) still goes in runs.

use std::collections::HashMap;

use arrow::array::{ArrayRef, RecordBatch, UInt32Array};
use arrow::compute::take_record_batch;
use arrow::row::{RowConverter, SortField};

use crate::error::{Error, Result};
use crate::snapshot::PartitionColumn;

use super::partitions::partition_key;

/// Partitions per lane the first batch of a write must span for the write to go to
/// lanes: input that arrives a partition or a few at a time (sorted by them, a daily
/// append, a compaction of one partition) is better cut into runs, which then meet few
/// partitions each while one partition's rows still use every core.
pub(super) const LANE_PARTITIONS: usize = 4;

/// Splits batches among `lanes` encoders by their partition values.
pub(super) struct Lanes {
    lanes: usize,
    converter: RowConverter,
    columns: Vec<PartitionColumn>,
    names: Vec<String>,
}

impl Lanes {
    /// Lanes for the partition columns of `batch`-shaped input.
    ///
    /// Fails with [`Error::SchemaMismatch`] when `batch` lacks a partition column.
    pub(super) fn new(
        lanes: usize,
        partition_columns: &[PartitionColumn],
        batch: &RecordBatch,
    ) -> Result<Lanes> {
        let names: Vec<String> = partition_columns.iter().map(|p| p.name.clone()).collect();
        let fields = key_columns(&names, batch)?
            .iter()
            .map(|c| SortField::new(c.data_type().clone()))
            .collect();
        let converter =
            RowConverter::new(fields).map_err(Error::arrow("hashing partition values"))?;
        Ok(Lanes {
            lanes: lanes.max(1),
            converter,
            columns: partition_columns.to_vec(),
            names,
        })
    }

    /// How many partitions the rows of `batch` fall in.
    ///
    /// Fails when `batch` lacks a partition column.
    pub(super) fn partitions_in(&self, batch: &RecordBatch) -> Result<usize> {
        let rows = self
            .converter
            .convert_columns(&key_columns(&self.names, batch)?)
            .map_err(Error::arrow("hashing partition values"))?;
        let keys: std::collections::HashSet<&[u8]> = rows.iter().map(|r| r.data()).collect();
        Ok(keys.len())
    }

    /// The rows of `batch` each lane takes, as `(lane, rows)` in lane order, lanes without
    /// rows left out. A batch wholly in one lane is passed on as it is.
    ///
    /// Fails when `batch` lacks a partition column.
    pub(super) fn split(&self, batch: &RecordBatch) -> Result<Vec<(usize, RecordBatch)>> {
        if self.lanes == 1 || batch.num_rows() == 0 {
            return Ok(vec![(0, batch.clone())]);
        }
        let keys = key_columns(&self.names, batch)?;
        let rows = self
            .converter
            .convert_columns(&keys)
            .map_err(Error::arrow("hashing partition values"))?;
        // A partition's lane comes from its key as the files are named (values that write
        // as the same partition, such as null and "", share a lane), worked out once per
        // distinct value of the batch.
        let mut lane_of_row: HashMap<&[u8], usize> = HashMap::new();
        let mut taken: Vec<Vec<u32>> = vec![Vec::new(); self.lanes];
        for (i, row) in rows.iter().enumerate() {
            let lane = *lane_of_row
                .entry(row.data())
                .or_insert_with(|| lane_of(&partition_key(&self.columns, &keys, i), self.lanes));
            taken[lane].push(i as u32);
        }
        if let Some(only) = taken.iter().position(|t| t.len() == batch.num_rows()) {
            return Ok(vec![(only, batch.clone())]);
        }
        taken
            .into_iter()
            .enumerate()
            .filter(|(_, rows)| !rows.is_empty())
            .map(|(lane, rows)| {
                take_record_batch(batch, &UInt32Array::from(rows))
                    .map(|rows| (lane, rows))
                    .map_err(Error::arrow("splitting rows among encoders"))
            })
            .collect()
    }
}

fn key_columns(names: &[String], batch: &RecordBatch) -> Result<Vec<ArrayRef>> {
    names
        .iter()
        .map(|name| {
            batch
                .column_by_name(name)
                .cloned()
                .ok_or_else(|| Error::SchemaMismatch {
                    reason: format!("the batch lacks partition column {name:?}"),
                })
        })
        .collect()
}

/// The lane of a partition by its key (FNV-1a: stable across runs, so the same
/// partition always lands in the same lane of a write).
fn lane_of(key: &[Option<String>], lanes: usize) -> usize {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut mix = |byte: u8| {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    };
    for value in key {
        match value {
            // A marker byte apart from every string's bytes and length.
            None => mix(0xff),
            Some(v) => {
                mix(0);
                v.bytes().for_each(&mut mix);
                (v.len() as u64)
                    .to_le_bytes()
                    .into_iter()
                    .for_each(&mut mix);
            }
        }
    }
    (hash % lanes as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use arrow::array::{AsArray, Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Int64Type, Schema};

    use crate::protocol::PrimitiveType;

    fn batch(ids: Vec<i64>, dates: Vec<Option<&str>>) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("date", DataType::Utf8, true),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(ids)),
                Arc::new(StringArray::from(dates)),
            ],
        )
        .unwrap()
    }

    fn date() -> Vec<PartitionColumn> {
        vec![PartitionColumn {
            name: "date".into(),
            physical_name: "date".into(),
            data_type: PrimitiveType::String,
        }]
    }

    #[test]
    fn every_row_goes_to_exactly_one_lane_and_a_partition_always_to_the_same() {
        let days: Vec<String> = (0..50).map(|d| format!("2026-11-{d:02}")).collect();
        let ids: Vec<i64> = (0..1000).collect();
        let dates: Vec<Option<&str>> = (0..1000)
            .map(|i| (i % 7 != 0).then(|| days[i % 50].as_str()))
            .collect();
        let input = batch(ids, dates);
        let lanes = Lanes::new(3, &date(), &input).unwrap();
        let split = lanes.split(&input).unwrap();
        assert!(
            split.len() > 1,
            "50 dates spread over more than one of 3 lanes"
        );
        let mut seen: Vec<i64> = Vec::new();
        let mut lane_of_date: std::collections::HashMap<Option<String>, usize> =
            std::collections::HashMap::new();
        for (lane, rows) in &split {
            seen.extend(rows.column(0).as_primitive::<Int64Type>().values());
            for date in rows.column(1).as_string::<i32>() {
                let previous = lane_of_date.insert(date.map(str::to_string), *lane);
                assert!(previous.is_none_or(|p| p == *lane), "{date:?} in two lanes");
            }
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..1000).collect::<Vec<i64>>());
        // A later batch sends the same dates to the same lanes.
        let again = batch(vec![5, 6], vec![Some(days[3].as_str()), None]);
        for (lane, rows) in lanes.split(&again).unwrap() {
            for date in rows.column(1).as_string::<i32>() {
                assert_eq!(lane_of_date[&date.map(str::to_string)], lane);
            }
        }
    }

    #[test]
    fn null_and_the_empty_string_are_one_partition_and_share_a_lane() {
        let days: Vec<String> = (0..64).map(|d| format!("d{d}")).collect();
        let mut dates: Vec<Option<&str>> = days.iter().map(|d| Some(d.as_str())).collect();
        dates.extend([None, Some(""), None, Some("")]);
        let input = batch((0..dates.len() as i64).collect(), dates);
        let lanes = Lanes::new(8, &date(), &input).unwrap();
        let mut lanes_of_null = Vec::new();
        for (lane, rows) in lanes.split(&input).unwrap() {
            let dates = rows.column(1).as_string::<i32>();
            if dates.iter().any(|d| d.is_none_or(str::is_empty)) {
                lanes_of_null.push(lane);
            }
        }
        assert_eq!(
            lanes_of_null.len(),
            1,
            "null and \"\" in lanes {lanes_of_null:?}"
        );
    }

    #[test]
    fn rows_without_their_partition_column_are_refused() {
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
        let input =
            RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(vec![1]))]).unwrap();
        assert!(matches!(
            Lanes::new(2, &date(), &input),
            Err(Error::SchemaMismatch { .. })
        ));
    }
}
