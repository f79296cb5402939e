//! [`Stats`]: the statistics an `add` carries, as JSON text or as a row of a checkpoint's
//! typed `stats_parsed` column.
//!
//! A checkpoint of 100,000 files holds some 50 MB of statistics JSON; decoding and copying
//! it was most of a cold open. When a checkpoint also holds `stats_parsed` (as Spark and
//! Tarn write them), the reader keeps that column's Arrow arrays and each `add` points at
//! its row: nothing is copied, planning reads typed values, and the JSON is rendered only
//! for the few files that need it as text.

use std::any::Any;
use std::borrow::Cow;
use std::fmt;
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Rows of typed statistics one `add` can point into (a batch of a checkpoint's
/// `stats_parsed` column). Implemented where statistics are understood, so this module
/// stays free of Arrow and expressions.
pub(crate) trait StatsRows: Send + Sync + fmt::Debug {
    /// The row as Delta's statistics JSON, or `None` when the row is null.
    fn json(&self, row: usize) -> Option<String>;
    /// `numRecords` of the row.
    fn num_records(&self, row: usize) -> Option<u64>;
    /// For downcasting by the statistics code.
    fn as_any(&self) -> &dyn Any;
}

#[derive(Clone)]
enum Repr {
    /// The text, and its `numRecords` once asked for: planning asks for it on every
    /// query, and parsing the JSON (some 100 bytes a column) each time cost more than
    /// the rest of planning a scan of many small files. Shared: a scan plan copies each
    /// file's `add`, and copying the text was a cost per file on every query.
    Json(Arc<str>, OnceLock<Option<u64>>),
    Parsed {
        rows: Arc<dyn StatsRows>,
        row: u32,
    },
}

/// A file's statistics (`numRecords`, `minValues`, `maxValues`, `nullCount`,
/// `tightBounds`), as its `add` action carries them. Built from JSON text with
/// `Stats::from`; read back as text with [`Stats::json`]. Serializes as the JSON string
/// Delta's `stats` field holds.
#[derive(Clone)]
pub struct Stats(Repr);

impl Stats {
    pub(crate) fn parsed(rows: Arc<dyn StatsRows>, row: usize) -> Self {
        Self(Repr::Parsed {
            rows,
            row: row as u32,
        })
    }

    /// The statistics as Delta's JSON text. Free for statistics that came as text; rendered
    /// from the typed values for those read from a checkpoint's `stats_parsed`.
    pub fn json(&self) -> Cow<'_, str> {
        match &self.0 {
            Repr::Json(text, _) => Cow::Borrowed(&**text),
            Repr::Parsed { rows, row } => {
                Cow::Owned(rows.json(*row as usize).unwrap_or_else(|| "{}".into()))
            }
        }
    }

    /// `numRecords`, without parsing JSON when the statistics are typed. `None` when absent
    /// or malformed.
    pub fn num_records(&self) -> Option<u64> {
        match &self.0 {
            Repr::Json(text, records) => *records.get_or_init(|| {
                #[derive(Deserialize)]
                struct Count {
                    #[serde(rename = "numRecords")]
                    num_records: Option<u64>,
                }
                serde_json::from_str::<Count>(text).ok()?.num_records
            }),
            Repr::Parsed { rows, row } => rows.num_records(*row as usize),
        }
    }

    /// The typed rows and the row these statistics are, when they came from `stats_parsed`.
    pub(crate) fn typed(&self) -> Option<(&Arc<dyn StatsRows>, usize)> {
        match &self.0 {
            Repr::Json(..) => None,
            Repr::Parsed { rows, row } => Some((rows, *row as usize)),
        }
    }
}

impl From<String> for Stats {
    fn from(json: String) -> Self {
        Self(Repr::Json(json.into(), OnceLock::new()))
    }
}

impl From<&str> for Stats {
    fn from(json: &str) -> Self {
        Self(Repr::Json(json.into(), OnceLock::new()))
    }
}

impl PartialEq for Stats {
    /// Statistics are equal when their JSON texts are.
    fn eq(&self, other: &Self) -> bool {
        self.json() == other.json()
    }
}

impl fmt::Debug for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Stats").field(&self.json()).finish()
    }
}

impl Serialize for Stats {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.json())
    }
}

impl<'de> Deserialize<'de> for Stats {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Self::from)
    }
}
