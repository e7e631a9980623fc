//! SeaTunnel's REST API (v2) over the jobs of a server, plus the jobs `ferry run` runs in
//! the same checkpoint directory (read-only). Field names and status values are
//! SeaTunnel's; errors are its `{"status": "fail", "message": …}`.

use ferry_checkpoint::{lock_status, FileStore, JobState, LockStatus};
use serde_json::{json, Map, Value};

use super::http::{Request, Response};
use super::jobs::{job_dag, Job, Status, Submission};
use super::{prom, Server};

/// `2026-12-02 04:00:00`, as SeaTunnel shows times.
fn time(ms: u64) -> String {
    let s = ferry_checkpoint::format_utc(ms / 1000);
    s.strip_suffix(" UTC").map(str::to_string).unwrap_or(s)
}

/// Routes one request.
pub fn handle(server: &Server, req: Request) -> Response {
    if req.method == "GET" && (req.path == "/" || req.path == "/index.html") {
        return Response {
            status: 200,
            content_type: "text/html; charset=utf-8",
            body: super::PAGE.as_bytes().to_vec(),
        };
    }
    if let Err(r) = server.authorize(&req) {
        return r;
    }
    let path = req.path.trim_end_matches('/');
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    match (req.method.as_str(), segments.as_slice()) {
        ("GET", ["overview"]) => overview(server),
        ("GET", ["running-jobs"]) => running_jobs(server),
        ("GET", ["finished-jobs"]) => finished_jobs(server, None),
        ("GET", ["finished-jobs", state]) => finished_jobs(server, Some(state)),
        ("GET", ["job-info", id]) | ("GET", ["running-job", id]) => job_info(server, id),
        ("GET", ["system-monitoring-information"]) => system_info(server),
        ("GET", ["metrics"]) => Response {
            status: 200,
            content_type: "text/plain; version=0.0.4; charset=utf-8",
            body: metrics(server).into_bytes(),
        },
        ("POST", ["submit-job"]) => submit_job(server, &req),
        ("POST", ["submit-jobs"]) => submit_jobs(server, &req),
        ("POST", ["stop-job"]) => stop_job(server, &req),
        ("POST", ["stop-jobs"]) => stop_jobs(server, &req),
        (
            _,
            ["overview"
            | "running-jobs"
            | "finished-jobs"
            | "job-info"
            | "running-job"
            | "system-monitoring-information"
            | "metrics"
            | "submit-job"
            | "submit-jobs"
            | "stop-job"
            | "stop-jobs", ..],
        ) => Response::error(
            405,
            format!(
                "{} {} is not served: see docs/server.md",
                req.method, req.path
            ),
        ),
        _ => Response::error(
            404,
            format!("no endpoint {} (docs/server.md lists them)", req.path),
        ),
    }
}

fn overview(server: &Server) -> Response {
    let counts = server.counts();
    let get = |name: &str| {
        counts
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(0, |(_, c)| *c)
    };
    Response::json(
        200,
        &json!({
            "projectVersion": env!("CARGO_PKG_VERSION"),
            "gitCommitAbbrev": "ferry",
            "totalSlot": "0",
            "unassignedSlot": "0",
            "works": "1",
            "runningJobs": get("running").to_string(),
            "finishedJobs": get("finished").to_string(),
            "failedJobs": get("failed").to_string(),
            "cancelledJobs": get("canceled").to_string(),
        }),
    )
}

