//! Names of the files in `_delta_log/`, and their parsing; and the names Tarn gives its
//! own records in the log.

/// The log folder under the table root.
pub const DELTA_LOG_DIR: &str = "_delta_log";
/// The checkpoint hint file in the log folder.
pub const LAST_CHECKPOINT: &str = "_last_checkpoint";
/// The folder of V2 checkpoint sidecars, in the log folder.
pub const SIDECARS_DIR: &str = "_sidecars";
/// The folder of group-commit proposals, in the log folder: writers waiting for a
/// version publish their prepared commits here for whoever wins it to carry.
pub const PROPOSALS_DIR: &str = "_tarn_proposals";
/// The log subfolder of group-commit claims: `<version:020>`, one per contended version.
pub const CLAIMS_DIR: &str = "_tarn_claims";
/// The prefix of the metadata domains of index segments: `tarn.index.<name>.<id>`.
pub const INDEX_SEGMENT_DOMAIN_PREFIX: &str = "tarn.index.";

/// What a checkpoint file is.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum CheckpointKind {
    /// `<v>.checkpoint.parquet`
    Classic,
    /// `<v>.checkpoint.<part>.<parts>.parquet`
    MultiPart {
        /// This part, from 1.
        part: u32,
        /// How many parts the checkpoint has.
        parts: u32,
    },
    /// `<v>.checkpoint.<uuid>.json|parquet`
    V2 {
        /// Whether the file is JSON (else Parquet).
        json: bool,
    },
}

/// What a log file is.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogFileKind {
    /// `<v>.json`
    Commit,
    /// A checkpoint file.
    Checkpoint(CheckpointKind),
    /// `<v>.crc`, `<v>.<w>.compacted.json` and other files Tarn does not need.
    Other,
}

/// A log file name's version and kind.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct LogFileName {
    /// The version the file belongs to.
    pub version: i64,
    /// What it is.
    pub kind: LogFileKind,
}

/// Parses a file name of the log folder (the last path segment). Returns `None` for names
/// that are not versioned log files (`_last_checkpoint`, temporary files, folders).
pub fn parse_log_file_name(name: &str) -> Option<LogFileName> {
    let (digits, rest) = name.split_at_checked(20)?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) || !rest.starts_with('.') {
        return None;
    }
    let version: i64 = digits.parse().ok()?;
    let kind = match &rest[1..] {
        "json" => LogFileKind::Commit,
        "checkpoint.parquet" => LogFileKind::Checkpoint(CheckpointKind::Classic),
        "crc" => LogFileKind::Other,
        other => {
            let Some(tail) = other.strip_prefix("checkpoint.") else {
                // Compacted logs and anything else versioned that Tarn does not read.
                return Some(LogFileName {
                    version,
                    kind: LogFileKind::Other,
                });
            };
            let parts: Vec<&str> = tail.split('.').collect();
            match parts.as_slice() {
                [part, parts, "parquet"] if part.len() == 10 && parts.len() == 10 => {
                    let (part, parts): (u32, u32) = (part.parse().ok()?, parts.parse().ok()?);
                    if part == 0 || part > parts {
                        return None;
                    }
                    LogFileKind::Checkpoint(CheckpointKind::MultiPart { part, parts })
                }
                [uuid, ext @ ("json" | "parquet")] if uuid.len() == 36 => {
                    LogFileKind::Checkpoint(CheckpointKind::V2 {
                        json: *ext == "json",
                    })
                }
                _ => LogFileKind::Other,
            }
        }
    };
    Some(LogFileName { version, kind })
}

/// `<version:020>.json`
pub fn commit_file_name(version: i64) -> String {
    format!("{version:020}.json")
}

/// `<version:020>.checkpoint.parquet`
pub fn checkpoint_file_name(version: i64) -> String {
    format!("{version:020}.checkpoint.parquet")
}

/// The 20-digit prefix every file of `version` starts with, for listing from a version.
pub fn version_prefix(version: i64) -> String {
    format!("{version:020}")
}

/// A group-commit proposal's name: `<base:020>.<stamp:013>.<txnId>.json`, where `base`
/// is the version its writer read up to and `stamp` when the writer began to commit
/// (milliseconds), so a listing orders proposals oldest first within a base.
pub fn proposal_file_name(base: i64, stamp: i64, txn_id: &str) -> String {
    format!("{base:020}.{stamp:013}.{txn_id}.json")
}

/// A group-commit claim's name: the version it claims, as 20 digits.
pub fn claim_file_name(version: i64) -> String {
    version_prefix(version)
}

/// The version a claim's file name holds; `None` for anything else.
pub fn parse_claim_file_name(name: &str) -> Option<i64> {
    (name.len() == 20 && name.bytes().all(|b| b.is_ascii_digit()))
        .then(|| name.parse().ok())
        .flatten()
}

/// A proposal's `(base, stamp, txnId)` from its file name; `None` for anything else.
pub fn parse_proposal_file_name(name: &str) -> Option<(i64, i64, String)> {
    let stem = name.strip_suffix(".json")?;
    let mut parts = stem.splitn(3, '.');
    let base = parts.next()?;
    let stamp = parts.next()?;
    let txn_id = parts.next()?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if base.len() != 20 || !digits(base) || !digits(stamp) || txn_id.is_empty() {
        return None;
    }
    Some((base.parse().ok()?, stamp.parse().ok()?, txn_id.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proposal_names_round_trip_and_refuse_others() {
        let name = proposal_file_name(7, 1_700_000_000_000, "a-b");
        assert_eq!(name, "00000000000000000007.1700000000000.a-b.json");
        assert_eq!(
            parse_proposal_file_name(&name),
            Some((7, 1_700_000_000_000, "a-b".into()))
        );
        assert_eq!(parse_proposal_file_name("00000000000000000007.json"), None);
        assert_eq!(parse_proposal_file_name("7.1.x.json"), None);
        assert_eq!(
            parse_proposal_file_name("00000000000000000007.x1.y.json"),
            None
        );
    }

    #[test]
    fn log_file_names_parse_to_version_and_kind() {
        let p = |n| parse_log_file_name(n).map(|f| (f.version, f.kind));
        assert_eq!(
            p("00000000000000000007.json"),
            Some((7, LogFileKind::Commit))
        );
        assert_eq!(
            p("00000000000000000010.checkpoint.parquet"),
            Some((10, LogFileKind::Checkpoint(CheckpointKind::Classic)))
        );
        assert_eq!(
            p("00000000000000000010.checkpoint.0000000002.0000000003.parquet"),
            Some((
                10,
                LogFileKind::Checkpoint(CheckpointKind::MultiPart { part: 2, parts: 3 })
            ))
        );
        assert_eq!(
            p("00000000000000000002.checkpoint.80a083e8-7026-4e79-81be-64bd76c43a11.json"),
            Some((
                2,
                LogFileKind::Checkpoint(CheckpointKind::V2 { json: true })
            ))
        );
        assert_eq!(p("00000000000000000001.crc"), Some((1, LogFileKind::Other)));
        assert_eq!(
            p("00000000000000000001.00000000000000000003.compacted.json"),
            Some((1, LogFileKind::Other))
        );
        assert_eq!(p("_last_checkpoint"), None);
        assert_eq!(p("0000000000000000001.json"), None);
        assert_eq!(
            p("00000000000000000001.json.tmp"),
            Some((1, LogFileKind::Other))
        );
        assert_eq!(
            p("00000000000000000001.checkpoint.0000000000.0000000001.parquet"),
            None
        );
        assert_eq!(commit_file_name(12), "00000000000000000012.json");
    }
}
