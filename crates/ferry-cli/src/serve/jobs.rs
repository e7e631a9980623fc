//! The jobs of a server: submitting one (validated by the planner before it runs), its
//! life on its own threads through [`crate::runner::execute`] (so the same job
//! directory, checkpoints, savepoints and resume as `ferry run`), stop requests, and the
//! record of each submitted job in `<checkpoint-dir>/.serve/` from which a restarted
//! server resumes the jobs that were running.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Instant;

use ferry_api::options::is_secret_key;
use ferry_api::FerryError;
use ferry_engine::{Metrics, RunOutcome, StopHandle};
use ferry_plan::{build_plan, JobPlan, PlanOptions};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::runner::{self, JobDir, Signals};

/// A job's status, spelled as SeaTunnel's `JobStatus`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Planned, starting.
    Initializing,
    /// Running.
    Running,
    /// A savepoint was asked for and is being taken.
    DoingSavepoint,
    /// A cancel was asked for.
    Canceling,
    /// Every source ended and everything was committed.
    Finished,
    /// Stopped with a savepoint.
    SavepointDone,
    /// Cancelled.
    Canceled,
    /// Failed.
    Failed,
    /// Not known (a `ferry run` job whose process died).
    Unknowable,
}

impl Status {
    /// SeaTunnel's spelling.
    pub fn name(self) -> &'static str {
        match self {
            Status::Initializing => "INITIALIZING",
            Status::Running => "RUNNING",
            Status::DoingSavepoint => "DOING_SAVEPOINT",
            Status::Canceling => "CANCELING",
            Status::Finished => "FINISHED",
            Status::SavepointDone => "SAVEPOINT_DONE",
            Status::Canceled => "CANCELED",
            Status::Failed => "FAILED",
            Status::Unknowable => "UNKNOWABLE",
        }
    }
    /// Whether the job has ended.
    pub fn ended(self) -> bool {
        matches!(
            self,
            Status::Finished
                | Status::SavepointDone
                | Status::Canceled
                | Status::Failed
                | Status::Unknowable
        )
    }
}

/// What the server keeps of a submitted job on disk, to resume it after a restart.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    /// The job id.
    pub job_id: String,
    /// The job name given at submission, if any.
    #[serde(default)]
    pub job_name: Option<String>,
    /// The job file's text as submitted.
    pub config: String,
    /// Milliseconds since the epoch of the first submission.
    pub create_ms: u64,
    /// `isStartWithSavePoint` of the first submission.
    #[serde(default)]
    pub start_with_savepoint: bool,
    /// The job was stopped through the API (or ended): a restart leaves it stopped.
    #[serde(default)]
    pub stopped: bool,
}

/// One plugin of a job, as its counters are keyed.
#[derive(Debug, Clone)]
pub struct Vertex {
    /// 1-based, in job-file order: sources, transforms, sinks.
    pub id: usize,
    /// `source`, `transform` or `sink`.
    pub kind: &'static str,
    /// `Source[0]-FakeSource`, as SeaTunnel names vertices.
    pub name: String,
    /// The plugin.
    pub plugin: String,
    /// The key of its counters: a source's stream, a sink's label (none for transforms).
    pub key: String,
    /// Its tables.
    pub tables: Vec<String>,
    /// The streams it reads (transforms and sinks) or emits (sources and transforms).
    pub inputs: Vec<String>,
    /// The stream it emits.
    pub output: String,
    /// Its parallelism.
    pub parallelism: usize,
}

/// What a job changes as it runs.
#[derive(Debug, Clone)]
pub struct Life {
    /// Its status.
    pub status: Status,
    /// When it ended, in milliseconds since the epoch.
    pub finished_ms: Option<u64>,
    /// Why it failed (secrets redacted).
    pub error: Option<String>,
}

/// A rate sample: when, and the row and byte counts then.
#[derive(Debug, Clone, Default)]
pub struct Sample {
    /// When.
    pub at: Option<Instant>,
    /// Rows and bytes by source stream.
    pub read: BTreeMap<String, (u64, u64)>,
    /// Rows and bytes by sink.
    pub written: BTreeMap<String, (u64, u64)>,
}