/// SeaTunnel's metrics object of a job: totals and per-table maps, all as strings.
fn metrics_json(job: &Job) -> Value {
    let read = job.metrics.read_flows();
    let written = job.metrics.written_flows();
    let rates = job.rates.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let mut m = Map::new();
    let mut tables = |prefix: &str, kind: &str| -> (u64, u64, f64, f64) {
        let (mut rows, mut bytes, mut qps, mut bps) = (0u64, 0u64, 0f64, 0f64);
        let mut count = Map::new();
        let mut b = Map::new();
        let mut q = Map::new();
        let mut bp = Map::new();
        for v in job.vertices.iter().filter(|v| v.kind == kind) {
            let (c, r) = if kind == "source" {
                (
                    read.get(&v.key).copied().unwrap_or_default(),
                    rates.read.get(&v.key).copied().unwrap_or_default(),
                )
            } else {
                (
                    written.get(&v.key).copied().unwrap_or_default(),
                    rates.written.get(&v.key).copied().unwrap_or_default(),
                )
            };
            rows += c.rows;
            bytes += c.bytes;
            qps += r.0;
            bps += r.1;
            let key = v.tables.first().cloned().unwrap_or_else(|| v.key.clone());
            let key = if v.tables.len() > 1 {
                v.key.clone()
            } else {
                key
            };
            count.insert(key.clone(), json!(c.rows.to_string()));
            b.insert(key.clone(), json!(c.bytes.to_string()));
            q.insert(key.clone(), json!(format!("{:.2}", r.0)));
            bp.insert(key, json!(format!("{:.2}", r.1)));
        }
        m.insert(format!("Table{prefix}Count"), Value::Object(count));
        m.insert(format!("Table{prefix}Bytes"), Value::Object(b));
        m.insert(format!("Table{prefix}QPS"), Value::Object(q));
        m.insert(format!("Table{prefix}BytesPerSeconds"), Value::Object(bp));
        (rows, bytes, qps, bps)
    };
    let (sr, sb, sq, sbp) = tables("SourceReceived", "source");
    let (wr, wb, wq, wbp) = tables("SinkWrite", "sink");
    m.insert("SourceReceivedCount".into(), json!(sr.to_string()));
    m.insert("SourceReceivedBytes".into(), json!(sb.to_string()));
    m.insert("SourceReceivedQPS".into(), json!(format!("{sq:.2}")));
    m.insert(
        "SourceReceivedBytesPerSeconds".into(),
        json!(format!("{sbp:.2}")),
    );
    m.insert("SinkWriteCount".into(), json!(wr.to_string()));
    m.insert("SinkWriteBytes".into(), json!(wb.to_string()));
    m.insert("SinkWriteQPS".into(), json!(format!("{wq:.2}")));
    m.insert(
        "SinkWriteBytesPerSeconds".into(),
        json!(format!("{wbp:.2}")),
    );
    Value::Object(m)
}

/// Ferry's additions to a job's details: per-plugin rows, checkpoint history.
fn ferry_json(job: &Job) -> Value {
    let read = job.metrics.read_flows();
    let written = job.metrics.written_flows();
    let rates = job.rates.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let ck = job.metrics.checkpoints();
    let mut figures: std::collections::BTreeMap<&str, Map<String, Value>> = Default::default();
    for (stream, _, name, value) in job.metrics.figures() {
        if let Some(v) = job
            .vertices
            .iter()
            .find(|v| v.kind == "source" && v.key == stream)
        {
            let m = figures.entry(v.name.as_str()).or_default();
            let sum = m.get(name).and_then(Value::as_f64).unwrap_or(0.0) + value;
            m.insert(name.to_string(), json!(sum));
        }
    }
    json!({
        "mode": job.mode,
        "plugins": job.vertices.iter().map(|v| {
            let (c, r) = match v.kind {
                "source" => (read.get(&v.key).copied().unwrap_or_default(), rates.read.get(&v.key).copied().unwrap_or_default()),
                "sink" => (written.get(&v.key).copied().unwrap_or_default(), rates.written.get(&v.key).copied().unwrap_or_default()),
                _ => (Default::default(), (0.0, 0.0)),
            };
            json!({
                "vertexId": v.id, "type": v.kind, "vertexName": v.name, "plugin": v.plugin,
                "rows": c.rows, "bytes": c.bytes, "rowsPerSecond": r.0,
                "backpressureSeconds": c.wait_ns as f64 / 1e9,
                "figures": figures.get(v.name.as_str()).cloned().unwrap_or_default(),
            })
        }).collect::<Vec<_>>(),
        "checkpoints": {
            "completed": ck.completed,
            "failed": ck.failed,
            "history": ck.history.iter().map(|c| json!({
                "id": c.id, "completedTime": time(c.completed_ms),
                "durationMs": c.duration.as_millis() as u64, "bytes": c.bytes,
            })).collect::<Vec<_>>(),
        },
    })
}

