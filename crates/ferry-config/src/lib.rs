//! Reads SeaTunnel job files (HOCON or JSON) into a typed, validated job description.
//!
//! [`load_job`] and [`parse_job`] turn a job file into a [`JobFile`]: the `env` settings,
//! and the source, transform and sink plugin blocks in the order written, each with its
//! options (as [`ferry_api::Options`], with the line of every key for error messages)
//! and its wiring (which tables it reads and writes) resolved.
//!
//! How a job file is read:
//! 1. SeaTunnel variables (`${name}`, `${name:default}`) are replaced in the text, from
//!    the user's variables (`-i name=value`) and then the process environment. A
//!    placeholder neither given nor defaulted stays as written (`${now}` in a file name).
//! 2. The text is parsed as HOCON (JSON is HOCON). HOCON substitutions between keys
//!    (`parallelism = ${env.parallelism}`) still work: an unquoted `${path}` that is no
//!    variable but names a key of the file is resolved by HOCON. Includes are read
//!    relative to the job file.
//! 3. Sections are checked (`env`, `source`, `transform`, `sink`), plugin blocks are
//!    read in order — a plugin written twice in a section gives two plugins — and the
//!    tables are wired (see [`PluginConfig::inputs`]).

mod env;
mod plan;
mod shade;
mod value;
mod vars;
mod walk;

use std::collections::HashMap;
use std::path::Path;

use ferry_api::error::Location;
use ferry_api::{FerryError, Options, Result};
use vars::Unresolved;

pub use env::{EnvConfig, KNOWN_ENV_KEYS};
pub use vars::SYSTEM_PLACEHOLDERS;

/// A job file, read and checked.
#[derive(Debug, Clone)]
pub struct JobFile {
    /// The path as the user gave it, used in messages.
    pub path: String,
    /// The `env` section.
    pub env: EnvConfig,
    /// The `env` section's options as written (after variables), for checkpoint layouts.
    pub env_options: serde_json::Map<String, serde_json::Value>,
    /// The `source` plugins, in the order written.
    pub sources: Vec<PluginConfig>,
    /// The `transform` plugins, in the order written (empty when the section is absent).
    pub transforms: Vec<PluginConfig>,
    /// The `sink` plugins, in the order written.
    pub sinks: Vec<PluginConfig>,
    /// SHA-256 (hex) of the resolved configuration (after variables, includes and
    /// substitutions): stable across runs, it changes when the job changes.
    pub fingerprint: String,
    /// Things worth telling the user that do not stop the job (unknown `env` keys…).
    pub warnings: Vec<String>,
}

impl JobFile {
    /// Every plugin: sources, then transforms, then sinks.
    pub fn plugins(&self) -> impl Iterator<Item = &PluginConfig> {
        self.sources
            .iter()
            .chain(&self.transforms)
            .chain(&self.sinks)
    }
}

/// The kind of a plugin block, by the section it is in.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum PluginKind {
    /// In `source`.
    Source,
    /// In `transform`.
    Transform,
    /// In `sink`.
    Sink,
}

impl PluginKind {
    /// The section name: `source`, `transform` or `sink`.
    pub fn section(&self) -> &'static str {
        match self {
            PluginKind::Source => "source",
            PluginKind::Transform => "transform",
            PluginKind::Sink => "sink",
        }
    }
}

/// One plugin block.
#[derive(Debug, Clone)]
pub struct PluginConfig {
    /// Source, transform or sink.
    pub kind: PluginKind,
    /// The plugin's name as written (`FakeSource`, `sql`, `console`); plugin names are
    /// case-insensitive.
    pub name: String,
    /// Position within its section.
    pub index: usize,
    /// The table the plugin emits: `plugin_output` (or `result_table_name`), else a
    /// generated name (`__source_0`, `__transform_1`). Empty for sinks.
    pub output: String,
    /// The tables the plugin reads: `plugin_input` (or `source_table_name`, a text, a
    /// comma-separated text or a list), else by SeaTunnel's implicit wiring: a transform
    /// reads the previous transform's output, the first transform reads every source's
    /// output; a sink reads the last transform's output, or every source's output when
    /// there is no transform. Empty for sources.
    pub inputs: Vec<String>,
    /// The plugin's own `parallelism`, when set.
    pub parallelism: Option<usize>,
    /// The block's options, with its location (file, section, plugin, lines). The wiring
    /// keys and `parallelism` are already read (marked used).
    pub options: Options,
}

