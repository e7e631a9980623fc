//! Turns a parsed job file into a [`JobPlan`]: every plugin created through the registry,
//! every table's schema known, and the wiring between them checked, before any data flows.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use ferry_api::{
    Boundedness, FerryError, JobContext, JobMode, Registry, ResolveContext, Result, Sink,
    SinkDelivery, Source, TableSchema, Transform, DEFAULT_RESOLVE_TIMEOUT,
};
use ferry_checkpoint::{hash_options, JobLayout, NodeLayout};
use ferry_config::{JobFile, PluginConfig};

/// What the job promises about duplicates and losses, decided before it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// Every row reaches every sink once, across crashes and restarts.
    ExactlyOnce,
    /// Rows may be written again after a restart; the reason says which part prevents more.
    AtLeastOnce(String),
}

impl std::fmt::Display for Delivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Delivery::ExactlyOnce => f.write_str("exactly-once"),
            Delivery::AtLeastOnce(why) => write!(f, "at-least-once ({why})"),
        }
    }
}

/// How barriers are handled by operators with several inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckpointMode {
    /// Inputs that delivered barrier N wait for the others (no row of N+1 is written before N is prepared).
    ExactlyOnce,
    /// Barriers pass through without waiting; a restart may repeat rows.
    AtLeastOnce,
}

/// Checkpoint settings of a job.
#[derive(Debug, Clone)]
pub struct CheckpointSettings {
    /// Interval between checkpoints, `None` for only the final one.
    pub interval_ms: Option<u64>,
    /// How long a checkpoint may take before it fails.
    pub timeout_ms: u64,
    /// Also checkpoint as soon as every reader has caught up with its input after rows
    /// flowed (`checkpoint.on-idle`), so that output is committed without waiting for the
    /// interval: what a Spark micro-batch does when its reader runs out of input.
    pub on_idle: bool,
    /// The least time from the end of one checkpoint to the start of the next periodic or
    /// on-idle one (`checkpoint.min-pause`); savepoints and the final checkpoint do not wait.
    pub min_pause: std::time::Duration,
    /// Barrier alignment.
    pub mode: CheckpointMode,
    /// Complete checkpoints kept on disk.
    pub retained: usize,
    /// Restarts from the latest checkpoint after a failure (`job.retry.times`).
    pub retry_times: u32,
    /// Pause before each restart (`job.retry.interval.seconds`).
    pub retry_interval: std::time::Duration,
}

/// `checkpoint.interval` of a STREAMING job that sets none, in ms: SeaTunnel's engine
/// checkpoints streaming jobs every 10 s, and transactional sinks publish only at
/// checkpoints.
pub const DEFAULT_STREAMING_INTERVAL_MS: u64 = 10_000;
/// `checkpoint.timeout` when the job sets none, in ms.
pub const DEFAULT_TIMEOUT_MS: u64 = 600_000;
/// `checkpoint.retained` when the job sets none.
pub const DEFAULT_RETAINED: usize = 3;
/// `job.retry.interval.seconds` when the job sets none.
pub const DEFAULT_RETRY_INTERVAL_SECS: u64 = 3;

