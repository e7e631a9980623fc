//! Crash tests: a streaming job reads a growing directory of files whose rows carry
//! unique ids and writes them through the transactional file sink, while the test kills
//! it at random moments (fixed seed) and restarts it with the same job id. At the end the
//! output must hold every input id exactly once (at least once for an at-least-once job).

mod common;

use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::Duration;

use common::{eventually, ferry, output_ids, wait_for, Rng};

const ROWS_PER_FILE: u64 = 200;

struct Setup {
    _root: tempfile::TempDir,
    input: PathBuf,
    output: PathBuf,
    ckpt: PathBuf,
    job: PathBuf,
    files: u64,
}

fn setup(transactional: bool, mode: &str) -> Setup {
    setup_with(transactional, mode, "")
}

fn setup_with(transactional: bool, mode: &str, extra_env: &str) -> Setup {
    let root = tempfile::tempdir().unwrap();
    let input = root.path().join("in");
    let output = root.path().join("out");
    std::fs::create_dir_all(&input).unwrap();
    let job = root.path().join("job.conf");
    std::fs::write(
        &job,
        format!(
            r#"
env {{
  job.name = "crash"
  job.mode = "STREAMING"
  checkpoint.interval = 300
  checkpoint.mode = "{mode}"
  parallelism = 2
  {extra_env}
}}
source {{
  LocalFile {{
    plugin_output = "events"
    path = "{input}"
    file_format_type = "csv"
    schema = {{ fields {{ id = bigint, payload = string }} }}
  }}
}}
sink {{
  LocalFile {{
    path = "{output}"
    file_format_type = "csv"
    is_enable_transaction = {transactional}
  }}
}}
"#,
            input = input.display(),
            output = output.display(),
        ),
    )
    .unwrap();
    Setup {
        ckpt: root.path().join("ckpt"),
        _root: root,
        input,
        output,
        job,
        files: 0,
    }
}

