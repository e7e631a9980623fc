//! The `env` section: job-wide settings.

use std::collections::HashMap;
use std::sync::Arc;

use ferry_api::error::nearest;
use ferry_api::{JobMode, Options, PluginLocation, Result};
use serde_json::{Map, Value};

/// Job-wide settings from the `env` section.
#[derive(Debug, Clone)]
pub struct EnvConfig {
    /// `job.mode`: `BATCH` or `STREAMING` (case-insensitive); `BATCH` when absent.
    pub mode: JobMode,
    /// `job.name`.
    pub job_name: Option<String>,
    /// `parallelism` (or `execution.parallelism`): the default parallelism of plugins.
    pub parallelism: Option<usize>,
    /// `checkpoint.interval`, in milliseconds.
    pub checkpoint_interval_ms: Option<u64>,
    /// `checkpoint.timeout`, in milliseconds.
    pub checkpoint_timeout_ms: Option<u64>,
    /// `checkpoint.on-idle`: also checkpoint as soon as every reader has caught up.
    pub checkpoint_on_idle: Option<bool>,
    /// `checkpoint.min-pause`, in milliseconds: the least time between two checkpoints.
    pub checkpoint_min_pause_ms: Option<u64>,
    /// `checkpoint.mode`: `exactly-once` or `at-least-once` (lower case).
    pub checkpoint_mode: Option<String>,
    /// `checkpoint.retained`: how many completed checkpoints to keep.
    pub checkpoint_retained: Option<usize>,
    /// `job.retry.times`.
    pub retry_times: Option<u32>,
    /// `job.retry.interval.seconds`.
    pub retry_interval_secs: Option<u64>,
    /// Every other `env` key, flattened to dotted names (`spark.executor.memory`).
    pub extra: Map<String, Value>,
}

impl Default for EnvConfig {
    fn default() -> Self {
        EnvConfig {
            mode: JobMode::Batch,
            job_name: None,
            parallelism: None,
            checkpoint_interval_ms: None,
            checkpoint_timeout_ms: None,
            checkpoint_on_idle: None,
            checkpoint_min_pause_ms: None,
            checkpoint_mode: None,
            checkpoint_retained: None,
            retry_times: None,
            retry_interval_secs: None,
            extra: Map::new(),
        }
    }
}

/// The `env` keys Ferry reads.
pub const KNOWN_ENV_KEYS: &[&str] = &[
    "job.mode",
    "job.name",
    "parallelism",
    "execution.parallelism",
    "checkpoint.interval",
    "checkpoint.timeout",
    "checkpoint.on-idle",
    "checkpoint.min-pause",
    "checkpoint.mode",
    "checkpoint.retained",
    "job.retry.times",
    "job.retry.interval.seconds",
];

/// `env` keys SeaTunnel knows that Ferry keeps in `extra` without a warning.
const SEATUNNEL_ENV_KEYS: &[&str] = &[
    "read_limit.rows_per_second",
    "read_limit.bytes_per_second",
    "savemode.execute.location",
    "jars",
    "custom_parameters",
    "tag_filter",
    "shade.identifier",
    "shade.props",
];

/// Prefixes of engine-specific keys, passed through `extra` to the engine that reads them.
const ENGINE_PREFIXES: &[&str] = &["spark.", "flink.", "execution.", "ferry."];

const JOB_MODES: &[&str] = &["BATCH", "STREAMING"];
const CHECKPOINT_MODES: &[&str] = &["exactly-once", "at-least-once"];

/// Reads the `env` block `values`; unknown keys go to `extra` with a warning in `warnings`.
pub(crate) fn read_env(
    values: Map<String, Value>,
    file: &str,
    lines: HashMap<String, usize>,
    warnings: &mut Vec<String>,
) -> Result<EnvConfig> {
    let location = PluginLocation {
        file: file.to_string(),
        section: String::new(),
        plugin: "env".into(),
        line: lines.get("").copied(),
        lines: Arc::new(lines),
    };
    let mut flat = Map::new();
    flatten(&values, "", &mut flat);
    let mut opts = Options::new(values, location.clone());
    let mut env = EnvConfig {
        mode: match opts.enum_value("job.mode", JOB_MODES)? {
            Some("STREAMING") => JobMode::Streaming,
            _ => JobMode::Batch,
        },
        job_name: opts.string("job.name")?,
        ..EnvConfig::default()
    };
    env.parallelism = match opts.u64("parallelism")? {
        Some(p) => Some(p),
        None => opts.u64("execution.parallelism")?,
    }
    .map(|p| positive(&location, "parallelism", p))
    .transpose()?;
    env.checkpoint_interval_ms = opts.u64("checkpoint.interval")?;
    env.checkpoint_timeout_ms = opts.u64("checkpoint.timeout")?;
    env.checkpoint_on_idle = opts.bool("checkpoint.on-idle")?;
    env.checkpoint_min_pause_ms = opts.u64("checkpoint.min-pause")?;
    env.checkpoint_mode = opts
        .enum_value("checkpoint.mode", CHECKPOINT_MODES)?
        .map(str::to_string);
    env.checkpoint_retained = opts.u64("checkpoint.retained")?.map(|n| n as usize);
    env.retry_times = match opts.u64("job.retry.times")? {
        Some(n) => Some(
            u32::try_from(n)
                .map_err(|_| location.error("job.retry.times", format!("{n} is too large")))?,
        ),
        None => None,
    };
    env.retry_interval_secs = opts.u64("job.retry.interval.seconds")?;

    for (key, value) in flat {
        if KNOWN_ENV_KEYS.contains(&key.as_str()) {
            continue;
        }
        let lower = key.to_ascii_lowercase();
        let engine_key = ENGINE_PREFIXES.iter().any(|p| lower.starts_with(p));
        let seatunnel_key = SEATUNNEL_ENV_KEYS
            .iter()
            .any(|k| lower == *k || lower.starts_with(&format!("{k}.")));
        if !engine_key && !seatunnel_key {
            if let Some(near) = nearest(&key, KNOWN_ENV_KEYS.iter().copied()) {
                return Err(location.error_with_hint(
                    &key,
                    "unknown env key",
                    format!("did you mean '{near}'?"),
                ));
            }
            warnings.push(format!(
                "{}: env: unknown key '{key}' (kept for the engine; Ferry reads {})",
                location_text(&location, &key),
                KNOWN_ENV_KEYS.join(", ")
            ));
        }
        env.extra.insert(key, value);
    }
    Ok(env)
}

