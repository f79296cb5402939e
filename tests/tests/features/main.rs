//! What Tarn does with one table at a time: reads of every Delta feature and the golden
//! tables, writes, row-level changes, deletion vectors, indices, maintenance and bad input.
//!
//! One test binary per theme, so each links once; `tests/README.md` maps features to
//! tests.

mod bad_input;
mod changes;
mod checkpoint_stats;
mod clustering;
mod column_mapping;
mod constraints;
mod count;
mod create_as;
mod deletion_vectors;
mod dml;
mod encodings;
mod generated;
mod golden;
mod identity;
mod in_commit_timestamps;
mod indices;
mod large_files;
mod log_cleanup;
mod operations;
mod path_escapes;
mod planning;
mod ranged_merges;
mod row_groups;
mod row_tracking;
mod selective_scans;
mod streaming_writes;
mod string_views;
mod table_conformance;
mod v2_checkpoints;
mod vacuum;
