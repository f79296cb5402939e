//! A planned scan read in parts, for an engine that runs a scan on threads of its own (a
//! DataFusion plan's output partitions): the scan is planned once, and each part reads
//! every `parts`-th planned file, with the rows the plan's indices selected in it.

use std::sync::Arc;

use super::{PlannedFile, RecordBatchStream, Scan, ScanPlan};
use crate::error::{Error, Result};

impl Scan {
    /// Reads part `part` of `parts` of `plan`, which [`plan`](Self::plan) made for this
    /// scan: every `parts`-th planned file from the `part`-th, as
    /// [`execute`](Self::execute) reads them (deleted rows skipped, the predicate
    /// applied, at most the scan's limit of rows per part). The parts together return
    /// what `execute` returns.
    ///
    /// Fails with [`Error::InvalidArgument`] when `part` is not below `parts`, and as
    /// `execute` does.
    pub async fn execute_part(
        &self,
        plan: &ScanPlan,
        part: usize,
        parts: usize,
    ) -> Result<RecordBatchStream> {
        if part >= parts {
            return Err(Error::InvalidArgument {
                name: "part",
                reason: format!("part {part} of {parts}: parts count from 0"),
            });
        }
        let ctx = Arc::new(self.context()?);
        let files = (part..plan.files.len())
            .step_by(parts)
            .map(|i| {
                let add = &plan.files[i];
                Ok(PlannedFile {
                    partitions: match plan.partitions_of(i, add) {
                        Some(parsed) => parsed,
                        None => Arc::new(ctx.partition_values(add)?),
                    },
                    rows: plan.rows_of(&self.snapshot, add).cloned(),
                    add: Arc::new(add.clone()),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let concurrency = self.concurrency_for(&files);
        // The parts run at once: each has its part of the cores.
        let cores = (crate::tasks::cores() / parts).max(1);
        Ok(self.read_files(ctx, files, concurrency, cores))
    }
}
