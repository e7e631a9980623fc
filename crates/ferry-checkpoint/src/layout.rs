//! What a checkpoint's state is laid out by, and whether a changed job file can resume it.
//!
//! A checkpoint stores state by position: the enumerator and readers of source `i`, the
//! writers and prepared commits of sink `j`. A job file may change between two runs of the
//! same job id (a tuned filter, another checkpoint interval) and still resume, as long as
//! every piece of saved state finds its owner again: the same sources and sinks, of the
//! same plugins, in the same order, with the same number of readers and writers, in the
//! same job mode. Transforms keep no state, so they may change freely.
//!
//! Options are recorded as a hash per option, never as values, so that a checkpoint
//! directory holds no secret from the job file while a resume can still say which options
//! changed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// The shape of a job as far as its checkpoints are concerned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct JobLayout {
    /// `BATCH` or `STREAMING`.
    pub mode: String,
    /// Sources, in file order.
    pub sources: Vec<NodeLayout>,
    /// Transforms, in file order.
    pub transforms: Vec<NodeLayout>,
    /// Sinks, in file order.
    pub sinks: Vec<NodeLayout>,
    /// `env` options, hashed like a node's options.
    pub env: BTreeMap<String, String>,
}

/// One source, transform or sink of a [`JobLayout`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeLayout {
    /// The plugin name as written in the job file.
    pub plugin: String,
    /// Readers or writers (0 for a transform, which runs inside its source's readers).
    pub parallelism: usize,
    /// A hash of each option's value, by option name.
    pub options: BTreeMap<String, String>,
}

impl NodeLayout {
    /// The layout of a plugin block with `options` as written (after variables).
    pub fn new(plugin: &str, parallelism: usize, options: &Map<String, Value>) -> Self {
        NodeLayout {
            plugin: plugin.to_string(),
            parallelism,
            options: hash_options(options),
        }
    }
}

/// A hash of each value of `options`, by name: enough to tell that an option changed,
/// too little to recover what it held (16 hex digits of SHA-256, salted with the name).
/// Nested blocks are flattened to dotted names (`checkpoint.interval`), as users write them.
pub fn hash_options(options: &Map<String, Value>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    flatten_into("", options, &mut out);
    out
}

fn flatten_into(prefix: &str, options: &Map<String, Value>, out: &mut BTreeMap<String, String>) {
    for (k, v) in options {
        let name = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            Value::Object(m) if !m.is_empty() => flatten_into(&name, m, out),
            _ => {
                let mut h = Sha256::new();
                h.update(name.as_bytes());
                h.update([0]);
                h.update(v.to_string().as_bytes());
                let digest = h.finalize();
                let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
                out.insert(name, hex);
            }
        }
    }
}

impl JobLayout {
    /// Whether state saved by a job laid out as `saved` can be resumed by `self`.
    /// `Ok` lists the compatible changes (empty when nothing changed); `Err` gives the
    /// first change that makes the saved state unusable.
    pub fn resume_from(&self, saved: &JobLayout) -> Result<Vec<String>, String> {
        if !saved.mode.eq_ignore_ascii_case(&self.mode) {
            return Err(format!(
                "the job mode changed from {} to {}",
                saved.mode, self.mode
            ));
        }
        check_stateful("source", "readers", &saved.sources, &self.sources)?;
        check_stateful("sink", "writers", &saved.sinks, &self.sinks)?;
        let mut changes = Vec::new();
        for (kind, old, new) in [
            ("source", &saved.sources, &self.sources),
            ("sink", &saved.sinks, &self.sinks),
        ] {
            for (i, (o, n)) in old.iter().zip(new).enumerate() {
                let diff = changed_options(&o.options, &n.options);
                if !diff.is_empty() {
                    changes.push(format!(
                        "{kind} {} ({}): options {} changed; its saved state is kept",
                        i + 1,
                        n.plugin,
                        diff.join(", ")
                    ));
                }
            }
        }
        if saved.transforms.len() != self.transforms.len() {
            changes.push(format!(
                "transforms: {} before, {} now",
                saved.transforms.len(),
                self.transforms.len()
            ));
        } else {
            for (i, (o, n)) in saved.transforms.iter().zip(&self.transforms).enumerate() {
                if o.plugin != n.plugin {
                    changes.push(format!(
                        "transform {} is now {} (was {})",
                        i + 1,
                        n.plugin,
                        o.plugin
                    ));
                } else {
                    let diff = changed_options(&o.options, &n.options);
                    if !diff.is_empty() {
                        changes.push(format!(
                            "transform {} ({}): options {} changed",
                            i + 1,
                            n.plugin,
                            diff.join(", ")
                        ));
                    }
                }
            }
        }
        let env = changed_options(&saved.env, &self.env);
        if !env.is_empty() {
            changes.push(format!("env: {} changed", env.join(", ")));
        }
        Ok(changes)
    }
}