fn job_json(job: &Job, details: bool) -> Value {
    let life = job.life();
    let mut v = json!({
        "jobId": job.id,
        "jobName": job.name,
        "jobStatus": life.status.name(),
        "createTime": time(job.create_ms),
        "jobDag": job_dag(&job.id, &job.vertices, &job.env),
        "metrics": metrics_json(job),
        "ferry": ferry_json(job),
    });
    let Some(o) = v.as_object_mut() else { return v };
    if !life.status.ended() {
        o.insert("envOptions".into(), Value::Object(job.env.clone()));
        o.insert("pluginJarsUrls".into(), json!([]));
        o.insert(
            "isStartWithSavePoint".into(),
            json!(job.start_with_savepoint),
        );
    } else {
        let finished = life.finished_ms.map(time);
        o.insert("finishedTime".into(), json!(finished));
        o.insert("finishTime".into(), json!(finished));
        o.insert("errorMsg".into(), json!(life.error));
    }
    if !details {
        o.remove("ferry");
    }
    v
}

/// A job `ferry run` runs (or ran) in the server's checkpoint directory: read-only.
fn outside_json(id: &str, status: &str, pid: Option<u32>, updated: u64, by: &str) -> Value {
    json!({
        "jobId": id,
        "jobName": id,
        "jobStatus": status,
        "createTime": time(updated * 1000),
        "jobDag": {"jobId": id, "envOptions": [], "vertexInfoMap": [], "pipelineEdges": {}},
        "metrics": {"SourceReceivedCount": "0", "SinkWriteCount": "0"},
        "ferry": {"runBy": by, "pid": pid, "readOnly": true},
    })
}

/// Jobs of the checkpoint directory that this server does not run.
fn outside_jobs(server: &Server) -> Vec<(Value, bool)> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(server.jobs.dir()) else {
        return out;
    };
    for e in rd.flatten() {
        let id = e.file_name().to_string_lossy().to_string();
        if id.starts_with('.') || server.jobs.get(&id).is_some() {
            continue;
        }
        let Ok(info) = FileStore::read_state(&e.path()) else {
            continue;
        };
        let lock = lock_status(&e.path()).unwrap_or(LockStatus::Free);
        let (status, running, pid) = match (&lock, info.state) {
            (LockStatus::Held(h), _) => (
                Status::Running,
                true,
                h.as_ref().map(|h| h.pid).or(Some(info.pid)),
            ),
            (LockStatus::Free, JobState::Running) => (Status::Unknowable, false, None),
            (LockStatus::Free, JobState::Finished) => (Status::Finished, false, None),
            (LockStatus::Free, JobState::Savepoint) => (Status::SavepointDone, false, None),
            (LockStatus::Free, JobState::Cancelled) => (Status::Canceled, false, None),
            (LockStatus::Free, JobState::Failed) => (Status::Failed, false, None),
        };
        // A job this server submitted before a restart and that stayed stopped.
        let by = if server.jobs.submitted_earlier(&id) {
            "ferry serve"
        } else {
            "ferry run"
        };
        out.push((
            outside_json(&id, status.name(), pid, info.updated, by),
            running,
        ));
    }
    out
}

fn running_jobs(server: &Server) -> Response {
    let mut list: Vec<Value> = server
        .jobs
        .all()
        .iter()
        .filter(|j| !j.life().status.ended())
        .map(|j| job_json(j, false))
        .collect();
    list.extend(
        outside_jobs(server)
            .into_iter()
            .filter(|(_, r)| *r)
            .map(|(v, _)| v),
    );
    Response::json(200, &Value::Array(list))
}

