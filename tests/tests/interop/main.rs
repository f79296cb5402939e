//! Tarn against other Delta implementations: delta-rs through its Python package and
//! Spark with Delta both ways (one Spark session shared by every test here), and DuckDB
//! with its delta extension reading what Tarn writes.
//!
//! One test binary per theme, so each links once; `tests/README.md` maps features to
//! tests.

mod duckdb;
mod interop;
mod operations;
mod python;
mod spark;
mod spark_catalog;
mod spark_features;
mod spark_matrix;
mod spark_sql;
mod variant;
