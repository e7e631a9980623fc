//! A job as the Spark engine carries it: the job file's text and variables travel to
//! every Spark worker, which builds the same plan with `ferry_plan::build_plan` and the
//! same registry as the `ferry` binary. No connector or planning logic lives here: the
//! plan-graph queries (chains, the tables of a stream) are `ferry_plan`'s too.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use ferry_api::{Boundedness, FerryError, JobMode, Result, TableSchema};
pub use ferry_plan::Chain;
use ferry_plan::{build_plan, Delivery, JobPlan, PlanOptions};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::convert::StreamCodec;

/// What a worker needs to rebuild a job's plan: serialised into every Spark partition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobSpec {
    /// The job file's text.
    pub text: String,
    /// The job file's path, for messages and relative includes.
    pub file: String,
    /// User variables (`-i`), plus the environment variables the text refers to, read on
    /// the driver so that every worker resolves `${name}` the same way.
    pub vars: BTreeMap<String, String>,
    /// Default parallelism from the command line.
    pub parallelism: Option<usize>,
    /// The job id (`--job-id`).
    pub job_id: Option<String>,
}

impl JobSpec {
    /// Reads the job file at `path` on the driver.
    pub fn from_file(
        path: &Path,
        user_vars: &[(String, String)],
        parallelism: Option<usize>,
        job_id: Option<String>,
    ) -> Result<Self> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| FerryError::config(format!("{file}: cannot read the job file: {e}")))?;
        let mut vars = BTreeMap::new();
        // `load_job` falls back on the environment; workers may run elsewhere, so the
        // driver's values of the names the text mentions travel with the job.
        for (k, v) in std::env::vars() {
            if text.contains(&format!("${{{k}")) || text.contains(&format!("${{?{k}")) {
                vars.insert(k, v);
            }
        }
        for (k, v) in user_vars {
            vars.insert(k.clone(), v.clone());
        }
        Ok(JobSpec {
            text,
            file,
            vars,
            parallelism,
            job_id,
        })
    }

    /// The spec as JSON text (what partitions carry).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Parses [`JobSpec::to_json`]'s output.
    pub fn from_json(text: &str) -> Result<Self> {
        serde_json::from_str(text)
            .map_err(|e| FerryError::internal(format!("malformed job spec: {e}")))
    }
}

/// A job's spec and its plan.
#[derive(Debug)]
pub struct SparkJob {
    /// What it was built from.
    pub spec: JobSpec,
    /// The plan, with every plugin created.
    pub plan: JobPlan,
    /// Warnings from reading the job file.
    pub warnings: Vec<String>,
    /// The job file's `spark.*` env options, for the Spark session (as SeaTunnel's Spark
    /// engine passes them on).
    pub spark_conf: BTreeMap<String, String>,
}

impl SparkJob {
    /// Parses the job file and builds its plan through the built-in registry.
    pub fn build(spec: JobSpec) -> Result<Self> {
        let vars: HashMap<String, String> = spec
            .vars
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let job = ferry_config::parse_job(&spec.text, &spec.file, &vars)?;
        let warnings = job.warnings.clone();
        let mut spark_conf = BTreeMap::new();
        flatten_conf("", &Value::Object(job.env_options.clone()), &mut spark_conf);
        spark_conf.retain(|k, _| k.starts_with("spark."));
        let plan = build_plan(
            job,
            &ferry_plugins::builtin(),
            &PlanOptions {
                parallelism: spec.parallelism,
                job_id: spec.job_id.clone(),
            },
        )?;
        if let Some(why) = plan.long_lived_readers().first() {
            return Err(FerryError::config(format!(
                "{}: this job cannot run on Spark, whose read tasks start a new reader for \
                 every micro-batch: {why}; run it with --engine local",
                spec.file
            )));
        }
        Ok(SparkJob {
            spec,
            plan,
            warnings,
            spark_conf,
        })
    }

    /// The tables stream `stream` carries (its last definition).
    pub fn stream_tables(&self, stream: &str) -> Result<&[TableSchema]> {
        self.plan.stream_tables(stream)
    }

    /// The tables source `index` emits.
    pub fn source_tables(&self, index: usize) -> Result<&[TableSchema]> {
        let s = self
            .plan
            .sources
            .get(index)
            .ok_or_else(|| FerryError::internal(format!("no source {index}")))?;
        Ok(&s.tables)
    }

