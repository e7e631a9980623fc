//! From the parsed root object to a checked [`JobFile`]: sections, plugin blocks, wiring.

use std::collections::HashMap;
use std::sync::Arc;

use ferry_api::error::nearest;
use ferry_api::{Options, PluginLocation, Result};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::env::{check_parallelism, read_env};
use crate::walk::{Block, Walk, DUP_PREFIX};
use crate::{file_error, JobFile, PluginConfig, PluginKind};

const SECTIONS: &[&str] = &["env", "source", "transform", "sink"];

/// The spellings of the wiring keys: SeaTunnel ≥ 2.3.9 first, then the older one.
const OUTPUT_KEYS: [&str; 2] = ["plugin_output", "result_table_name"];
const INPUT_KEYS: [&str; 2] = ["plugin_input", "source_table_name"];

/// A plugin block read, before wiring.
struct Read {
    plugin: PluginConfig,
    /// The input key written and the tables it names, when set.
    explicit_inputs: Option<(&'static str, Vec<String>)>,
    /// The output key written, when set.
    output_key: Option<&'static str>,
}

pub(crate) fn build(mut root: Map<String, Value>, walk: Walk, file: &str) -> Result<JobFile> {
    for key in root.keys() {
        if !SECTIONS.contains(&key.as_str()) {
            let mut e = file_error(
                file,
                walk.lines.get(key).copied(),
                format!("unknown section '{key}'"),
            );
            if let ferry_api::FerryError::Config { hint, .. } = &mut e {
                *hint = Some(match nearest(key, SECTIONS.iter().copied()) {
                    Some(n) => format!("did you mean '{n}'? a job file has the sections env, source, transform and sink"),
                    None => "a job file has the sections env, source, transform and sink".into(),
                });
            }
            return Err(e);
        }
    }
    let mut warnings = Vec::new();
    let env_values = match root.remove("env") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m,
        Some(_) => {
            return Err(file_error(
                file,
                walk.lines.get("env").copied(),
                "'env' must be a block: env { … }",
            ))
        }
    };
    let mut env_lines: HashMap<String, usize> = walk
        .lines
        .iter()
        .filter_map(|(k, l)| k.strip_prefix("env.").map(|k| (k.to_string(), *l)))
        .collect();
    if let Some(l) = walk.lines.get("env") {
        env_lines.insert(String::new(), *l);
    }
    let mut fingerprint_doc = Map::new();
    fingerprint_doc.insert("env".into(), Value::Object(env_values.clone()));
    let env_options = env_values.clone();
    let env = read_env(env_values, file, env_lines, &mut warnings)?;
    if let Some(id) = crate::shade::identifier(&env_options) {
        crate::shade::decode(&mut root, &id, file)?;
    }

    let sources = read_section(&mut root, &walk, file, PluginKind::Source, &mut warnings)?;
    let transforms = read_section(&mut root, &walk, file, PluginKind::Transform, &mut warnings)?;
    let sinks = read_section(&mut root, &walk, file, PluginKind::Sink, &mut warnings)?;
    for (kind, list) in [
        ("source", &sources),
        ("transform", &transforms),
        ("sink", &sinks),
    ] {
        let items = list
            .iter()
            .map(|r| {
                let mut m = Map::new();
                m.insert("plugin_name".into(), Value::String(r.plugin.name.clone()));
                m.extend(r.plugin.options.raw().clone());
                Value::Object(m)
            })
            .collect();
        fingerprint_doc.insert(kind.into(), Value::Array(items));
    }
    let (sources, transforms, sinks) = wire(sources, transforms, sinks)?;
    Ok(JobFile {
        path: file.to_string(),
        env,
        env_options,
        sources,
        transforms,
        sinks,
        fingerprint: fingerprint(&Value::Object(fingerprint_doc)),
        warnings,
    })
}

