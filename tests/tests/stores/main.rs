//! The store conformance suite over memory and MinIO, and the local read cache for real.
//!
//! One test binary per theme, so each links once; `tests/README.md` maps features to
//! tests.

mod cache_store;
mod store_conformance;