impl CheckpointSettings {
    /// The settings of a job in `mode` with `env`, every default applied: the one place
    /// both engines take them from.
    ///
    /// `checkpoint.interval = 0` means *no periodic checkpoint* on every engine. A BATCH
    /// job then takes only its final checkpoint. A STREAMING job checkpoints whenever every
    /// reader has caught up with its input (as if `checkpoint.on-idle = true`), besides
    /// savepoints: on Spark, where a micro-batch is a checkpoint, each micro-batch reads
    /// until its readers have caught up and the next starts at once (see
    /// [`CheckpointSettings::micro_batch`]); a streaming job that never committed until it
    /// is stopped would hold every transactional sink's output back indefinitely.
    pub fn from_env(env: &ferry_config::EnvConfig, mode: JobMode) -> Self {
        let checkpoint_mode = match env
            .checkpoint_mode
            .as_deref()
            .map(|m| m.to_ascii_lowercase().replace('_', "-"))
        {
            Some(m) if m == "at-least-once" => CheckpointMode::AtLeastOnce,
            _ => CheckpointMode::ExactlyOnce,
        };
        let interval_ms = match (env.checkpoint_interval_ms, mode) {
            (Some(0), _) => None,
            (Some(i), _) => Some(i),
            (None, JobMode::Streaming) => Some(DEFAULT_STREAMING_INTERVAL_MS),
            (None, JobMode::Batch) => None,
        };
        let zero_streaming = env.checkpoint_interval_ms == Some(0) && mode == JobMode::Streaming;
        CheckpointSettings {
            interval_ms,
            timeout_ms: env.checkpoint_timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS),
            on_idle: env.checkpoint_on_idle.unwrap_or(false) || zero_streaming,
            min_pause: std::time::Duration::from_millis(env.checkpoint_min_pause_ms.unwrap_or(0)),
            mode: checkpoint_mode,
            retained: env.checkpoint_retained.unwrap_or(DEFAULT_RETAINED).max(1),
            retry_times: env.retry_times.unwrap_or(0),
            retry_interval: std::time::Duration::from_secs(
                env.retry_interval_secs
                    .unwrap_or(DEFAULT_RETRY_INTERVAL_SECS),
            ),
        }
    }

    /// How an engine whose checkpoints are micro-batches (Spark) runs a STREAMING job:
    /// a micro-batch starts every `trigger_ms` (0: as soon as the previous one ends), and
    /// each reader task reads for at most `read_budget_ms`, or, when that is `None`, until
    /// its reader has caught up with its input. With a periodic interval both are the
    /// interval; with none (`checkpoint.interval = 0`), micro-batches run back to back and
    /// each ends when its readers have caught up: a checkpoint whenever every reader has
    /// caught up, as the embedded engine takes one.
    pub fn micro_batch(&self) -> MicroBatch {
        match self.interval_ms {
            Some(i) => MicroBatch {
                trigger_ms: i,
                read_budget_ms: Some(i),
            },
            None => MicroBatch {
                trigger_ms: 0,
                read_budget_ms: None,
            },
        }
    }
}

/// The micro-batch schedule of a STREAMING job, see [`CheckpointSettings::micro_batch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct MicroBatch {
    /// Time between the starts of two micro-batches, ms (0: back to back).
    pub trigger_ms: u64,
    /// How long a reader task reads in one micro-batch, ms; `None`: until it has caught up.
    pub read_budget_ms: Option<u64>,
}

/// A source in the plan.
#[derive(Debug)]
pub struct SourceNode {
    /// Plugin name as written.
    pub plugin: String,
    /// Name of the stream it emits.
    pub output: String,
    /// Number of readers.
    pub parallelism: usize,
    /// The configured source.
    pub source: Arc<dyn Source>,
    /// Tables it emits (renamed to the stream name when there is one table).
    pub tables: Vec<TableSchema>,
    /// The table name stamped on its batches when it emits one table.
    pub rename: Option<Arc<str>>,
}

/// A transform in the plan.
#[derive(Debug)]
pub struct TransformNode {
    /// Plugin name as written.
    pub plugin: String,
    /// Streams it reads.
    pub inputs: Vec<String>,
    /// Stream it emits.
    pub output: String,
    /// The configured transform.
    pub transform: Arc<dyn Transform>,
    /// Tables it emits.
    pub tables: Vec<TableSchema>,
    /// The table name stamped on its batches when it emits one table.
    pub rename: Option<Arc<str>>,
}

/// A sink in the plan.
#[derive(Debug)]
pub struct SinkNode {
    /// Plugin name as written.
    pub plugin: String,
    /// Name in metrics and messages: the plugin name, with `#n` when several sinks share it.
    pub label: String,
    /// Streams it reads.
    pub inputs: Vec<String>,
    /// Number of writers.
    pub parallelism: usize,
    /// The configured sink.
    pub sink: Arc<dyn Sink>,
    /// Tables it receives.
    pub tables: Vec<TableSchema>,
}

