//! Table properties (`metaData.configuration`) Tarn reads, with Delta's defaults.

use std::time::Duration;

use parquet::basic::{Compression, ZstdLevel};

use crate::error::{Error, Result};
use crate::protocol::Metadata;

/// `delta.checkpointInterval`
pub const CHECKPOINT_INTERVAL: &str = "delta.checkpointInterval";
/// `delta.deletedFileRetentionDuration`
pub const DELETED_FILE_RETENTION: &str = "delta.deletedFileRetentionDuration";
/// `delta.logRetentionDuration`: how long commits and checkpoints are kept for time
/// travel before log cleanup may delete them.
pub const LOG_RETENTION: &str = "delta.logRetentionDuration";
/// `delta.enableExpiredLogCleanup`: whether log cleanup runs after each checkpoint.
pub const ENABLE_EXPIRED_LOG_CLEANUP: &str = "delta.enableExpiredLogCleanup";
/// `delta.dataSkippingNumIndexedCols`
pub const NUM_INDEXED_COLS: &str = "delta.dataSkippingNumIndexedCols";
/// `delta.checkpoint.writeStatsAsJson`
pub const CHECKPOINT_STATS_AS_JSON: &str = "delta.checkpoint.writeStatsAsJson";
/// `delta.checkpoint.writeStatsAsStruct`
pub const CHECKPOINT_STATS_AS_STRUCT: &str = "delta.checkpoint.writeStatsAsStruct";
/// `delta.targetFileSize`
pub const TARGET_FILE_SIZE: &str = "delta.targetFileSize";
/// `delta.columnMapping.mode`
pub const COLUMN_MAPPING_MODE: &str = "delta.columnMapping.mode";
/// `delta.enableInCommitTimestamps`
pub const ENABLE_IN_COMMIT_TIMESTAMPS: &str = "delta.enableInCommitTimestamps";
/// `delta.inCommitTimestampEnablementVersion`
pub const ICT_ENABLEMENT_VERSION: &str = "delta.inCommitTimestampEnablementVersion";
/// `delta.inCommitTimestampEnablementTimestamp`
pub const ICT_ENABLEMENT_TIMESTAMP: &str = "delta.inCommitTimestampEnablementTimestamp";
/// `delta.appendOnly`
pub const APPEND_ONLY: &str = "delta.appendOnly";
/// `delta.enableChangeDataFeed`
pub const ENABLE_CHANGE_DATA_FEED: &str = "delta.enableChangeDataFeed";
/// `delta.enableDeletionVectors`
pub const ENABLE_DELETION_VECTORS: &str = "delta.enableDeletionVectors";
/// `delta.enableRowTracking`: rows keep stable ids and commit versions.
pub const ENABLE_ROW_TRACKING: &str = "delta.enableRowTracking";
/// `delta.rowTracking.materializedRowIdColumnName`: the hidden data-file column of
/// preserved row ids.
pub const MATERIALIZED_ROW_ID_COLUMN: &str = "delta.rowTracking.materializedRowIdColumnName";
/// `delta.rowTracking.materializedRowCommitVersionColumnName`: the hidden data-file column
/// of preserved row commit versions.
pub const MATERIALIZED_ROW_COMMIT_VERSION_COLUMN: &str =
    "delta.rowTracking.materializedRowCommitVersionColumnName";
/// `tarn.dml.strategy`: how row-level changes are written, `copy-on-write` or
/// `merge-on-read`. Without it, tables with deletion vectors enabled use merge-on-read.
pub const DML_STRATEGY: &str = "tarn.dml.strategy";
/// `tarn.deletionVectors.inlineThreshold`: deletion vectors whose data is at most this many
/// bytes are stored inline in the log (default 64).
pub const DV_INLINE_THRESHOLD: &str = "tarn.deletionVectors.inlineThreshold";
/// `tarn.parquet.compression`: the codec of the data files Tarn writes, `lz4_raw`
/// (default), `snappy`, `zstd` or `uncompressed`. LZ4_RAW decompresses about twice as fast
/// as Snappy at the same size; `snappy` suits readers older than Parquet 1.13 (Spark 3.4
/// and before).
pub const PARQUET_COMPRESSION: &str = "tarn.parquet.compression";
/// `tarn.index.inlineMinRows`: data files with fewer rows than this get no inline index
/// segment when written (default 0: every file gets one); scans read such files with
/// statistics pruning, and `optimize_indices` indexes them later.
pub const INDEX_INLINE_MIN_ROWS: &str = "tarn.index.inlineMinRows";
/// `tarn.index.streamSegmentRows`: a streamed write into a table with inline indices
/// builds one segment per index for each group of its files holding up to this many rows
/// (default 4,194,304), reading the indexed column back group by group, so what it holds
/// for the indices is bounded by this, not by the input.
pub const INDEX_STREAM_SEGMENT_ROWS: &str = "tarn.index.streamSegmentRows";

