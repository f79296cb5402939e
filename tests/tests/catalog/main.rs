//! The directory catalog: its life, its costs in requests, its pages under a crowd of
//! writers, and its torture test.
//!
//! One test binary per theme, so each links once; `tests/README.md` maps features to
//! tests.

mod catalog;
mod catalog_costs;
mod catalog_fence;
mod catalog_folds;
mod catalog_torture;
