//! Streaming on the embedded engine: savepoints, restores and crashes, through the real
//! binary, checking that nothing is lost and nothing is written twice.

mod common;

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

use common::{conformance_dir, eventually, ferry, rewrite_paths, visible_lines, wait_for};

fn start(job: &Path, job_id: &str, ckpt: &Path) -> Child {
    ferry()
        .arg("run")
        .arg(job)
        .args(["--job-id", job_id, "--checkpoint-dir"])
        .arg(ckpt)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ferry starts")
}

/// Waits until `ferry jobs` shows `job_id` running (its state file is written at start).
fn wait_running(job_id: &str, ckpt: &Path) {
    let running = eventually(Duration::from_secs(30), || {
        let out = ferry()
            .args(["jobs", "--checkpoint-dir"])
            .arg(ckpt)
            .output()
            .expect("ferry jobs runs");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .any(|l| l.starts_with(job_id) && l.contains("RUNNING"))
    });
    assert!(running, "job {job_id} never showed as running");
}

fn savepoint(job_id: &str, ckpt: &Path) {
    wait_running(job_id, ckpt);
    let out = ferry()
        .args(["savepoint", job_id, "--checkpoint-dir"])
        .arg(ckpt)
        .output()
        .expect("ferry savepoint runs");
    assert!(
        out.status.success(),
        "savepoint: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn stderr_of(child: Child) -> String {
    let out = child.wait_with_output().expect("collect output");
    String::from_utf8_lossy(&out.stderr).to_string()
}

/// The conformance pack's `savepoint-restore` scenario (SeaTunnel's CheckpointEnableIT),
/// with the savepoint taken `savepoint_after` into the first run.
fn savepoint_restore(savepoint_after: Duration) {
    let root = tempfile::tempdir().unwrap();
    let cases = conformance_dir().join("cases/engine");
    let stream = root.path().join("stream.conf");
    let text = std::fs::read_to_string(cases.join("stream_fakesource_to_localfile.conf")).unwrap();
    std::fs::write(&stream, rewrite_paths(&text, root.path())).unwrap();
    let assert_job = root.path().join("assert.conf");
    let text = std::fs::read_to_string(cases.join("stream_sink_file_text_to_assert.conf")).unwrap();
    std::fs::write(&assert_job, rewrite_paths(&text, root.path())).unwrap();
    let sink_dir = root
        .path()
        .join("tmp/seatunnel/config/checkpoint-streaming-enable-test-resources/sinkfile");
    let ckpt = root.path().join("checkpoints");

    // First run: stop with a savepoint part-way.
    let mut first = start(&stream, "stream", &ckpt);
    std::thread::sleep(savepoint_after);
    if let Ok(Some(status)) = first.try_wait() {
        panic!(
            "the streaming job ended by itself ({status}): {}",
            stderr_of(first)
        );
    }
    savepoint("stream", &ckpt);
    let status = wait_for(&mut first, Duration::from_secs(60), "first run");
    let err = stderr_of(first);
    assert!(status.success(), "first run: {err}");
    assert!(err.contains("stopped with a savepoint"), "{err}");

    // Restore: it must go on to write everything, then stop again.
    let mut second = start(&stream, "stream", &ckpt);
    wait_running("stream", &ckpt);
    let all = eventually(Duration::from_secs(60), || {
        visible_lines(&sink_dir).len() >= 100
    });
    savepoint("stream", &ckpt);
    let status = wait_for(&mut second, Duration::from_secs(60), "restored run");
    let err = stderr_of(second);
    assert!(status.success(), "restored run: {err}");
    assert!(
        all,
        "the restored job wrote {} of 100 rows",
        visible_lines(&sink_dir).len()
    );

    let out = ferry().arg("run").arg(&assert_job).output().unwrap();
    assert!(
        out.status.success(),
        "assert job: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut lines = visible_lines(&sink_dir);
    lines.sort();
    lines.dedup();
    assert_eq!(lines.len(), 100, "rows must be distinct");
}

#[test]
fn savepoint_restore_case_of_the_conformance_pack() {
    savepoint_restore(Duration::from_secs(15));
}

#[test]
fn savepoint_restore_in_the_middle_of_the_stream() {
    savepoint_restore(Duration::from_secs(4));
}

#[test]
fn jobs_lists_a_stopped_job_with_its_state() {
    let root = tempfile::tempdir().unwrap();
    let job = root.path().join("j.conf");
    std::fs::write(
        &job,
        "env { job.mode = STREAMING, checkpoint.interval = 500 }\nsource { FakeSource { plugin_output = f, row.num = 10, schema = { fields { id = int } } } }\nsink { Blackhole {} }\n",
    )
    .unwrap();
    let ckpt = root.path().join("ck");
    let mut child = start(&job, "listed", &ckpt);
    wait_running("listed", &ckpt);
    let out = ferry()
        .args(["cancel", "listed", "--checkpoint-dir"])
        .arg(&ckpt)
        .output()
        .unwrap();
    assert!(out.status.success());
    let status = wait_for(&mut child, Duration::from_secs(20), "cancelled job");
    assert_eq!(status.code(), Some(130));
    let out = ferry()
        .args(["jobs", "--checkpoint-dir"])
        .arg(&ckpt)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .any(|l| l.starts_with("listed") && l.contains("CANCELLED")),
        "{text}"
    );
}
