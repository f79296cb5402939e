//! Model tests: random histories of operations checked against a model of the rows, single
//! writers and groups.
//!
//! One test binary per theme, so each links once; `tests/README.md` maps features to
//! tests.

mod dml_model;
mod group_model;
mod index_model;
mod model;