impl PluginConfig {
    /// The plugin as shown in messages: `source FakeSource`.
    pub fn describe(&self) -> String {
        format!("{} {}", self.kind.section(), self.name)
    }
}

/// Reads and checks the job file at `path`, with user variables `vars` (`-i k=v`; a later
/// pair wins over an earlier one) and then the process environment for `${name}`.
pub fn load_job(path: &Path, vars: &[(String, String)]) -> Result<JobFile> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| file_error(&file, None, format!("cannot read the job file: {e}")))?;
    let vars: HashMap<String, String> = vars.iter().cloned().collect();
    check_variables(&vars)?;
    let lookup = |name: &str| vars.get(name).cloned().or_else(|| std::env::var(name).ok());
    parse_inner(&text, &file, path.parent(), &lookup)
}

/// Reads and checks a job file's `text`; `file` names it in messages (and is the base
/// for relative includes). Variables come from `vars` only, not the environment.
pub fn parse_job(text: &str, file: &str, vars: &HashMap<String, String>) -> Result<JobFile> {
    check_variables(vars)?;
    let lookup = |name: &str| vars.get(name).cloned();
    parse_inner(text, file, Path::new(file).parent(), &lookup)
}

/// SeaTunnel refuses user variables named like the per-table sink placeholders.
fn check_variables(vars: &HashMap<String, String>) -> Result<()> {
    let mut names: Vec<&String> = vars
        .keys()
        .filter(|k| SYSTEM_PLACEHOLDERS.contains(&k.as_str()))
        .collect();
    names.sort();
    match names.first() {
        Some(name) => Err(FerryError::Config {
            location: Location::default(),
            plugin: None,
            option: None,
            message: format!(
                "variable '{name}' cannot be set: it is a placeholder that sinks fill in per table"
            ),
            hint: Some(format!(
                "reserved names: {}",
                SYSTEM_PLACEHOLDERS.join(", ")
            )),
        }),
        None => Ok(()),
    }
}

fn parse_inner(
    text: &str,
    file: &str,
    base_dir: Option<&Path>,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<JobFile> {
    // The lexer skips a byte-order mark without counting a column; so do we.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    // First pass: every unresolved placeholder outside strings becomes an optional HOCON
    // substitution; the result tells which `${path}` name keys of the file. Second pass:
    // those stay HOCON substitutions, the others become literal text.
    let text_a = vars::substitute(text, lookup, Unresolved::Probe);
    let (root_a, walk_a) = value::parse_hocon(&text_a, file, base_dir)?;
    // Keys written in the file count too: a substitution cycle then fails in the second
    // pass instead of turning into text.
    let mut paths = value::config_paths(&root_a);
    paths.extend(walk_a.key_paths());
    let text_b = vars::substitute(text, lookup, Unresolved::Keep(&|p| paths.contains(p)));
    let (root, walk) = if text_b == text_a {
        (root_a, walk_a)
    } else {
        value::parse_hocon(&text_b, file, base_dir)?
    };
    plan::build(root, walk, file)
}

/// A configuration error about the job file as a whole.
pub(crate) fn file_error(
    file: &str,
    line: Option<usize>,
    message: impl Into<String>,
) -> FerryError {
    FerryError::Config {
        location: Location {
            file: file.to_string(),
            line,
        },
        plugin: None,
        option: None,
        message: message.into(),
        hint: None,
    }
}

#[cfg(test)]
mod tests;
