//! Helpers shared by the end-to-end tests.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

/// The `ferry` binary under test.
pub fn ferry() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ferry"));
    c.env_remove("RUST_LOG");
    c
}

/// The SeaTunnel conformance pack: `$FERRY_CONFORMANCE_DIR`, or `shared/` beside the clone.
pub fn conformance_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("FERRY_CONFORMANCE_DIR") {
        return PathBuf::from(d);
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.join("../shared/conformance/seatunnel")
}

/// The repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}