/// Rates per second, by source stream and by sink, from the last two samples.
#[derive(Debug, Clone, Default)]
pub struct Rates {
    /// Rows/s and bytes/s by source stream.
    pub read: BTreeMap<String, (f64, f64)>,
    /// Rows/s and bytes/s by sink.
    pub written: BTreeMap<String, (f64, f64)>,
    last: Sample,
}

impl Rates {
    /// Takes a sample of `m` and updates the rates from the previous one.
    pub fn sample(&mut self, m: &Metrics) {
        let now = Instant::now();
        let read: BTreeMap<String, (u64, u64)> = m
            .read_flows()
            .into_iter()
            .map(|(k, f)| (k, (f.rows, f.bytes)))
            .collect();
        let written: BTreeMap<String, (u64, u64)> = m
            .written_flows()
            .into_iter()
            .map(|(k, f)| (k, (f.rows, f.bytes)))
            .collect();
        if let Some(then) = self.last.at {
            let secs = now.duration_since(then).as_secs_f64().max(1e-3);
            let rate = |new: &BTreeMap<String, (u64, u64)>, old: &BTreeMap<String, (u64, u64)>| {
                new.iter()
                    .map(|(k, (r, b))| {
                        let (r0, b0) = old.get(k).copied().unwrap_or((0, 0));
                        (
                            k.clone(),
                            (
                                r.saturating_sub(r0) as f64 / secs,
                                b.saturating_sub(b0) as f64 / secs,
                            ),
                        )
                    })
                    .collect()
            };
            self.read = rate(&read, &self.last.read);
            self.written = rate(&written, &self.last.written);
        }
        self.last = Sample {
            at: Some(now),
            read,
            written,
        };
    }
}

/// A job of this server.
pub struct Job {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// When it was first submitted (ms since the epoch).
    pub create_ms: u64,
    /// `isStartWithSavePoint` of this start.
    pub start_with_savepoint: bool,
    /// Its plugins.
    pub vertices: Vec<Vertex>,
    /// `env` options, secrets redacted.
    pub env: Map<String, Value>,
    /// `BATCH` or `STREAMING`.
    pub mode: &'static str,
    /// The counters the engine bumps.
    pub metrics: Arc<Metrics>,
    /// Rates, updated by the server's sampler.
    pub rates: Mutex<Rates>,
    /// Its status.
    pub life: Mutex<Life>,
    stop: StopHandle,
}

impl Job {
    /// Its life now.
    pub fn life(&self) -> Life {
        self.life.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
    fn set(&self, f: impl FnOnce(&mut Life)) {
        f(&mut self.life.lock().unwrap_or_else(|p| p.into_inner()));
    }
}

/// Why a request about jobs was refused, and with which HTTP status.
#[derive(Debug)]
pub struct Refusal {
    /// 400, 404, 409…
    pub status: u16,
    /// What is wrong.
    pub message: String,
}

impl Refusal {
    fn new(status: u16, message: impl Into<String>) -> Refusal {
        Refusal {
            status,
            message: message.into(),
        }
    }
}

/// A submission.
#[derive(Debug, Clone)]
pub struct Submission {
    /// The job file's text (HOCON or JSON).
    pub config: String,
    /// The job id asked for.
    pub job_id: Option<String>,
    /// The job name asked for.
    pub job_name: Option<String>,
    /// Resume from the job's savepoint (its latest checkpoint).
    pub start_with_savepoint: bool,
}

/// The jobs of one server.
pub struct Jobs {
    dir: PathBuf,
    jobs: Mutex<BTreeMap<String, Arc<Job>>>,
    /// Ids being submitted, so that two submissions of one id do not race.
    pending: Mutex<Vec<String>>,
}

/// Milliseconds since the epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl Jobs {
    /// The jobs of checkpoint directory `dir` (none yet).
    pub fn new(dir: PathBuf) -> Jobs {
        Jobs {
            dir,
            jobs: Mutex::new(BTreeMap::new()),
            pending: Mutex::new(Vec::new()),
        }
    }