/// Adds one input file the way producers should: written aside, then renamed in.
fn add_file(s: &mut Setup) {
    let n = s.files;
    let mut text = String::new();
    for i in 0..ROWS_PER_FILE {
        text.push_str(&format!("{},row-{n}-{i}\n", n * ROWS_PER_FILE + i));
    }
    let tmp = s.input.join(format!(".part-{n:05}.csv"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, s.input.join(format!("part-{n:05}.csv"))).unwrap();
    s.files += 1;
}

fn start(s: &Setup, crash_point: Option<&str>) -> Child {
    start_with(s, crash_point)
}

fn start_with(s: &Setup, crash_point: Option<&str>) -> Child {
    let mut c = ferry();
    c.arg("run")
        .arg(&s.job)
        .args(["--job-id", "crash", "--checkpoint-dir"])
        .arg(&s.ckpt);
    if let Some(p) = crash_point {
        c.env("FERRY_CRASH_POINT", p);
    }
    c.stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ferry starts")
}

fn wait_running(s: &Setup) {
    common::wait_running("crash", &s.ckpt, "local", Duration::from_secs(30));
}

fn finish_and_check(s: &mut Setup, exactly_once: bool) {
    let expected = s.files * ROWS_PER_FILE;
    let last = start(s, None);
    let done = eventually(Duration::from_secs(90), || {
        output_ids(&s.output).len() as u64 >= expected
    });
    stop_with_savepoint(s, last);
    assert!(
        done,
        "only {} of {expected} ids arrived",
        output_ids(&s.output).len()
    );
    let ids = output_ids(&s.output);
    let missing: Vec<u64> = (0..expected)
        .filter(|i| !ids.contains_key(i))
        .take(10)
        .collect();
    assert!(missing.is_empty(), "lost ids, e.g. {missing:?}");
    if exactly_once {
        let twice: Vec<(&u64, &usize)> = ids.iter().filter(|(_, n)| **n > 1).take(10).collect();
        assert!(
            twice.is_empty(),
            "ids written more than once, e.g. {twice:?}"
        );
        assert_eq!(ids.len() as u64, expected);
    }
}

fn kill_repeatedly(s: &mut Setup, kills: usize, seed: u64) {
    let mut rng = Rng(seed);
    for k in 0..kills {
        // Every other run dies at a chosen point of the checkpoint protocol instead:
        // after the writers prepared (flushed) but before the checkpoint is stored, after it
        // is stored but before it is published, and in the middle of publishing.
        let point = match k % 6 {
            1 => Some(format!("checkpoint-acknowledged:{}", rng.between(1, 4))),
            3 => Some(format!("checkpoint-stored:{}", rng.between(1, 4))),
            5 => Some(format!("sink-committed:{}", rng.between(1, 4))),
            _ => None,
        };
        let mut child = start(s, point.as_deref());
        let life = Duration::from_millis(rng.between(300, 1500));
        let step = life / 3;
        for _ in 0..3 {
            std::thread::sleep(step);
            if rng.between(0, 2) == 0 {
                add_file(s);
            }
        }
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
    }
}

#[test]
fn exactly_once_under_twenty_kills() {
    let mut s = setup(true, "exactly-once");
    for _ in 0..5 {
        add_file(&mut s);
    }
    kill_repeatedly(&mut s, 24, 0x5eed_0001);
    add_file(&mut s);
    finish_and_check(&mut s, true);
}

#[test]
fn at_least_once_never_loses_a_row_under_kills() {
    let mut s = setup(false, "at-least-once");
    for _ in 0..5 {
        add_file(&mut s);
    }
    kill_repeatedly(&mut s, 20, 0x5eed_0002);
    finish_and_check(&mut s, false);
}

fn stop_with_savepoint(s: &Setup, mut child: Child) -> String {
    wait_running(s);
    common::request_savepoint("crash", &s.ckpt);
    let status = wait_for(&mut child, Duration::from_secs(60), "job");
    let err = common::stderr_of(child);
    assert!(status.success(), "{err}");
    err
}

#[test]
fn a_failing_step_restarts_in_process_from_the_latest_checkpoint() {
    let mut s = setup_with(
        true,
        "exactly-once",
        "job.retry.times = 2\n  job.retry.interval.seconds = 0",
    );
    for _ in 0..4 {
        add_file(&mut s);
    }
    let child = start(&s, Some("checkpoint-stored:2:error"));
    let expected = s.files * ROWS_PER_FILE;
    assert!(eventually(
        Duration::from_secs(60),
        || output_ids(&s.output).len() as u64 >= expected
    ));
    let err = stop_with_savepoint(&s, child);
    assert!(
        err.contains("restarting from the latest checkpoint (retry 1 of 2)"),
        "{err}"
    );
    let ids = output_ids(&s.output);
    assert_eq!(ids.len() as u64, expected);
    assert!(
        ids.values().all(|n| *n == 1),
        "duplicates after an in-process restart"
    );
}

#[test]
fn a_permanently_failing_sink_exits_nonzero_and_leaves_its_checkpoint_usable() {
    let mut s = setup(true, "exactly-once");
    for _ in 0..3 {
        add_file(&mut s);
    }
    let mut child = start(&s, None);
    assert!(eventually(Duration::from_secs(60), || !output_ids(
        &s.output
    )
    .is_empty()));
    // Take the output directory away: publishing into it now fails, and keeps failing.
    let aside = s.output.with_extension("aside");
    std::fs::rename(&s.output, &aside).unwrap();
    std::fs::write(&s.output, "not a directory").unwrap();
    add_file(&mut s);
    let status = wait_for(&mut child, Duration::from_secs(60), "failing job");
    let err = String::from_utf8_lossy(&child.wait_with_output().unwrap().stderr).to_string();
    assert!(!status.success(), "the job must fail: {err}");
    let line = err
        .lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_default()
        .to_string();
    assert!(
        line.contains("LocalFile") || line.contains(&s.output.display().to_string()),
        "{err}"
    );

    // Give the directory back: the same job id resumes and ends with every id once.
    std::fs::remove_file(&s.output).unwrap();
    std::fs::rename(&aside, &s.output).unwrap();
    add_file(&mut s);
    finish_and_check(&mut s, true);
}

#[test]
fn a_corrupt_latest_checkpoint_falls_back_to_the_previous_one() {
    let mut s = setup(true, "exactly-once");
    for _ in 0..3 {
        add_file(&mut s);
    }
    let child = start(&s, None);
    let expected = s.files * ROWS_PER_FILE;
    assert!(eventually(
        Duration::from_secs(60),
        || output_ids(&s.output).len() as u64 >= expected
    ));
    stop_with_savepoint(&s, child);

    // Tear the newest checkpoint as a crash during its write would.
    let offsets = s.ckpt.join("crash/offsets");
    let latest = std::fs::read_dir(&offsets)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u64>().ok())
        .max()
        .expect("a checkpoint was written");
    let torn = offsets.join(latest.to_string());
    let bytes = std::fs::read(&torn).unwrap();
    std::fs::write(&torn, &bytes[..bytes.len() / 2]).unwrap();

    add_file(&mut s);
    let child = start(&s, None);
    let expected = s.files * ROWS_PER_FILE;
    assert!(eventually(
        Duration::from_secs(60),
        || output_ids(&s.output).len() as u64 >= expected
    ));
    let err = stop_with_savepoint(&s, child);
    assert!(
        err.contains(&format!("skipping checkpoint {latest}")),
        "{err}"
    );
    assert!(
        err.contains(&torn.display().to_string()),
        "the warning names the file: {err}"
    );
    assert!(
        err.contains(&format!("from checkpoint {}", latest - 1)),
        "{err}"
    );
    let ids = output_ids(&s.output);
    assert!(
        (0..expected).all(|i| ids.contains_key(&i)),
        "no id may be lost"
    );
}