/// A job ready to run.
#[derive(Debug)]
pub struct JobPlan {
    /// Job-wide facts.
    pub job: JobContext,
    /// Sources, in file order.
    pub sources: Vec<SourceNode>,
    /// Transforms, in file order (each reads only streams defined before it).
    pub transforms: Vec<TransformNode>,
    /// Sinks, in file order.
    pub sinks: Vec<SinkNode>,
    /// Checkpoint settings.
    pub checkpoint: CheckpointSettings,
    /// The delivery guarantee the job gets.
    pub delivery: Delivery,
    /// Hash of the resolved job file: a checkpoint taken with the same hash resumes as is.
    pub fingerprint: String,
    /// The job's shape, to decide whether a checkpoint of a changed job file can resume.
    pub layout: JobLayout,
}

/// Plan-time settings from the command line.
#[derive(Debug, Clone, Default)]
pub struct PlanOptions {
    /// Overrides `env.parallelism`.
    pub parallelism: Option<usize>,
    /// The job id (checkpoints are stored under it).
    pub job_id: Option<String>,
}

/// Creates every plugin of `job` through `registry` and checks the wiring.
pub fn build_plan(job: JobFile, registry: &Registry, opts: &PlanOptions) -> Result<JobPlan> {
    let default_parallelism = opts.parallelism.or(job.env.parallelism).unwrap_or(1).max(1);
    let job_name = job
        .env
        .job_name
        .clone()
        .unwrap_or_else(|| "ferry".to_string());
    let ctx = JobContext {
        mode: job.env.mode,
        job_id: opts.job_id.clone().unwrap_or_else(|| job_name.clone()),
        job_name,
    };
    let mut streams: BTreeMap<String, Vec<TableSchema>> = BTreeMap::new();
    let mut layout = JobLayout {
        mode: mode_name(ctx.mode).to_string(),
        env: hash_options(&job.env_options),
        ..JobLayout::default()
    };

    let mut sources = Vec::new();
    for mut p in job.sources {
        let parallelism = p.parallelism.unwrap_or(default_parallelism).max(1);
        layout
            .sources
            .push(NodeLayout::new(&p.name, parallelism, p.options.raw()));
        let factory = registry
            .find_source(&p.name)
            .ok_or_else(|| unknown_plugin(&p, registry.sources().map(|f| f.name())))?;
        let mut source = factory
            .create(&mut p.options, &ctx)
            .map_err(|e| in_plugin(e, &p))?;
        // The one step where a source may do I/O before data flows (connect, read its
        // tables' columns and keys), bounded so that an unreachable server fails planning.
        let resolve = ResolveContext::new(
            format!("source {}", p.name),
            ctx.clone(),
            DEFAULT_RESOLVE_TIMEOUT,
        );
        source.resolve(&resolve).map_err(|e| in_plugin(e, &p))?;
        let source: Arc<dyn Source> = Arc::from(source);
        let mut tables = source.tables();
        if tables.is_empty() {
            return Err(p.options.error("", "the source declares no table"));
        }
        for t in &tables {
            t.catalog
                .check_against(&t.schema)
                .map_err(|m| p.options.error("schema", format!("table {}: {m}", t.name)))?;
        }
        let rename = single_table_rename(&mut tables, &p.output);
        if ctx.mode == JobMode::Batch && source.boundedness() == Boundedness::Unbounded {
            return Err(p.options.error("", "this source is unbounded and cannot run in a BATCH job (set env.job.mode = STREAMING)"));
        }
        streams.insert(p.output.clone(), tables.clone());
        sources.push(SourceNode {
            plugin: p.name.clone(),
            output: p.output.clone(),
            parallelism,
            source,
            tables,
            rename,
        });
    }

    let mut transforms = Vec::new();
    for mut p in job.transforms {
        layout
            .transforms
            .push(NodeLayout::new(&p.name, 0, p.options.raw()));
        let factory = registry
            .find_transform(&p.name)
            .ok_or_else(|| unknown_plugin(&p, registry.transforms().map(|f| f.name())))?;
        let input = input_tables(&p, &streams)?;
        let transform = factory
            .create(&mut p.options, &input, &ctx)
            .map_err(|e| in_plugin(e, &p))?;
        let mut tables = transform.output_tables();
        // A transform that names its output table itself (TableRename, TableMerge) keeps
        // that name; one that passes the table through takes the stream's name.
        let renames_itself =
            input.len() != 1 || tables.len() != 1 || tables[0].name != input[0].name;
        let rename = if renames_itself {
            None
        } else {
            single_table_rename(&mut tables, &p.output)
        };
        streams.insert(p.output.clone(), tables.clone());
        transforms.push(TransformNode {
            plugin: p.name.clone(),
            inputs: p.inputs.clone(),
            output: p.output.clone(),
            transform,
            tables,
            rename,
        });
    }

    let mut sinks = Vec::new();
    for mut p in job.sinks {
        let parallelism = p.parallelism.unwrap_or(default_parallelism).max(1);
        layout
            .sinks
            .push(NodeLayout::new(&p.name, parallelism, p.options.raw()));
        let factory = registry
            .find_sink(&p.name)
            .ok_or_else(|| unknown_plugin(&p, registry.sinks().map(|f| f.name())))?;
        let input = input_tables(&p, &streams)?;
        let sink = factory
            .create(&mut p.options, &input, &ctx)
            .map_err(|e| in_plugin(e, &p))?;
        sinks.push(SinkNode {
            label: p.name.clone(),
            plugin: p.name.clone(),
            inputs: p.inputs.clone(),
            parallelism,
            sink,
            tables: input,
        });
    }

    for i in 0..sinks.len() {
        let same: Vec<usize> = (0..sinks.len())
            .filter(|j| sinks[*j].plugin.eq_ignore_ascii_case(&sinks[i].plugin))
            .collect();
        if same.len() > 1 {
            let n = same.iter().position(|j| *j == i).unwrap_or(0) + 1;
            sinks[i].label = format!("{}#{n}", sinks[i].plugin);
        }
    }
    let checkpoint = CheckpointSettings::from_env(&job.env, ctx.mode);
    let mode = checkpoint.mode;
    let delivery = decide_delivery(&sources, &sinks, mode);
    Ok(JobPlan {
        job: ctx,
        sources,
        transforms,
        sinks,
        checkpoint,
        delivery,
        fingerprint: job.fingerprint,
        layout,
    })
}

