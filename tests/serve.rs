//! `ferry serve` end to end: a real server process, SeaTunnel's REST API v2 over HTTP,
//! Prometheus metrics, a `kill -9` of the server with the running job resumed from its
//! checkpoint (every row once), bad input, the token, 20 concurrent jobs, and the web page
//! in headless Chromium driven through chromedriver's WebDriver protocol.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::http::{get, post, request};
use common::{eventually, ferry, output_ids, wait_for};
use serde_json::{json, Value};

/// A `ferry serve` process; killed when dropped.
struct Serve {
    child: Child,
    addr: String,
    log: mpsc::Receiver<String>,
    lines: std::cell::RefCell<Vec<String>>,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Serve {
    /// The lines the server wrote to stderr so far.
    fn log(&self) -> String {
        let mut lines = self.lines.borrow_mut();
        lines.extend(self.log.try_iter());
        lines.join("\n")
    }
}

/// Starts `ferry serve --listen 127.0.0.1:0 --checkpoint-dir CKPT extra…` and waits until
/// it says where it listens.
fn serve(ckpt: &Path, extra: &[&str]) -> Serve {
    let mut child = ferry()
        .args(["serve", "--listen", "127.0.0.1:0", "--checkpoint-dir"])
        .arg(ckpt)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ferry serve starts");
    let stderr = child.stderr.take().expect("stderr is piped");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let started = Instant::now();
    let mut seen = Vec::new();
    while started.elapsed() < Duration::from_secs(30) {
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(100)) {
            if let Some(rest) = line.strip_prefix("ferry serve: listening on http://") {
                let addr = rest
                    .split_whitespace()
                    .next()
                    .unwrap_or_default()
                    .to_string();
                seen.push(line);
                return Serve {
                    child,
                    addr,
                    log: rx,
                    lines: std::cell::RefCell::new(seen),
                };
            }
            seen.push(line);
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("ferry serve exited ({status}): {}", seen.join("\n"));
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!(
        "ferry serve never said where it listens: {}",
        seen.join("\n")
    );
}

/// A streaming job: FakeSource emits `rows` rows with unique ids, one per split, one split
/// every `interval_ms`, into a transactional (exactly-once) LocalFile CSV sink in `out`.
fn streaming_job(rows: u64, interval_ms: u64, out: &Path) -> String {
    format!(
        r#"env {{
  job.mode = "STREAMING"
  checkpoint.interval = 300
}}
source {{
  FakeSource {{
    plugin_output = "fake"
    row.num = {rows}
    split.num = {rows}
    split.read-interval = {interval_ms}
    schema = {{ fields {{ id = bigint, name = string }} }}
  }}
}}
sink {{
  LocalFile {{
    path = "{out}"
    file_format_type = "csv"
    is_enable_transaction = true
  }}
}}
"#,
        out = out.display()
    )
}

fn job_info(addr: &str, id: &str) -> Value {
    let r = get(addr, &format!("/job-info/{id}"));
    assert_eq!(r.status, 200, "job-info {id}: {}", r.body);
    r.json()
}

fn count(v: &Value, key: &str) -> u64 {
    v["metrics"][key]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("metrics.{key} is no count in {v}"))
}

