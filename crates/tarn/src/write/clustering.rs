//! Clustered tables (the `clustering` writer feature, Spark's `CLUSTER BY`): Tarn does
//! not cluster, but every file it adds must carry statistics for the clustering columns
//! (the `delta.clustering` domain lists them, by physical name), so that clustering and
//! data skipping keep working. The domain itself is never touched.

use crate::error::{Error, Result};
use crate::snapshot::Snapshot;

/// The domain of a clustered table's columns.
const CLUSTERING_DOMAIN: &str = "delta.clustering";

/// Which top-level columns get statistics in the files a write adds: the first `budget`
/// leaves (`delta.dataSkippingNumIndexedCols`, negative for all), and `always` whatever
/// the budget.
#[derive(Debug, Clone, Default)]
pub(crate) struct StatsColumns {
    pub(crate) budget: i64,
    pub(crate) always: Vec<String>,
}

impl StatsColumns {
    /// The statistics columns of writes to `snapshot`'s table.
    ///
    /// Fails with [`Error::UnsupportedWriterFeature`] (`clustering`) when the table
    /// clusters by a column Tarn cannot keep statistics for (nested, or not in the schema)
    /// or its clustering domain does not parse.
    pub(crate) fn of(snapshot: &Snapshot) -> Result<StatsColumns> {
        Ok(StatsColumns {
            budget: snapshot.properties().num_indexed_cols(),
            always: clustering_columns(snapshot)?,
        })
    }
}

/// The logical names of the table's clustering columns; empty when it is not clustered.
fn clustering_columns(snapshot: &Snapshot) -> Result<Vec<String>> {
    let Some(configuration) = snapshot.domain_metadata(CLUSTERING_DOMAIN) else {
        return Ok(Vec::new());
    };
    let refuse = || Error::UnsupportedWriterFeature {
        feature: "clustering".into(),
    };
    let parsed: serde_json::Value = serde_json::from_str(configuration).map_err(|_| refuse())?;
    let listed = parsed["clusteringColumns"].as_array().ok_or_else(refuse)?;
    let mut out = Vec::new();
    for column in listed {
        // A name, or a path of names (Spark writes `[["id"]]`): top-level only.
        let physical = match column {
            serde_json::Value::String(s) => s.as_str(),
            serde_json::Value::Array(path) if path.len() == 1 => {
                path[0].as_str().ok_or_else(refuse)?
            }
            _ => return Err(refuse()),
        };
        let field = snapshot
            .schema()
            .fields
            .iter()
            .find(|f| f.physical_name() == physical)
            .ok_or_else(refuse)?;
        out.push(field.name.clone());
    }
    Ok(out)
}