fn decide_delivery(sources: &[SourceNode], sinks: &[SinkNode], mode: CheckpointMode) -> Delivery {
    if mode == CheckpointMode::AtLeastOnce {
        return Delivery::AtLeastOnce("checkpoint.mode = at-least-once".into());
    }
    if let Some(s) = sources.iter().find(|s| !s.source.is_replayable()) {
        return Delivery::AtLeastOnce(format!(
            "source {} cannot replay from a checkpoint",
            s.plugin
        ));
    }
    if let Some(s) = sinks
        .iter()
        .find(|s| s.sink.delivery() != SinkDelivery::ExactlyOnce)
    {
        return Delivery::AtLeastOnce(match s.sink.delivery_reason() {
            Some(why) => format!(
                "sink {}: {}",
                s.plugin,
                why.strip_prefix("at-least-once: ").unwrap_or(&why)
            ),
            None => format!("sink {} is neither transactional nor idempotent", s.plugin),
        });
    }
    Delivery::ExactlyOnce
}

/// A stream that carries a single table is known by the stream's name, so that a
/// query or rule names the table the way the job file names the stream.
fn single_table_rename(tables: &mut [TableSchema], stream: &str) -> Option<Arc<str>> {
    // A generated stream name (`__source_0`, no plugin_output given) is no table name:
    // the table keeps the one its plugin gave it.
    if tables.len() == 1 && !stream.starts_with("__") {
        let name: Arc<str> = Arc::from(stream);
        tables[0].name = name.clone();
        Some(name)
    } else {
        None
    }
}