    /// The tables sink `index` receives: those of its input streams, in order (the union
    /// of several inputs, as the embedded engine gives them to the sink).
    pub fn sink_input(&self, index: usize) -> Result<&[TableSchema]> {
        let sink = self
            .plan
            .sinks
            .get(index)
            .ok_or_else(|| FerryError::internal(format!("no sink {index}")))?;
        Ok(&sink.tables)
    }

    /// The tables transform `index` receives: those of its input streams, in order.
    pub fn transform_input(&self, index: usize) -> Result<Vec<TableSchema>> {
        self.plan.transform_input(index)
    }

    /// The tables transform `index` emits.
    pub fn transform_output(&self, index: usize) -> Result<&[TableSchema]> {
        let t = self
            .plan
            .transforms
            .get(index)
            .ok_or_else(|| FerryError::internal(format!("no transform {index}")))?;
        Ok(&t.tables)
    }

    /// The job cut into [`Chain`]s, one per source, in source order.
    pub fn chains(&self) -> Vec<Chain> {
        self.plan.chains()
    }

    /// The plan as the Python driver reads it: sources, transforms and sinks with their
    /// streams and Spark schemas, mode, checkpoint interval and delivery.
    pub fn plan_json(&self) -> Result<Value> {
        let p = &self.plan;
        let names = |tables: &[TableSchema]| -> Vec<String> {
            tables.iter().map(|t| t.name.to_string()).collect()
        };
        let schema = |tables: &[TableSchema]| StreamCodec::new(tables)?.spark_schema_json();
        let mut sources = Vec::new();
        for (i, s) in p.sources.iter().enumerate() {
            sources.push(json!({
                "index": i,
                "plugin": s.plugin,
                "output": s.output,
                "parallelism": s.parallelism,
                "bounded": s.source.boundedness() == Boundedness::Bounded,
                "schema": schema(&s.tables)?,
                "tables": names(&s.tables),
            }));
        }
        let mut transforms = Vec::new();
        for (i, t) in p.transforms.iter().enumerate() {
            transforms.push(json!({
                "index": i,
                "plugin": t.plugin,
                "inputs": t.inputs,
                "input_schema": schema(&self.transform_input(i)?)?,
                "output": t.output,
                "schema": schema(&t.tables)?,
                "tables": names(&t.tables),
            }));
        }
        let mut sinks = Vec::new();
        for (i, s) in p.sinks.iter().enumerate() {
            sinks.push(json!({
                "index": i,
                "plugin": s.plugin,
                "label": s.label,
                "inputs": s.inputs,
                "input_schema": schema(&s.tables)?,
                "parallelism": s.parallelism,
            }));
        }
        let (delivery, reason) = match &p.delivery {
            Delivery::ExactlyOnce => ("exactly-once", Value::Null),
            Delivery::AtLeastOnce(why) => ("at-least-once", Value::String(why.clone())),
        };
        Ok(json!({
            "name": p.job.job_name,
            "job_id": p.job.job_id,
            "mode": if p.job.mode == JobMode::Batch { "BATCH" } else { "STREAMING" },
            "delivery": delivery,
            "delivery_reason": reason,
            "checkpoint_interval_ms": p.checkpoint.interval_ms,
            // How a STREAMING job's micro-batches run: the planner decides, not the driver.
            "micro_batch": p.checkpoint.micro_batch(),
            "fingerprint": p.fingerprint,
            "sources": sources,
            "transforms": transforms,
            "sinks": sinks,
            "chains": self.chains(),
            "spark_conf": self.spark_conf,
            "warnings": self.warnings,
        }))
    }
}

/// Options as Spark configuration entries: nested objects (`spark { app.name = x }`)
/// become dotted keys, values their text.
fn flatten_conf(prefix: &str, v: &Value, out: &mut BTreeMap<String, String>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten_conf(&key, v, out);
            }
        }
        Value::String(s) => {
            out.insert(prefix.to_string(), s.clone());
        }
        Value::Null => {}
        other => {
            out.insert(prefix.to_string(), other.to_string());
        }
    }
}

type Cache = Mutex<HashMap<String, Arc<SparkJob>>>;

