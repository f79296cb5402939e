//! The seeded runs of the model tests: a proptest runner whose seed and number of cases
//! come from the environment, so a failing run can be replayed, and the faults they inject.

use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestRunner};
use tarn_store::Fault;

/// A runner seeded from `$<prefix>_SEED` (else `default_seed`) that runs
/// `$<prefix>_CASES` cases (else `default_cases`) and persists no failures; returned with
/// its seed and number of cases.
pub fn runner(prefix: &str, default_seed: u64, default_cases: u32) -> (TestRunner, u64, u32) {
    let env = |name: &str| std::env::var(format!("{prefix}_{name}")).ok();
    let seed = env("SEED")
        .and_then(|s| s.parse().ok())
        .unwrap_or(default_seed);
    let cases = env("CASES")
        .and_then(|s| s.parse().ok())
        .unwrap_or(default_cases);
    let config = Config {
        cases,
        rng_seed: RngSeed::Fixed(seed),
        failure_persistence: None,
        ..Config::default()
    };
    (TestRunner::new(config), seed, cases)
}

/// A single-threaded Tokio runtime with time and IO, for one model run.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// One of the faults the model tests inject into a request: failing before or after it
/// takes effect, a 500, a 409, or a short timeout.
pub fn fault() -> impl Strategy<Value = Fault> + Clone {
    prop_oneof![
        Just(Fault::FailBefore),
        Just(Fault::FailAfter),
        Just(Fault::ServerError),
        Just(Fault::Conflict),
        Just(Fault::Timeout(Duration::from_millis(2))),
    ]
}
