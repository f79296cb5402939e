//! The store conformance suite over memory and MinIO, the local read cache for real, and
//! credentials never printed.
//!
//! One test binary per theme, so each links once; `tests/README.md` maps features to
//! tests.

mod cache_store;
mod credentials;
mod store_conformance;