/// SHA-256 of the canonical JSON text (key order as written), in hex.
fn fingerprint(doc: &Value) -> String {
    let digest = Sha256::digest(doc.to_string().as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn read_section(
    root: &mut Map<String, Value>,
    walk: &Walk,
    file: &str,
    kind: PluginKind,
    warnings: &mut Vec<String>,
) -> Result<Vec<Read>> {
    let section = kind.section();
    let line = walk.lines.get(section).copied();
    let find = |pred: &dyn Fn(&Block) -> bool| {
        walk.blocks.iter().find(|b| b.section == section && pred(b))
    };
    let mut out = Vec::new();
    match root.remove(section) {
        None if kind == PluginKind::Transform => return Ok(out),
        None => {
            return Err(file_error(
                file,
                None,
                format!(
                    "the job file has no '{section}' section; a job needs at least one {section}"
                ),
            ));
        }
        Some(Value::Null) => {}
        Some(Value::Object(blocks)) => {
            for (index, (key, value)) in blocks.into_iter().enumerate() {
                let block = find(&|b| b.key.as_deref() == Some(key.as_str()));
                let name = block
                    .map(|b| b.name.clone())
                    .unwrap_or_else(|| strip_dup_prefix(&key).to_string());
                let line = block.map(|b| b.line).or(line);
                let Value::Object(values) = value else {
                    return Err(file_error(
                        file,
                        line,
                        format!("{section} {name}: a plugin must be a block: {name} {{ … }}"),
                    ));
                };
                out.push(read_plugin(
                    kind, name, index, values, block, line, file, warnings,
                )?);
            }
        }
        Some(Value::Array(items)) => {
            for (index, item) in items.into_iter().enumerate() {
                let block = find(&|b| b.index == Some(index));
                let line = block.map(|b| b.line).or(line);
                let Value::Object(mut values) = item else {
                    return Err(file_error(
                        file,
                        line,
                        format!("{section}[{index}]: a plugin must be a block with plugin_name"),
                    ));
                };
                let name = match values.remove("plugin_name") {
                    Some(Value::String(n)) if !n.trim().is_empty() => n.trim().to_string(),
                    _ => {
                        return Err(file_error(file, line, format!("{section}[{index}]: 'plugin_name' must name the plugin, as \"plugin_name\": \"FakeSource\"")));
                    }
                };
                out.push(read_plugin(
                    kind, name, index, values, block, line, file, warnings,
                )?);
            }
        }
        Some(_) => {
            return Err(file_error(
                file,
                line,
                format!("'{section}' must be a block of plugins: {section} {{ Name {{ … }} }}"),
            ));
        }
    }
    if out.is_empty() && kind != PluginKind::Transform {
        return Err(file_error(
            file,
            line,
            format!("the '{section}' section is empty; a job needs at least one {section}"),
        ));
    }
    Ok(out)
}

fn strip_dup_prefix(key: &str) -> &str {
    key.strip_prefix(DUP_PREFIX)
        .and_then(|rest| {
            rest.trim_start_matches(|c: char| c.is_ascii_digit())
                .strip_prefix("__")
        })
        .unwrap_or(key)
}

#[allow(clippy::too_many_arguments)]
fn read_plugin(
    kind: PluginKind,
    name: String,
    index: usize,
    values: Map<String, Value>,
    block: Option<&Block>,
    line: Option<usize>,
    file: &str,
    warnings: &mut Vec<String>,
) -> Result<Read> {
    let location = PluginLocation {
        file: file.to_string(),
        section: kind.section().to_string(),
        plugin: name.clone(),
        line,
        lines: Arc::new(block.map(|b| b.lines.clone()).unwrap_or_default()),
    };
    let describe = location.describe();
    let mut options = Options::new(values, location);
    let mut output = None;
    let mut output_key = None;
    for key in OUTPUT_KEYS {
        if let Some(name) = options
            .string(key)?
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
        {
            match &output {
                Some(first) if *first != name => warnings.push(format!(
                    "{describe}: both {} = '{first}' and {key} = '{name}' are set; using '{first}'",
                    OUTPUT_KEYS[0]
                )),
                Some(_) => {}
                None => {
                    output = Some(name);
                    output_key = Some(key);
                }
            }
        }
    }
    let mut explicit_inputs = None;
    for key in INPUT_KEYS {
        if let Some(tables) = table_list(&mut options, key)? {
            if explicit_inputs.is_none() {
                explicit_inputs = Some((key, tables));
            }
        }
    }
    let parallelism = match options.u64("parallelism")? {
        Some(n) => Some(check_parallelism(options.location(), "parallelism", n)?),
        None => None,
    };
    let output = match kind {
        PluginKind::Source => output.unwrap_or_else(|| format!("__source_{index}")),
        PluginKind::Transform => output.unwrap_or_else(|| format!("__transform_{index}")),
        PluginKind::Sink => {
            if let Some(o) = output {
                warnings.push(format!(
                    "{describe}: a sink emits no table; {} = '{o}' is ignored",
                    output_key.unwrap_or("plugin_output")
                ));
            }
            String::new()
        }
    };
    if kind == PluginKind::Source {
        if let Some((key, _)) = explicit_inputs.take() {
            warnings.push(format!(
                "{describe}: a source reads no table; {key} is ignored"
            ));
        }
    }
    Ok(Read {
        plugin: PluginConfig {
            kind,
            name,
            index,
            output,
            inputs: Vec::new(),
            parallelism,
            options,
        },
        explicit_inputs,
        output_key,
    })
}

/// `plugin_input`: a table name, a comma-separated text (or `[a,b]` from a variable), or a list.
fn table_list(options: &mut Options, key: &str) -> Result<Option<Vec<String>>> {
    let tables = match options.get(key) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(s)) => {
            let t = s.trim();
            let t = t
                .strip_prefix('[')
                .and_then(|t| t.strip_suffix(']'))
                .unwrap_or(t);
            t.split(',')
                .map(|p| p.trim().trim_matches(['"', '\'']).trim().to_string())
                .filter(|p| !p.is_empty())
                .collect::<Vec<_>>()
        }
        Some(Value::Array(items)) => {
            let mut out = Vec::new();
            for item in items {
                match item {
                    Value::String(s) if !s.trim().is_empty() => out.push(s.trim().to_string()),
                    Value::Number(n) => out.push(n.to_string()),
                    _ => return Err(options.error(key, "expected a list of table names")),
                }
            }
            out
        }
        Some(Value::Number(n)) => vec![n.to_string()],
        Some(_) => return Err(options.error(key, "expected a table name or a list of table names")),
    };
    if tables.is_empty() {
        return Err(options.error(key, "names no table"));
    }
    Ok(Some(tables))
}

