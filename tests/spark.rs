//! The Spark engine end to end: SeaTunnel's conformance cases, the same job on both
//! engines, and a streaming savepoint/restore, on a local Spark (pyspark 4.1 installed by
//! `scripts/setup-spark`), and a savepoint on a standalone cluster on loopback (a master
//! and two one-core workers started from the same pyspark package). Spark tests run one
//! at a time: each starts a JVM.

mod common;

use std::io::BufRead;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{
    cases, conformance_dir, eventually, ferry, jobs_line, output_ids, own_cases, prepare, psql,
    request_savepoint, rewrite_paths, start_job, stderr_of, visible_lines, wait_for, wait_running,
    Case, Rng,
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

/// Jobs with several tables in one stream or several inputs to one plugin (`@OUT@` is the
/// output directory): each must give the same rows on both engines.
const MULTI_TABLE_JOBS: &[(&str, &str)] = &[
    (
        // SeaTunnel's shape: two FakeSources, no table names, one partitioned LocalFile
        // sink that takes the union of both.
        "two_sources_one_partitioned_sink",
        r#"
env { job.mode = "BATCH", parallelism = 1 }
source {
  FakeSource { row.num = 12, string.length = 1, seed = 1, schema = { fields { id = bigint, c_string = string, c_int = int } } }
  FakeSource { row.num = 9, string.length = 1, seed = 2, schema = { fields { id = bigint, c_string = string, c_int = int } } }
}
sink {
  LocalFile {
    path = "@OUT@"
    partition_by = ["c_string"]
    partition_dir_expression = "${k0}=${v0}"
    is_partition_field_write_in_file = true
    file_format_type = "text"
    field_delimiter = "\t"
    is_enable_transaction = true
  }
}
"#,
    ),
    (
        // A multi-table source straight into one sink: one fused chain.
        "one_stream_two_tables_fused",
        r#"
env { job.mode = "BATCH", parallelism = 1 }
source {
  FakeSource {
    tables_configs = [
      { row.num = 6, schema { table = "db.fake1", fields { id = int, name = string } } },
      { row.num = 5, schema { table = "db.fake2", fields { code = bigint, at = time } } }
    ]
  }
}
sink { LocalFile { path = "@OUT@/${table_name}", file_format_type = "json" } }
"#,
    ),
    (
        // A multi-table stream through Spark (three readers), split by table and merged.
        "one_stream_split_by_table",
        r#"
env { job.mode = "BATCH", parallelism = 1 }
source {
  FakeSource {
    plugin_output = "fake"
    tables_configs = [
      { row.num = 4, schema { table = "db.orders", fields { order_id = int, amount = double } } },
      { row.num = 5, schema { table = "db.events_a", fields { id = int, kind = string } } },
      { row.num = 6, schema { table = "db.events_b", fields { id = int, kind = string } } }
    ]
  }
}
transform {
  TableFilter { plugin_input = "fake", plugin_output = "orders", table_pattern = "orders" }
  TableFilter { plugin_input = "fake", plugin_output = "events", table_pattern = "events_.*" }
  TableMerge { plugin_input = "events", plugin_output = "merged", database = "dw", table = "events" }
}
sink {
  LocalFile { plugin_input = "orders", path = "@OUT@/orders", file_format_type = "json" }
  LocalFile { plugin_input = "merged", path = "@OUT@/events", file_format_type = "json" }
  LocalFile { plugin_input = "fake", path = "@OUT@/all/${table_name}", file_format_type = "json" }
}
"#,
    ),
    (
        // Transforms and sinks that read two streams.
        "transforms_and_sinks_with_two_inputs",
        r#"
env { job.mode = "BATCH", parallelism = 1 }
source {
  FakeSource { plugin_output = "a", row.num = 7, seed = 3, schema = { fields { id = bigint, name = string, at = time } } }
  FakeSource { plugin_output = "b", row.num = 8, seed = 4, schema = { fields { id = bigint, name = string, at = time } } }
}
transform {
  Filter { plugin_input = ["a", "b"], plugin_output = "ids", include_fields = [id, at] }
  TableMerge { plugin_input = ["a", "b"], plugin_output = "merged", table = "ab" }
}
sink {
  LocalFile { plugin_input = ["a", "b"], path = "@OUT@/both/${table_name}", file_format_type = "json" }
  LocalFile { plugin_input = "ids", path = "@OUT@/ids/${table_name}", file_format_type = "json" }
  LocalFile { plugin_input = "merged", path = "@OUT@/merged", file_format_type = "json" }
  Assert { plugin_input = "merged", rules { row_rules = [{ rule_type = MIN_ROW, rule_value = 15 }, { rule_type = MAX_ROW, rule_value = 15 }] } }
}
"#,
    ),
];

/// Sorted lines of the visible files under `dir`, by directory relative to `dir` (file
/// names hold transaction ids and differ from run to run).
fn lines_by_directory(dir: &Path) -> std::collections::BTreeMap<String, Vec<String>> {
    fn walk(root: &Path, dir: &Path, out: &mut std::collections::BTreeMap<String, Vec<String>>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if name.starts_with('.') || name.starts_with('_') {
                continue;
            }
            let p = e.path();
            if p.is_dir() {
                walk(root, &p, out);
            } else if let Ok(text) = std::fs::read_to_string(&p) {
                let rel = dir.strip_prefix(root).unwrap_or(dir).display().to_string();
                let lines = out.entry(rel).or_default();
                lines.extend(text.lines().filter(|l| !l.is_empty()).map(str::to_string));
                lines.sort();
            }
        }
    }
    let mut out = std::collections::BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// Multi-table streams and plugins with several inputs run on Spark (one session for
/// all, as the conformance run does) and write what the embedded engine writes, table by
/// table and directory by directory.
#[test]
fn multi_table_and_multi_input_jobs_give_the_same_rows_on_both_engines() {
    let _one = serial();
    let root = tempfile::tempdir().unwrap();
    let mut manifest = String::new();
    for (name, text) in MULTI_TABLE_JOBS {
        for engine in ["local", "spark"] {
            let out = root.path().join(engine).join(name);
            let job = root.path().join(format!("{name}-{engine}.conf"));
            std::fs::write(&job, text.replace("@OUT@", &out.display().to_string())).unwrap();
            if engine == "local" {
                let run = ferry().arg("run").arg(&job).output().unwrap();
                assert!(
                    run.status.success(),
                    "{name} on the embedded engine: {}",
                    String::from_utf8_lossy(&run.stderr)
                );
            } else {
                let entry = serde_json::json!({"name": name, "job": job, "vars": []});
                manifest.push_str(&format!("{entry}\n"));
            }
        }
    }
    let list = root.path().join("manifest.jsonl");
    std::fs::write(&list, manifest).unwrap();
    let py = spark_python();
    let mut child = Command::new(&py)
        .args(["-m", "ferry_spark", "--manifest"])
        .arg(&list)
        .env("PYSPARK_PYTHON", &py)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the Spark driver starts");
    let status = wait_for(&mut child, Duration::from_secs(600), "the jobs on Spark");
    let out = child.wait_with_output().expect("collect output");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (name, _) in MULTI_TABLE_JOBS {
        let local = lines_by_directory(&root.path().join("local").join(name));
        let spark = lines_by_directory(&root.path().join("spark").join(name));
        assert!(
            local.len() > 1 && local.values().all(|l| !l.is_empty()),
            "{name}: {local:?}"
        );
        assert_eq!(local, spark, "{name}: the engines wrote different rows");
    }
}

fn start_spark(job: &Path, job_id: &str, ckpt: &Path) -> Child {
    start_job(job, job_id, ckpt, &["--engine", "spark"])
}

fn wait_running_spark(job_id: &str, ckpt: &Path) {
    // Upper bounds, not delays: a Spark session alone took 60 s to start on a loaded
    // 2-core machine, so the bounds leave room for that.
    wait_running(job_id, ckpt, "spark", Duration::from_secs(180));
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
    let some = eventually(Duration::from_secs(240), || {
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
    let all = eventually(Duration::from_secs(240), || {
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
    let mut first = common::start_group(&job, "spark", "stwice", &ckpt);
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

    common::kill_group(&mut first);
    let line = jobs_line("stwice", &ckpt);
    assert!(line.contains("CRASHED"), "{line}");
    let mut third = common::start_group(&job, "spark", "stwice", &ckpt);
    wait_running_spark("stwice", &ckpt);
    let line = jobs_line("stwice", &ckpt);
    assert!(line.contains(&format!(" {} ", third.id())), "{line}");
    common::kill_group(&mut third);
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

/// Kills the whole Spark driver process group (driver, JVM, Python workers) with SIGKILL
/// at random moments, five times, restarting the job each time with the same job id; in
/// the end every input id is in the output exactly once.
#[test]
fn crashes_of_the_whole_driver_lose_and_repeat_nothing() {
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
        let started = eventually(Duration::from_secs(180), || batches(&ckpt) > planned);
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

/// A Spark standalone cluster on loopback: a master and two one-core workers, run from
/// the Spark environment's pyspark package (`bin/spark-class`) on free ports of
/// 127.0.0.1. Dropping it stops them (and the executors the workers started).
struct Cluster {
    url: String,
    processes: Vec<Child>,
    dir: tempfile::TempDir,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port on 127.0.0.1")
}

impl Cluster {
    fn start() -> Cluster {
        let py = spark_python();
        let out = Command::new(&py)
            .args([
                "-c",
                "import os, pyspark; print(os.path.dirname(pyspark.__file__))",
            ])
            .output()
            .expect("the Spark environment's Python runs");
        let home = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        let class = home.join("bin/spark-class");
        assert!(class.exists(), "{} is missing", class.display());
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let url = format!("spark://127.0.0.1:{port}");
        let mut cluster = Cluster {
            url: url.clone(),
            processes: Vec::new(),
            dir,
        };
        let spawn = |cluster: &mut Cluster, name: &str, args: &[&str]| {
            let log = std::fs::File::create(cluster.dir.path().join(format!("{name}.log")))
                .expect("create a log file");
            let child = Command::new(&class)
                .args(args)
                .env("SPARK_HOME", &home)
                .env("SPARK_LOCAL_IP", "127.0.0.1")
                .env("SPARK_LOCAL_HOSTNAME", "127.0.0.1")
                .env("SPARK_LOG_DIR", cluster.dir.path())
                .env("SPARK_PID_DIR", cluster.dir.path())
                // No REST submission server (a fixed port) and no web UIs to bind.
                .env(
                    "SPARK_DAEMON_JAVA_OPTS",
                    "-Dspark.master.rest.enabled=false -Dspark.ui.enabled=false",
                )
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("log file"))
                .stderr(log)
                // Executors are the workers' children, in their process groups.
                .process_group(0)
                .spawn()
                .expect("spark-class starts");
            cluster.processes.push(child);
        };
        let port_text = port.to_string();
        spawn(
            &mut cluster,
            "master",
            &[
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                &port_text,
                "--webui-port",
                "0",
            ],
        );
        for n in 1..=2 {
            let work = cluster.dir.path().join(format!("work-{n}"));
            let work = work.display().to_string();
            spawn(
                &mut cluster,
                &format!("worker-{n}"),
                &[
                    "org.apache.spark.deploy.worker.Worker",
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    "1",
                    "--memory",
                    "1g",
                    "--webui-port",
                    "0",
                    "--work-dir",
                    &work,
                    &url,
                ],
            );
        }
        let master_log = cluster.dir.path().join("master.log");
        let registered = eventually(Duration::from_secs(90), || {
            std::fs::read_to_string(&master_log)
                .map(|t| t.matches("Registering worker").count() >= 2)
                .unwrap_or(false)
        });
        assert!(
            registered,
            "the standalone cluster did not start: {}",
            std::fs::read_to_string(&master_log).unwrap_or_default()
        );
        cluster
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for p in &self.processes {
            let _ = Command::new("kill")
                .args(["-TERM", "--"])
                .arg(format!("-{}", p.id()))
                .status();
        }
        for p in &mut self.processes {
            let start = Instant::now();
            while p.try_wait().ok().flatten().is_none() && start.elapsed() < Duration::from_secs(15)
            {
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = Command::new("kill")
                .args(["-KILL", "--"])
                .arg(format!("-{}", p.id()))
                .status();
            let _ = p.wait();
        }
    }
}

/// A running `ferry run --engine spark` in its own process group, whose stderr is
/// collected as it comes.
struct Driver {
    child: Child,
    stderr: Arc<Mutex<String>>,
}

impl Driver {
    fn start(job: &Path, args: &[&str]) -> Driver {
        let mut child = ferry()
            .arg("run")
            .arg(job)
            .args(["--engine", "spark"])
            .args(args)
            .env("SPARK_LOCAL_IP", "127.0.0.1")
            .env("SPARK_LOCAL_HOSTNAME", "127.0.0.1")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .expect("ferry starts");
        let stderr = Arc::new(Mutex::new(String::new()));
        let pipe = child.stderr.take().expect("stderr is piped");
        let sink = stderr.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(pipe).lines().map_while(Result::ok) {
                let mut s = sink.lock().unwrap_or_else(|e| e.into_inner());
                s.push_str(&line);
                s.push('\n');
            }
        });
        Driver { child, stderr }
    }

    fn stderr(&self) -> String {
        self.stderr
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn kill(&mut self) {
        common::kill_group(&mut self.child);
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            common::kill_group(&mut self.child);
        }
    }
}

/// On a real cluster, the driver is killed while micro-batch 1 (a new file) is planned
/// but not committed; the rerun is asked for a savepoint while its Spark session starts,
/// before Spark runs batch 1 again. The savepoint is kept and returns only once batch 1
/// is committed: its rows are out when the driver exits, once each.
#[test]
fn a_savepoint_on_a_standalone_cluster_returns_after_the_replayed_batch_commits() {
    let _one = serial();
    let cluster = Cluster::start();
    let root = tempfile::tempdir().unwrap();
    let input = root.path().join("in");
    let output = root.path().join("out");
    std::fs::create_dir_all(&input).unwrap();
    let job = root.path().join("job.conf");
    std::fs::write(
        &job,
        format!(
            r#"
env {{ job.name = "standalone", job.mode = "STREAMING", checkpoint.interval = 6000, parallelism = 1 }}
source {{ LocalFile {{ plugin_output = events, path = "{}", file_format_type = csv, schema = {{ fields {{ id = bigint, payload = string }} }} }} }}
sink {{ LocalFile {{ path = "{}", file_format_type = csv, is_enable_transaction = true }} }}
"#,
            input.display(),
            output.display()
        ),
    )
    .unwrap();
    let ckpt = root.path().join("ckpt");
    let ckpt_arg = ckpt.display().to_string();
    let args = [
        "--master",
        cluster.url.as_str(),
        "--job-id",
        "sa",
        "--checkpoint-dir",
        ckpt_arg.as_str(),
    ];
    let offsets = ckpt.join("sa/query-0/offsets");
    let commits = ckpt.join("sa/query-0/commits");
    add_file(&input, 0);

    let mut first = Driver::start(&job, &args);
    // File 1 arrives while batch 0 runs, so batch 1 plans it.
    let planned = eventually(Duration::from_secs(120), || offsets.join("0").exists());
    assert!(planned, "batch 0 was never planned: {}", first.stderr());
    add_file(&input, 1);
    let planned = eventually(Duration::from_secs(180), || offsets.join("1").exists());
    assert!(planned, "batch 1 was never planned: {}", first.stderr());
    first.kill();
    let planned_1 = std::fs::read_to_string(offsets.join("1")).unwrap();
    assert!(planned_1.contains("part-00001"), "{planned_1}");
    assert!(
        !commits.join("1").exists(),
        "batch 1 committed before the kill"
    );

    // Asked for while the rerun's Spark session starts (seconds on a cluster): the
    // request waits for the query, which first runs batch 1 again.
    let mut second = Driver::start(&job, &args);
    wait_running_spark("sa", &ckpt);
    request_savepoint("sa", &ckpt);
    assert!(
        !second.stderr().contains("session started"),
        "the session started before the request: {}",
        second.stderr()
    );
    let status = wait_for(&mut second.child, Duration::from_secs(150), "the rerun");
    let err = second.stderr();
    assert!(status.success(), "rerun: {err}");
    assert!(err.contains("stopped with a savepoint"), "{err}");
    assert!(
        commits.join("1").exists(),
        "the savepoint returned before batch 1 committed: {err}"
    );
    let ids = output_ids(&output);
    assert_eq!(
        ids.len() as u64,
        2 * ROWS_PER_FILE,
        "the rows of both files are out when the savepoint returns: {err}"
    );
    assert!(ids.values().all(|n| *n == 1), "every id once");
    drop(cluster);
}

/// A Postgres-CDC → Jdbc (upserts by key) job of database `test`: schema `schema`'s
/// table `src` into its table `dst`, through slot `slot`, snapshot chunks of `split` rows.
fn cdc_job(dir: &Path, schema: &str, slot: &str, split: u64) -> PathBuf {
    let job = dir.join("cdc.conf");
    std::fs::write(
        &job,
        format!(
            r#"
env {{ job.name = "cdc-{slot}", job.mode = "STREAMING", checkpoint.interval = 1000 }}
source {{
  Postgres-CDC {{
    base-url = "jdbc:postgresql://127.0.0.1:5432/test"
    username = "postgres"
    password = "secret-not-shown"
    table-names = ["test.{schema}.src"]
    slot.name = "{slot}"
    snapshot.split.size = {split}
    exactly_once = true
  }}
}}
sink {{
  Jdbc {{
    url = "jdbc:postgresql://127.0.0.1:5432/test"
    driver = "org.postgresql.Driver"
    user = "postgres"
    password = "secret-not-shown"
    generate_sink_sql = true
    database = test
    table = {schema}.dst
    primary_keys = ["id"]
  }}
}}
"#
        ),
    )
    .unwrap();
    job
}

/// Drops replication slot `slot` (and its publication) and makes schema `schema` afresh with
/// tables `src` (`rows` rows) and `dst`. `src.note` is stored out of line uncompressed
/// (TOAST, `STORAGE EXTERNAL`) once over about 2 KB, and `src` has the default replica
/// identity: an update that leaves such a note alone does not send it.
fn cdc_tables(schema: &str, slot: &str, rows: u64) {
    cdc_drop_slot(slot);
    psql(
        "test",
        &format!(
            "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema};
             CREATE TABLE {schema}.src (id int8 PRIMARY KEY, v int4 NOT NULL, note text);
             ALTER TABLE {schema}.src ALTER COLUMN note SET STORAGE EXTERNAL;
             CREATE TABLE {schema}.dst (id int8 PRIMARY KEY, v int4 NOT NULL, note text);
             INSERT INTO {schema}.src SELECT g, 0, 'row ' || g FROM generate_series(1, {rows}) g;"
        ),
    );
}

/// Drops replication slot `slot` and its publication.
fn cdc_drop_slot(slot: &str) {
    psql(
        "test",
        &format!("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = '{slot}'"),
    );
    psql(
        "test",
        &format!("DROP PUBLICATION IF EXISTS {slot}_publication"),
    );
}

/// `schema`'s table `t` as text, row by row (large values by their hash).
fn cdc_text(schema: &str, t: &str) -> String {
    psql(
        "test",
        &format!("SELECT id, v, md5(note) FROM {schema}.{t} ORDER BY id"),
    )
}

/// The replication slots named like `slot` (or temporary), and how far `slot`'s confirmed
/// position is behind the server's.
fn cdc_slots(slot: &str) -> (String, i64) {
    let slots = psql(
        "test",
        &format!("SELECT slot_name FROM pg_replication_slots WHERE temporary OR slot_name LIKE '{slot}%' ORDER BY 1"),
    );
    let behind = psql(
        "test",
        &format!("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::int8 FROM pg_replication_slots WHERE slot_name = '{slot}'"),
    )
    .trim()
    .parse()
    .unwrap_or(i64::MAX);
    (slots.trim().to_string(), behind)
}

/// Postgres-CDC on Spark: the snapshot (in several micro-batches of bounded chunks), then
/// inserts, updates (one with a large value) and deletes reach the keyed Jdbc target, which
/// equals the source; a savepoint stops the query; only the job's slot remains.
/// Postgres-CDC on Spark under a continuous workload of multi-statement transactions
/// (updates, inserts with large values, deletes) while the whole driver process group is
/// killed with SIGKILL five times, in the snapshot and in the stream: after the workload
/// stops, the keyed target equals the source row for row, only the job's slot exists and
/// it is confirmed close to the server's position. (It also covers what a run without kills
/// would: `ferry check` names both engines, a transaction that updates one row twice, TOAST
/// values changed, updates that leave a TOASTed value alone (unchanged TOAST: the marks
/// cross Spark in the fused chain and the target keeps the value), the password never
/// shown.)
#[test]
fn postgres_cdc_on_spark_survives_kills_of_the_driver_row_for_row() {
    let _one = serial();
    let (schema, slot) = ("ferry_spark_cdc_crash", "ferry_sparkcdc_crash");
    const ROWS: u64 = 6_000;
    cdc_tables(schema, slot, ROWS);
    let root = tempfile::tempdir().unwrap();
    // Chunks of 250 rows, at most 8 a micro-batch: the snapshot takes 3 micro-batches, so
    // the first kills land in it and the later ones in the stream.
    let job = cdc_job(root.path(), schema, slot, 250);
    let ckpt = root.path().join("ckpt");
    let check = ferry()
        .arg("check")
        .arg(&job)
        .output()
        .expect("ferry check runs");
    let text = String::from_utf8_lossy(&check.stdout);
    assert!(text.contains("engines: local, spark"), "{text}");
    let workload = common::Workload::start(
        0xcdc5_9a4c,
        Duration::from_millis(50),
        move |round, rng| {
            let base = ROWS + 1 + round * 10;
            psql(
            "test",
            &format!(
                "BEGIN;
                 UPDATE {schema}.src SET v = v + 1, note = note || '.' WHERE id % 13 = {} AND id % 17 = {};
                 INSERT INTO {schema}.src (id, v, note) SELECT {base} + g, 0, repeat(md5(g::text), {}) FROM generate_series(0, 9) g;
                 DELETE FROM {schema}.src WHERE id % 1009 = {} AND id % 7 = {};
                 COMMIT;",
                rng.between(0, 13),
                rng.between(0, 17),
                rng.between(1, 300),
                rng.between(0, 1009),
                rng.between(0, 7)
            ),
        );
        },
    );
    let batches = |ckpt: &Path| {
        std::fs::read_dir(ckpt.join("sparkcdccrash/query-0/offsets"))
            .map(|rd| rd.flatten().count())
            .unwrap_or(0)
    };
    // Whether the latest logged micro-batch (the one a restart replays) starts before the
    // snapshot's end.
    let in_snapshot =
        |ckpt: &Path| common::spark_batch_in_snapshot(&ckpt.join("sparkcdccrash/query-0/offsets"));
    let mut rng = Rng(0x5eed_cdc5);
    let mut kills_in_snapshot = 0;
    for round in 0..5 {
        let planned = batches(&ckpt);
        let mut child = common::start_group(&job, "spark", "sparkcdccrash", &ckpt);
        let started = eventually(Duration::from_secs(240), || batches(&ckpt) > planned);
        if !started {
            common::kill_group(&mut child);
            panic!(
                "round {round}: no micro-batch started: {}",
                stderr_of(child)
            );
        }
        // The last two kills land in the stream: the snapshot chases the workload's inserts
        // (new keys at the end of the table), so wait until this run has finished it.
        if round >= 3 {
            let streaming = eventually(Duration::from_secs(240), || !in_snapshot(&ckpt));
            assert!(streaming, "round {round}: the snapshot did not end");
        }
        std::thread::sleep(Duration::from_millis(rng.between(300, 4_000)));
        if let Ok(Some(status)) = child.try_wait() {
            panic!(
                "round {round}: the job ended by itself ({status}): {}",
                stderr_of(child)
            );
        }
        common::kill_group(&mut child);
        let snapshot = in_snapshot(&ckpt);
        kills_in_snapshot += snapshot as u32;
        eprintln!(
            "round {round}: killed after {} micro-batches in all (in the snapshot: {snapshot}), {} rows in the target",
            batches(&ckpt),
            psql("test", &format!("SELECT count(*) FROM {schema}.dst")).trim()
        );
    }
    let mut last = common::start_group(&job, "spark", "sparkcdccrash", &ckpt);
    wait_running_spark("sparkcdccrash", &ckpt);
    std::thread::sleep(Duration::from_secs(3));
    let rounds = workload.stop();
    // After the workload (statements over many rows would meet its transactions in a
    // deadlock): large values replaced, one row updated twice in a transaction, and
    // updates that leave the out-of-line notes alone.
    psql(
        "test",
        &format!(
            "UPDATE {schema}.src SET v = v + 7, note = repeat('u', 5000) WHERE id % 100 = 3;
             BEGIN; UPDATE {schema}.src SET v = -1 WHERE id = 2; UPDATE {schema}.src SET v = -2 WHERE id = 2; COMMIT;
             UPDATE {schema}.src SET v = v + 1 WHERE length(note) > 2500;"
        ),
    );
    assert_eq!(
        psql(
            "test",
            &format!(
                "SELECT pg_relation_size(reltoastrelid) > 0 FROM pg_class WHERE oid = '{schema}.src'::regclass"
            )
        )
        .trim(),
        "t",
        "no note is stored out of line: the unchanged-TOAST updates test nothing"
    );
    let same = eventually(Duration::from_secs(180), || {
        cdc_text(schema, "src") == cdc_text(schema, "dst")
    });
    request_savepoint("sparkcdccrash", &ckpt);
    let status = wait_for(&mut last, Duration::from_secs(120), "the last run");
    let err = stderr_of(last);
    assert!(status.success(), "last run: {err}");
    assert!(
        !err.contains("secret-not-shown"),
        "the password shows: {err}"
    );
    assert!(
        same,
        "after 5 kills and {rounds} transactions the target differs: {} rows in src, {} in dst",
        psql("test", &format!("SELECT count(*) FROM {schema}.src")).trim(),
        psql("test", &format!("SELECT count(*) FROM {schema}.dst")).trim()
    );
    assert!(rounds > 20, "only {rounds} workload transactions ran");
    assert!(
        (1..5).contains(&kills_in_snapshot),
        "{kills_in_snapshot} of 5 kills in the snapshot: the test should kill in both phases"
    );
    let (slots, behind) = cdc_slots(slot);
    assert_eq!(slots, slot, "slots: {slots}");
    assert!(
        behind < 64 << 20,
        "the slot is {behind} bytes behind the server"
    );
    cdc_drop_slot(slot);
}
