//! Runs every `batch` case of SeaTunnel's conformance pack (`../shared/conformance/seatunnel`)
//! through the real `ferry` binary, as the pack's README says: paths rewritten to a fresh
//! temporary root, data files copied in, user variables passed with `-i`. A case passes
//! when the job exits 0 (its Assert sink fails the job when a rule is broken).

mod common;

use std::path::{Path, PathBuf};

use common::{cases, conformance_dir, ferry, rewrite_paths, Case};

/// Cases that need a plugin that has not landed yet, with the reason. Nothing else may be listed.
const PENDING: &[(&str, &str)] = &[];

/// Evaluates `$(...)` in a variable value as a shell would.
fn shell_eval(value: &str) -> String {
    if !value.contains("$(") {
        return value.to_string();
    }
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("printf '%s' \"{value}\""))
        .output()
        .expect("sh runs");
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// Prepares case `c` under `root`; returns the rewritten job file and its variables.
fn prepare(c: &Case, root: &Path) -> (PathBuf, Vec<String>) {
    let dir = conformance_dir();
    let text =
        std::fs::read_to_string(dir.join("cases").join(&c.path)).expect("case file is readable");
    for (data, target) in &c.setup {
        let target = PathBuf::from(rewrite_paths(target, root));
        std::fs::create_dir_all(target.parent().expect("target has a parent"))
            .expect("create data dir");
        std::fs::copy(dir.join("data").join(data), &target).expect("copy data file");
    }
    let job = root.join(
        Path::new(&c.path)
            .file_name()
            .expect("case has a file name"),
    );
    std::fs::write(&job, rewrite_paths(&text, root)).expect("write job file");
    let vars = c
        .vars
        .iter()
        .map(|(k, v)| format!("{k}={}", shell_eval(v)))
        .collect();
    (job, vars)
}

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