    /// The checkpoint directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Every job of this server.
    pub fn all(&self) -> Vec<Arc<Job>> {
        self.jobs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// One job of this server.
    pub fn get(&self, id: &str) -> Option<Arc<Job>> {
        self.jobs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .cloned()
    }

    fn records_dir(&self) -> PathBuf {
        self.dir.join(".serve")
    }

    fn record_path(&self, id: &str) -> PathBuf {
        self.records_dir().join(format!("{id}.json"))
    }

    /// Whether a server on this checkpoint directory submitted job `id` (it has a record).
    pub fn submitted_earlier(&self, id: &str) -> bool {
        self.record_path(id).is_file()
    }

    fn read_record(&self, id: &str) -> Option<Record> {
        ferry_checkpoint::read_checked(&self.record_path(id)).ok()
    }

    fn write_record(&self, r: &Record) -> Result<(), FerryError> {
        let dir = self.records_dir();
        std::fs::create_dir_all(&dir).map_err(|e| {
            FerryError::external("server", format!("cannot create {}: {e}", dir.display()))
        })?;
        let body = serde_json::to_vec_pretty(r)
            .map_err(|e| FerryError::internal(format!("cannot encode a job record: {e}")))?;
        ferry_checkpoint::write_atomic(&self.record_path(&r.job_id), &body)?;
        // The record holds the job file, secrets included: for the owner only.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(
                self.record_path(&r.job_id),
                std::fs::Permissions::from_mode(0o600),
            );
        }
        Ok(())
    }

    fn mark_stopped(&self, id: &str) {
        if let Some(mut r) = self.read_record(id) {
            if !r.stopped {
                r.stopped = true;
                let _ = self.write_record(&r);
            }
        }
    }

    /// The records of jobs a previous server was running when it ended (not stopped
    /// through the API and not ended on their own).
    pub fn to_resume(&self) -> Vec<Record> {
        let mut out = Vec::new();
        let Ok(rd) = std::fs::read_dir(self.records_dir()) else {
            return out;
        };
        for e in rd.flatten() {
            if e.path().extension().is_none_or(|x| x != "json") {
                continue;
            }
            let Ok(r) = ferry_checkpoint::read_checked::<Record>(&e.path()) else {
                eprintln!(
                    "ferry serve: ignoring unreadable job record {}",
                    e.path().display()
                );
                continue;
            };
            if !r.stopped {
                out.push(r);
            }
        }
        out.sort_by_key(|r| r.create_ms);
        out
    }

    /// Submits a job: reads and plans it (refusing what the planner refuses), locks its
    /// job directory and starts it on its own thread. Returns the job once it runs.
    pub fn submit(
        self: &Arc<Self>,
        s: Submission,
        resumed: Option<Record>,
    ) -> Result<Arc<Job>, Refusal> {
        if has_include(&s.config) {
            return Err(Refusal::new(
                400,
                "submitted job files may not `include` other files (they would be read from the server's disk)",
            ));
        }
        let id = match &s.job_id {
            Some(id) => {
                ferry_checkpoint::job_dir(&self.dir, id)
                    .map_err(|e| Refusal::new(400, e.to_string()))?;
                id.clone()
            }
            None => new_job_id(),
        };
        {
            let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            let running = self.get(&id).is_some_and(|j| !j.life().status.ended());
            if running || pending.contains(&id) {
                return Err(Refusal::new(
                    409,
                    format!("job '{id}' is already running on this server"),
                ));
            }
            pending.push(id.clone());
        }
        let result = self.start(&id, s, resumed);
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|p| p != &id);
        result
    }

    fn start(
        self: &Arc<Self>,
        id: &str,
        s: Submission,
        resumed: Option<Record>,
    ) -> Result<Arc<Job>, Refusal> {
        // The plan is built on the job's own thread (plugins stay on it); the thread says
        // how planning went and then runs the job.
        let (tx, rx) = mpsc::channel::<Result<Arc<Job>, Refusal>>();
        let jobs = self.clone();
        let id2 = id.to_string();
        let sub = s.clone();
        let create_ms = resumed.as_ref().map_or_else(now_ms, |r| r.create_ms);
        let resuming = resumed.is_some();
        let spawned = std::thread::Builder::new()
            .name(format!("job-{id}"))
            .spawn(move || {
                let redact2 = {
                    let secrets = secret_values(&sub.config);
                    move |m: String| redact(m, &secrets)
                };
                let prepared = jobs.prepare(&id2, &sub, create_ms, resuming, &redact2);
                let (job, plan, dir) = match prepared {
                    Ok(p) => p,
                    Err(r) => {
                        let _ = tx.send(Err(r));
                        return;
                    }
                };
                let _ = tx.send(Ok(job.clone()));
                job.set(|l| l.status = Status::Running);
                let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    runner::execute(
                        &plan,
                        Some(dir),
                        job.stop.clone(),
                        job.metrics.clone(),
                        Signals::Ignore,
                    )
                }));
                // An ended job moves no rows: its rates are zero.
                *job.rates.lock().unwrap_or_else(|p| p.into_inner()) = Rates::default();
                let (status, error) = match outcome {
                    Ok(Ok(RunOutcome::Finished)) => (Status::Finished, None),
                    Ok(Ok(RunOutcome::Savepoint)) => (Status::SavepointDone, None),
                    Ok(Err(FerryError::Cancelled)) => (Status::Canceled, None),
                    Ok(Err(e)) => (Status::Failed, Some(redact2(e.to_string()))),
                    Err(_) => (
                        Status::Failed,
                        Some("the job panicked (a bug: please report it)".to_string()),
                    ),
                };
                if let Some(e) = &error {
                    eprintln!("ferry serve: job '{}' failed: {e}", job.id);
                }
                // A job that ended on its own, or was stopped through the API, stays
                // ended when the server restarts; one stopped by the server's own
                // shutdown (a savepoint) resumes.
                if status != Status::SavepointDone || !SHUTTING_DOWN.load(Ordering::SeqCst) {
                    jobs.mark_stopped(&job.id);
                }
                job.set(|l| {
                    l.status = status;
                    l.error = error;
                    l.finished_ms = Some(now_ms());
                });
            });
        if let Err(e) = spawned {
            return Err(Refusal::new(
                503,
                format!("cannot start a thread for job '{id}': {e}"),
            ));
        }
        match rx.recv() {
            Ok(r) => r,
            Err(_) => Err(Refusal::new(
                500,
                format!("job '{id}' stopped while it was being planned"),
            )),
        }
    }

    /// Plans the job, opens its directory and registers it.
    fn prepare(
        &self,
        id: &str,
        s: &Submission,
        create_ms: u64,
        resuming: bool,
        redact: &dyn Fn(String) -> String,
    ) -> Result<(Arc<Job>, JobPlan, JobDir), Refusal> {
        let bad = |e: FerryError| {
            let status = if e.is_user_error() { 400 } else { 409 };
            Refusal::new(status, redact(e.to_string()))
        };
        let mut file =
            ferry_config::parse_job(&s.config, "<submitted job>", &HashMap::new()).map_err(bad)?;
        if let Some(name) = &s.job_name {
            file.env.job_name = Some(name.clone());
        }
        let env = redacted_env(&file.env_options);
        let plan = build_plan(
            file,
            &crate::registry::builtin(),
            &PlanOptions {
                parallelism: None,
                job_id: Some(id.to_string()),
            },
        )
        .map_err(bad)?;
        let root = ferry_checkpoint::job_dir(&self.dir, id).map_err(bad)?;
        if let Ok(ferry_checkpoint::LockStatus::Held(h)) = ferry_checkpoint::lock_status(&root) {
            let who = h
                .map(|h| h.describe())
                .unwrap_or_else(|| "another process".into());
            return Err(Refusal::new(
                409,
                format!("job '{id}' is running elsewhere ({who})"),
            ));
        }
        let mut dir = JobDir::open(&self.dir, &plan, false)
            .map_err(|e| Refusal::new(409, redact(e.to_string())))?;
        let latest = dir
            .latest_checkpoint()
            .map_err(|e| Refusal::new(409, redact(e.to_string())))?;
        if let (Some(c), false, false) = (latest, s.start_with_savepoint, resuming) {
            return Err(Refusal::new(
                409,
                format!("job '{id}' has checkpoints (the latest is {c}): submit with isStartWithSavePoint=true to resume from them, or use another jobId"),
            ));
        }
        let job = Arc::new(Job {
            id: id.to_string(),
            name: plan.job.job_name.clone(),
            create_ms,
            start_with_savepoint: s.start_with_savepoint || resuming,
            vertices: vertices(&plan),
            env,
            mode: ferry_plan::mode_name(plan.job.mode),
            metrics: Arc::new(Metrics::default()),
            rates: Mutex::new(Rates::default()),
            life: Mutex::new(Life {
                status: Status::Initializing,
                finished_ms: None,
                error: None,
            }),
            stop: StopHandle::default(),
        });
        if !resuming {
            self.write_record(&Record {
                job_id: id.to_string(),
                job_name: s.job_name.clone(),
                config: s.config.clone(),
                create_ms,
                start_with_savepoint: s.start_with_savepoint,
                stopped: false,
            })
            .map_err(|e| Refusal::new(500, e.to_string()))?;
        }
        self.jobs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.to_string(), job.clone());
        Ok((job, plan, dir))
    }

    /// Stops job `id`: with a savepoint (a final checkpoint, committed) or a cancel.
    pub fn stop(&self, id: &str, savepoint: bool) -> Result<Arc<Job>, Refusal> {
        let Some(job) = self.get(id) else {
            return Err(Refusal::new(404, format!("no job '{id}' on this server")));
        };
        let status = job.life().status;
        if status.ended() {
            return Err(Refusal::new(
                409,
                format!("job '{id}' is not running (status {})", status.name()),
            ));
        }
        self.mark_stopped(id);
        if savepoint {
            job.stop.request_savepoint();
            job.set(|l| {
                if l.status != Status::Canceling {
                    l.status = Status::DoingSavepoint
                }
            });
        } else {
            job.stop.request_cancel();
            job.set(|l| l.status = Status::Canceling);
        }
        Ok(job)
    }

    /// Asks every running job for a savepoint (the server is shutting down; they resume
    /// when it starts again) and waits for them to end.
    pub fn shutdown(&self, patience: std::time::Duration) {
        SHUTTING_DOWN.store(true, Ordering::SeqCst);
        let running: Vec<Arc<Job>> = self
            .all()
            .into_iter()
            .filter(|j| !j.life().status.ended())
            .collect();
        for j in &running {
            j.stop.request_savepoint();
            j.set(|l| l.status = Status::DoingSavepoint);
        }
        let started = Instant::now();
        while started.elapsed() < patience && running.iter().any(|j| !j.life().status.ended()) {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}

/// Set once the server shuts down: savepoints taken then are no stop of the user's.
static SHUTTING_DOWN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A new job id: numeric, as SeaTunnel's, from the time and a counter.
fn new_job_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}{:03}",
        now_ms(),
        COUNTER.fetch_add(1, Ordering::SeqCst) % 1000
    )
}

