//! Runs every `batch` case of SeaTunnel's conformance pack (`../shared/conformance/seatunnel`)
//! through the real `ferry` binary, as the pack's README says: paths rewritten to a fresh
//! temporary root, data files copied in, user variables passed with `-i`. A case passes
//! when the job exits 0 (its Assert sink fails the job when a rule is broken).

mod common;

use common::{cases, ferry, prepare};

/// Cases that need a plugin that has not landed yet, with the reason. Nothing else may be listed.
const PENDING: &[(&str, &str)] = &[];

#[test]
fn every_batch_case_passes_on_the_embedded_engine() {
    let mut failures = Vec::new();
    let mut ran = 0;
    for c in cases().iter().filter(|c| c.mode == "batch") {
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
