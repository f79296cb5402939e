//! A spinner on standard error while long work runs (optimize, vacuum, restore, scans to
//! a file), drawn only when output is readable and goes to a terminal.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use crate::output::Output;

/// A running spinner; cleared when finished or dropped.
pub(crate) struct Spinner(Option<ProgressBar>);

impl Spinner {
    /// Starts a spinner saying `message`, when `out` is interactive.
    pub(crate) fn start(out: &Output, message: impl Into<String>) -> Self {
        if !out.interactive() {
            return Self(None);
        }
        let bar = ProgressBar::new_spinner();
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} ({elapsed})") {
            bar.set_style(style);
        }
        bar.set_message(message.into());
        bar.enable_steady_tick(Duration::from_millis(100));
        Self(Some(bar))
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        if let Some(bar) = self.0.take() {
            bar.finish_and_clear();
        }
    }
}