/// The plugins of `plan` as vertices, numbered from 1.
pub fn vertices(plan: &JobPlan) -> Vec<Vertex> {
    let mut out = Vec::new();
    let tables =
        |t: &[ferry_api::TableSchema]| t.iter().map(|t| t.name.to_string()).collect::<Vec<_>>();
    for (i, s) in plan.sources.iter().enumerate() {
        out.push(Vertex {
            id: out.len() + 1,
            kind: "source",
            name: format!("Source[{i}]-{}", s.plugin),
            plugin: s.plugin.clone(),
            key: s.output.clone(),
            tables: tables(&s.tables),
            inputs: Vec::new(),
            output: s.output.clone(),
            parallelism: s.parallelism,
        });
    }
    for (i, t) in plan.transforms.iter().enumerate() {
        out.push(Vertex {
            id: out.len() + 1,
            kind: "transform",
            name: format!("Transform[{i}]-{}", t.plugin),
            plugin: t.plugin.clone(),
            key: String::new(),
            tables: tables(&t.tables),
            inputs: t.inputs.clone(),
            output: t.output.clone(),
            parallelism: 1,
        });
    }
    for (i, k) in plan.sinks.iter().enumerate() {
        out.push(Vertex {
            id: out.len() + 1,
            kind: "sink",
            name: format!("Sink[{i}]-{}", k.plugin),
            plugin: k.plugin.clone(),
            key: k.label.clone(),
            tables: tables(&k.tables),
            inputs: k.inputs.clone(),
            output: String::new(),
            parallelism: k.parallelism,
        });
    }
    out
}

