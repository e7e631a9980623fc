//! `ferry`: runs Apache SeaTunnel job files on Ferry's embedded engine.

mod jobs;
mod registry;
mod runner;
mod serve;
mod spark;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand, ValueEnum};
use ferry_api::{FerryError, OptionSpec};
use ferry_engine::{Metrics, RunOutcome, StopHandle};
use ferry_plan::jobdir::checkpoint_dir_or_default;
use ferry_plan::{build_plan, PlanOptions};

/// Ferry moves data between systems, in batch and streaming, from SeaTunnel job files.
#[derive(Parser, Debug)]
#[command(name = "ferry", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a job file (HOCON `.conf` or `.json`).
    Run(RunArgs),
    /// Validate a job file and print its plan, without running it.
    Check(JobArgs),
    /// List connectors and transforms, or show one with its options.
    Connectors {
        /// A plugin name (any case).
        name: Option<String>,
    },
    /// List the jobs in a checkpoint directory with their state and last checkpoint:
    /// RUNNING while a process holds the job's lock (with its pid and start time), CRASHED
    /// when the state says running but nobody holds the lock.
    Jobs {
        /// Checkpoint directory (default: $FERRY_HOME/checkpoints, FERRY_HOME defaulting to ~/.ferry).
        #[arg(long, env = "FERRY_CHECKPOINT_DIR")]
        checkpoint_dir: Option<PathBuf>,
    },
    /// Ask a running job to take a final checkpoint, commit it and exit 0.
    Savepoint(ControlArgs),
    /// Ask a running job to stop at once, without a checkpoint.
    Cancel(ControlArgs),
    /// Run a job server: SeaTunnel's REST API (v2), Prometheus metrics at /metrics and a
    /// web page, for many jobs with checkpoints; jobs that were running resume when it
    /// starts again (see docs/server.md).
    Serve(serve::ServeArgs),
}

