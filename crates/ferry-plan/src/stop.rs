//! Stop requests to a running job, handled alike by both engines (the `ferry` binary and
//! the Spark driver, through the native module): SIGTERM/SIGINT, and the job directory's
//! `control` file that `ferry savepoint|cancel` write. A savepoint stops after a final
//! checkpoint is committed; a cancel stops at once and wins over a savepoint asked for
//! before it.

use std::path::{Path, PathBuf};

/// What a stop request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopRequest {
    /// Stop after a final checkpoint (a savepoint) is committed.
    Savepoint,
    /// Stop at once, without a checkpoint.
    Cancel,
}

impl StopRequest {
    /// `savepoint` or `cancel`, as the `control` file spells it.
    pub fn name(self) -> &'static str {
        match self {
            StopRequest::Savepoint => "savepoint",
            StopRequest::Cancel => "cancel",
        }
    }
}

/// The stop requests a run has received so far.
#[derive(Debug)]
pub struct StopRequests {
    control: Option<PathBuf>,
    request: Option<StopRequest>,
}

impl StopRequests {
    /// Watches the `control` file of job directory `job_dir` (none for a job without one).
    /// A request an earlier run left there is dropped: make this before the job's state
    /// says RUNNING, so that a request sent once it does is not lost.
    pub fn new(job_dir: Option<&Path>) -> Self {
        let control = job_dir.map(|d| d.join("control"));
        if let Some(c) = &control {
            let _ = std::fs::remove_file(c);
        }
        StopRequests {
            control,
            request: None,
        }
    }

    /// A stop signal arrived (SIGTERM, Ctrl-C): a savepoint, unless a request is already
    /// there. Returns whether this is the first request (so the caller says so once).
    pub fn signal(&mut self) -> bool {
        let first = self.request.is_none();
        self.request.get_or_insert(StopRequest::Savepoint);
        first
    }

    /// Reads (and removes) the `control` file, if one was written, and returns the request
    /// so far: `cancel` in the file is a cancel, anything else a savepoint.
    pub fn poll(&mut self) -> Option<StopRequest> {
        if let Some(c) = &self.control {
            if let Ok(text) = std::fs::read_to_string(c) {
                let _ = std::fs::remove_file(c);
                self.request = Some(match (text.trim(), self.request) {
                    ("cancel", _) => StopRequest::Cancel,
                    (_, Some(r)) => r,
                    (_, None) => StopRequest::Savepoint,
                });
            }
        }
        self.request
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_come_from_signals_and_the_control_file_and_cancel_wins() {
        let dir = tempfile::tempdir().unwrap();
        let control = dir.path().join("control");
        std::fs::write(&control, "savepoint").unwrap();
        // Left by an earlier run: dropped.
        let mut r = StopRequests::new(Some(dir.path()));
        assert!(!control.exists());
        assert_eq!(r.poll(), None);
        ferry_checkpoint::write_control(dir.path(), "savepoint").unwrap();
        assert_eq!(r.poll(), Some(StopRequest::Savepoint));
        assert!(!control.exists(), "a request is read once");
        assert!(!r.signal(), "a signal after a request is no new request");
        ferry_checkpoint::write_control(dir.path(), "cancel").unwrap();
        assert_eq!(r.poll(), Some(StopRequest::Cancel));
        ferry_checkpoint::write_control(dir.path(), "savepoint").unwrap();
        assert_eq!(
            r.poll(),
            Some(StopRequest::Cancel),
            "a cancel stays a cancel"
        );

        let mut r = StopRequests::new(None);
        assert_eq!(r.poll(), None);
        assert!(r.signal());
        assert!(!r.signal());
        assert_eq!(r.poll().map(StopRequest::name), Some("savepoint"));
    }
}
