//! The Spark engine end to end: SeaTunnel's conformance cases, the same job on both
//! engines, and a streaming savepoint/restore, on a local Spark (pyspark 4.1 installed by
//! `scripts/setup-spark`). Spark tests run one at a time: each starts a JVM.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::{
    cases, conformance_dir, eventually, ferry, jobs_line, own_cases, prepare, request_savepoint,
    rewrite_paths, start_job, stderr_of, visible_lines, wait_for, wait_running, Case,
};

/// One Spark session at a time: two JVMs on a small machine make both slow.
static SPARK: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SPARK.lock().unwrap_or_else(|e| e.into_inner())
}

/// The Python of the Spark environment, as `ferry run --engine spark` finds it.
fn spark_python() -> PathBuf {
    if let Some(p) = std::env::var_os("FERRY_SPARK_PYTHON") {
        return PathBuf::from(p);
    }
    let venv = std::env::var_os("FERRY_SPARK_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME is set"))
                .join(".cache/ferry/spark-venv")
        });
    let py = venv.join("bin/python");
    assert!(
        py.exists(),
        "{} is missing: run scripts/setup-spark first",
        py.display()
    );
    py
}

#[test]
fn every_batch_conformance_case_passes_on_spark_in_one_session() {
    every_batch_case_passes_on_spark_in_one_session(cases());
}

/// Ferry's own cases (`tests/cases`): the multi-table LocalFile source and empty
/// directories, written from SeaTunnel's documentation.
#[test]
fn every_case_written_from_seatunnels_documentation_passes_on_spark() {
    every_batch_case_passes_on_spark_in_one_session(own_cases());
}

/// Runs every batch case of `all` in one Spark session (the driver's `--manifest` mode).
fn every_batch_case_passes_on_spark_in_one_session(all: Vec<Case>) {
    let _one = serial();
    let roots = tempfile::tempdir().unwrap();
    let mut manifest = String::new();
    let batch: Vec<Case> = all.into_iter().filter(|c| c.mode == "batch").collect();
    for (i, c) in batch.iter().enumerate() {
        let root = roots.path().join(i.to_string());
        std::fs::create_dir_all(&root).unwrap();
        let (job, vars) = prepare(c, &root);
        let entry = serde_json::json!({"name": c.path, "job": job, "vars": vars});
        manifest.push_str(&format!("{entry}\n"));
    }
    let list = roots.path().join("manifest.jsonl");
    std::fs::write(&list, manifest).unwrap();
    let py = spark_python();
    let started = Instant::now();
    let mut child = Command::new(&py)
        .args(["-m", "ferry_spark", "--manifest"])
        .arg(&list)
        .env("PYSPARK_PYTHON", &py)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the Spark driver starts");
    let status = wait_for(
        &mut child,
        Duration::from_secs(600),
        "the conformance run on Spark",
    );
    let out = child.wait_with_output().expect("collect output");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stdout}");
    eprintln!(
        "{} cases in {:.1} s",
        batch.len(),
        started.elapsed().as_secs_f64()
    );
    let ok = stdout.lines().filter(|l| l.starts_with("ok ")).count();
    let failed: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("FAILED "))
        .collect();
    assert!(
        failed.is_empty() && status.success(),
        "{} of {} cases failed on Spark:\n{}\n{stderr}",
        failed.len(),
        batch.len(),
        failed.join("\n")
    );
    assert_eq!(
        ok,
        batch.len(),
        "every case reports a result:\n{stdout}\n{stderr}"
    );
}

fn run_spark(args: &[&str], job: &Path) -> std::process::Output {
    let mut c = ferry();
    c.arg("run").arg(job).args(["--engine", "spark"]).args(args);
    c.output().expect("ferry runs")
}

/// Sorted lines of every visible file under `dir`.
fn sorted_lines(dir: &Path) -> Vec<String> {
    let mut v = visible_lines(dir);
    v.sort();
    v
}