/// The plan of the job in `spec_json`, built once per process: Spark's Python workers are
/// reused across tasks, and building a plan (a SQL query, a file listing) is not free.
pub fn cached(spec_json: &str) -> Result<Arc<SparkJob>> {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(j) = cache
        .lock()
        .map_err(|_| FerryError::internal("job cache poisoned"))?
        .get(spec_json)
    {
        return Ok(j.clone());
    }
    let job = Arc::new(SparkJob::build(JobSpec::from_json(spec_json)?)?);
    let mut c = cache
        .lock()
        .map_err(|_| FerryError::internal("job cache poisoned"))?;
    // A worker serves one application; a handful of jobs is the most it sees.
    if c.len() >= 16 {
        c.clear();
    }
    c.insert(spec_json.to_string(), job.clone());
    Ok(job)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn spec(text: &str) -> JobSpec {
        JobSpec {
            text: text.into(),
            file: "job.conf".into(),
            vars: BTreeMap::new(),
            parallelism: None,
            job_id: None,
        }
    }

    const FAKE: &str = r#"
        env { job.mode = BATCH, parallelism = 2 }
        source { FakeSource { plugin_output = fake, row.num = 10, schema = { fields { id = bigint, t = time } } } }
        transform { Filter { plugin_input = fake, plugin_output = f, include_fields = [id] } }
        sink { Assert { plugin_input = f, rules { row_rules = [{ rule_type = MIN_ROW, rule_value = 10 }] } } }
    "#;

    #[test]
    fn plan_json_lists_streams_with_spark_schemas() {
        let job = SparkJob::build(spec(FAKE)).unwrap();
        let j = job.plan_json().unwrap();
        assert_eq!(j["mode"], "BATCH");
        assert_eq!(j["sources"][0]["parallelism"], 2);
        assert_eq!(j["sources"][0]["schema"]["fields"][1]["type"], "string");
        assert_eq!(j["transforms"][0]["inputs"][0], "fake");
        assert_eq!(
            j["transforms"][0]["schema"]["fields"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
        assert_eq!(j["sinks"][0]["inputs"][0], "f");
        assert_eq!(job.sink_input(0).unwrap()[0].schema.fields().len(), 1);
    }

    #[test]
    fn spark_options_of_the_env_section_become_spark_configuration() {
        let text = r#"
            env {
              job.mode = BATCH
              spark.app.name = "SeaTunnel"
              spark.executor.instances = 2
              spark { executor.memory = "1g" }
            }
            source { FakeSource { plugin_output = fake, row.num = 1, schema = { fields { id = bigint } } } }
            sink { Console { plugin_input = fake } }
        "#;
        let job = SparkJob::build(spec(text)).unwrap();
        let conf: Vec<_> = job
            .spark_conf
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        assert_eq!(
            conf,
            [
                "spark.app.name=SeaTunnel",
                "spark.executor.instances=2",
                "spark.executor.memory=1g"
            ]
        );
        assert_eq!(
            job.plan_json().unwrap()["spark_conf"]["spark.app.name"],
            "SeaTunnel"
        );
    }

    #[test]
    fn a_linear_job_is_one_chain_from_source_to_sink() {
        let job = SparkJob::build(spec(FAKE)).unwrap();
        assert_eq!(
            job.chains(),
            vec![Chain {
                source: 0,
                transforms: vec![0],
                sink: Some(0),
                output: "f".into(),
            }]
        );
        assert_eq!(job.plan_json().unwrap()["chains"][0]["sink"], 0);
    }

    #[test]
    fn a_chain_stops_where_a_stream_has_several_readers() {
        // `fake` feeds a transform and a sink; `other` feeds two sinks.
        let text = r#"
            env { job.mode = BATCH }
            source {
              FakeSource { plugin_output = fake, row.num = 3, schema = { fields { id = bigint, s = string } } }
              FakeSource { plugin_output = other, row.num = 3, schema = { fields { id = bigint } } }
            }
            transform {
              Filter { plugin_input = fake, plugin_output = a, include_fields = [id] }
              Filter { plugin_input = a, plugin_output = b, include_fields = [id] }
            }
            sink {
              Console { plugin_input = fake }
              Console { plugin_input = b }
              Console { plugin_input = other }
              Console { plugin_input = other }
            }
        "#;
        let job = SparkJob::build(spec(text)).unwrap();
        let chains = job.chains();
        assert_eq!(chains[0].transforms, Vec::<usize>::new());
        assert_eq!(chains[0].sink, None);
        assert_eq!(chains[0].output, "fake");
        assert_eq!(chains[1].sink, None, "two sinks read `other`");
        assert_eq!(chains.len(), 2);
    }

    #[test]
    fn a_chain_takes_every_transform_of_a_straight_line() {
        let text = r#"
            env { job.mode = BATCH }
            source { FakeSource { plugin_output = a, row.num = 3, schema = { fields { id = bigint, s = string } } } }
            transform {
              Filter { plugin_input = a, plugin_output = c, include_fields = [id, s] }
              Filter { plugin_input = c, plugin_output = b, include_fields = [id] }
            }
            sink { Console { plugin_input = b } }
        "#;
        let job = SparkJob::build(spec(text)).unwrap();
        assert_eq!(
            job.chains(),
            vec![Chain {
                source: 0,
                transforms: vec![0, 1],
                sink: Some(0),
                output: "b".into(),
            }]
        );
    }

    #[test]
    fn multi_table_streams_and_several_inputs_are_planned_for_spark() {
        // Two sources into one sink without plugin_input (SeaTunnel's usual shape), and a
        // multi-table source into a transform.
        let text = r#"
            env { job.mode = BATCH }
            source {
              FakeSource { row.num = 3, schema = { fields { id = bigint } } }
              FakeSource { row.num = 3, schema = { fields { id = bigint } } }
              FakeSource {
                plugin_output = multi
                tables_configs = [
                  { row.num = 2, schema { table = "db.a", fields { x = int } } },
                  { row.num = 2, schema { table = "db.b", fields { y = string } } }
                ]
              }
            }
            transform { TableFilter { plugin_input = multi, plugin_output = only_a, table_pattern = "a" } }
            sink {
              Console { plugin_input = [__source_0, __source_1] }
              Console { plugin_input = only_a }
            }
        "#;
        let job = SparkJob::build(spec(text)).unwrap();
        let j = job.plan_json().unwrap();
        let fields = |v: &Value| -> Vec<String> {
            v["fields"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f["name"].as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(j["sources"][2]["tables"], json!(["db.a", "db.b"]));
        assert_eq!(
            fields(&j["sources"][2]["schema"]),
            [
                "__ferry_table",
                "__ferry_t0",
                "__ferry_t1",
                "__ferry_row_kind"
            ]
        );
        assert_eq!(
            fields(&j["transforms"][0]["schema"]),
            ["x", "__ferry_row_kind"]
        );
        assert_eq!(
            fields(&j["sinks"][0]["input_schema"]),
            [
                "__ferry_table",
                "__ferry_t0",
                "__ferry_t1",
                "__ferry_row_kind"
            ]
        );
        assert_eq!(job.sink_input(0).unwrap().len(), 2);
        // A sink with two inputs reads data frames: no chain ends in it.
        let chains = job.chains();
        assert_eq!((chains[0].sink, chains[1].sink), (None, None));
        assert_eq!(chains[2].transforms, vec![0]);
        assert_eq!(chains[2].sink, Some(1));
    }

    #[test]
    fn the_spec_round_trips_and_the_cache_returns_one_plan() {
        let s = spec(FAKE);
        assert_eq!(JobSpec::from_json(&s.to_json()).unwrap(), s);
        let a = cached(&s.to_json()).unwrap();
        let b = cached(&s.to_json()).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
    }

    #[test]
    fn errors_in_the_job_file_name_the_file() {
        let e = SparkJob::build(spec("source { NoSuch {} }\nsink { Console {} }"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("job.conf") && e.contains("NoSuch"), "{e}");
    }

    #[test]
    fn environment_variables_the_text_mentions_travel_with_the_job() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("j.conf");
        std::fs::write(&p, "env { job.name = ${HOME} }").unwrap();
        let s = JobSpec::from_file(&p, &[("x".into(), "1".into())], None, None).unwrap();
        assert!(s.vars.contains_key("HOME"));
        assert!(!s.vars.contains_key("PATH"));
        assert_eq!(s.vars["x"], "1");
    }
}