/// SeaTunnel's `jobDag` of a job's vertices: the vertices, and the edges between them
/// (by the streams they read), all in pipeline 1.
pub fn job_dag(id: &str, vertices: &[Vertex], env: &Map<String, Value>) -> Value {
    let mut edges = Vec::new();
    for v in vertices {
        for input in &v.inputs {
            for from in vertices
                .iter()
                .filter(|u| !u.output.is_empty() && &u.output == input)
            {
                edges.push(json!({"inputVertexId": from.id, "targetVertexId": v.id}));
            }
        }
    }
    json!({
        "jobId": id,
        "envOptions": env,
        "vertexInfoMap": vertices.iter().map(|v| json!({
            "vertexId": v.id,
            "type": v.kind,
            "vertexName": v.name,
            "tablePaths": v.tables,
            "parallelism": v.parallelism,
        })).collect::<Vec<_>>(),
        "pipelineEdges": {"1": edges},
    })
}

/// The `env` options with every secret-looking value replaced, at any depth (HOCON's
/// `api.password = x` is `{"api": {"password": "x"}}`).
fn redacted_env(env: &Map<String, Value>) -> Map<String, Value> {
    env.iter()
        .map(|(k, v)| {
            let v = if is_secret_key(k) {
                Value::String("******".into())
            } else {
                redacted_value(v)
            };
            (k.clone(), v)
        })
        .collect()
}

