//! How a transaction behaves, as plain values: its isolation level and its retry policy.

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

/// How strictly a transaction is ordered against concurrent ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IsolationLevel {
    /// Write-write conflicts only: a transaction fails when a concurrent one removed a
    /// file it also removes. What it read may have changed.
    SnapshotIsolation,
    /// Delta's default: blind appends commute with everything; other files added
    /// concurrently that match what the transaction read, and files it read that were
    /// removed concurrently, conflict.
    WriteSerializable,
    /// Like `WriteSerializable`, and concurrent appends matching what the transaction read
    /// conflict too, blind or not. Tarn's default.
    #[default]
    Serializable,
    /// Serializable, with reads pinned to the newest version at the time of the first
    /// read, and read-only transactions validated at commit, so every transaction, reads
    /// included, is ordered as the log is.
    StrictSerializable,
}

impl IsolationLevel {
    /// The name written into `commitInfo.isolationLevel`.
    pub fn name(self) -> &'static str {
        match self {
            Self::SnapshotIsolation => "SnapshotIsolation",
            Self::WriteSerializable => "WriteSerializable",
            Self::Serializable => "Serializable",
            Self::StrictSerializable => "StrictSerializable",
        }
    }

    /// The level [`name`](Self::name) gives `name`; `None` for any other text.
    pub fn from_name(name: &str) -> Option<Self> {
        [
            Self::SnapshotIsolation,
            Self::WriteSerializable,
            Self::Serializable,
            Self::StrictSerializable,
        ]
        .into_iter()
        .find(|l| l.name() == name)
    }
}

/// How often and how patiently a commit retries after losing the race for a version,
/// or after a PUT whose outcome was unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included.
    pub max_attempts: u32,
    /// Backoff before the third attempt; it doubles after each further attempt.
    pub base_backoff: Duration,
    /// The most a backoff grows to.
    pub max_backoff: Duration,
    /// Reads of a version whose PUT had an unknown outcome before giving up with
    /// [`Error::CommitStateUnknown`](crate::Error::CommitStateUnknown).
    pub max_outcome_reads: u32,
    /// Group commit: after losing a race, publish the prepared commit as a proposal that
    /// whoever wins a later version may carry, and carry other writers' proposals when
    /// this commit wins. On by default; off, every writer commits alone. The environment
    /// variable `TARN_GROUP_COMMIT=off` turns it off in the default policy, so a whole
    /// process (a benchmark worker, say) can be measured without it.
    pub group_commit: bool,
    /// Group commit under crowds: once a listing of the log shows this many proposals
    /// waiting, a writer whose proposal is out claims the next version instead of
    /// reading every proposal and racing for it; only the claim's holder reads them and
    /// commits, the others wait for its commit (see the README's "Group commit").
    /// Default 8, or the environment variable `TARN_CLAIM_AT` (a whole process, a
    /// benchmark worker say); 0 claims as soon as a writer has published.
    pub claim_at: usize,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 200,
            base_backoff: Duration::from_millis(5),
            max_backoff: Duration::from_millis(200),
            max_outcome_reads: 5,
            group_commit: group_commit_by_default(),
            claim_at: claim_at_by_default(),
        }
    }
}

/// Writers claim versions from 8 waiting proposals, or from `TARN_CLAIM_AT`. At 32, 64
/// writers on MinIO read each proposal 14 times over (racers all read every proposal
/// until claims engage): 16 GETs per append, against 8 at 8, and 36-44 appends/s against
/// 44-49 in the same session.
fn claim_at_by_default() -> usize {
    std::env::var("TARN_CLAIM_AT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8)
}

/// Group commit is on unless `TARN_GROUP_COMMIT` says `off`, `false` or `0`.
fn group_commit_by_default() -> bool {
    !matches!(
        std::env::var("TARN_GROUP_COMMIT").as_deref(),
        Ok("off" | "false" | "0")
    )
}

impl RetryPolicy {
    /// The most unread proposals a racing writer reads beside its catch-up: twice
    /// `claim_at`. Past that, a crowd has formed faster than claims engage (hundreds of
    /// writers starting at once), and every contender reading every proposal cost one GET
    /// per writer per proposal; the claim holders read them instead. Below it, racers
    /// read as before, so a winner carries what it read.
    pub(crate) fn read_at_most(&self) -> usize {
        self.claim_at.saturating_mul(2)
    }

    /// The jittered wait before `attempt` (1-based): none for the first two attempts (a
    /// rebase is usually enough), then a random share of an exponentially growing cap.
    pub(crate) fn backoff(&self, attempt: u32) -> Duration {
        if attempt <= 2 {
            return Duration::ZERO;
        }
        let cap = self
            .base_backoff
            .saturating_mul(1u32 << (attempt - 3).min(20))
            .min(self.max_backoff);
        let random = std::hash::RandomState::new().build_hasher().finish();
        cap.mul_f64((random % 10_000) as f64 / 10_000.0)
    }

    /// The wait before re-reading a version whose PUT had an unknown outcome, in `round`
    /// (1-based): exponential, capped.
    pub(crate) fn outcome_backoff(&self, round: u32) -> Duration {
        self.base_backoff
            .saturating_mul(1 << round.min(10))
            .min(self.max_backoff)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_stays_under_its_cap() {
        let policy = RetryPolicy::default();
        assert_eq!(policy.backoff(1), Duration::ZERO);
        assert_eq!(policy.backoff(2), Duration::ZERO);
        for attempt in 3..60 {
            assert!(policy.backoff(attempt) <= policy.max_backoff);
        }
        assert!(policy.outcome_backoff(30) <= policy.max_backoff);
    }

    #[test]
    fn isolation_levels_name_themselves_as_delta_does() {
        assert_eq!(IsolationLevel::default(), IsolationLevel::Serializable);
        assert_eq!(
            IsolationLevel::WriteSerializable.name(),
            "WriteSerializable"
        );
    }
}