fn input_tables(
    p: &PluginConfig,
    streams: &BTreeMap<String, Vec<TableSchema>>,
) -> Result<Vec<TableSchema>> {
    let mut out = Vec::new();
    for input in &p.inputs {
        match streams.get(input) {
            Some(t) => out.extend(t.iter().cloned()),
            None => {
                let known: Vec<&str> = streams.keys().map(String::as_str).collect();
                return Err(p.options.location().error_with_hint(
                    "plugin_input",
                    format!("no plugin before this one outputs a table named '{input}'"),
                    format!("known tables: {}", known.join(", ")),
                ));
            }
        }
    }
    Ok(out)
}

/// Prepares every sink's target before any writer starts ([`Sink::setup`]): once per job
/// run, on the side that commits. `resumed` says the run continues from a checkpoint, so
/// that save modes that drop or recreate the target are not applied again.
pub fn setup_sinks(plan: &JobPlan, resumed: bool) -> Result<()> {
    for node in &plan.sinks {
        let mut ctx = ResolveContext::new(
            format!("sink {}", node.label),
            plan.job.clone(),
            DEFAULT_RESOLVE_TIMEOUT,
        );
        ctx.resumed = resumed;
        node.sink.setup(&ctx)?;
    }
    Ok(())
}

/// Says which plugin of which job file met an outside or data error while being set up
/// (a missing path, an unreachable database); configuration errors say it already.
fn in_plugin(e: FerryError, p: &PluginConfig) -> FerryError {
    let loc = p.options.location();
    let place = match loc.line {
        Some(l) => format!("{}:{l}: {}", loc.file, loc.describe()),
        None => format!("{}: {}", loc.file, loc.describe()),
    };
    match e {
        FerryError::External { component, message } => FerryError::External {
            component: place,
            message: strip_component(&component, message),
        },
        FerryError::Data { component, message } => FerryError::Data {
            component: place,
            message: strip_component(&component, message),
        },
        other => other,
    }
}

/// The message without a repeated plugin name (`LocalFile: LocalFile: …`).
fn strip_component(component: &str, message: String) -> String {
    match message.strip_prefix(&format!("{component}: ")) {
        Some(rest) => rest.to_string(),
        None => message,
    }
}

fn unknown_plugin<'a>(p: &PluginConfig, names: impl Iterator<Item = &'a str>) -> FerryError {
    let names: Vec<&str> = names.collect();
    let hint = match ferry_api::error::nearest(&p.name, names.iter().copied()) {
        Some(n) => format!("did you mean '{n}'? available: {}", names.join(", ")),
        None => format!("available: {}", names.join(", ")),
    };
    let loc = p.options.location();
    FerryError::Config {
        location: ferry_api::error::Location {
            file: loc.file.clone(),
            line: loc.line,
        },
        plugin: None,
        option: None,
        message: format!("unknown {} plugin '{}'", loc.section, p.name),
        hint: Some(hint),
    }
}

impl JobPlan {
    /// One line per source that needs a reader living from a checkpoint to its completion
    /// ([`Source::needs_long_lived_reader`]): "source RabbitMQ: <why>". Engines whose readers
    /// last one micro-batch (Spark) refuse a job with any.
    pub fn long_lived_readers(&self) -> Vec<String> {
        self.sources
            .iter()
            .filter_map(|s| {
                s.source
                    .needs_long_lived_reader()
                    .map(|why| format!("source {}: {why}", s.plugin))
            })
            .collect()
    }