fn finished_jobs(server: &Server, state: Option<&str>) -> Response {
    const STATES: [&str; 5] = [
        "FINISHED",
        "CANCELED",
        "FAILED",
        "SAVEPOINT_DONE",
        "UNKNOWABLE",
    ];
    let wanted = match state {
        None => None,
        Some(s) if STATES.contains(&s.to_ascii_uppercase().as_str()) => {
            Some(s.to_ascii_uppercase())
        }
        Some(s) => {
            return Response::error(
                400,
                format!(
                    "unknown finished state '{s}': use one of {}",
                    STATES.join(", ")
                ),
            );
        }
    };
    let fits = |v: &Value| wanted.as_deref().is_none_or(|w| v["jobStatus"] == w);
    let mut list: Vec<Value> = server
        .jobs
        .all()
        .iter()
        .filter(|j| j.life().status.ended())
        .map(|j| job_json(j, false))
        .filter(|v| fits(v))
        .collect();
    list.extend(
        outside_jobs(server)
            .into_iter()
            .filter(|(v, r)| !*r && fits(v))
            .map(|(v, _)| v),
    );
    Response::json(200, &Value::Array(list))
}

fn job_info(server: &Server, id: &str) -> Response {
    if let Some(job) = server.jobs.get(id) {
        return Response::json(200, &job_json(&job, true));
    }
    if let Some((v, _)) = outside_jobs(server)
        .into_iter()
        .find(|(v, _)| v["jobId"] == id)
    {
        return Response::json(200, &v);
    }
    // SeaTunnel answers `{"jobId": …}` for a job it does not know; with a 404 and a
    // message here, so that scripts notice.
    Response::json(
        404,
        &json!({"jobId": id, "status": "fail", "message": format!("no job '{id}'")}),
    )
}

fn system_info(server: &Server) -> Response {
    let threads = std::fs::read_dir("/proc/self/task")
        .map(|d| d.count())
        .unwrap_or(0);
    let rss = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .map(|l| l.trim_start_matches("VmRSS:").trim().to_string())
        })
        .unwrap_or_default();
    let processors = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    Response::json(
        200,
        &json!([{
            "processors": processors.to_string(),
            "thread.count": threads.to_string(),
            "process.memory.rss": rss,
            "uptime.seconds": server.started.elapsed().as_secs().to_string(),
        }]),
    )
}

/// The Prometheus exposition of every job of the server.
pub fn metrics(server: &Server) -> String {
    let jobs = server.jobs.all();
    let rates: Vec<_> = jobs
        .iter()
        .map(|j| j.rates.lock().unwrap_or_else(|p| p.into_inner()).clone())
        .collect();
    let statuses: Vec<_> = jobs.iter().map(|j| j.life().status).collect();
    let exported: Vec<prom::Exported<'_>> = jobs
        .iter()
        .zip(&rates)
        .zip(&statuses)
        .map(|((j, r), s)| prom::Exported {
            id: &j.id,
            name: &j.name,
            status: s.name(),
            vertices: &j.vertices,
            metrics: &j.metrics,
            rates: r,
            started_ms: j.create_ms,
        })
        .collect();
    prom::render(&exported, Some(&server.counts()))
}

/// The body as text, or a 400.
fn body_text(req: &Request) -> Result<&str, Response> {
    std::str::from_utf8(&req.body)
        .map_err(|_| Response::error(400, "the request body is not UTF-8 text"))
}

