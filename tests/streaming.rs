//! Streaming on the embedded engine: savepoints, restores and crashes, through the real
//! binary, checking that nothing is lost and nothing is written twice.

mod common;

use std::path::Path;
use std::process::Child;
use std::time::Duration;

use common::{
    conformance_dir, eventually, ferry, jobs_line, request_savepoint, rewrite_paths, start_job,
    stderr_of, visible_lines, wait_for, wait_running,
};

fn start(job: &Path, job_id: &str, ckpt: &Path) -> Child {
    start_job(job, job_id, ckpt, &[])
}

/// Asks the running job `job_id` for a savepoint once `ferry jobs` shows it running.
fn savepoint(job_id: &str, ckpt: &Path) {
    wait_running(job_id, ckpt, "local", Duration::from_secs(30));
    request_savepoint(job_id, ckpt);
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
    wait_running("stream", &ckpt, "local", Duration::from_secs(30));
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
    wait_running("listed", &ckpt, "local", Duration::from_secs(30));
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

#[test]
fn a_changed_job_file_resumes_when_its_state_fits_and_is_refused_otherwise() {
    let root = tempfile::tempdir().unwrap();
    let ckpt = root.path().join("ck");
    let write = |name: &str, text: &str| {
        let p = root.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let source = "source { FakeSource { plugin_output = f, row.num = 10, schema = { fields { id = int, name = string } } } }";
    let first = write(
        "first.conf",
        &format!("env {{ job.mode = STREAMING, checkpoint.interval = 500 }}\n{source}\nsink {{ Blackhole {{}} }}\n"),
    );
    let mut child = start(&first, "evolving", &ckpt);
    savepoint("evolving", &ckpt);
    let status = wait_for(&mut child, Duration::from_secs(30), "first run");
    let err = stderr_of(child);
    assert!(status.success(), "first run: {err}");

    // A new transform and another interval: the saved state still fits.
    let tuned = write(
        "tuned.conf",
        &format!("env {{ job.mode = STREAMING, checkpoint.interval = 700 }}\n{source}\ntransform {{ Sql {{ plugin_input = f, plugin_output = g, query = \"select id from f\" }} }}\nsink {{ Blackhole {{ plugin_input = g }} }}\n"),
    );
    let mut child = start(&tuned, "evolving", &ckpt);
    savepoint("evolving", &ckpt);
    let status = wait_for(&mut child, Duration::from_secs(30), "tuned run");
    let err = stderr_of(child);
    assert!(status.success(), "tuned run: {err}");
    assert!(
        err.contains("resuming job 'evolving' from checkpoint"),
        "{err}"
    );
    assert!(err.contains("transforms: 0 before, 1 now"), "{err}");
    assert!(err.contains("env: checkpoint.interval changed"), "{err}");
    assert!(
        err.contains("sink 1 (Blackhole): options plugin_input changed"),
        "{err}"
    );

    // Two readers where the checkpoint has one: refused before any data flows.
    let wider = write(
        "wider.conf",
        &format!("env {{ job.mode = STREAMING, checkpoint.interval = 700, parallelism = 2 }}\n{source}\ntransform {{ Sql {{ plugin_input = f, plugin_output = g, query = \"select id from f\" }} }}\nsink {{ Blackhole {{ plugin_input = g }} }}\n"),
    );
    let out = ferry()
        .arg("run")
        .arg(&wider)
        .args(["--job-id", "evolving", "--checkpoint-dir"])
        .arg(&ckpt)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("cannot be resumed by this job file: source 1 (FakeSource) ran with 1 readers and would now run with 2"),
        "{err}"
    );
}

/// `checkpoint.on-idle`: each file that arrives in the watched directory is committed once
/// it has been read, long before the one-minute interval would commit it.
#[test]
fn on_idle_checkpoints_commit_each_arriving_file_without_waiting_for_the_interval() {
    let root = tempfile::tempdir().unwrap();
    let (input, output) = (root.path().join("in"), root.path().join("out"));
    std::fs::create_dir_all(&input).unwrap();
    let job = root.path().join("j.conf");
    std::fs::write(
        &job,
        format!(
            "env {{ job.mode = STREAMING, parallelism = 2, checkpoint.interval = 60000, checkpoint.on-idle = true }}\n\
             source {{ LocalFile {{ plugin_output = f, path = \"{}\", file_format_type = csv, schema = {{ fields {{ id = int, name = string }} }} }} }}\n\
             sink {{ LocalFile {{ plugin_input = f, path = \"{}\", file_format_type = csv, is_enable_transaction = true }} }}\n",
            input.display(),
            output.display()
        ),
    )
    .unwrap();
    let ckpt = root.path().join("ck");
    let mut child = start(&job, "idle", &ckpt);
    wait_running("idle", &ckpt, "local", Duration::from_secs(30));
    let ids = |dir: &Path| -> Vec<u32> {
        let mut v: Vec<u32> = visible_lines(dir)
            .iter()
            .filter_map(|l| l.split(',').next()?.parse().ok())
            .collect();
        v.sort_unstable();
        v
    };
    for k in 0..2u32 {
        // Arrive whole: written under a hidden name, then renamed into view.
        let text: String = (k * 100..(k + 1) * 100)
            .map(|i| format!("{i},n{i}\n"))
            .collect();
        let hidden = input.join(format!(".f{k}.csv"));
        std::fs::write(&hidden, text).unwrap();
        std::fs::rename(&hidden, input.join(format!("f{k}.csv"))).unwrap();
        let want: Vec<u32> = (0..(k + 1) * 100).collect();
        assert!(
            eventually(Duration::from_secs(20), || ids(&output) == want),
            "file {k} not committed within 20 s: {} rows visible",
            ids(&output).len()
        );
    }
    request_savepoint("idle", &ckpt);
    let status = wait_for(&mut child, Duration::from_secs(60), "on-idle job");
    let err = stderr_of(child);
    assert!(status.success(), "{err}");
    assert_eq!(ids(&output), (0..200).collect::<Vec<u32>>(), "{err}");
}

/// One run per job id: while a run holds the job's lock, a second run of the same id is
/// refused at once, naming the first, and changes nothing; once the first is killed with
/// SIGKILL (no chance to clean up), the kernel has released the lock and a new run resumes.
#[test]
fn a_second_run_of_a_running_job_is_refused_until_the_first_is_killed() {
    let root = tempfile::tempdir().unwrap();
    let job = root.path().join("j.conf");
    std::fs::write(
        &job,
        "env { job.mode = STREAMING, checkpoint.interval = 300 }\nsource { FakeSource { plugin_output = f, row.num = 10, schema = { fields { id = int } } } }\nsink { Blackhole {} }\n",
    )
    .unwrap();
    let ckpt = root.path().join("ck");
    let mut first = start(&job, "twice", &ckpt);
    wait_running("twice", &ckpt, "local", Duration::from_secs(30));
    // A checkpoint exists, so a second run that got through would say it resumes.
    let committed =
        || std::fs::read_dir(ckpt.join("twice/commits")).map_or(0, |rd| rd.flatten().count());
    assert!(
        eventually(Duration::from_secs(30), || committed() > 0),
        "no checkpoint"
    );

    let started = std::time::Instant::now();
    let out = ferry()
        .arg("run")
        .arg(&job)
        .args(["--job-id", "twice", "--checkpoint-dir"])
        .arg(&ckpt)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the second run was accepted: {err}");
    assert!(
        err.contains(&format!(
            "job 'twice' is already running (pid {}, since ",
            first.id()
        )),
        "{err}"
    );
    assert!(!err.contains("resuming"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "refused after {:?}",
        started.elapsed()
    );
    let line = jobs_line("twice", &ckpt);
    assert!(
        line.contains("RUNNING") && line.contains(&format!(" {} ", first.id())),
        "{line}"
    );

    first.kill().unwrap(); // SIGKILL
    first.wait().unwrap();
    let line = jobs_line("twice", &ckpt);
    assert!(line.contains("CRASHED"), "{line}");

    let mut third = start(&job, "twice", &ckpt);
    wait_running("twice", &ckpt, "local", Duration::from_secs(30));
    let line = jobs_line("twice", &ckpt);
    assert!(line.contains(&format!(" {} ", third.id())), "{line}");
    // `ferry savepoint` works while the run holds the lock.
    request_savepoint("twice", &ckpt);
    let status = wait_for(
        &mut third,
        Duration::from_secs(30),
        "the run after the kill",
    );
    let err = stderr_of(third);
    assert!(status.success(), "{err}");
    assert!(
        err.contains("resuming job 'twice' from checkpoint"),
        "{err}"
    );
}

/// A job directory whose every checkpoint is damaged is refused, naming the files, instead
/// of silently starting from scratch (its sources would replay everything into sinks that
/// hold it already); `--from-scratch` starts anew deliberately, setting the old files aside.
#[test]
fn history_without_an_intact_checkpoint_is_refused_until_from_scratch() {
    let root = tempfile::tempdir().unwrap();
    let job = root.path().join("j.conf");
    std::fs::write(
        &job,
        "env { job.mode = STREAMING, checkpoint.interval = 300 }\nsource { FakeSource { plugin_output = f, row.num = 10, schema = { fields { id = int } } } }\nsink { Blackhole {} }\n",
    )
    .unwrap();
    let ckpt = root.path().join("ck");
    let mut first = start(&job, "torn", &ckpt);
    savepoint("torn", &ckpt);
    let status = wait_for(&mut first, Duration::from_secs(30), "first run");
    assert!(status.success(), "{}", stderr_of(first));

    let offsets = ckpt.join("torn/offsets");
    let mut damaged: Vec<String> = std::fs::read_dir(&offsets)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| !n.starts_with('.'))
        .collect();
    damaged.sort();
    assert!(!damaged.is_empty(), "the first run left no checkpoint");
    for name in &damaged {
        let p = offsets.join(name);
        let mut bytes = std::fs::read(&p).unwrap();
        bytes[3] ^= 0x20;
        std::fs::write(&p, bytes).unwrap();
    }

    // Without the refusal the job would start afresh and run on: bounded wait.
    let mut refused = start(&job, "torn", &ckpt);
    let status = wait_for(&mut refused, Duration::from_secs(30), "the refused run");
    let err = stderr_of(refused);
    assert!(!status.success(), "started without its history: {err}");
    assert!(
        err.contains("error: job 'torn' has checkpoint history in")
            && err.contains("but no intact checkpoint"),
        "{err}"
    );
    for name in &damaged {
        let file = offsets.join(name);
        assert!(
            err.contains(&format!("{}: corrupt (checksum mismatch)", file.display())),
            "{name} not named: {err}"
        );
    }
    assert!(
        err.contains("--from-scratch") && err.contains("new --job-id"),
        "{err}"
    );

    let mut fresh = start_job(&job, "torn", &ckpt, &["--from-scratch"]);
    savepoint("torn", &ckpt);
    let status = wait_for(&mut fresh, Duration::from_secs(30), "the run from scratch");
    let err = stderr_of(fresh);
    assert!(status.success(), "{err}");
    assert!(
        err.contains("--from-scratch: job 'torn' starts anew; its old checkpoints are in"),
        "{err}"
    );
    assert!(!err.contains("resuming"), "{err}");
    // The damaged files are kept, as they were, beside the new history.
    let aside: Vec<_> = std::fs::read_dir(ckpt.join("torn"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("discarded-"))
        .collect();
    assert_eq!(aside.len(), 1);
    for name in &damaged {
        assert!(
            aside[0].path().join("offsets").join(name).exists(),
            "{name}"
        );
    }
    // The new history resumes normally.
    let mut next = start(&job, "torn", &ckpt);
    savepoint("torn", &ckpt);
    let status = wait_for(&mut next, Duration::from_secs(30), "the run after");
    let err = stderr_of(next);
    assert!(status.success(), "{err}");
    assert!(err.contains("resuming job 'torn' from checkpoint"), "{err}");
}