#[test]
fn the_same_job_gives_the_same_rows_on_both_engines() {
    let _one = serial();
    let root = tempfile::tempdir().unwrap();
    let job = |out: &Path| {
        format!(
            r#"
env {{ job.mode = BATCH, parallelism = 2 }}
source {{
  FakeSource {{
    plugin_output = fake
    row.num = 500
    split.num = 3
    schema = {{ fields {{
      id = bigint, name = string, price = "decimal(12, 3)", at = time, ts = timestamp, day = date,
      ok = boolean, tags = "array<string>", attrs = "map<string, int>", r = {{ x = int, y = string }}
    }} }}
  }}
}}
transform {{
  Sql {{ plugin_input = fake, plugin_output = q, query = "select id, name, price, at, ts, day, ok, tags, attrs, r from fake where id % 3 <> 0" }}
  Replace {{ plugin_input = q, plugin_output = out, replace_field = name, pattern = "a", replacement = "A" }}
}}
sink {{ LocalFile {{ plugin_input = out, path = "{}", file_format_type = json }} }}
"#,
            out.display()
        )
    };
    let local_out = root.path().join("local");
    let spark_out = root.path().join("spark");
    let unfused_out = root.path().join("unfused");
    std::fs::write(root.path().join("local.conf"), job(&local_out)).unwrap();
    std::fs::write(root.path().join("spark.conf"), job(&spark_out)).unwrap();
    std::fs::write(root.path().join("unfused.conf"), job(&unfused_out)).unwrap();
    let out = ferry()
        .arg("run")
        .arg(root.path().join("local.conf"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "local: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run_spark(&[], &root.path().join("spark.conf"));
    assert!(
        out.status.success(),
        "spark: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The same plan without fusing: the transforms as mapInArrow steps, the sink as a
    // Spark write.
    let out = ferry()
        .arg("run")
        .arg(root.path().join("unfused.conf"))
        .args(["--engine", "spark"])
        .env("FERRY_SPARK_FUSE", "0")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "spark, unfused: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let local = sorted_lines(&local_out);
    let spark = sorted_lines(&spark_out);
    assert!(local.len() > 300, "the job writes rows: {}", local.len());
    assert_eq!(local.len(), spark.len());
    assert_eq!(local, spark, "the engines wrote different rows");
    assert_eq!(
        local,
        sorted_lines(&unfused_out),
        "Spark without fusing wrote different rows"
    );
}

fn start_spark(job: &Path, job_id: &str, ckpt: &Path) -> Child {
    start_job(job, job_id, ckpt, &["--engine", "spark"])
}

fn wait_running_spark(job_id: &str, ckpt: &Path) {
    wait_running(job_id, ckpt, "spark", Duration::from_secs(60));
}

/// The conformance pack's savepoint-restore scenario on Spark: FakeSource STREAMING
/// (100 rows in 5 splits, one every 3 s) into a transactional LocalFile sink, a
/// savepoint part-way, a restore, and exactly 100 distinct rows in the end.
#[test]
fn streaming_savepoint_and_restore_write_every_row_once() {
    let _one = serial();
    let root = tempfile::tempdir().unwrap();
    let cases = conformance_dir().join("cases/engine");
    let stream = root.path().join("stream.conf");
    let text = std::fs::read_to_string(cases.join("stream_fakesource_to_localfile.conf")).unwrap();
    // Micro-batches of 4 s instead of the default 10 s checkpoint interval keep the test short.
    let text = rewrite_paths(&text, root.path()).replace(
        "job.mode = \"STREAMING\"",
        "job.mode = \"STREAMING\"\n  checkpoint.interval = 4000",
    );
    std::fs::write(&stream, text).unwrap();
    let assert_job = root.path().join("assert.conf");
    let text = std::fs::read_to_string(cases.join("stream_sink_file_text_to_assert.conf")).unwrap();
    std::fs::write(&assert_job, rewrite_paths(&text, root.path())).unwrap();
    let sink_dir = root
        .path()
        .join("tmp/seatunnel/config/checkpoint-streaming-enable-test-resources/sinkfile");
    let ckpt = root.path().join("checkpoints");

    let mut first = start_spark(&stream, "sstream", &ckpt);
    wait_running_spark("sstream", &ckpt);
    // Part-way: some rows are out, not all.
    let some = eventually(Duration::from_secs(90), || {
        !visible_lines(&sink_dir).is_empty()
    });
    if let Ok(Some(status)) = first.try_wait() {
        panic!(
            "the streaming job ended by itself ({status}): {}",
            stderr_of(first)
        );
    }
    assert!(some, "the first run wrote nothing");
    request_savepoint("sstream", &ckpt);
    let status = wait_for(&mut first, Duration::from_secs(90), "first run");
    let err = stderr_of(first);
    assert!(status.success(), "first run: {err}");
    assert!(err.contains("stopped with a savepoint"), "{err}");
    let after_first = visible_lines(&sink_dir).len();
    let out = ferry()
        .args(["jobs", "--checkpoint-dir"])
        .arg(&ckpt)
        .output()
        .unwrap();
    let jobs = String::from_utf8_lossy(&out.stdout);
    assert!(
        jobs.lines()
            .any(|l| l.starts_with("sstream") && l.contains("SAVEPOINT") && l.contains("spark")),
        "{jobs}"
    );

    let mut second = start_spark(&stream, "sstream", &ckpt);
    wait_running_spark("sstream", &ckpt);
    let all = eventually(Duration::from_secs(90), || {
        visible_lines(&sink_dir).len() >= 100
    });
    request_savepoint("sstream", &ckpt);
    let status = wait_for(&mut second, Duration::from_secs(90), "restored run");
    let err = stderr_of(second);
    assert!(status.success(), "restored run: {err}");
    assert!(
        all,
        "the restored job wrote {} of 100 rows ({after_first} after the first run)",
        visible_lines(&sink_dir).len()
    );

    let out = ferry().arg("run").arg(&assert_job).output().unwrap();
    assert!(
        out.status.success(),
        "assert job: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines = sorted_lines(&sink_dir);
    let mut distinct = lines.clone();
    distinct.dedup();
    assert_eq!((lines.len(), distinct.len()), (100, 100), "every row once");
}

#[test]
fn a_job_file_error_is_reported_before_spark_starts() {
    let root = tempfile::tempdir().unwrap();
    let job = root.path().join("bad.conf");
    std::fs::write(&job, "source { FakeSource { row.nmu = 3, schema = { fields { id = int } } } }\nsink { Console {} }\n").unwrap();
    let started = Instant::now();
    let out = run_spark(&[], &job);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("bad.conf:1") && err.contains("row.nmu"),
        "{err}"
    );
    assert!(!err.contains("session started"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(30));
}

/// Starts `ferry run JOB --engine spark --job-id ID` in a process group of its own, so that
/// [`kill_group`] can kill the driver, its JVM and its Python workers together.
fn start_spark_group(job: &Path, job_id: &str, ckpt: &Path) -> Child {
    use std::os::unix::process::CommandExt;
    ferry()
        .arg("run")
        .arg(job)
        .args(["--engine", "spark", "--job-id", job_id, "--checkpoint-dir"])
        .arg(ckpt)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("ferry starts")
}

/// SIGKILL to the whole process group of `child` (see [`start_spark_group`]).
fn kill_group(child: &mut Child) {
    let status = Command::new("kill")
        .args(["-KILL", "--"])
        .arg(format!("-{}", child.id()))
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill failed");
    let _ = wait_for(child, Duration::from_secs(30), "the killed driver");
}

/// One run per job id on Spark: the driver holds the job directory's lock from before its
/// Spark session starts, so a second run is refused at once, naming it; after the first is
/// killed with SIGKILL, a new run gets the lock. No micro-batch needs to run, so this costs
/// little more than the JVMs' start.
#[test]
fn a_second_spark_run_of_a_running_job_is_refused_until_the_first_is_killed() {
    let _one = serial();
    let root = tempfile::tempdir().unwrap();
    let job = root.path().join("j.conf");
    std::fs::write(
        &job,
        "env { job.mode = STREAMING, checkpoint.interval = 1000 }\nsource { FakeSource { plugin_output = f, row.num = 10, schema = { fields { id = int } } } }\nsink { Blackhole {} }\n",
    )
    .unwrap();
    let ckpt = root.path().join("ck");
    let mut first = start_spark_group(&job, "stwice", &ckpt);
    wait_running_spark("stwice", &ckpt);
    let started = Instant::now();
    let out = run_spark(
        &[
            "--job-id",
            "stwice",
            "--checkpoint-dir",
            &ckpt.display().to_string(),
        ],
        &job,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the second run was accepted: {err}");
    // `ferry run --engine spark` replaces itself with the driver: the same pid.
    assert!(
        err.contains(&format!(
            "job 'stwice' is already running (pid {}, since ",
            first.id()
        )),
        "{err}"
    );
    assert!(!err.contains("session started"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(30));

    kill_group(&mut first);
    let line = jobs_line("stwice", &ckpt);
    assert!(line.contains("CRASHED"), "{line}");
    let mut third = start_spark_group(&job, "stwice", &ckpt);
    wait_running_spark("stwice", &ckpt);
    let line = jobs_line("stwice", &ckpt);
    assert!(line.contains(&format!(" {} ", third.id())), "{line}");
    kill_group(&mut third);
}

/// A small deterministic generator (xorshift64*), so every run kills at the same moments.
struct Rng(u64);

impl Rng {
    fn between(&mut self, lo: u64, hi: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        lo + self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % (hi - lo)
    }
}

const ROWS_PER_FILE: u64 = 100;

/// Adds input file `n` the way producers should: written aside, then renamed in.
fn add_file(input: &Path, n: u64) {
    let text: String = (0..ROWS_PER_FILE)
        .map(|i| format!("{},row-{n}-{i}\n", n * ROWS_PER_FILE + i))
        .collect();
    let tmp = input.join(format!(".part-{n:05}.csv"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, input.join(format!("part-{n:05}.csv"))).unwrap();
}

/// Micro-batches Spark planned so far (its offset log) for the job's one sink.
fn batches(ckpt: &Path) -> usize {
    std::fs::read_dir(ckpt.join("crash/query-0/offsets"))
        .map(|rd| rd.flatten().count())
        .unwrap_or(0)
}

/// Output ids with how often each appears.
fn output_ids(dir: &Path) -> std::collections::BTreeMap<u64, usize> {
    let mut ids = std::collections::BTreeMap::new();
    for line in visible_lines(dir) {
        let id: u64 = line
            .split(',')
            .next()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("bad output line {line:?}"));
        *ids.entry(id).or_insert(0) += 1;
    }
    ids
}

/// Kills the whole Spark driver process group (driver, JVM, Python workers) with SIGKILL
/// at random moments, five times, restarting the job each time with the same job id; in
/// the end every input id is in the output exactly once.
#[test]
fn crashes_of_the_whole_driver_lose_and_repeat_nothing() {
    use std::os::unix::process::CommandExt;
    let _one = serial();
    let root = tempfile::tempdir().unwrap();
    let input = root.path().join("in");
    let output = root.path().join("out");
    std::fs::create_dir_all(&input).unwrap();
    let job = root.path().join("job.conf");
    std::fs::write(
        &job,
        format!(
            r#"
env {{ job.name = "crash", job.mode = "STREAMING", checkpoint.interval = 1000, parallelism = 2 }}
source {{ LocalFile {{ plugin_output = events, path = "{}", file_format_type = csv, schema = {{ fields {{ id = bigint, payload = string }} }} }} }}
sink {{ LocalFile {{ path = "{}", file_format_type = csv, is_enable_transaction = true }} }}
"#,
            input.display(),
            output.display()
        ),
    )
    .unwrap();
    let ckpt = root.path().join("ckpt");
    let start = || {
        ferry()
            .arg("run")
            .arg(&job)
            .args(["--engine", "spark", "--job-id", "crash", "--checkpoint-dir"])
            .arg(&ckpt)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("ferry starts")
    };
    let mut rng = Rng(0x5EED_F00D);
    let mut files = 0;
    for _ in 0..3 {
        add_file(&input, files);
        files += 1;
    }
    for round in 0..5 {
        let planned = batches(&ckpt);
        let mut child = start();
        wait_running_spark("crash", &ckpt);
        // Random points of a running query: after this run planned its first micro-batch.
        let started = eventually(Duration::from_secs(60), || batches(&ckpt) > planned);
        assert!(started, "round {round}: no micro-batch started");
        let mut left = rng.between(200, 5_000);
        while left > 0 {
            let step = left.min(700);
            std::thread::sleep(Duration::from_millis(step));
            left -= step;
            add_file(&input, files);
            files += 1;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!(
                "round {round}: the job ended by itself ({status}): {}",
                stderr_of(child)
            );
        }
        let status = Command::new("kill")
            .args(["-KILL", "--"])
            .arg(format!("-{}", child.id()))
            .status()
            .expect("kill runs");
        assert!(status.success(), "round {round}: kill failed");
        let _ = wait_for(&mut child, Duration::from_secs(30), "the killed driver");
        let ids = output_ids(&output);
        eprintln!(
            "round {round}: killed after {} micro-batches in all, {} ids out",
            batches(&ckpt),
            ids.len()
        );
        let twice: Vec<_> = ids.iter().filter(|(_, n)| **n > 1).take(5).collect();
        assert!(
            twice.is_empty(),
            "round {round}: ids written twice: {twice:?}"
        );
    }
    let mut last = start();
    wait_running_spark("crash", &ckpt);
    let expected = files * ROWS_PER_FILE;
    let all = eventually(Duration::from_secs(120), || {
        output_ids(&output).len() as u64 >= expected
    });
    request_savepoint("crash", &ckpt);
    let status = wait_for(&mut last, Duration::from_secs(90), "the last run");
    let err = stderr_of(last);
    assert!(status.success(), "last run: {err}");
    let ids = output_ids(&output);
    assert!(all, "{} of {expected} ids arrived", ids.len());
    let twice: Vec<_> = ids.iter().filter(|(_, n)| **n > 1).take(5).collect();
    assert!(twice.is_empty(), "ids written twice: {twice:?}");
    assert_eq!(ids.len() as u64, expected);
    assert_eq!(ids.keys().next_back().copied(), Some(expected - 1));
}
