//! Helpers shared by the end-to-end tests.
#![allow(dead_code)]

pub mod chaos;
pub mod http;
pub mod kafka_log;

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

use std::path::Path;
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

/// Rewrites the absolute paths of SeaTunnel's test containers into `root`, as the
/// conformance pack's README says.
pub fn rewrite_paths(text: &str, root: &Path) -> String {
    let r = root.display();
    text.replace("/seatunnel/read/", &format!("{r}/seatunnel/read/"))
        .replace("/tmp/seatunnel/", &format!("{r}/tmp/seatunnel/"))
        .replace("/tmp/hive/", &format!("{r}/tmp/hive/"))
        .replace("/tmp/fake_empty", &format!("{r}/tmp/fake_empty"))
}

/// Waits for `child` at most `limit`; kills it (and fails) when it takes longer, so
/// that no test hangs.
pub fn wait_for(child: &mut Child, limit: Duration, what: &str) -> ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait on child") {
            return status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Polls `cond` every 100 ms until it holds or `limit` passes; returns whether it held.
pub fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    cond()
}

/// Lines in the visible files under `dir` (names starting with `.` or `_` are staging).
pub fn visible_lines(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if name.starts_with('.') || name.starts_with('_') {
            continue;
        }
        let p = e.path();
        if p.is_dir() {
            out.extend(visible_lines(&p));
        } else if let Ok(text) = std::fs::read_to_string(&p) {
            out.extend(text.lines().filter(|l| !l.is_empty()).map(str::to_string));
        }
    }
    out
}

/// Ferry's own conformance cases, written from SeaTunnel's documentation for what the
/// pack does not cover: `tests/cases`, laid out as the pack is (see its README.md).
pub fn own_cases_dir() -> PathBuf {
    repo_root().join("tests/cases")
}

/// One line of a `cases.tsv` (the conformance pack's, or Ferry's own).
pub struct Case {
    /// The directory holding `cases.tsv`, `cases/` and `data/`.
    pub dir: PathBuf,
    /// Config path under `cases/`.
    pub path: String,
    /// `batch` or `savepoint-restore`.
    pub mode: String,
    /// Data files to copy: (file under `data/`, absolute target).
    pub setup: Vec<(String, String)>,
    /// User variables.
    pub vars: Vec<(String, String)>,
}

/// Every case of the conformance pack (`cases.tsv`).
pub fn cases() -> Vec<Case> {
    cases_in(&conformance_dir())
}

/// Every case of Ferry's own conformance cases (`tests/cases/cases.tsv`).
pub fn own_cases() -> Vec<Case> {
    cases_in(&own_cases_dir())
}

/// Every case listed in `dir/cases.tsv`.
pub fn cases_in(dir: &Path) -> Vec<Case> {
    let tsv = std::fs::read_to_string(dir.join("cases.tsv")).expect("cases.tsv is readable");
    tsv.lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let cols: Vec<&str> = l.split('\t').collect();
            let pairs = |i: usize, sep: &str| -> Vec<(String, String)> {
                cols.get(i)
                    .map(|c| {
                        c.split(';')
                            .filter(|p| !p.is_empty())
                            .filter_map(|p| {
                                p.split_once(sep)
                                    .map(|(a, b)| (a.to_string(), b.to_string()))
                            })
                            .collect()
                    })
                    .unwrap_or_default()
            };
            Case {
                dir: dir.to_path_buf(),
                path: cols[0].to_string(),
                mode: cols.get(1).unwrap_or(&"batch").to_string(),
                setup: pairs(2, "=>"),
                vars: pairs(3, "="),
            }
        })
        .collect()
}

