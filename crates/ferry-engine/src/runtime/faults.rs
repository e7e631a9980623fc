//! Fault injection for the crash tests (`tests/crash.rs`).

use std::sync::atomic::{AtomicU64, Ordering};

use ferry_api::{FerryError, Result};

/// Fault injection for crash tests: with `FERRY_CRASH_POINT=<name>:<n>` the process
/// aborts (as abruptly as `kill -9`) the `n`-th time it reaches point `name`; with
/// `FERRY_CRASH_POINT=<name>:<n>:error` that step fails with an error instead, once, so
/// that in-process restarts (`job.retry.times`) can be tested.
pub(super) fn crash_point(name: &str) -> Result<()> {
    static HITS: AtomicU64 = AtomicU64::new(0);
    let Ok(spec) = std::env::var("FERRY_CRASH_POINT") else {
        return Ok(());
    };
    let mut parts = spec.split(':');
    let (Some(point), Some(nth)) = (parts.next(), parts.next()) else {
        return Ok(());
    };
    if point != name || nth.parse::<u64>().ok() != Some(HITS.fetch_add(1, Ordering::SeqCst) + 1) {
        return Ok(());
    }
    if parts.next() == Some("error") {
        return Err(FerryError::external(
            "fault injection",
            format!("FERRY_CRASH_POINT {spec}"),
        ));
    }
    eprintln!("ferry: FERRY_CRASH_POINT {spec}: aborting");
    std::process::abort();
}
