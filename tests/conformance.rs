//! Runs every `batch` case of SeaTunnel's conformance pack (`../shared/conformance/seatunnel`)
//! and of Ferry's own cases written from SeaTunnel's documentation (`tests/cases`) through
//! the real `ferry` binary, as the pack's README says: paths rewritten to a fresh temporary
//! root, data files copied in, user variables passed with `-i`. A case passes when the job
//! exits 0 (its Assert sink fails the job when a rule is broken).

mod common;

use common::{cases, ferry, own_cases, prepare, Case};

/// Cases that need a plugin that has not landed yet, with the reason. Nothing else may be listed.
const PENDING: &[(&str, &str)] = &[];

/// Runs every batch case of `all` on the embedded engine; fails listing those that failed.
fn every_batch_case_passes(all: Vec<Case>) {
    let mut failures = Vec::new();
    let mut ran = 0;
    for c in all.iter().filter(|c| c.mode == "batch") {
        if let Some((_, why)) = PENDING.iter().find(|(p, _)| *p == c.path) {
            eprintln!("PENDING {}: {why}", c.path);
            continue;
        }
        let root = tempfile::tempdir().expect("temp dir");
        let (job, vars) = prepare(c, root.path());
        let mut cmd = ferry();
        cmd.arg("run").arg(&job);
        for v in &vars {
            cmd.arg("-i").arg(v);
        }
        let out = cmd.output().expect("ferry runs");
        ran += 1;
        if out.status.success() {
            eprintln!("ok      {}", c.path);
        } else {
            eprintln!("FAILED  {}", c.path);
            failures.push(format!(
                "{}:\n{}",
                c.path,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    assert!(ran > 0, "no case ran");
    assert!(
        failures.is_empty(),
        "{} of {ran} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn every_batch_case_passes_on_the_embedded_engine() {
    every_batch_case_passes(cases());
}

#[test]
fn every_case_written_from_seatunnels_documentation_passes_on_the_embedded_engine() {
    every_batch_case_passes(own_cases());
}