/// Evaluates `$(...)` in a variable value as a shell would.
pub fn shell_eval(value: &str) -> String {
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
/// A setup pair with no data file (`=>/tmp/fake_empty`) makes an empty directory.
pub fn prepare(c: &Case, root: &Path) -> (PathBuf, Vec<String>) {
    let dir = &c.dir;
    let text =
        std::fs::read_to_string(dir.join("cases").join(&c.path)).expect("case file is readable");
    for (data, target) in &c.setup {
        let target = PathBuf::from(rewrite_paths(target, root));
        if data.is_empty() {
            std::fs::create_dir_all(&target).expect("create empty dir");
            continue;
        }
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

/// Starts `ferry run JOB --job-id ID --checkpoint-dir DIR` with `extra` arguments (e.g.
/// `--engine spark`), stderr captured.
pub fn start_job(job: &Path, job_id: &str, ckpt: &Path, extra: &[&str]) -> Child {
    ferry()
        .arg("run")
        .arg(job)
        .args(extra)
        .args(["--job-id", job_id, "--checkpoint-dir"])
        .arg(ckpt)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("ferry starts")
}

/// Waits up to `limit` until `ferry jobs` lists `job_id` as RUNNING (a process holds its
/// lock) on a line that also contains `engine` (a killed run's state file still says
/// running, but nobody holds the lock: `ferry jobs` shows it as CRASHED).
pub fn wait_running(job_id: &str, ckpt: &Path, engine: &str, limit: Duration) {
    let running = eventually(limit, || {
        let out = ferry()
            .args(["jobs", "--checkpoint-dir"])
            .arg(ckpt)
            .output()
            .expect("ferry jobs runs");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .any(|l| l.starts_with(job_id) && l.contains("RUNNING") && l.contains(engine))
    });
    assert!(running, "job {job_id} never showed as running ({engine})");
}

/// The line of `job_id` in `ferry jobs --checkpoint-dir DIR`.
pub fn jobs_line(job_id: &str, ckpt: &Path) -> String {
    let out = ferry()
        .args(["jobs", "--checkpoint-dir"])
        .arg(ckpt)
        .output()
        .expect("ferry jobs runs");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    text.lines()
        .find(|l| l.split_whitespace().next() == Some(job_id))
        .unwrap_or_else(|| panic!("no line for {job_id} in:\n{text}"))
        .to_string()
}

/// `ferry savepoint ID --checkpoint-dir DIR`, which must succeed.
pub fn request_savepoint(job_id: &str, ckpt: &Path) {
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

/// Waits for `child` to exit and returns what it wrote to stderr.
pub fn stderr_of(child: Child) -> String {
    let out = child.wait_with_output().expect("collect output");
    String::from_utf8_lossy(&out.stderr).to_string()
}

/// A small deterministic generator (xorshift64*), so that every run of a crash test kills
/// at the same moments.
pub struct Rng(pub u64);

impl Rng {
    /// The next number.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `lo..hi`.
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo)
    }
}

/// The ids (first CSV field) of every visible output line under `dir`, with how often each
/// appears: the crash tests' measure of "every id exactly once".
pub fn output_ids(dir: &Path) -> std::collections::BTreeMap<u64, usize> {
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

/// Runs `sql` with `psql` on the local PostgreSQL's database `db` (stopping at the first
/// error, which fails the test) and returns its unaligned, tuples-only output.
pub fn psql(db: &str, sql: &str) -> String {
    let out = Command::new("psql")
        .args(["-h", "127.0.0.1", "-U", "postgres", "-d", db, "-XAtq"])
        .args(["-v", "ON_ERROR_STOP=1", "-c", sql])
        .output()
        .expect("psql runs");
    assert!(
        out.status.success(),
        "psql: {}\n{sql}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Creates Kafka topic `name` with `partitions` on the broker at `servers`.
pub fn create_kafka_topic(servers: &str, name: &str, partitions: i32) {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    let admin: AdminClient<rdkafka::client::DefaultClientContext> = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", servers)
        .create()
        .expect("a Kafka admin client");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let new = NewTopic::new(name, partitions, TopicReplication::Fixed(1));
    for r in rt
        .block_on(admin.create_topics([&new], &AdminOptions::new()))
        .expect("topics created")
    {
        r.expect("the topic created");
    }
}

/// A workload on a thread of its own: `round(n, rng)` for n = 0, 1, … one after another,
/// `pause` between rounds, until [`Workload::stop`]. The chaos tests' writers.
pub struct Workload {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<u64>,
}

impl Workload {
    /// Starts rounds with an [`Rng`] seeded with `seed`.
    pub fn start(
        seed: u64,
        pause: Duration,
        mut round: impl FnMut(u64, &mut Rng) + Send + 'static,
    ) -> Workload {
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut rng = Rng(seed);
            let mut n = 0;
            while !flag.load(Ordering::SeqCst) {
                round(n, &mut rng);
                n += 1;
                std::thread::sleep(pause);
            }
            n
        });
        Workload { stop, thread }
    }

    /// Stops after the round under way; returns how many rounds ran.
    pub fn stop(self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        self.thread.join().expect("the workload thread")
    }
}

/// Starts `ferry run JOB --engine ENGINE --job-id ID --checkpoint-dir CKPT` in a process
/// group of its own, so that [`kill_group`] kills the driver, its JVM and its Python workers
/// together (on Spark), or the embedded engine's one process.
pub fn start_group(
    job: &std::path::Path,
    engine: &str,
    job_id: &str,
    ckpt: &std::path::Path,
) -> Child {
    use std::os::unix::process::CommandExt;
    ferry()
        .arg("run")
        .arg(job)
        .args(["--engine", engine, "--job-id", job_id, "--checkpoint-dir"])
        .arg(ckpt)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("ferry starts")
}

/// SIGKILL to the whole process group of `child` (see [`start_group`]), then waits for it.
pub fn kill_group(child: &mut Child) {
    // The group may have ended by itself meanwhile: then there is nothing to kill.
    let _ = Command::new("kill")
        .args(["-KILL", "--"])
        .arg(format!("-{}", child.id()))
        .status();
    let _ = wait_for(child, Duration::from_secs(30), "the killed job");
}

/// Whether the latest micro-batch the Spark engine logged in the offsets directory `offsets`
/// (the one a restart replays) starts before a CDC source's snapshot has ended.
pub fn spark_batch_in_snapshot(offsets: &std::path::Path) -> bool {
    let last = std::fs::read_dir(offsets)
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<u64>().ok())
                .max()
        })
        .ok()
        .flatten();
    last.and_then(|n| std::fs::read_to_string(offsets.join(n.to_string())).ok())
        // Python's json.dumps wrote it, with spaces.
        .map(|t| t.replace(' ', ""))
        .is_some_and(|t| {
            t.contains("\"chunk\":{")
                || t.contains("\"snapshotted\":[]")
                || t.contains("\"state\":null")
        })
}

