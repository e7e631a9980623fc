//! `ferry serve`: a job server speaking SeaTunnel's REST API (v2), with Prometheus metrics
//! at `/metrics` and a web page at `/`; and `ferry run --metrics-listen`, which serves the
//! same metrics for one job. See docs/server.md.
//!
//! - [`http`]: a small HTTP/1.1 server on std's sockets;
//! - [`jobs`]: the jobs, run through [`crate::runner`] as `ferry run` runs one;
//! - [`api`]: SeaTunnel's endpoints;
//! - [`prom`]: Prometheus' text format;
//! - `page.html`: the page, embedded in the binary.

mod api;
mod http;
mod jobs;
mod prom;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferry_api::FerryError;
use ferry_engine::Metrics;
use ferry_plan::jobdir::checkpoint_dir_or_default;
use ferry_plan::JobPlan;

use http::{Request, Response};
use jobs::{Jobs, Rates, Status, Submission};

/// The web page: plain HTML and a small script, no build step, nothing fetched from
/// elsewhere.
pub const PAGE: &str = include_str!("page.html");

/// The largest request body accepted by default (a job file).
const DEFAULT_MAX_BODY: usize = 1024 * 1024;

/// `ferry serve`'s options.
#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// Address to listen on. A non-loopback address requires --token-file.
    #[arg(long, default_value = "127.0.0.1:8080", value_name = "ADDR")]
    listen: String,
    /// Directory of the jobs' checkpoints (default: $FERRY_HOME/checkpoints). Jobs that
    /// were running here when the server last ended resume from their checkpoints.
    #[arg(long, env = "FERRY_CHECKPOINT_DIR")]
    checkpoint_dir: Option<PathBuf>,
    /// A file holding the bearer token every API request must carry
    /// (`Authorization: Bearer TOKEN`); required with a non-loopback --listen.
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// The largest request body accepted, in bytes (a larger one gets 413).
    #[arg(long, default_value_t = DEFAULT_MAX_BODY, value_name = "BYTES")]
    max_body_bytes: usize,
}

/// A running server.
pub struct Server {
    jobs: Arc<Jobs>,
    token: Option<String>,
    started: Instant,
}

impl Server {
    /// Refuses a request without the server's token (when it has one).
    fn authorize(&self, req: &Request) -> Result<(), Response> {
        let Some(token) = &self.token else {
            return Ok(());
        };
        let given = req
            .header("authorization")
            .and_then(|h| h.strip_prefix("Bearer "))
            .map(str::trim);
        match given {
            Some(g) if constant_time_eq(g.as_bytes(), token.as_bytes()) => Ok(()),
            Some(_) => Err(Response::error(401, "wrong bearer token")),
            None => Err(Response::error(
                401,
                "this server requires `Authorization: Bearer <token>` (the token of its --token-file)",
            )),
        }
    }

    /// Jobs by status, as SeaTunnel's overview counts them.
    fn counts(&self) -> Vec<(&'static str, usize)> {
        let mut c = [
            ("running", 0usize),
            ("finished", 0),
            ("failed", 0),
            ("canceled", 0),
            ("savepoint_done", 0),
        ];
        for j in self.jobs.all() {
            let i = match j.life().status {
                Status::Finished => 1,
                Status::Failed | Status::Unknowable => 2,
                Status::Canceled => 3,
                Status::SavepointDone => 4,
                _ => 0,
            };
            c[i].1 += 1;
        }
        c.to_vec()
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Whether `addr` (host:port) is a loopback address.
fn is_loopback(addr: &str) -> Result<bool, FerryError> {
    use std::net::ToSocketAddrs;
    let addrs: Vec<_> = addr
        .to_socket_addrs()
        .map_err(|e| FerryError::config(format!("--listen {addr}: not an address ({e})")))?
        .collect();
    if addrs.is_empty() {
        return Err(FerryError::config(format!("--listen {addr}: no address")));
    }
    Ok(addrs.iter().all(|a| a.ip().is_loopback()))
}

fn read_token(path: &PathBuf) -> Result<String, FerryError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        FerryError::config(format!(
            "--token-file {}: cannot read it: {e}",
            path.display()
        ))
    })?;
    let token = text.trim().to_string();
    if token.len() < 16 {
        return Err(FerryError::config(format!(
            "--token-file {}: the token must have at least 16 characters",
            path.display()
        )));
    }
    Ok(token)
}