fn location_text(location: &PluginLocation, key: &str) -> String {
    match location.line_of(key) {
        Some(line) => format!("{}:{line}", location.file),
        None => location.file.clone(),
    }
}

fn positive(location: &PluginLocation, key: &str, n: u64) -> Result<usize> {
    if n == 0 {
        return Err(location.error(key, "must be at least 1"));
    }
    usize::try_from(n).map_err(|_| location.error(key, format!("{n} is too large")))
}

/// Flattens nested objects to dotted keys; lists and empty objects are leaves.
pub(crate) fn flatten(values: &Map<String, Value>, prefix: &str, out: &mut Map<String, Value>) {
    for (k, v) in values {
        let key = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            Value::Object(inner) if !inner.is_empty() => flatten(inner, &key, out),
            other => {
                out.insert(key, other.clone());
            }
        }
    }
}

/// Checks a per-plugin or job parallelism value.
pub(crate) fn check_parallelism(location: &PluginLocation, key: &str, n: u64) -> Result<usize> {
    positive(location, key, n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn env(v: Value) -> Result<(EnvConfig, Vec<String>)> {
        let mut lines = HashMap::new();
        lines.insert("job.mdoe".to_string(), 3);
        lines.insert("job.mode".to_string(), 3);
        let mut warnings = Vec::new();
        let map = v.as_object().cloned().unwrap_or_default();
        read_env(map, "job.conf", lines, &mut warnings).map(|e| (e, warnings))
    }

    #[test]
    fn reads_known_keys_nested_or_flat() {
        let (e, w) = env(json!({
            "job": {"mode": "streaming", "name": "n", "retry": {"times": 3, "interval": {"seconds": "5"}}},
            "execution.parallelism": 4,
            "checkpoint": {"interval": 10000, "timeout": 600000, "mode": "AT-LEAST-ONCE", "retained": 2},
            "checkpoint.on-idle": "true",
            "checkpoint.min-pause": 250,
            "spark.executor.memory": "1g",
            "spark": {"master": "local"}
        }))
        .unwrap();
        assert_eq!(e.mode, JobMode::Streaming);
        assert_eq!(e.job_name.as_deref(), Some("n"));
        assert_eq!(e.parallelism, Some(4));
        assert_eq!(
            (e.checkpoint_interval_ms, e.checkpoint_timeout_ms),
            (Some(10000), Some(600000))
        );
        assert_eq!(e.checkpoint_mode.as_deref(), Some("at-least-once"));
        assert_eq!(e.checkpoint_retained, Some(2));
        assert_eq!(
            (e.checkpoint_on_idle, e.checkpoint_min_pause_ms),
            (Some(true), Some(250))
        );
        assert_eq!((e.retry_times, e.retry_interval_secs), (Some(3), Some(5)));
        assert_eq!(e.extra.get("spark.executor.memory"), Some(&json!("1g")));
        assert_eq!(e.extra.get("spark.master"), Some(&json!("local")));
        assert!(!e.extra.contains_key("execution.parallelism"));
        assert!(w.is_empty(), "{w:?}");
    }

    #[test]
    fn defaults_to_batch() {
        let (e, _) = env(json!({})).unwrap();
        assert_eq!(e.mode, JobMode::Batch);
        assert_eq!(e.parallelism, None);
    }

    #[test]
    fn bad_job_mode_lists_valid_values() {
        let err = env(json!({"job": {"mode": "sometimes"}}))
            .unwrap_err()
            .to_string();
        assert_eq!(err, "job.conf:3: env: option 'job.mode': invalid value 'sometimes' (valid values: BATCH, STREAMING)");
    }

    #[test]
    fn misspelt_key_is_an_error_unknown_key_a_warning() {
        let err = env(json!({"job.mdoe": "BATCH"})).unwrap_err().to_string();
        assert_eq!(
            err,
            "job.conf:3: env: option 'job.mdoe': unknown env key (did you mean 'job.mode'?)"
        );
        let (e, w) = env(json!({"my_custom_setting": 1, "jars": "a.jar"})).unwrap();
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("unknown key 'my_custom_setting'"), "{w:?}");
        assert_eq!(e.extra.len(), 2);
    }

    #[test]
    fn invalid_numbers_and_modes_are_errors() {
        assert!(env(json!({"parallelism": 0}))
            .unwrap_err()
            .to_string()
            .contains("must be at least 1"));
        assert!(env(json!({"parallelism": "x"}))
            .unwrap_err()
            .to_string()
            .contains("expected a whole number"));
        let e = env(json!({"checkpoint.mode": "twice"}))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("valid values: exactly-once, at-least-once"),
            "{e}"
        );
        assert!(env(json!({"checkpoint.interval": -1}))
            .unwrap_err()
            .to_string()
            .contains("must not be negative"));
    }
}
