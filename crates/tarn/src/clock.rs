//! Where the library's timestamps come from: commit times, file modification times, the
//! `remove` tombstones' deletion times, vacuum's and checkpoints' retention cut-offs.
//!
//! Every timestamp Tarn takes goes through a [`Clock`], so a test sets the time (a
//! [`ManualClock`]) instead of sleeping, and a writer with a skewed clock can be
//! simulated ([`OffsetClock`]).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

/// A source of wall-clock time.
pub trait Clock: Send + Sync + fmt::Debug {
    /// Milliseconds since the epoch.
    fn now_ms(&self) -> i64;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        chrono::Utc::now().timestamp_millis()
    }
}

/// The system clock shifted by a fixed offset: a writer whose clock is ahead or behind.
#[derive(Debug, Clone, Copy, Default)]
pub struct OffsetClock {
    /// Milliseconds added to the system clock (negative: behind).
    pub offset_ms: i64,
}

impl Clock for OffsetClock {
    fn now_ms(&self) -> i64 {
        SystemClock.now_ms() + self.offset_ms
    }
}

/// A clock that shows what it is set to, for tests: time moves only when told to.
/// Clones share the time.
#[derive(Debug, Clone, Default)]
pub struct ManualClock {
    now: Arc<AtomicI64>,
}

impl ManualClock {
    /// A clock showing `now_ms`.
    pub fn new(now_ms: i64) -> Self {
        Self {
            now: Arc::new(AtomicI64::new(now_ms)),
        }
    }

    /// A clock showing the system time now, from then on still.
    pub fn starting_now() -> Self {
        Self::new(SystemClock.now_ms())
    }

    /// Sets the time.
    pub fn set(&self, now_ms: i64) {
        self.now.store(now_ms, Ordering::SeqCst);
    }

    /// Moves the time forward (or back, for a negative duration) by `ms`.
    pub fn advance(&self, ms: i64) {
        self.now.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.now.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_told_and_clones_share_it() {
        let clock = ManualClock::new(1_000);
        let other = clock.clone();
        assert_eq!(clock.now_ms(), 1_000);
        other.advance(500);
        assert_eq!(clock.now_ms(), 1_500);
        clock.set(7);
        assert_eq!(other.now_ms(), 7);
    }
}