/// The engine an end-to-end test runs a job on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// The embedded engine (`ferry run`'s default).
    Local,
    /// `--engine spark`, with the virtual environment `scripts/setup-spark` makes.
    Spark,
}

impl Engine {
    /// The arguments of `ferry run` that pick the engine.
    pub fn args(self) -> &'static [&'static str] {
        match self {
            Engine::Local => &[],
            Engine::Spark => &["--engine", "spark"],
        }
    }

    /// How long a run may take to reach a state a test waits for: upper bounds, not
    /// delays. A Spark session alone took 60 s to start on a loaded 2-core machine.
    pub fn patience(self) -> Duration {
        match self {
            Engine::Local => Duration::from_secs(60),
            Engine::Spark => Duration::from_secs(240),
        }
    }

    /// Fails with what to run when the Spark engine's environment is missing.
    pub fn check_installed(self) {
        if self == Engine::Spark {
            let venv = PathBuf::from(std::env::var_os("HOME").expect("HOME is set"))
                .join(".cache/ferry/spark-venv/bin/python");
            assert!(
                std::env::var_os("FERRY_SPARK_PYTHON").is_some() || venv.exists(),
                "{} is missing: run scripts/setup-spark first",
                venv.display()
            );
        }
    }

    /// Whether a restored run resumed its checkpoint: the embedded engine says so on
    /// stderr; a Spark run goes on with its query's commit log, whose last micro-batch is
    /// then later than `before` ([`spark_last_commit`] after the first run). (Not the
    /// offset log: a run stopped with a savepoint may leave a micro-batch planned there
    /// that the next run runs again first, and that may be all it runs.)
    pub fn resumed(self, stderr: &str, ckpt: &Path, job_id: &str, before: Option<u64>) -> bool {
        match self {
            Engine::Local => stderr.contains("resuming"),
            Engine::Spark => before.is_some() && spark_last_commit(ckpt, job_id) > before,
        }
    }
}

/// The last micro-batch Spark committed for `job_id` in `ckpt` (its query's `commits`
/// log holds a file named by each batch id).
pub fn spark_last_commit(ckpt: &Path, job_id: &str) -> Option<u64> {
    std::fs::read_dir(ckpt.join(job_id).join("query-0/commits"))
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u64>().ok())
        .max()
}

/// Micro-batches Spark logged for `job_id` in `ckpt` (it writes `N` and `.N.crc` in the
/// query's offset log).
pub fn spark_batches(ckpt: &Path, job_id: &str) -> usize {
    std::fs::read_dir(ckpt.join(job_id).join("query-0/offsets"))
        .map(|rd| {
            rd.flatten()
                .filter(|e| {
                    e.file_name()
                        .to_str()
                        .is_some_and(|n| n.parse::<u64>().is_ok())
                })
                .count()
        })
        .unwrap_or(0)
}