/// Sources and sinks own state by position: they must match one for one.
fn check_stateful(
    kind: &str,
    workers: &str,
    saved: &[NodeLayout],
    now: &[NodeLayout],
) -> Result<(), String> {
    if saved.len() != now.len() {
        return Err(format!(
            "the job had {} {kind}(s) and now has {}; a checkpoint holds state for each {kind} by position",
            saved.len(),
            now.len()
        ));
    }
    for (i, (o, n)) in saved.iter().zip(now).enumerate() {
        if !o.plugin.eq_ignore_ascii_case(&n.plugin) {
            return Err(format!(
                "{kind} {} was {} and is now {}; its saved state belongs to {}",
                i + 1,
                o.plugin,
                n.plugin,
                o.plugin
            ));
        }
        if o.parallelism != n.parallelism {
            return Err(format!(
                "{kind} {} ({}) ran with {} {workers} and would now run with {}; its state is saved per {}",
                i + 1,
                n.plugin,
                o.parallelism,
                n.parallelism,
                workers.trim_end_matches('s')
            ));
        }
    }
    Ok(())
}

/// Names of the options added, removed or changed, in order (the first eight, then how
/// many more).
fn changed_options(old: &BTreeMap<String, String>, new: &BTreeMap<String, String>) -> Vec<String> {
    let mut names: Vec<String> = old
        .iter()
        .filter(|(k, v)| new.get(*k) != Some(*v))
        .map(|(k, _)| k.clone())
        .chain(new.keys().filter(|k| !old.contains_key(*k)).cloned())
        .collect();
    names.sort();
    if names.len() > 8 {
        let more = names.len() - 8;
        names.truncate(8);
        names.push(format!("and {more} more"));
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(plugin: &str, parallelism: usize, options: Value) -> NodeLayout {
        let Value::Object(m) = options else {
            panic!("options must be an object")
        };
        NodeLayout::new(plugin, parallelism, &m)
    }

    fn job() -> JobLayout {
        JobLayout {
            mode: "STREAMING".into(),
            sources: vec![node(
                "LocalFile",
                2,
                json!({"path": "/in", "password": "s3cret"}),
            )],
            transforms: vec![node("Sql", 0, json!({"query": "select * from t"}))],
            sinks: vec![node("LocalFile", 1, json!({"path": "/out"}))],
            env: hash_options(
                json!({"checkpoint": {"interval": 1000}})
                    .as_object()
                    .unwrap(),
            ),
        }
    }

    #[test]
    fn an_unchanged_job_resumes_without_notes() {
        assert_eq!(job().resume_from(&job()), Ok(vec![]));
    }

    #[test]
    fn transforms_env_and_options_may_change() {
        let mut now = job();
        now.transforms = vec![
            node("Sql", 0, json!({"query": "select a from t"})),
            node("Filter", 0, json!({})),
        ];
        now.env = hash_options(
            json!({"checkpoint": {"interval": 5000}})
                .as_object()
                .unwrap(),
        );
        now.sources[0] = node(
            "LocalFile",
            2,
            json!({"path": "/in2", "password": "s3cret"}),
        );
        let notes = now.resume_from(&job()).unwrap();
        assert_eq!(
            notes,
            vec![
                "source 1 (LocalFile): options path changed; its saved state is kept".to_string(),
                "transforms: 1 before, 2 now".to_string(),
                "env: checkpoint.interval changed".to_string(),
            ]
        );
        now.transforms.pop();
        let notes = now.resume_from(&job()).unwrap();
        assert!(notes.contains(&"transform 1 (Sql): options query changed".to_string()));
    }

    #[test]
    fn stateful_changes_are_refused_with_the_reason() {
        let mut now = job();
        now.sources[0].parallelism = 4;
        let e = now.resume_from(&job()).unwrap_err();
        assert!(
            e.contains("source 1 (LocalFile) ran with 2 readers and would now run with 4"),
            "{e}"
        );

        let mut now = job();
        now.sinks[0].plugin = "Console".into();
        let e = now.resume_from(&job()).unwrap_err();
        assert!(e.contains("sink 1 was LocalFile and is now Console"), "{e}");

        let mut now = job();
        now.sinks.push(node("Console", 1, json!({})));
        let e = now.resume_from(&job()).unwrap_err();
        assert!(e.contains("had 1 sink(s) and now has 2"), "{e}");

        let mut now = job();
        now.mode = "BATCH".into();
        assert!(now.resume_from(&job()).unwrap_err().contains("job mode"));
    }

    #[test]
    fn option_hashes_hide_values() {
        let text = serde_json::to_string(&job()).unwrap();
        assert!(!text.contains("s3cret") && !text.contains("/in"), "{text}");
        assert_eq!(job().sources[0].options["password"].len(), 16);
    }
}
