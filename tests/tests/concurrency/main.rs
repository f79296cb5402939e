//! Writers racing on one table: the conflict matrix, group commit, lost acknowledgements,
//! listing races and the torture tests with killed processes.
//!
//! One test binary per theme, so each links once; `tests/README.md` maps features to
//! tests.

mod concurrent_deletes;
mod conflict_matrix;
mod fences;
mod group_backlog;
mod group_outcomes;
mod grouped_matrix;
mod listing_race;
mod torture;
mod transactions;