/// The job file: `ferry run job.conf`, or SeaTunnel's `-c/--config job.conf` (one of the two).
#[derive(clap::Args, Debug)]
#[group(required = true, multiple = false)]
struct JobFile {
    /// The job file (HOCON `.conf` or `.json`).
    #[arg(value_name = "JOB")]
    job: Option<PathBuf>,
    /// The job file, as SeaTunnel's `seatunnel.sh --config FILE` spells it (instead of JOB).
    #[arg(short = 'c', long = "config", value_name = "FILE")]
    config: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
struct JobArgs {
    #[command(flatten)]
    file: JobFile,
    /// A user variable for `${name}` in the job file (repeatable): `-i name=value`.
    #[arg(short = 'i', long = "variable", value_name = "NAME=VALUE")]
    variables: Vec<String>,
    /// Default parallelism, overriding `env.parallelism`.
    #[arg(long, short = 'p')]
    parallelism: Option<usize>,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Engine {
    /// Ferry's embedded engine, in this process.
    Local,
    /// Apache Spark (see docs/spark.md).
    Spark,
}

#[derive(clap::Args, Debug)]
struct RunArgs {
    #[command(flatten)]
    job: JobArgs,
    /// Where to run the job.
    #[arg(long, value_enum, default_value = "local")]
    engine: Engine,
    /// The job's id: checkpoints are kept under it and a rerun with the same id resumes
    /// from its latest checkpoint; one run per id at a time (a second is refused while the
    /// first holds the job directory's lock). `-r ID` is SeaTunnel's spelling.
    #[arg(long, short = 'r', visible_alias = "restore")]
    job_id: Option<String>,
    /// Directory of checkpoints (default with --job-id: $FERRY_HOME/checkpoints).
    #[arg(long, env = "FERRY_CHECKPOINT_DIR")]
    checkpoint_dir: Option<PathBuf>,
    /// Start the job anew, deliberately: its old checkpoint history is moved, untouched,
    /// into `discarded-<time>/` of the job directory, and its sources read from the
    /// beginning. Needed when none of its checkpoints is intact.
    #[arg(long)]
    from_scratch: bool,
    /// As SeaTunnel's `-m/--master`. With `--engine spark`: the Spark master URL (default
    /// `local[*]`). On the embedded engine: `local` (SeaTunnel's `cluster` runs here too,
    /// with a notice: there is no cluster to submit to).
    #[arg(long, short = 'm', value_name = "MASTER")]
    master: Option<String>,
    /// Serve the job's metrics in Prometheus' text format at http://ADDR/metrics while
    /// it runs (the names `ferry serve` uses; loopback addresses only, e.g.
    /// 127.0.0.1:9250).
    #[arg(long, value_name = "ADDR")]
    metrics_listen: Option<String>,
}

impl JobArgs {
    /// The job file, given as JOB or with `-c/--config` (clap ensures one of them).
    fn path(&self) -> Result<&Path, FerryError> {
        self.file
            .job
            .as_deref()
            .or(self.file.config.as_deref())
            .ok_or_else(|| {
                FerryError::config(
                    "no job file: give it as `ferry run FILE` or with -c/--config FILE",
                )
            })
    }
}

#[derive(clap::Args, Debug)]
struct ControlArgs {
    /// The job id given to `ferry run --job-id`.
    job_id: String,
    /// Checkpoint directory the job runs with.
    #[arg(long, env = "FERRY_CHECKPOINT_DIR")]
    checkpoint_dir: Option<PathBuf>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging();
    let result = match cli.command {
        Command::Run(args) => run(args),
        Command::Check(args) => check(args),
        Command::Connectors { name } => connectors(name.as_deref()),
        Command::Jobs { checkpoint_dir } => jobs::list(&checkpoint_dir_or_default(checkpoint_dir)),
        Command::Savepoint(args) => jobs::control(args, "savepoint"),
        Command::Cancel(args) => jobs::control(args, "cancel"),
        Command::Serve(args) => serve::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let colour = log_colours(
        std::io::stderr().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
    );
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(colour)
        .with_target(false)
        .try_init();
}

/// Whether log lines carry colour codes: only on a terminal (a file or a pipe gets plain
/// text), and never when `NO_COLOR` is set to anything but the empty string
/// (<https://no-color.org>).
fn log_colours(stderr_is_terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    stderr_is_terminal && no_color.is_none_or(|v| v.is_empty())
}

fn load_plan(args: &JobArgs, job_id: Option<String>) -> Result<ferry_plan::JobPlan, FerryError> {
    let vars = ferry_plan::parse_vars(&args.variables)?;
    let job = ferry_config::load_job(args.path()?, &vars)?;
    for w in &job.warnings {
        tracing::warn!("{w}");
    }
    build_plan(
        job,
        &registry::builtin(),
        &PlanOptions {
            parallelism: args.parallelism,
            job_id,
        },
    )
}

fn check(args: JobArgs) -> Result<ExitCode, FerryError> {
    let plan = load_plan(&args, None)?;
    print!("{}", plan.describe());
    println!("{}: OK", args.path()?.display());
    Ok(ExitCode::SUCCESS)
}

fn run(args: RunArgs) -> Result<ExitCode, FerryError> {
    if args.from_scratch && args.job_id.is_none() && args.checkpoint_dir.is_none() {
        return Err(FerryError::config(
            "--from-scratch sets a job's checkpoints aside: give the job's --job-id (and --checkpoint-dir)",
        ));
    }
    if args.engine == Engine::Spark {
        if args.metrics_listen.is_some() {
            return Err(FerryError::config(
                "--metrics-listen serves the embedded engine's counters; Spark has its own metrics (its UI and sinks)",
            ));
        }
        return spark::run(&args);
    }
    embedded_master(args.master.as_deref())?;
    let plan = load_plan(&args.job, args.job_id.clone())?;
    // The lock is held until the directory is dropped (or the process dies): one run per
    // job directory.
    let dir = match (&args.job_id, &args.checkpoint_dir) {
        (None, None) => None,
        _ => Some(runner::JobDir::open(
            &checkpoint_dir_or_default(args.checkpoint_dir.clone()),
            &plan,
            args.from_scratch,
        )?),
    };
    eprintln!(
        "ferry: job '{}' ({}), delivery {}",
        plan.job.job_name,
        ferry_plan::mode_name(plan.job.mode),
        plan.delivery
    );
    let metrics = Arc::new(Metrics::default());
    let _metrics_server = match &args.metrics_listen {
        Some(addr) => Some(serve::serve_run_metrics(addr, &plan, metrics.clone())?),
        None => None,
    };
    let progress = start_progress(metrics.clone());
    let started = Instant::now();
    let result = runner::execute(
        &plan,
        dir,
        StopHandle::default(),
        metrics.clone(),
        runner::Signals::Watch,
    );
    progress.store(true, Ordering::SeqCst);
    let elapsed = started.elapsed();
    match result {
        Ok(outcome) => {
            eprintln!("{}", summary(&plan, &metrics, elapsed, outcome));
            Ok(ExitCode::SUCCESS)
        }
        Err(FerryError::Cancelled) => {
            eprintln!(
                "ferry: job '{}' cancelled after {:.2} s",
                plan.job.job_name,
                elapsed.as_secs_f64()
            );
            Ok(ExitCode::from(130))
        }
        Err(e) => Err(e),
    }
}

/// SeaTunnel's `-m/--master` on the embedded engine: `local` is what it is; `cluster`
/// (SeaTunnel's default, submitting to a running cluster) runs here as well, said so, so
/// that scripts written for `seatunnel.sh` carry over; anything else is a Spark master.
fn embedded_master(master: Option<&str>) -> Result<(), FerryError> {
    match master {
        None => Ok(()),
        Some(m) if m.eq_ignore_ascii_case("local") => Ok(()),
        Some(m) if m.eq_ignore_ascii_case("cluster") => {
            eprintln!("ferry: -m cluster: Ferry has no SeaTunnel cluster to submit to; running the job on the embedded engine, in this process");
            Ok(())
        }
        Some(m) => Err(FerryError::config(format!(
            "-m/--master '{m}': the embedded engine takes `local` (or SeaTunnel's `cluster`); for a Spark master URL add --engine spark"
        ))),
    }
}

fn summary(
    plan: &ferry_plan::JobPlan,
    metrics: &Metrics,
    elapsed: Duration,
    outcome: RunOutcome,
) -> String {
    let read = metrics.read();
    let written = metrics.written();
    let total_read: u64 = read.values().sum();
    let secs = elapsed.as_secs_f64().max(1e-9);
    let fmt = |m: &std::collections::BTreeMap<String, u64>| {
        m.iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    format!(
        "ferry: job '{}' {} in {:.2} s: read {} [{}], wrote [{}], {:.0} rows/s",
        plan.job.job_name,
        if outcome == RunOutcome::Savepoint {
            "stopped with a savepoint"
        } else {
            "finished"
        },
        secs,
        total_read,
        fmt(&read),
        fmt(&written),
        total_read as f64 / secs
    )
}

/// Source readers' own figures for the progress line (`, lag_bytes 1200, streaming 1`):
/// each name summed over the readers reporting it (lags in bytes or messages add up), but
/// for times, which take the largest.
fn figures_text(figures: &[(String, usize, &'static str, f64)]) -> String {
    runner::sum_figures(figures)
        .iter()
        .map(|(n, v)| format!(", {n} {}", (v * 100.0).round() / 100.0))
        .collect()
}

/// A progress line on a terminal, for runs longer than a second.
fn start_progress(metrics: Arc<Metrics>) -> Arc<AtomicBool> {
    let done = Arc::new(AtomicBool::new(false));
    if !std::io::stderr().is_terminal() {
        return done;
    }
    let done2 = done.clone();
    let _ = std::thread::Builder::new()
        .name("progress".into())
        .spawn(move || {
            let start = Instant::now();
            let mut printed = false;
            while !done2.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(250));
                if start.elapsed() >= Duration::from_secs(1) && !done2.load(Ordering::SeqCst) {
                    let read: u64 = metrics.read().values().sum();
                    let written: u64 = metrics.written().values().sum();
                    let secs = start.elapsed().as_secs_f64();
                    eprint!(
                        "\r\x1b[2Kferry: {secs:.0} s, read {read}, written {written}, {:.0} rows/s{}",
                        read as f64 / secs,
                        figures_text(&metrics.figures())
                    );
                    printed = true;
                }
            }
            if printed {
                eprint!("\r\x1b[2K");
            }
        });
    done
}

fn connectors(name: Option<&str>) -> Result<ExitCode, FerryError> {
    let reg = registry::builtin();
    match name {
        None => {
            println!("Sources:");
            for f in reg.sources() {
                println!("  {:<16} {}", f.name(), f.description());
            }
            println!("Transforms:");
            for f in reg.transforms() {
                println!("  {:<16} {}", f.name(), f.description());
            }
            println!("Sinks:");
            for f in reg.sinks() {
                println!("  {:<16} {}", f.name(), f.description());
            }
            println!("\n`ferry connectors NAME` shows a plugin's options.");
        }
        Some(n) => {
            let mut found = false;
            let mut show = |kind: &str, name: &str, desc: &str, opts: &[OptionSpec]| {
                found = true;
                println!("{name} ({kind}): {desc}\n");
                println!(
                    "{:<32} {:<24} {:<9} {:<12} DESCRIPTION",
                    "OPTION", "TYPE", "REQUIRED", "DEFAULT"
                );
                for o in opts {
                    // Declared defaults are Rust literals (`"json"`), descriptions doc
                    // comments that may span lines: shown as one line of plain text.
                    let default = o.default.map_or("-", |d| d.trim_matches('"'));
                    let description = o
                        .description
                        .split_whitespace()
                        .collect::<Vec<_>>()
                        .join(" ");
                    println!(
                        "{:<32} {:<24} {:<9} {:<12} {}",
                        o.name,
                        o.kind.describe(),
                        if o.required { "yes" } else { "no" },
                        default,
                        description
                    );
                }
                println!();
            };
            if let Some(f) = reg.find_source(n) {
                show("source", f.name(), f.description(), f.options());
            }
            if let Some(f) = reg.find_transform(n) {
                show("transform", f.name(), f.description(), f.options());
            }
            if let Some(f) = reg.find_sink(n) {
                show("sink", f.name(), f.description(), f.options());
            }
            if !found {
                let all: Vec<&str> = reg
                    .sources()
                    .map(|f| f.name())
                    .chain(reg.transforms().map(|f| f.name()))
                    .chain(reg.sinks().map(|f| f.name()))
                    .collect();
                let hint = ferry_api::error::nearest(n, all.iter().copied())
                    .map(|s| format!("did you mean '{s}'? "))
                    .unwrap_or_default();
                return Err(FerryError::config(format!(
                    "no connector or transform named '{n}' ({hint}`ferry connectors` lists them)"
                )));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    #[test]
    fn figures_sum_over_readers_and_times_take_the_largest() {
        let f = vec![
            ("cdc".to_string(), 0, "lag_bytes", 100.0),
            ("cdc".to_string(), 1, "lag_bytes", 20.0),
            ("cdc".to_string(), 0, "lag_seconds", 1.5),
            ("cdc".to_string(), 1, "lag_seconds", 0.25),
        ];
        assert_eq!(super::figures_text(&f), ", lag_bytes 120, lag_seconds 1.5");
    }

    use super::log_colours;
    use std::ffi::OsStr;

    #[test]
    fn logs_are_coloured_only_on_a_terminal_without_no_color() {
        assert!(log_colours(true, None));
        assert!(log_colours(true, Some(OsStr::new(""))));
        assert!(!log_colours(true, Some(OsStr::new("1"))));
        assert!(!log_colours(false, None));
        assert!(!log_colours(false, Some(OsStr::new(""))));
    }
}