/// The default of [`INDEX_STREAM_SEGMENT_ROWS`].
pub const DEFAULT_INDEX_STREAM_SEGMENT_ROWS: u64 = 4 << 20;

/// The default of [`DV_INLINE_THRESHOLD`], in bytes.
pub const DEFAULT_DV_INLINE_THRESHOLD: usize = 64;

/// The default target size of data files: 128 MiB.
pub const DEFAULT_TARGET_FILE_SIZE: u64 = 128 * 1024 * 1024;

/// How a table maps logical column names to the names in data files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnMappingMode {
    /// Data files use the logical names.
    None,
    /// Data files use `delta.columnMapping.physicalName`.
    Name,
    /// Data files use field ids (`delta.columnMapping.id`), and physical names.
    Id,
}

/// How a row-level change (DELETE, UPDATE, MERGE) is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeStrategy {
    /// Rewrite every file holding a touched row.
    CopyOnWrite,
    /// Mark touched rows in deletion vectors; write only new rows.
    MergeOnRead,
}

/// A typed view of a table's properties.
#[derive(Debug, Clone, Copy)]
pub struct TableProperties<'a> {
    metadata: &'a Metadata,
}

impl<'a> TableProperties<'a> {
    /// Properties of this metadata.
    pub fn new(metadata: &'a Metadata) -> Self {
        Self { metadata }
    }

    fn get(&self, key: &str) -> Option<&'a str> {
        self.metadata.property(key)
    }

    fn flag(&self, key: &str) -> bool {
        self.get(key)
            .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    }

    /// Commits between checkpoints (default 10; invalid or non-positive values give the
    /// default).
    pub fn checkpoint_interval(&self) -> u64 {
        self.get(CHECKPOINT_INTERVAL)
            .and_then(|v| v.trim().parse::<u64>().ok())
            .filter(|v| *v > 0)
            .unwrap_or(10)
    }

    /// How long removed files stay referenced as tombstones (default one week).
    pub fn deleted_file_retention(&self) -> Duration {
        self.get(DELETED_FILE_RETENTION)
            .and_then(parse_interval)
            .unwrap_or(Duration::from_secs(7 * 24 * 3600))
    }

    /// How long the log keeps commits and checkpoints for time travel
    /// (`delta.logRetentionDuration`, default 30 days).
    pub fn log_retention(&self) -> Duration {
        self.get(LOG_RETENTION)
            .and_then(parse_interval)
            .unwrap_or(Duration::from_secs(30 * 24 * 3600))
    }

    /// Whether log cleanup runs after each checkpoint (`delta.enableExpiredLogCleanup`,
    /// default true).
    pub fn expired_log_cleanup(&self) -> bool {
        !self
            .get(ENABLE_EXPIRED_LOG_CLEANUP)
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("false"))
    }

    /// How many leading columns get statistics (default 32; -1 means all).
    pub fn num_indexed_cols(&self) -> i64 {
        self.get(NUM_INDEXED_COLS)
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(32)
    }

    /// Whether checkpoints carry each file's statistics as JSON text, `add.stats`
    /// (`delta.checkpoint.writeStatsAsJson`, default true, as in Spark).
    pub fn checkpoint_stats_as_json(&self) -> bool {
        !self
            .get(CHECKPOINT_STATS_AS_JSON)
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("false"))
    }

    /// Whether checkpoints carry typed statistics and partition values, `add.stats_parsed`
    /// and `add.partitionValues_parsed` (`delta.checkpoint.writeStatsAsStruct`, default
    /// true, as in Spark).
    pub fn checkpoint_stats_as_struct(&self) -> bool {
        !self
            .get(CHECKPOINT_STATS_AS_STRUCT)
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("false"))
    }

    /// Fewest rows a new data file must hold to get inline index segments
    /// ([`INDEX_INLINE_MIN_ROWS`]; default 0, invalid values give the default).
    pub fn index_inline_min_rows(&self) -> u64 {
        self.get(INDEX_INLINE_MIN_ROWS)
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Most rows of the files one inline segment of a streamed write covers
    /// ([`INDEX_STREAM_SEGMENT_ROWS`]; invalid or zero values give the default).
    pub fn index_stream_segment_rows(&self) -> u64 {
        self.get(INDEX_STREAM_SEGMENT_ROWS)
            .and_then(|v| v.trim().parse().ok())
            .filter(|v| *v > 0)
            .unwrap_or(DEFAULT_INDEX_STREAM_SEGMENT_ROWS)
    }

    /// The target size of data files, if the table sets one.
    pub fn target_file_size(&self) -> Option<u64> {
        self.get(TARGET_FILE_SIZE)
            .and_then(|v| v.trim().parse().ok())
            .filter(|v| *v > 0)
    }

    /// The codec of new data files ([`PARQUET_COMPRESSION`], default LZ4_RAW).
    ///
    /// Fails with [`Error::InvalidArgument`] when the property names no codec Tarn writes.
    pub fn data_compression(&self) -> Result<Compression> {
        parse_compression(self.get(PARQUET_COMPRESSION))
    }

    /// The column mapping mode.
    pub fn column_mapping_mode(&self) -> ColumnMappingMode {
        match self.get(COLUMN_MAPPING_MODE) {
            Some(m) if m.eq_ignore_ascii_case("name") => ColumnMappingMode::Name,
            Some(m) if m.eq_ignore_ascii_case("id") => ColumnMappingMode::Id,
            _ => ColumnMappingMode::None,
        }
    }

    /// The first version with in-commit timestamps, when they are enabled.
    pub fn in_commit_timestamps_since(&self) -> Option<i64> {
        if !self.flag(ENABLE_IN_COMMIT_TIMESTAMPS) {
            return None;
        }
        Some(
            self.get(ICT_ENABLEMENT_VERSION)
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0),
        )
    }

    /// Whether the table refuses removes (`delta.appendOnly`).
    pub fn append_only(&self) -> bool {
        self.flag(APPEND_ONLY)
    }

    /// Whether the table records a change data feed (`delta.enableChangeDataFeed`).
    pub fn change_data_feed(&self) -> bool {
        self.flag(ENABLE_CHANGE_DATA_FEED)
    }

    /// Whether row tracking is enabled (`delta.enableRowTracking`).
    pub fn row_tracking(&self) -> bool {
        self.flag(ENABLE_ROW_TRACKING)
    }

    /// Whether deletion vectors are enabled.
    pub fn deletion_vectors_enabled(&self) -> bool {
        self.flag(ENABLE_DELETION_VECTORS)
    }

    /// The strategy the table asks row-level changes to use: [`DML_STRATEGY`], else
    /// merge-on-read when deletion vectors are enabled, else copy-on-write.
    pub fn change_strategy(&self) -> ChangeStrategy {
        match self.get(DML_STRATEGY) {
            Some(s) if s.eq_ignore_ascii_case("merge-on-read") => ChangeStrategy::MergeOnRead,
            Some(s) if s.eq_ignore_ascii_case("copy-on-write") => ChangeStrategy::CopyOnWrite,
            _ if self.deletion_vectors_enabled() => ChangeStrategy::MergeOnRead,
            _ => ChangeStrategy::CopyOnWrite,
        }
    }

    /// The largest deletion vector, in bytes of bitmap data, stored inline in the log
    /// ([`DV_INLINE_THRESHOLD`], default 64; invalid values give the default).
    pub fn inline_dv_threshold(&self) -> usize {
        self.get(DV_INLINE_THRESHOLD)
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(DEFAULT_DV_INLINE_THRESHOLD)
    }
}