fn redacted_value(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(redacted_env(m)),
        Value::Array(items) => Value::Array(items.iter().map(redacted_value).collect()),
        other => other.clone(),
    }
}

/// Whether a job file's text includes another file (`include "x.conf"`).
fn has_include(text: &str) -> bool {
    text.lines().any(|l| {
        let l = l.trim_start();
        l.strip_prefix("include")
            .is_some_and(|rest| rest.starts_with([' ', '\t', '"']) || rest.starts_with("required("))
    })
}

/// The values of secret-looking options in a job file's text (`password = "x"`,
/// `"password": "x"`), found by reading it as text so that they are known even when the
/// file does not parse: every message about the job has them replaced.
pub fn secret_values(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.split([',', '\n', '{', '}']) {
        let Some(pos) = line.find(['=', ':']) else {
            continue;
        };
        let key = line[..pos].trim().trim_matches('"').trim_matches('\'');
        if key.is_empty() || !is_secret_key(key) {
            continue;
        }
        let value = line[pos + 1..]
            .trim()
            .trim_matches('"')
            .trim_matches('\'')
            .trim();
        if value.len() >= 3 {
            out.push(value.to_string());
        }
    }
    out.sort_by_key(|v| std::cmp::Reverse(v.len()));
    out.dedup();
    out
}

/// `message` with every secret replaced by `******`.
pub fn redact(mut message: String, secrets: &[String]) -> String {
    for s in secrets {
        if message.contains(s.as_str()) {
            message = message.replace(s.as_str(), "******");
        }
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_found_in_hocon_and_json_and_redacted() {
        let hocon = "source { Jdbc { url = \"x\", password = \"hunter22\"\n user = bob } }";
        let json = r#"{"sink":[{"plugin_name":"Redis","auth":"s3cret!","host":"h"}]}"#;
        assert_eq!(secret_values(hocon), vec!["hunter22".to_string()]);
        assert_eq!(secret_values(json), vec!["s3cret!".to_string()]);
        assert_eq!(
            redact("bad value 'hunter22' for url".into(), &secret_values(hocon)),
            "bad value '******' for url"
        );
    }

    #[test]
    fn nested_env_secrets_are_redacted() {
        let env: Map<String, Value> = serde_json::from_str(
            r#"{"api": {"password": "x", "host": "h"}, "list": [{"token": "t"}], "a.secret": 1}"#,
        )
        .unwrap();
        let r = Value::Object(redacted_env(&env)).to_string();
        assert_eq!(
            r,
            r#"{"api":{"password":"******","host":"h"},"list":[{"token":"******"}],"a.secret":"******"}"#
        );
    }

    #[test]
    fn includes_are_seen() {
        assert!(has_include("include \"/etc/passwd\"\nenv {}"));
        assert!(has_include("  include required(\"x\")"));
        assert!(!has_include("env { included = 1 }"));
    }
}