/// Resolves every plugin's inputs and checks that each names a table emitted earlier.
fn wire(
    sources: Vec<Read>,
    transforms: Vec<Read>,
    sinks: Vec<Read>,
) -> Result<(Vec<PluginConfig>, Vec<PluginConfig>, Vec<PluginConfig>)> {
    // Tables emitted so far, with who emits them.
    let mut known: Vec<(String, String)> = Vec::new();
    let add = |known: &mut Vec<(String, String)>, r: &Read| -> Result<()> {
        let p = &r.plugin;
        if let Some((_, by)) = known.iter().find(|(t, _)| *t == p.output) {
            let key = r.output_key.unwrap_or(OUTPUT_KEYS[0]);
            return Err(p.options.location().error_with_hint(
                key,
                format!("table '{}' is already the output of {by}", p.output),
                "give each plugin its own output table name",
            ));
        }
        known.push((p.output.clone(), p.describe()));
        Ok(())
    };
    let check = |known: &[(String, String)], r: &Read| -> Result<()> {
        if let Some((key, tables)) = &r.explicit_inputs {
            for t in tables {
                if !known.iter().any(|(k, _)| k == t) {
                    let names: Vec<&str> = known.iter().map(|(k, _)| k.as_str()).collect();
                    let hint = match nearest(t, names.iter().copied()) {
                        Some(n) => {
                            format!("did you mean '{n}'? known tables: {}", names.join(", "))
                        }
                        None => format!("known tables: {}", names.join(", ")),
                    };
                    return Err(r.plugin.options.location().error_with_hint(
                        key,
                        format!("unknown table '{t}': no earlier plugin emits it"),
                        hint,
                    ));
                }
            }
        }
        Ok(())
    };

    for s in &sources {
        add(&mut known, s)?;
    }
    let source_outputs: Vec<String> = sources.iter().map(|s| s.plugin.output.clone()).collect();
    let mut wired_transforms = Vec::with_capacity(transforms.len());
    let mut previous: Option<String> = None;
    for t in transforms {
        check(&known, &t)?;
        add(&mut known, &t)?;
        let mut t = t;
        t.plugin.inputs = match t.explicit_inputs.take() {
            Some((_, tables)) => tables,
            None => match &previous {
                Some(p) => vec![p.clone()],
                None => source_outputs.clone(),
            },
        };
        previous = Some(t.plugin.output.clone());
        wired_transforms.push(t.plugin);
    }
    let mut wired_sinks = Vec::with_capacity(sinks.len());
    for s in sinks {
        check(&known, &s)?;
        let mut s = s;
        s.plugin.inputs = match s.explicit_inputs.take() {
            Some((_, tables)) => tables,
            None => match &previous {
                Some(p) => vec![p.clone()],
                None => source_outputs.clone(),
            },
        };
        wired_sinks.push(s.plugin);
    }
    Ok((
        sources.into_iter().map(|s| s.plugin).collect(),
        wired_transforms,
        wired_sinks,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_the_duplicate_prefix_only() {
        assert_eq!(strip_dup_prefix("__ferry_dup2__Copy"), "Copy");
        assert_eq!(strip_dup_prefix("Copy"), "Copy");
        assert_eq!(strip_dup_prefix("__ferry_dupX"), "__ferry_dupX");
    }

    #[test]
    fn fingerprint_is_hex_sha256() {
        let f = fingerprint(&Value::String("x".into()));
        assert_eq!(f.len(), 64);
        // sha256 of the JSON text `"x"`.
        assert_eq!(
            f,
            "ba2df4903a2c14e86dc3bcca58911b44ac1d2514b7227bf6eb08cfb978f55a1b"
        );
    }
}