/// `ferry serve`.
pub fn run(args: ServeArgs) -> Result<ExitCode, FerryError> {
    let token = match &args.token_file {
        Some(p) => Some(read_token(p)?),
        None => None,
    };
    if token.is_none() && !is_loopback(&args.listen)? {
        return Err(FerryError::config(format!(
            "--listen {}: a non-loopback address needs --token-file (anyone who reaches it could run jobs)",
            args.listen
        )));
    }
    let dir = checkpoint_dir_or_default(args.checkpoint_dir.clone());
    std::fs::create_dir_all(&dir).map_err(|e| {
        FerryError::external("server", format!("cannot create {}: {e}", dir.display()))
    })?;
    let server = Arc::new(Server {
        jobs: Arc::new(Jobs::new(dir.clone())),
        token,
        started: Instant::now(),
    });
    let term = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, term.clone())
            .map_err(|e| FerryError::internal(format!("cannot handle signals: {e}")))?;
    }
    // Jobs that were running when the server last ended resume first.
    for record in server.jobs.to_resume() {
        let id = record.job_id.clone();
        let s = Submission {
            config: record.config.clone(),
            job_id: Some(id.clone()),
            job_name: record.job_name.clone(),
            start_with_savepoint: true,
        };
        match server.jobs.submit(s, Some(record)) {
            Ok(_) => eprintln!("ferry serve: resumed job '{id}'"),
            Err(r) => eprintln!("ferry serve: cannot resume job '{id}': {}", r.message),
        }
    }
    let handler_server = server.clone();
    let http = http::start(
        &args.listen,
        args.max_body_bytes,
        Arc::new(move |req| api::handle(&handler_server, req)),
    )
    .map_err(|e| FerryError::config(format!("--listen: {e}")))?;
    let jobs = server.jobs.clone();
    start_sampler(move || {
        for j in jobs.all() {
            if !j.life().status.ended() {
                j.rates
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .sample(&j.metrics);
            }
        }
    });
    eprintln!(
        "ferry serve: listening on http://{} (checkpoints in {})",
        http.addr,
        dir.display()
    );
    while !term.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!("ferry serve: stopping; taking a savepoint of every running job (they resume when the server starts again)");
    server.jobs.shutdown(Duration::from_secs(60));
    Ok(ExitCode::SUCCESS)
}

/// Calls `f` every second on a thread of its own (rates are per second).
fn start_sampler(f: impl Fn() + Send + 'static) {
    let _ = std::thread::Builder::new()
        .name("rates".into())
        .spawn(move || loop {
            f();
            std::thread::sleep(Duration::from_secs(1));
        });
}

/// `ferry run --metrics-listen ADDR`: serves `/metrics` for the one job of this process
/// while it runs. Loopback addresses only (no token on `ferry run`).
pub fn serve_run_metrics(
    addr: &str,
    plan: &JobPlan,
    metrics: Arc<Metrics>,
) -> Result<(), FerryError> {
    if !is_loopback(addr)? {
        return Err(FerryError::config(format!(
            "--metrics-listen {addr}: only loopback addresses are served by `ferry run` (use `ferry serve --token-file` to expose jobs)"
        )));
    }
    struct One {
        id: String,
        name: String,
        vertices: Vec<jobs::Vertex>,
        metrics: Arc<Metrics>,
        rates: Mutex<Rates>,
        started_ms: u64,
    }
    let one = Arc::new(One {
        id: plan.job.job_id.clone(),
        name: plan.job.job_name.clone(),
        vertices: jobs::vertices(plan),
        metrics,
        rates: Mutex::new(Rates::default()),
        started_ms: jobs::now_ms(),
    });
    let sampled = one.clone();
    start_sampler(move || {
        sampled
            .rates
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .sample(&sampled.metrics);
    });
    let server = http::start(
        addr,
        0,
        Arc::new(move |req: Request| {
            if req.method != "GET" || req.path != "/metrics" {
                return Response::error(
                    404,
                    "`ferry run --metrics-listen` serves GET /metrics only",
                );
            }
            let rates = one.rates.lock().unwrap_or_else(|p| p.into_inner()).clone();
            let text = prom::render(
                &[prom::Exported {
                    id: &one.id,
                    name: &one.name,
                    status: "RUNNING",
                    vertices: &one.vertices,
                    metrics: &one.metrics,
                    rates: &rates,
                    started_ms: one.started_ms,
                }],
                None,
            );
            Response {
                status: 200,
                content_type: "text/plain; version=0.0.4; charset=utf-8",
                body: text.into_bytes(),
            }
        }),
    )
    .map_err(|e| FerryError::config(format!("--metrics-listen: {e}")))?;
    eprintln!("ferry: metrics at http://{}/metrics", server.addr);
    Ok(())
}
