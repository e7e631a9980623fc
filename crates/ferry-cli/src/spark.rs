//! `ferry run --engine spark`: hands the job to the Spark driver (`python -m ferry_spark`)
//! of the virtual environment that `scripts/setup-spark` prepares, replacing this process
//! so that signals, the exit code and the process id `ferry jobs` shows are the driver's.

use std::path::PathBuf;
use std::process::{Command, ExitCode};

use ferry_api::FerryError;

use crate::RunArgs;

/// The Python of the Spark virtual environment: `$FERRY_SPARK_PYTHON`, else
/// `$FERRY_SPARK_VENV/bin/python`, else `~/.cache/ferry/spark-venv/bin/python`.
pub fn python() -> Result<PathBuf, FerryError> {
    if let Some(p) = std::env::var_os("FERRY_SPARK_PYTHON") {
        return Ok(PathBuf::from(p));
    }
    let venv = std::env::var_os("FERRY_SPARK_VENV")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/ferry/spark-venv"))
        });
    let py = venv.map(|v| v.join("bin/python")).filter(|p| p.exists());
    py.ok_or_else(|| {
        FerryError::config(
            "the Spark engine is not installed: run scripts/setup-spark (or set FERRY_SPARK_VENV to its virtual environment)",
        )
    })
}

/// The driver's command line for `args`.
fn command(args: &RunArgs) -> Result<Command, FerryError> {
    let py = python()?;
    let mut c = Command::new(&py);
    c.args(["-m", "ferry_spark"]).arg(args.job.path()?);
    for v in &args.job.variables {
        c.arg("-i").arg(v);
    }
    if let Some(p) = args.job.parallelism {
        c.arg("-p").arg(p.to_string());
    }
    if let Some(m) = &args.master {
        c.arg("--master").arg(m);
    }
    if let Some(id) = &args.job_id {
        c.arg("--job-id").arg(id);
    }
    if args.from_scratch {
        c.arg("--from-scratch");
    }
    if args.job_id.is_some() || args.checkpoint_dir.is_some() {
        c.arg("--checkpoint-dir")
            .arg(ferry_plan::jobdir::checkpoint_dir_or_default(
                args.checkpoint_dir.clone(),
            ));
    }
    // Spark's workers run this Python too: it has the native module.
    c.env("PYSPARK_PYTHON", &py)
        .env("PYSPARK_DRIVER_PYTHON", &py);
    Ok(c)
}

/// Runs the job on Spark; returns only when the driver could not be started.
pub fn run(args: &RunArgs) -> Result<ExitCode, FerryError> {
    ferry_plan::parse_vars(&args.job.variables)?;
    if let Some(m) = &args.master {
        // SeaTunnel's Zeta spelling is no Spark master URL; Spark's own error would not say why.
        if m.eq_ignore_ascii_case("cluster") {
            return Err(FerryError::config(
                "-m cluster is SeaTunnel's cluster mode; with --engine spark, -m/--master is the Spark master URL (spark://HOST:PORT, yarn, k8s://…, local[N])",
            ));
        }
    }
    let mut c = command(args)?;
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        let e = c.exec();
        Err(FerryError::external(
            "spark",
            format!("cannot start the Spark driver: {e}"),
        ))
    }
    #[cfg(not(unix))]
    {
        let status = c.status().map_err(|e| {
            FerryError::external("spark", format!("cannot start the Spark driver: {e}"))
        })?;
        Ok(ExitCode::from(status.code().unwrap_or(1) as u8))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn the_driver_gets_the_job_its_variables_and_where_checkpoints_go() {
        std::env::set_var("FERRY_SPARK_PYTHON", "/opt/py/bin/python");
        // SeaTunnel's spellings: -c for the job file, -m for the master.
        let cli = crate::Cli::parse_from([
            "ferry",
            "run",
            "-c",
            "j.conf",
            "--engine",
            "spark",
            "-i",
            "a=1",
            "-m",
            "local[2]",
            "--job-id",
            "x",
            "--checkpoint-dir",
            "/ck",
        ]);
        let crate::Command::Run(args) = cli.command else {
            panic!("not a run")
        };
        let c = command(&args).unwrap();
        let argv: Vec<String> = c
            .get_args()
            .map(|a| a.to_string_lossy().to_string())
            .collect();
        assert_eq!(
            argv,
            [
                "-m",
                "ferry_spark",
                "j.conf",
                "-i",
                "a=1",
                "--master",
                "local[2]",
                "--job-id",
                "x",
                "--checkpoint-dir",
                "/ck"
            ]
        );
        assert_eq!(c.get_program(), "/opt/py/bin/python");
    }
}