/// The job's status, or "" while the server does not know it.
fn status(addr: &str, id: &str) -> String {
    let r = get(addr, &format!("/job-info/{id}"));
    if r.status != 200 {
        return String::new();
    }
    r.json()["jobStatus"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Asserts that `v` has SeaTunnel's job fields (running or finished).
fn assert_seatunnel_job_shape(v: &Value, running: bool) {
    for k in [
        "jobId",
        "jobName",
        "jobStatus",
        "createTime",
        "jobDag",
        "metrics",
    ] {
        assert!(v.get(k).is_some(), "no {k} in {v}");
    }
    if running {
        for k in ["envOptions", "pluginJarsUrls", "isStartWithSavePoint"] {
            assert!(v.get(k).is_some(), "no {k} in a running job: {v}");
        }
    } else {
        for k in ["finishTime", "errorMsg"] {
            assert!(v.get(k).is_some(), "no {k} in a finished job: {v}");
        }
    }
    let dag = &v["jobDag"];
    for k in ["jobId", "envOptions", "vertexInfoMap", "pipelineEdges"] {
        assert!(dag.get(k).is_some(), "no jobDag.{k} in {v}");
    }
    let vertex = &dag["vertexInfoMap"][0];
    for k in ["vertexId", "type", "vertexName", "tablePaths"] {
        assert!(vertex.get(k).is_some(), "no vertexInfoMap[0].{k} in {v}");
    }
    for k in [
        "SourceReceivedCount",
        "SourceReceivedQPS",
        "SourceReceivedBytes",
        "SinkWriteCount",
        "SinkWriteQPS",
        "SinkWriteBytes",
        "TableSourceReceivedCount",
        "TableSinkWriteCount",
    ] {
        assert!(v["metrics"].get(k).is_some(), "no metrics.{k} in {v}");
    }
}

/// The ids a run of the same job in BATCH mode writes: what the server's job must write.
fn expected_ids(job: &str, root: &Path) -> Vec<u64> {
    let out = root.join("expected");
    let text = job
        .replace("\"STREAMING\"", "\"BATCH\"")
        .replace(
            &format!("path = \"{}\"", root.join("out").display()),
            &format!("path = \"{}\"", out.display()),
        )
        .replace("split.read-interval = 20", "split.read-interval = 1");
    let file = root.join("expected.conf");
    std::fs::write(&file, text).unwrap();
    let run = ferry().arg("run").arg(&file).output().unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let ids: Vec<u64> = output_ids(&out).into_keys().collect();
    assert!(!ids.is_empty());
    ids
}

#[test]
fn submit_list_details_metrics_resume_after_kill_9_and_stop_with_a_savepoint() {
    let root = tempfile::tempdir().unwrap();
    let ckpt = root.path().join("ckpt");
    let out = root.path().join("out");
    const ROWS: u64 = 250;
    let job = streaming_job(ROWS, 20, &out);
    let server = serve(&ckpt, &[]);
    let addr = server.addr.clone();

    // Submit, as SeaTunnel's clients do: the job file in the body, id and name as parameters.
    let r = post(&addr, "/submit-job?jobId=orders&jobName=orders_job", &job);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.json(),
        json!({"jobId": "orders", "jobName": "orders_job"})
    );
    // The same id again while it runs: refused.
    let again = post(&addr, "/submit-job?jobId=orders", &job);
    assert_eq!(again.status, 409, "{}", again.body);
    assert!(again.json()["message"]
        .as_str()
        .unwrap()
        .contains("already running"));

    // Listed as running, with SeaTunnel's shape.
    let running = get(&addr, "/running-jobs").json();
    let listed = running
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["jobId"] == "orders")
        .unwrap_or_else(|| panic!("orders not in {running}"))
        .clone();
    assert_seatunnel_job_shape(&listed, true);
    assert_eq!(listed["jobName"], "orders_job");
    let overview = get(&addr, "/overview").json();
    assert_eq!(overview["runningJobs"], "1", "{overview}");

    // Details: rows flow, a checkpoint completes; the plan is source -> sink.
    assert!(
        eventually(Duration::from_secs(20), || {
            let v = job_info(&addr, "orders");
            count(&v, "SourceReceivedCount") >= 40
                && v["ferry"]["checkpoints"]["completed"].as_u64() >= Some(1)
        }),
        "no rows or checkpoint: {}",
        job_info(&addr, "orders")
    );
    let info = job_info(&addr, "orders");
    assert_seatunnel_job_shape(&info, true);
    assert_eq!(info["jobStatus"], "RUNNING");
    let dag = &info["jobDag"];
    assert_eq!(
        dag["vertexInfoMap"][0]["vertexName"],
        "Source[0]-FakeSource"
    );
    assert_eq!(dag["vertexInfoMap"][1]["type"], "sink");
    assert_eq!(
        dag["pipelineEdges"]["1"][0],
        json!({"inputVertexId": 1, "targetVertexId": 2})
    );
    assert!(
        info["metrics"]["TableSourceReceivedCount"]["fake"].is_string(),
        "{info}"
    );
    // The source's own figure: rows still to generate, fewer as the stream goes on.
    let lag = |v: &Value| v["ferry"]["plugins"][0]["figures"]["lag_rows"].as_f64();
    assert!(lag(&info).is_some(), "no lag_rows in {info}");
    let mut first = 0.0;
    assert!(
        eventually(Duration::from_secs(10), || {
            first = lag(&job_info(&addr, "orders")).unwrap_or(0.0);
            first > 0.0 && first < ROWS as f64
        }),
        "lag_rows never showed rows left: {}",
        job_info(&addr, "orders")
    );
    assert!(
        eventually(Duration::from_secs(10), || lag(&job_info(&addr, "orders"))
            .is_some_and(|l| l < first)),
        "lag_rows never fell below {first}"
    );

    // Prometheus: SeaTunnel's names, per job and plugin.
    let m = get(&addr, "/metrics");
    assert_eq!(m.status, 200);
    for needle in [
        "# TYPE SourceReceivedCount counter",
        "SourceReceivedCount{job_id=\"orders\",job_name=\"orders_job\",plugin=\"FakeSource\"",
        "SinkWriteCount{job_id=\"orders\"",
        "ferry_checkpoints_total{job_id=\"orders\"",
        "ferry_checkpoint_last_age_seconds{job_id=\"orders\"",
        "job_count{type=\"running\"} 1",
        "ferry_source_figure{job_id=\"orders\",job_name=\"orders_job\",plugin=\"FakeSource\",vertex=\"Source[0]-FakeSource\",table=\"fake\",subtask=\"0\",figure=\"lag_rows\"}",
    ] {
        assert!(m.body.contains(needle), "no {needle} in\n{}", m.body);
    }

    // kill -9 the server in the middle of the stream.
    let before = count(&job_info(&addr, "orders"), "SourceReceivedCount");
    assert!(
        before < ROWS,
        "the stream ended before the kill ({before} rows)"
    );
    let pid = server.child.id().to_string();
    assert!(Command::new("kill")
        .args(["-9", &pid])
        .status()
        .unwrap()
        .success());
    drop(server);

    // Restarted, the server resumes the job from its checkpoint on its own.
    let server = serve(&ckpt, &[]);
    let addr = server.addr.clone();
    assert!(
        eventually(Duration::from_secs(20), || status(&addr, "orders")
            == "RUNNING"),
        "not resumed: {} / {}",
        job_info(&addr, "orders"),
        server.log()
    );
    let resumed = job_info(&addr, "orders");
    assert_eq!(resumed["isStartWithSavePoint"], true, "{resumed}");
    assert!(
        server.log().contains("resumed job 'orders'"),
        "{}",
        server.log()
    );
    // Every row arrives, committed: wait for the stream's end, then stop with a savepoint.
    assert!(
        eventually(Duration::from_secs(60), || output_ids(&out).len() as u64
            >= ROWS),
        "only {} of {ROWS} ids arrived",
        output_ids(&out).len()
    );
    let r = post(
        &addr,
        "/stop-job",
        r#"{"jobId": "orders", "isStopWithSavePoint": true}"#,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json(), json!({"jobId": "orders"}));
    assert!(
        eventually(Duration::from_secs(30), || status(&addr, "orders")
            == "SAVEPOINT_DONE"),
        "{}",
        job_info(&addr, "orders")
    );
    let finished = get(&addr, "/finished-jobs/SAVEPOINT_DONE").json();
    let f = &finished.as_array().unwrap()[0];
    assert_eq!(f["jobId"], "orders");
    assert_seatunnel_job_shape(f, false);
    assert_eq!(get(&addr, "/finished-jobs/FAILED").json(), json!([]));
    // Stopping a stopped job: refused.
    let r = post(&addr, "/stop-job", r#"{"jobId": "orders"}"#);
    assert_eq!(r.status, 409, "{}", r.body);

    // Every row exactly once: the ids a batch run of the same source writes, each once.
    let ids = output_ids(&out);
    let twice: Vec<_> = ids.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "ids written more than once: {twice:?}");
    let expected = expected_ids(&job, root.path());
    assert_eq!(expected.len() as u64, ROWS);
    assert_eq!(ids.into_keys().collect::<Vec<_>>(), expected);

    // A server restarted again leaves the stopped job stopped.
    drop(server);
    let server = serve(&ckpt, &[]);
    std::thread::sleep(Duration::from_millis(500));
    assert!(!server.log().contains("resumed"), "{}", server.log());
    let finished = get(&server.addr, "/finished-jobs").json();
    assert_eq!(finished[0]["jobStatus"], "SAVEPOINT_DONE", "{finished}");
    assert_eq!(finished[0]["ferry"]["runBy"], "ferry serve", "{finished}");
    // And resubmitted with isStartWithSavePoint it goes on from its savepoint.
    let r = post(&server.addr, "/submit-job?jobId=orders", &job);
    assert_eq!(r.status, 409, "{}", r.body);
    assert!(r.body.contains("isStartWithSavePoint"), "{}", r.body);
    let r = post(
        &server.addr,
        "/submit-job?jobId=orders&isStartWithSavePoint=true",
        &job,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let r = post(
        &server.addr,
        "/stop-job",
        r#"{"jobId": "orders", "isStopWithSavePoint": false}"#,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        eventually(Duration::from_secs(20), || status(&server.addr, "orders")
            == "CANCELED"),
        "{}",
        job_info(&server.addr, "orders")
    );
    assert_eq!(output_ids(&out).len() as u64, ROWS);
}

#[test]
fn bad_input_gets_a_4xx_with_a_message_and_the_server_stays_up() {
    let root = tempfile::tempdir().unwrap();
    let server = serve(&root.path().join("ckpt"), &["--max-body-bytes", "65536"]);
    let addr = &server.addr;
    let message =
        |r: &common::http::Reply| r.json()["message"].as_str().unwrap_or_default().to_string();

    let r = post(addr, "/submit-job", "env { job.mode = ");
    assert_eq!(r.status, 400, "{}", r.body);
    assert_eq!(r.json()["status"], "fail");
    assert!(message(&r).contains("syntax error"), "{}", r.body);

    let r = post(
        addr,
        "/submit-job",
        r#"{"env": {"job.mode": "batch"}, "source": [{"plugin_name": "FakeSorce", "schema": {"fields": {"a": "int"}}}], "sink": [{"plugin_name": "Console"}]}"#,
    );
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        message(&r).contains("unknown source plugin 'FakeSorce'"),
        "{}",
        r.body
    );
    assert!(
        message(&r).contains("FakeSource"),
        "a hint names the plugin: {}",
        r.body
    );

    let r = post(addr, "/submit-job", "");
    assert_eq!(r.status, 400, "{}", r.body);
    let r = post(addr, "/submit-job", "include \"/etc/hostname\"\nenv {}");
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(message(&r).contains("include"), "{}", r.body);
    let r = post(addr, "/submit-job?jobId=../escape", "env {}");
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(message(&r).contains("invalid job id"), "{}", r.body);

    let big = "x".repeat(100_000);
    let r = post(addr, "/submit-job", &big);
    assert_eq!(r.status, 413, "{}", r.body);
    assert!(message(&r).contains("at most 65536"), "{}", r.body);

    let r = get(addr, "/job-info/424242");
    assert_eq!(r.status, 404, "{}", r.body);
    assert_eq!(r.json()["jobId"], "424242");
    let r = post(addr, "/stop-job", r#"{"jobId": 424242}"#);
    assert_eq!(r.status, 404, "{}", r.body);
    assert!(message(&r).contains("no job '424242'"), "{}", r.body);
    let r = post(addr, "/stop-job", "{not json");
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(message(&r).contains("Invalid JSON"), "{}", r.body);
    let r = post(addr, "/stop-job", r#"{"isStopWithSavePoint": true}"#);
    assert_eq!(r.status, 400, "{}", r.body);
    let r = get(addr, "/finished-jobs/SOMETIMES");
    assert_eq!(r.status, 400, "{}", r.body);
    let r = get(addr, "/nothing-here");
    assert_eq!(r.status, 404, "{}", r.body);
    let r = request(addr, "GET", "/submit-job", b"", &[]).unwrap();
    assert_eq!(r.status, 405, "{}", r.body);
    let r = request(addr, "BREW", "/", b"", &[]).unwrap();
    assert!((400..500).contains(&r.status), "{}", r.body);

    // A secret of a refused job appears in no answer.
    let secret = "hunter2-very-secret";
    let r = post(
        addr,
        "/submit-job",
        &format!(
            r#"{{"env": {{"job.mode": "batch"}}, "source": [{{"plugin_name": "Jdbc", "url": "jdbc:postgresql://127.0.0.1:1/x", "driver": "org.postgresql.Driver", "user": "u", "password": "{secret}", "query": "select 1", "fetch_size": "lots"}}], "sink": [{{"plugin_name": "Console"}}]}}"#
        ),
    );
    assert!((400..500).contains(&r.status), "{}", r.body);
    assert!(!r.body.contains(secret), "{}", r.body);
    // A job with a secret in `env` runs; the secret shows in no answer, page or metric.
    let r = post(
        addr,
        "/submit-job?jobId=withsecret",
        &format!(
            r#"{{"env": {{"job.mode": "batch", "api.password": "{secret}"}}, "source": [{{"plugin_name": "FakeSource", "plugin_output": "f", "row.num": 5, "schema": {{"fields": {{"a": "int"}}}}}}], "sink": [{{"plugin_name": "Blackhole"}}]}}"#
        ),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        eventually(Duration::from_secs(20), || status(addr, "withsecret")
            == "FINISHED"),
        "{}",
        job_info(addr, "withsecret")
    );
    for path in [
        "/job-info/withsecret",
        "/running-jobs",
        "/finished-jobs",
        "/metrics",
        "/",
    ] {
        let r = get(addr, path);
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        assert!(!r.body.contains(secret), "{path}: {}", r.body);
    }
    assert_eq!(count(&job_info(addr, "withsecret"), "SinkWriteCount"), 5);

    // Still up, still answering.
    assert_eq!(get(addr, "/overview").status, 200);
    assert!(
        server.log().is_empty() || !server.log().contains("panicked"),
        "{}",
        server.log()
    );
}

#[test]
fn sigterm_takes_a_savepoint_of_every_job_and_a_restart_resumes_them() {
    let root = tempfile::tempdir().unwrap();
    let ckpt = root.path().join("ckpt");
    let out = root.path().join("out");
    const ROWS: u64 = 200;
    let job = streaming_job(ROWS, 20, &out);
    let mut server = serve(&ckpt, &[]);
    let r = post(&server.addr, "/submit-job?jobId=term", &job);
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        eventually(Duration::from_secs(20), || count(
            &job_info(&server.addr, "term"),
            "SourceReceivedCount"
        ) >= 20),
        "no rows"
    );
    let pid = server.child.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let status = wait_for(
        &mut server.child,
        Duration::from_secs(30),
        "ferry serve after SIGTERM",
    );
    assert!(status.success(), "{status}: {}", server.log());
    assert!(
        server
            .log()
            .contains("taking a savepoint of every running job"),
        "{}",
        server.log()
    );
    let state = std::fs::read_to_string(ckpt.join("term/state")).unwrap();
    assert!(state.contains("SAVEPOINT"), "{state}");
    let taken = output_ids(&out).len() as u64;
    assert!(taken < ROWS, "the stream ended before SIGTERM");
    drop(server);

    let server = serve(&ckpt, &[]);
    assert!(
        server.log().contains("resumed job 'term'"),
        "{}",
        server.log()
    );
    assert!(
        eventually(Duration::from_secs(60), || output_ids(&out).len() as u64
            >= ROWS),
        "only {} of {ROWS} ids arrived",
        output_ids(&out).len()
    );
    let ids = output_ids(&out);
    assert_eq!(ids.len() as u64, ROWS);
    assert!(ids.values().all(|n| *n == 1), "ids written twice");
}

#[test]
fn a_failing_job_fails_alone_with_its_error() {
    let root = tempfile::tempdir().unwrap();
    let server = serve(&root.path().join("ckpt"), &[]);
    let addr = &server.addr;
    let r = post(
        addr,
        "/submit-job?jobId=steady",
        &streaming_job(3000, 20, &root.path().join("out")),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let failing = r#"
source { FakeSource { plugin_output = "fake", rows = [{ kind = INSERT, fields = [1] }, { kind = INSERT, fields = [12] }], schema = { fields { age = int } } } }
sink { Assert { rules { field_rules = [{ field_name = age, field_type = int, field_value = [{ rule_type = MAX, rule_value = 10 }] }] } } }
"#;
    let r = post(addr, "/submit-job?jobId=broken", failing);
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        eventually(Duration::from_secs(20), || status(addr, "broken")
            == "FAILED"),
        "{}",
        job_info(addr, "broken")
    );
    let info = job_info(addr, "broken");
    assert!(
        info["errorMsg"]
            .as_str()
            .is_some_and(|e| e.contains("rule MAX 10 broken by value 12")),
        "{info}"
    );
    assert_eq!(
        get(addr, "/finished-jobs/FAILED").json()[0]["jobId"],
        "broken"
    );
    // The other job runs on.
    let before = count(&job_info(addr, "steady"), "SourceReceivedCount");
    assert!(
        eventually(Duration::from_secs(10), || count(
            &job_info(addr, "steady"),
            "SourceReceivedCount"
        ) > before),
        "the steady job stopped moving"
    );
    assert_eq!(status(addr, "steady"), "RUNNING");
    assert_eq!(get(addr, "/overview").json()["failedJobs"], "1");
}

#[test]
fn a_non_loopback_address_needs_a_token_and_the_token_is_checked() {
    let root = tempfile::tempdir().unwrap();
    let out = ferry()
        .args(["serve", "--listen", "0.0.0.0:0", "--checkpoint-dir"])
        .arg(root.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("needs --token-file"), "{err}");

    let token_file = root.path().join("token");
    std::fs::write(&token_file, "s3cr3t-token-of-the-test\n").unwrap();
    let server = serve(
        &root.path().join("ckpt"),
        &["--token-file", token_file.to_str().unwrap()],
    );
    let r = get(&server.addr, "/running-jobs");
    assert_eq!(r.status, 401, "{}", r.body);
    let r = request(
        &server.addr,
        "GET",
        "/running-jobs",
        b"",
        &[("Authorization", "Bearer wrong")],
    )
    .unwrap();
    assert_eq!(r.status, 401, "{}", r.body);
    let r = request(
        &server.addr,
        "GET",
        "/running-jobs",
        b"",
        &[("Authorization", "Bearer s3cr3t-token-of-the-test")],
    )
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    // The page itself holds no data and loads without the token (it asks for it).
    assert_eq!(get(&server.addr, "/").status, 200);
}

#[test]
fn ferry_run_jobs_are_listed_read_only_and_run_serves_metrics() {
    let root = tempfile::tempdir().unwrap();
    let ckpt = root.path().join("ckpt");
    let out = root.path().join("out");
    let job = root.path().join("job.conf");
    std::fs::write(&job, streaming_job(3000, 20, &out)).unwrap();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let metrics_addr = format!("127.0.0.1:{port}");
    let mut run = ferry()
        .arg("run")
        .arg(&job)
        .args([
            "--job-id",
            "byrun",
            "--metrics-listen",
            &metrics_addr,
            "--checkpoint-dir",
        ])
        .arg(&ckpt)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(
        eventually(Duration::from_secs(20), || {
            request(&metrics_addr, "GET", "/metrics", b"", &[]).is_ok_and(|r| {
                r.body.contains("SourceReceivedCount{job_id=\"byrun\"")
                    && r.body.contains("ferry_checkpoints_total{job_id=\"byrun\"")
            })
        }),
        "ferry run --metrics-listen never served the job's metrics"
    );
    let server = serve(&ckpt, &[]);
    let running = get(&server.addr, "/running-jobs").json();
    let j = running
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["jobId"] == "byrun")
        .unwrap_or_else(|| panic!("byrun not in {running}"));
    assert_eq!(j["jobStatus"], "RUNNING");
    assert_eq!(j["ferry"]["readOnly"], true);
    let r = post(&server.addr, "/stop-job", r#"{"jobId": "byrun"}"#);
    assert_eq!(r.status, 409, "{}", r.body);
    assert!(r.body.contains("ferry savepoint byrun"), "{}", r.body);
    common::request_savepoint("byrun", &ckpt);
    let status = wait_for(&mut run, Duration::from_secs(30), "ferry run");
    assert!(status.success());
    assert!(
        eventually(Duration::from_secs(5), || {
            get(&server.addr, "/finished-jobs/SAVEPOINT_DONE")
                .body
                .contains("\"byrun\"")
        }),
        "{}",
        get(&server.addr, "/finished-jobs").body
    );
}

#[test]
fn twenty_concurrent_jobs_complete_with_correct_counts() {
    let root = tempfile::tempdir().unwrap();
    let server = serve(&root.path().join("ckpt"), &[]);
    let addr = server.addr.clone();
    const JOBS: usize = 20;
    const ROWS: u64 = 2000;
    let submitters: Vec<_> = (0..JOBS)
        .map(|i| {
            let addr = addr.clone();
            let out = root.path().join(format!("out{i}"));
            std::thread::spawn(move || {
                let job = format!(
                    r#"env {{ job.mode = "BATCH" }}
source {{ FakeSource {{ plugin_output = "f", row.num = {ROWS}, split.num = 4, schema = {{ fields {{ id = bigint, name = string }} }} }} }}
sink {{ LocalFile {{ path = "{}", file_format_type = "csv", is_enable_transaction = true }} }}"#,
                    out.display()
                );
                let r = post(&addr, &format!("/submit-job?jobId=load{i}"), &job);
                assert_eq!(r.status, 200, "job {i}: {}", r.body);
                out
            })
        })
        .collect();
    let outs: Vec<PathBuf> = submitters.into_iter().map(|t| t.join().unwrap()).collect();
    assert!(
        eventually(Duration::from_secs(120), || {
            get(&addr, "/finished-jobs/FINISHED")
                .json()
                .as_array()
                .map(Vec::len)
                == Some(JOBS)
        }),
        "not all finished: {}",
        get(&addr, "/overview").body
    );
    for (i, out) in outs.iter().enumerate() {
        let v = job_info(&addr, &format!("load{i}"));
        assert_eq!(count(&v, "SourceReceivedCount"), ROWS, "{v}");
        assert_eq!(count(&v, "SinkWriteCount"), ROWS, "{v}");
        let ids = output_ids(out);
        assert_eq!(ids.values().sum::<usize>() as u64, ROWS, "job {i}");
    }
    let overview = get(&addr, "/overview").json();
    assert_eq!(overview["finishedJobs"], JOBS.to_string(), "{overview}");
    assert_eq!(overview["runningJobs"], "0", "{overview}");
}

// ---- the page, in headless Chromium through chromedriver ----

/// chromedriver on a free port; killed when dropped.
struct Driver {
    child: Child,
    addr: String,
    session: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = request(
            &self.addr,
            "DELETE",
            &format!("/session/{}", self.session),
            b"",
            &[],
        );
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn which(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path).chain([PathBuf::from("/usr/lib/chromium")]) {
        for n in names {
            let p = dir.join(n);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

impl Driver {
    fn start() -> Driver {
        let driver = which(&["chromedriver"]).expect(
            "chromedriver is not installed: run scripts/setup-browser (Debian's chromium and chromium-driver)",
        );
        let browser = which(&["chromium", "chromium-browser", "google-chrome"])
            .expect("chromium is not installed: run scripts/setup-browser");
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let child = Command::new(driver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let addr = format!("127.0.0.1:{port}");
        assert!(
            eventually(Duration::from_secs(20), || request(
                &addr,
                "GET",
                "/status",
                b"",
                &[]
            )
            .is_ok()),
            "chromedriver does not answer"
        );
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": browser,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1000,1200"]
            }
        }}});
        let r = request(&addr, "POST", "/session", caps.to_string().as_bytes(), &[]).unwrap();
        assert_eq!(r.status, 200, "new session: {}", r.body);
        let session = r.json()["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session id: {}", r.body))
            .to_string();
        Driver {
            child,
            addr,
            session,
        }
    }

    fn call(&self, method: &str, path: &str, body: Value) -> Value {
        let body = if method == "GET" {
            String::new()
        } else {
            body.to_string()
        };
        let r = request(
            &self.addr,
            method,
            &format!("/session/{}{path}", self.session),
            body.as_bytes(),
            &[],
        )
        .unwrap();
        assert_eq!(r.status, 200, "{method} {path}: {}", r.body);
        r.json()["value"].clone()
    }

    fn element(&self, css: &str) -> String {
        let v = self.call(
            "POST",
            "/element",
            json!({"using": "css selector", "value": css}),
        );
        v.as_object()
            .and_then(|o| o.values().next())
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("no element {css}: {v}"))
            .to_string()
    }

    fn text(&self, css: &str) -> String {
        let e = self.element(css);
        self.call("GET", &format!("/element/{e}/text"), Value::Null)
            .as_str()
            .unwrap_or_default()
            .to_string()
    }
}