    /// A readable description of the plan, for `ferry check`.
    pub fn describe(&self) -> String {
        let mut s = String::new();
        let mode = mode_name(self.job.mode);
        let _ = writeln!(s, "job '{}' ({mode})", self.job.job_name);
        let _ = writeln!(s, "delivery: {}", self.delivery);
        let when = match (self.checkpoint.interval_ms, self.checkpoint.on_idle) {
            (Some(i), false) => Some(format!("every {i} ms")),
            (Some(i), true) => Some(format!("every {i} ms and when every reader has caught up")),
            (None, true) => Some("when every reader has caught up".to_string()),
            (None, false) => None,
        };
        match when {
            Some(when) => {
                let _ = writeln!(
                    s,
                    "checkpoints: {when}, timeout {} ms, mode {:?}",
                    self.checkpoint.timeout_ms, self.checkpoint.mode
                );
            }
            None => {
                let _ = writeln!(s, "checkpoints: final only");
            }
        }
        match self.long_lived_readers().first() {
            None => {
                let _ = writeln!(s, "engines: local, spark");
            }
            Some(why) => {
                let _ = writeln!(s, "engines: local (not spark: {why})");
            }
        }
        for src in &self.sources {
            let replay = if src.source.is_replayable() {
                "replayable"
            } else {
                "not replayable: rows after the last checkpoint may come again"
            };
            let _ = writeln!(
                s,
                "source {} (parallelism {}) -> {} [{replay}]",
                src.plugin, src.parallelism, src.output
            );
            describe_tables(&mut s, &src.tables);
        }
        for t in &self.transforms {
            let _ = writeln!(
                s,
                "transform {} {} -> {}",
                t.plugin,
                t.inputs.join(", "),
                t.output
            );
            describe_tables(&mut s, &t.tables);
        }
        for k in &self.sinks {
            let _ = writeln!(
                s,
                "sink {} (parallelism {}) <- {} [{}]",
                k.label,
                k.parallelism,
                k.inputs.join(", "),
                sink_guarantee(k.sink.as_ref())
            );
        }
        s
    }
}

/// A sink's own guarantee and its reason, as `ferry check` prints it.
fn sink_guarantee(sink: &dyn ferry_api::Sink) -> String {
    let what = match sink.delivery() {
        SinkDelivery::ExactlyOnce => "exactly-once",
        SinkDelivery::AtLeastOnce => "at-least-once",
    };
    // A reason states the guarantee itself ("exactly-once in effect: upserts by key").
    sink.delivery_reason().unwrap_or_else(|| what.to_string())
}

/// `BATCH` or `STREAMING`, as job files spell it.
pub fn mode_name(mode: JobMode) -> &'static str {
    match mode {
        JobMode::Batch => "BATCH",
        JobMode::Streaming => "STREAMING",
    }
}

fn describe_tables(s: &mut String, tables: &[TableSchema]) {
    for t in tables {
        let cols: Vec<String> = t
            .schema
            .fields()
            .iter()
            .map(|f| {
                format!(
                    "{} {}",
                    f.name(),
                    ferry_api::types::type_name(f.data_type())
                )
            })
            .collect();
        let _ = writeln!(s, "    table {}: {}", t.name, cols.join(", "));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_config::EnvConfig;

    fn settings(mode: JobMode, interval: Option<u64>) -> CheckpointSettings {
        let env = EnvConfig {
            checkpoint_interval_ms: interval,
            ..EnvConfig::default()
        };
        CheckpointSettings::from_env(&env, mode)
    }

    #[test]
    fn checkpoint_interval_zero_means_no_periodic_checkpoint_on_every_engine() {
        // BATCH: the final checkpoint only, with or without 0.
        for i in [None, Some(0)] {
            let s = settings(JobMode::Batch, i);
            assert_eq!((s.interval_ms, s.on_idle), (None, false), "{i:?}");
        }
        // STREAMING with 0: whenever every reader has caught up; on Spark micro-batches
        // back to back, each read until its readers have caught up.
        let s = settings(JobMode::Streaming, Some(0));
        assert_eq!((s.interval_ms, s.on_idle), (None, true));
        assert_eq!(
            s.micro_batch(),
            MicroBatch {
                trigger_ms: 0,
                read_budget_ms: None
            }
        );
        // STREAMING without an interval: every 10 s, on both engines.
        let s = settings(JobMode::Streaming, None);
        assert_eq!((s.interval_ms, s.on_idle), (Some(10_000), false));
        assert_eq!(
            s.micro_batch(),
            MicroBatch {
                trigger_ms: 10_000,
                read_budget_ms: Some(10_000)
            }
        );
        assert_eq!(
            settings(JobMode::Streaming, Some(500)).micro_batch(),
            MicroBatch {
                trigger_ms: 500,
                read_budget_ms: Some(500)
            }
        );
    }
}