fn flag(v: Option<&str>) -> bool {
    v.is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

fn submit_one(server: &Server, s: Submission) -> Result<Value, Response> {
    if s.config.trim().is_empty() {
        return Err(Response::error(
            400,
            "the request body is empty: send the job file (JSON or HOCON)",
        ));
    }
    let job = server
        .jobs
        .submit(s, None)
        .map_err(|r| Response::error(r.status, r.message))?;
    // SeaTunnel's ids are numbers; Ferry's may be any name.
    let id = job
        .id
        .parse::<u64>()
        .map(Value::from)
        .unwrap_or_else(|_| json!(job.id));
    Ok(json!({"jobId": id, "jobName": job.name}))
}

fn submit_job(server: &Server, req: &Request) -> Response {
    let text = match body_text(req) {
        Ok(t) => t,
        Err(r) => return r,
    };
    let s = Submission {
        config: text.to_string(),
        job_id: req
            .param("jobId")
            .filter(|s| !s.is_empty())
            .map(str::to_string),
        job_name: req
            .param("jobName")
            .filter(|s| !s.is_empty())
            .map(str::to_string),
        start_with_savepoint: flag(req.param("isStartWithSavePoint")),
    };
    match submit_one(server, s) {
        Ok(v) => Response::json(200, &v),
        Err(r) => r,
    }
}

fn submit_jobs(server: &Server, req: &Request) -> Response {
    let text = match body_text(req) {
        Ok(t) => t,
        Err(r) => return r,
    };
    let Ok(Value::Array(items)) = serde_json::from_str::<Value>(text) else {
        return Response::error(
            400,
            "submit-jobs takes a JSON array of jobs, each with its `params`",
        );
    };
    let mut out = Vec::new();
    for (i, mut item) in items.into_iter().enumerate() {
        let params = item
            .as_object_mut()
            .and_then(|o| o.remove("params"))
            .unwrap_or(Value::Null);
        let param = |k: &str| match &params[k] {
            Value::String(s) if !s.is_empty() => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        };
        let s = Submission {
            config: item.to_string(),
            job_id: param("jobId"),
            job_name: param("jobName"),
            start_with_savepoint: param("isStartWithSavePoint").is_some_and(|v| v == "true"),
        };
        match submit_one(server, s) {
            Ok(v) => out.push(v),
            Err(r) => {
                let msg = serde_json::from_slice::<Value>(&r.body)
                    .ok()
                    .and_then(|v| v["message"].as_str().map(str::to_string))
                    .unwrap_or_default();
                return Response::error(
                    r.status,
                    format!(
                        "job {} of the array: {msg} (the jobs before it were submitted: {})",
                        i + 1,
                        Value::Array(out)
                    ),
                );
            }
        }
    }
    Response::json(200, &Value::Array(out))
}

/// `{"jobId": …, "isStopWithSavePoint": …}` → the job id and the flag.
fn stop_request(v: &Value) -> Result<(String, bool), Response> {
    let id = match &v["jobId"] {
        Value::String(s) if !s.is_empty() => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => {
            return Err(Response::error(
                400,
                "stop-job needs a `jobId` (a number or a text)",
            ))
        }
    };
    let savepoint = match &v["isStopWithSavePoint"] {
        Value::Bool(b) => *b,
        Value::String(s) => s.eq_ignore_ascii_case("true"),
        Value::Null => false,
        other => {
            return Err(Response::error(
                400,
                format!("isStopWithSavePoint must be true or false, not {other}"),
            ))
        }
    };
    Ok((id, savepoint))
}

fn stop_one(server: &Server, v: &Value) -> Result<Value, Response> {
    let (id, savepoint) = stop_request(v)?;
    if server.jobs.get(&id).is_none()
        && outside_jobs(server)
            .iter()
            .any(|(v, r)| *r && v["jobId"] == id.as_str())
    {
        return Err(Response::error(409, format!("job '{id}' is run by `ferry run`, not by this server: stop it with `ferry savepoint {id}` or `ferry cancel {id}`")));
    }
    server
        .jobs
        .stop(&id, savepoint)
        .map_err(|r| Response::error(r.status, r.message))?;
    let id_json = id
        .parse::<u64>()
        .map(Value::from)
        .unwrap_or_else(|_| json!(id));
    Ok(json!({"jobId": id_json}))
}

fn parse_json(req: &Request) -> Result<Value, Response> {
    let text = body_text(req)?;
    serde_json::from_str(text)
        .map_err(|e| Response::error(400, format!("Invalid JSON format in request body: {e}")))
}

fn stop_job(server: &Server, req: &Request) -> Response {
    match parse_json(req).and_then(|v| stop_one(server, &v)) {
        Ok(v) => Response::json(200, &v),
        Err(r) => r,
    }
}

fn stop_jobs(server: &Server, req: &Request) -> Response {
    let items = match parse_json(req) {
        Ok(Value::Array(items)) => items,
        Ok(_) => {
            return Response::error(
                400,
                "stop-jobs takes a JSON array of {jobId, isStopWithSavePoint}",
            )
        }
        Err(r) => return r,
    };
    let mut out = Vec::new();
    for v in &items {
        match stop_one(server, v) {
            Ok(v) => out.push(v),
            Err(r) => return r,
        }
    }
    Response::json(200, &Value::Array(out))
}