/// The codec a [`PARQUET_COMPRESSION`] value names (LZ4_RAW without one).
///
/// Fails with [`Error::InvalidArgument`] when it names no codec Tarn writes.
pub(crate) fn parse_compression(value: Option<&str>) -> Result<Compression> {
    let Some(value) = value else {
        return Ok(Compression::LZ4_RAW);
    };
    match value.trim().to_ascii_lowercase().as_str() {
        "lz4_raw" | "lz4raw" => Ok(Compression::LZ4_RAW),
        "snappy" => Ok(Compression::SNAPPY),
        "zstd" => Ok(Compression::ZSTD(ZstdLevel::default())),
        "uncompressed" | "none" => Ok(Compression::UNCOMPRESSED),
        _ => Err(Error::InvalidArgument {
            name: PARQUET_COMPRESSION,
            reason: format!("{value:?} is none of lz4_raw, snappy, zstd or uncompressed"),
        }),
    }
}

/// Parses Delta's interval strings: `interval 1 week`, `interval 7 days`, `1 hour`.
pub fn parse_interval(text: &str) -> Option<Duration> {
    let text = text.trim().to_ascii_lowercase();
    let text = text.strip_prefix("interval").unwrap_or(&text).trim();
    let mut parts = text.split_whitespace();
    let n: u64 = parts.next()?.parse().ok()?;
    let unit = parts.next().unwrap_or("seconds");
    let seconds = match unit.trim_end_matches('s') {
        "nanosecond" => return Some(Duration::from_nanos(n)),
        "microsecond" => return Some(Duration::from_micros(n)),
        "millisecond" => return Some(Duration::from_millis(n)),
        "second" => 1,
        "minute" => 60,
        "hour" => 3600,
        "day" => 86_400,
        "week" => 7 * 86_400,
        _ => return None,
    };
    Some(Duration::from_secs(n.checked_mul(seconds)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_parse_in_delta_forms() {
        assert_eq!(
            parse_interval("interval 1 week"),
            Some(Duration::from_secs(604_800))
        );
        assert_eq!(
            parse_interval("interval 2 days"),
            Some(Duration::from_secs(172_800))
        );
        assert_eq!(
            parse_interval("30 minutes"),
            Some(Duration::from_secs(1_800))
        );
        assert_eq!(parse_interval("soon"), None);
    }
}