fn base64_decode(s: &str) -> Vec<u8> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0);
    for v in s.bytes().filter_map(val) {
        acc = (acc << 6) | v as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}

#[test]
fn the_page_shows_a_running_jobs_rate_and_its_savepoint_button_stops_it() {
    let root = tempfile::tempdir().unwrap();
    let server = serve(&root.path().join("ckpt"), &[]);
    let addr = server.addr.clone();
    let job = streaming_job(3000, 10, &root.path().join("out"));
    let r = post(&addr, "/submit-job?jobId=watched", &job);
    assert_eq!(r.status, 200, "{}", r.body);

    let driver = Driver::start();
    driver.call(
        "POST",
        "/url",
        json!({"url": format!("http://{addr}/?job=watched")}),
    );
    assert!(
        eventually(Duration::from_secs(20), || driver.text("#status")
            == "RUNNING"),
        "the page never showed the job running"
    );
    // The rate moves: several different values, not all zero.
    let mut seen = std::collections::BTreeSet::new();
    assert!(
        eventually(Duration::from_secs(30), || {
            let rate = driver.text("#rate");
            if rate.parse::<f64>().is_ok_and(|r| r > 0.0) {
                seen.insert(rate);
            }
            seen.len() >= 2
        }),
        "the rate never changed: {seen:?}"
    );
    let jobs_table = driver.text("#jobs");
    assert!(jobs_table.contains("watched"), "{jobs_table}");
    let plan = driver.text("#plan");
    assert!(
        plan.contains("Source[0]-FakeSource") && plan.contains("Sink[0]-LocalFile"),
        "{plan}"
    );

    let button = driver.element("#savepoint");
    driver.call("POST", &format!("/element/{button}/click"), json!({}));
    assert!(
        eventually(Duration::from_secs(30), || driver.text("#status")
            == "SAVEPOINT_DONE"),
        "the page never showed the savepoint done (status {})",
        driver.text("#status")
    );
    assert_eq!(status(&addr, "watched"), "SAVEPOINT_DONE");
    let ck = driver.text("#ck-summary");
    assert!(!ck.starts_with("0 completed"), "{ck}");

    let png = driver.call("GET", "/screenshot", Value::Null);
    let png = base64_decode(png.as_str().unwrap_or_default());
    assert!(png.starts_with(b"\x89PNG"), "not a PNG screenshot");
    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("serve-page.png");
    std::fs::write(&shot, png).unwrap();
    eprintln!("screenshot: {}", shot.display());
}
