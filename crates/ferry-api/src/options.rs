//! How connectors declare and read their options.
//!
//! Every connector lists its options as [`OptionSpec`]s (shown by `ferry connectors NAME`
//! and used to reject unknown options), and reads them through [`Options`], whose typed
//! getters turn a wrong value into an error naming the file, line, plugin and option.
//! Values of secret options (passwords, tokens, keys) never appear in any message.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::error::{nearest, FerryError, Location, Result};

/// The type of an option, for documentation and validation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptionKind {
    /// Text.
    String,
    /// A whole number.
    Int,
    /// A number.
    Float,
    /// `true` / `false`.
    Bool,
    /// A list of values.
    List,
    /// A nested block (`schema { … }`).
    Object,
    /// One of a fixed set of names.
    Enum(&'static [&'static str]),
    /// A value of any shape (a row of values, a per-type template).
    Any,
}

impl OptionKind {
    /// How the kind is shown to users.
    pub fn describe(&self) -> String {
        match self {
            OptionKind::String => "string".into(),
            OptionKind::Int => "int".into(),
            OptionKind::Float => "float".into(),
            OptionKind::Bool => "boolean".into(),
            OptionKind::List => "list".into(),
            OptionKind::Object => "object".into(),
            OptionKind::Enum(values) => format!("one of {}", values.join(", ")),
            OptionKind::Any => "any".into(),
        }
    }
}

/// One option a plugin accepts. A `*` in `name` matches one dotted segment
/// (`*.min` stands for `int.min`, `double.min`, …).
#[derive(Debug, Clone, Copy)]
pub struct OptionSpec {
    /// The option's key, as written in job files.
    pub name: &'static str,
    /// Its type.
    pub kind: OptionKind,
    /// Whether a job must set it.
    pub required: bool,
    /// The default, as shown to users.
    pub default: Option<&'static str>,
    /// What it does.
    pub description: &'static str,
}

impl OptionSpec {
    /// Whether this entry is an old spelling of option `name` (as `declare_options!` lists
    /// each alias: described "Old spelling of NAME.").
    pub fn is_alias_of(&self, name: &str) -> bool {
        self.description
            .strip_prefix("Old spelling of ")
            .and_then(|d| d.strip_suffix('.'))
            == Some(name)
    }

    /// An optional option.
    pub const fn optional(
        name: &'static str,
        kind: OptionKind,
        default: Option<&'static str>,
        description: &'static str,
    ) -> Self {
        OptionSpec {
            name,
            kind,
            required: false,
            default,
            description,
        }
    }
    /// A required option.
    pub const fn required(name: &'static str, kind: OptionKind, description: &'static str) -> Self {
        OptionSpec {
            name,
            kind,
            required: true,
            default: None,
            description,
        }
    }

    fn matches(&self, key: &str) -> bool {
        if !self.name.contains('*') {
            return self.name == key
                || key.starts_with(&format!("{}.", self.name)) && self.kind_allows_children();
        }
        let pat: Vec<&str> = self.name.split('.').collect();
        let k: Vec<&str> = key.split('.').collect();
        pat.len() <= k.len()
            && pat.iter().zip(k.iter()).all(|(p, s)| *p == "*" || p == s)
            && (pat.len() == k.len() || self.kind_allows_children())
    }

    fn kind_allows_children(&self) -> bool {
        matches!(self.kind, OptionKind::Object | OptionKind::Any)
    }
}

/// Options that every plugin accepts; the engine reads them, connectors need not.
pub const COMMON_OPTIONS: &[OptionSpec] = &[
    OptionSpec::optional(
        "plugin_output",
        OptionKind::String,
        None,
        "Name of the table this plugin emits (SeaTunnel ≥ 2.3.9).",
    ),
    OptionSpec::optional(
        "result_table_name",
        OptionKind::String,
        None,
        "Legacy spelling of plugin_output.",
    ),
    OptionSpec::optional(
        "plugin_input",
        OptionKind::Any,
        None,
        "Name(s) of the table(s) this plugin reads (SeaTunnel ≥ 2.3.9).",
    ),
    OptionSpec::optional(
        "source_table_name",
        OptionKind::Any,
        None,
        "Legacy spelling of plugin_input.",
    ),
    OptionSpec::optional(
        "parallelism",
        OptionKind::Int,
        None,
        "Parallelism of this plugin; defaults to the job's.",
    ),
];

/// Where a plugin block sits in a job file, for error messages.
#[derive(Debug, Clone, Default)]
pub struct PluginLocation {
    /// The job file.
    pub file: String,
    /// `source`, `transform` or `sink`.
    pub section: String,
    /// The plugin's name as written (`FakeSource`).
    pub plugin: String,
    /// The line where the plugin block starts.
    pub line: Option<usize>,
    /// Line of each option key inside the block, by dotted path (`rules.field_rules[0].field_name`).
    pub lines: Arc<HashMap<String, usize>>,
}

impl PluginLocation {
    /// The plugin as shown in messages: `source FakeSource`.
    pub fn describe(&self) -> String {
        if self.section.is_empty() {
            self.plugin.clone()
        } else {
            format!("{} {}", self.section, self.plugin)
        }
    }

    /// The line of `path`, or of its nearest enclosing key, or of the block.
    pub fn line_of(&self, path: &str) -> Option<usize> {
        let mut p = path;
        loop {
            if let Some(l) = self.lines.get(p) {
                return Some(*l);
            }
            match p.rfind(['.', '[']) {
                Some(i) => p = &p[..i],
                None => return self.line,
            }
        }
    }

    /// The location of the block nested at `prefix` (a `tables_configs[1]` item): the
    /// lines of its keys, re-rooted at the block, so that its own options report theirs.
    pub fn nested(&self, prefix: &str) -> PluginLocation {
        let p = format!("{prefix}.");
        let lines: HashMap<String, usize> = self
            .lines
            .iter()
            .filter_map(|(k, v)| k.strip_prefix(&p).map(|s| (s.to_string(), *v)))
            .collect();
        PluginLocation {
            lines: Arc::new(lines),
            line: self.lines.get(prefix).copied().or(self.line),
            ..self.clone()
        }
    }

    /// A configuration error at `path` inside this plugin.
    pub fn error(&self, path: &str, message: impl Into<String>) -> FerryError {
        FerryError::Config {
            location: Location {
                file: self.file.clone(),
                line: self.line_of(path),
            },
            plugin: Some(self.describe()),
            option: if path.is_empty() {
                None
            } else {
                Some(path.to_string())
            },
            message: message.into(),
            hint: None,
        }
    }

    /// Like [`error`](Self::error), with a hint.
    pub fn error_with_hint(
        &self,
        path: &str,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) -> FerryError {
        match self.error(path, message) {
            FerryError::Config {
                location,
                plugin,
                option,
                message,
                ..
            } => FerryError::Config {
                location,
                plugin,
                option,
                message,
                hint: Some(hint.into()),
            },
            other => other,
        }
    }
}

/// Whether an option's value is a secret that must never be printed.
pub fn is_secret_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    // Redis's password option (SeaTunnel's `auth`), matched whole: `author` is no secret.
    k == "auth"
        || k.ends_with(".auth")
        || [
            "password",
            "passwd",
            "secret",
            "token",
            "credential",
            "private_key",
            "access_key",
            "secret_key",
            "api_key",
            "apikey",
        ]
        .iter()
        .any(|s| k.contains(s))
}

/// Shows a value in an error message, or `<redacted>` for a secret option.
/// Placeholders that sinks fill in per table (`${table_name}` in a path). SeaTunnel never
/// replaces them from user variables and rejects variables with these names.
pub const SYSTEM_PLACEHOLDERS: &[&str] = &[
    "database_name",
    "schema_name",
    "table_name",
    "schema_full_name",
    "table_full_name",
    "primary_key",
    "unique_key",
    "field_names",
];

/// Placeholders that connectors fill in while they write (LocalFile's
/// `file_name_expression`: `${transactionId}`, `${now}`, `${uuid}`), besides
/// [`SYSTEM_PLACEHOLDERS`] and the partition directory's `${k0}`, `${v0}`, …, `${kn}`,
/// `${vn}`: left as written, they are no missing variables.
pub const WRITER_PLACEHOLDERS: &[&str] = &["transactionId", "now", "uuid"];

/// Whether `${name}` is a placeholder a connector fills in rather than a user variable.
pub fn is_connector_placeholder(name: &str) -> bool {
    let partition =
        |rest: &str| rest == "n" || (!rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()));
    SYSTEM_PLACEHOLDERS.contains(&name)
        || WRITER_PLACEHOLDERS.contains(&name)
        || name.strip_prefix(['k', 'v']).is_some_and(partition)
}

/// The first user variable left unset in `v` (a text, or a list of texts): a `${name}`
/// that variable substitution kept because neither `-i name=…`, the environment nor a
/// default gave it a value, and that no connector fills in. SeaTunnel's pattern:
/// `\$\{([^:{}]+)(?::[^}]*)?\}`.
pub fn unset_variable(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => {
            let mut rest = s.as_str();
            while let Some(start) = rest.find("${") {
                let body = &rest[start + 2..];
                let end = body.find(['}', '{'])?;
                if body.as_bytes()[end] == b'}' {
                    let name = body[..end].split(':').next().unwrap_or("");
                    let name = name.trim_start_matches('?').trim();
                    if !name.is_empty() && !is_connector_placeholder(name) {
                        return Some(name.to_string());
                    }
                }
                rest = &body[end..];
            }
            None
        }
        Value::Array(items) => items.iter().find_map(unset_variable),
        _ => None,
    }
}

/// What an error says about a user variable nobody set.
pub fn unset_variable_message(name: &str) -> String {
    format!("variable '{name}' is not set (pass -i {name}=VALUE)")
}

fn show(key: &str, v: &Value) -> String {
    if is_secret_key(key) {
        "<redacted>".into()
    } else {
        match v {
            Value::String(s) => format!("'{s}'"),
            other => other.to_string(),
        }
    }
}

/// A plugin's options, read through typed getters that remember which keys were used.
///
/// Keys may be written flat (`"row.num" = 10`) or as HOCON paths, which nest
/// (`row.num = 10` is `row { num = 10 }`); getters accept both.
#[derive(Debug, Clone)]
pub struct Options {
    values: Map<String, Value>,
    used: BTreeSet<String>,
    location: PluginLocation,
}

impl Options {
    /// Options `values` of the plugin at `location`.
    pub fn new(values: Map<String, Value>, location: PluginLocation) -> Self {
        Options {
            values,
            used: BTreeSet::new(),
            location,
        }
    }

    /// Options from a JSON object, with no file position (tests, the Spark workers).
    pub fn from_json(plugin: &str, v: Value) -> Self {
        let values = match v {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        Options::new(
            values,
            PluginLocation {
                plugin: plugin.into(),
                ..Default::default()
            },
        )
    }

    /// Where the plugin block is.
    pub fn location(&self) -> &PluginLocation {
        &self.location
    }

    /// All raw values (for engines that ship options elsewhere, e.g. to Spark workers).
    pub fn raw(&self) -> &Map<String, Value> {
        &self.values
    }

    /// A configuration error about `key`. When the value still holds a user variable
    /// that was never set (`row.num = ${rows}` run without `-i rows=…`), that is what
    /// the error says, whatever the reader found wrong with the text.
    pub fn error(&self, key: &str, message: impl Into<String>) -> FerryError {
        match self.lookup(key).and_then(unset_variable) {
            Some(name) => self.location.error(key, unset_variable_message(&name)),
            None => self.location.error(key, message),
        }
    }

    fn lookup(&self, key: &str) -> Option<&Value> {
        if let Some(v) = self.values.get(key) {
            return Some(v);
        }
        // HOCON nests dotted keys: `row.num = 1` is `row { num = 1 }`. Try every split.
        let mut cur: &Map<String, Value> = &self.values;
        let mut rest = key;
        loop {
            if let Some(v) = cur.get(rest) {
                return Some(v);
            }
            let mut found = None;
            for (i, _) in rest.match_indices('.') {
                if let Some(Value::Object(m)) = cur.get(&rest[..i]) {
                    found = Some((m, &rest[i + 1..]));
                    break;
                }
            }
            match found {
                Some((m, r)) => {
                    cur = m;
                    rest = r;
                }
                None => return None,
            }
        }
    }

    /// The raw value of `key`, marking it used.
    pub fn get(&mut self, key: &str) -> Option<Value> {
        let v = self.lookup(key).cloned();
        if v.is_some() {
            self.used.insert(key.to_string());
        }
        v
    }

    /// Whether `key` is set (does not mark it used).
    pub fn contains(&self, key: &str) -> bool {
        self.lookup(key).is_some()
    }

    /// The first of `keys` that is set, with the key found (for old and new spellings).
    pub fn get_any(&mut self, keys: &[&str]) -> Option<(String, Value)> {
        for k in keys {
            if let Some(v) = self.get(k) {
                return Some((k.to_string(), v));
            }
        }
        None
    }

    /// A text option. Numbers and booleans are accepted as their text.
    pub fn string(&mut self, key: &str) -> Result<Option<String>> {
        match self.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(v @ (Value::Number(_) | Value::Bool(_))) => Ok(Some(v.to_string())),
            Some(v) => Err(self.error(key, format!("expected text, found {}", show(key, &v)))),
        }
    }

    /// A text option that must be set.
    pub fn required_string(&mut self, key: &str) -> Result<String> {
        self.string(key)?
            .ok_or_else(|| self.error(key, "is required but not set"))
    }

    /// A whole-number option; text holding a number is accepted.
    pub fn i64(&mut self, key: &str) -> Result<Option<i64>> {
        match self.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => {
                let n = match &v {
                    Value::Number(n) => n
                        .as_i64()
                        .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64)),
                    Value::String(s) => s.trim().parse::<i64>().ok(),
                    _ => None,
                };
                n.map(Some).ok_or_else(|| {
                    self.error(
                        key,
                        format!("expected a whole number, found {}", show(key, &v)),
                    )
                })
            }
        }
    }

    /// A non-negative whole-number option.
    pub fn u64(&mut self, key: &str) -> Result<Option<u64>> {
        match self.i64(key)? {
            None => Ok(None),
            Some(n) if n >= 0 => Ok(Some(n as u64)),
            Some(n) => Err(self.error(key, format!("must not be negative, found {n}"))),
        }
    }

    /// A number option.
    pub fn f64(&mut self, key: &str) -> Result<Option<f64>> {
        match self.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => {
                let n = match &v {
                    Value::Number(n) => n.as_f64(),
                    Value::String(s) => s.trim().parse::<f64>().ok(),
                    _ => None,
                };
                n.map(Some).ok_or_else(|| {
                    self.error(key, format!("expected a number, found {}", show(key, &v)))
                })
            }
        }
    }

    /// A boolean option (`true`/`false`, also as text).
    pub fn bool(&mut self, key: &str) -> Result<Option<bool>> {
        match self.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(b)),
            Some(Value::String(s)) if s.eq_ignore_ascii_case("true") => Ok(Some(true)),
            Some(Value::String(s)) if s.eq_ignore_ascii_case("false") => Ok(Some(false)),
            Some(v) => Err(self.error(
                key,
                format!("expected true or false, found {}", show(key, &v)),
            )),
        }
    }

    /// A list of texts. A single text is a one-element list; a text in brackets
    /// (`"[a,b]"`, as command-line variables produce) is split on commas.
    pub fn string_list(&mut self, key: &str) -> Result<Option<Vec<String>>> {
        match self.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| match v {
                    Value::String(s) => Ok(s.clone()),
                    Value::Number(_) | Value::Bool(_) => Ok(v.to_string()),
                    other => Err(self.error(
                        key,
                        format!("expected a list of texts, found {}", show(key, other)),
                    )),
                })
                .collect::<Result<Vec<_>>>()
                .map(Some),
            Some(Value::String(s)) => {
                let t = s.trim();
                if t.starts_with('[') && t.ends_with(']') {
                    Ok(Some(
                        t[1..t.len() - 1]
                            .split(',')
                            .map(|p| p.trim().trim_matches('"').to_string())
                            .filter(|p| !p.is_empty())
                            .collect(),
                    ))
                } else {
                    Ok(Some(vec![s]))
                }
            }
            Some(v) => Err(self.error(key, format!("expected a list, found {}", show(key, &v)))),
        }
    }

    /// A list of values of any shape.
    pub fn list(&mut self, key: &str) -> Result<Option<Vec<Value>>> {
        match self.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(items)) => Ok(Some(items)),
            Some(Value::String(s)) if s.trim_start().starts_with('[') => {
                // A command-line variable such as `[abc,def]` arrives as text.
                Ok(Some(self.string_list_from_text(&s)))
            }
            Some(v) => Err(self.error(key, format!("expected a list, found {}", show(key, &v)))),
        }
    }

    fn string_list_from_text(&self, s: &str) -> Vec<Value> {
        let t = s.trim();
        t[1..t.len().saturating_sub(1)]
            .split(',')
            .map(|p| p.trim().trim_matches('"'))
            .filter(|p| !p.is_empty())
            .map(|p| Value::String(p.to_string()))
            .collect()
    }

    /// A nested block.
    pub fn object(&mut self, key: &str) -> Result<Option<Map<String, Value>>> {
        match self.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Object(m)) => Ok(Some(m)),
            Some(v) => Err(self.error(
                key,
                format!("expected a block {{ … }}, found {}", show(key, &v)),
            )),
        }
    }

    /// One of `allowed` (case-insensitive); returns the allowed spelling.
    pub fn enum_value(
        &mut self,
        key: &str,
        allowed: &[&'static str],
    ) -> Result<Option<&'static str>> {
        match self.string(key)? {
            None => Ok(None),
            Some(s) => self.check_enum(key, &s, allowed).map(Some),
        }
    }

    /// The spelling in `allowed` that `s`, the value of `key`, matches (case-insensitive),
    /// or the error [`enum_value`](Self::enum_value) gives.
    pub fn check_enum(&self, key: &str, s: &str, allowed: &[&'static str]) -> Result<&'static str> {
        match allowed.iter().find(|a| a.eq_ignore_ascii_case(s.trim())) {
            Some(a) => Ok(a),
            None if unset_variable(&Value::String(s.to_string())).is_some() => {
                Err(self.error(key, ""))
            }
            None => Err(self.location.error_with_hint(
                key,
                format!("invalid value {}", show(key, &Value::String(s.to_string()))),
                format!("valid values: {}", allowed.join(", ")),
            )),
        }
    }

    /// Checks that every option set was read or declared in `specs` (or is common to
    /// all plugins), and that every required option is set. Call once, after reading.
    pub fn finish(&self, specs: &[OptionSpec]) -> Result<()> {
        for spec in specs.iter().filter(|s| s.required && !s.name.contains('*')) {
            let by_alias = specs
                .iter()
                .any(|a| a.is_alias_of(spec.name) && self.contains(a.name));
            if !self.contains(spec.name) && !by_alias {
                return Err(self.error(spec.name, "is required but not set"));
            }
        }
        let mut leaves = Vec::new();
        collect_leaves(&self.values, "", &mut leaves);
        for leaf in leaves {
            let used = self
                .used
                .iter()
                .any(|u| leaf == *u || leaf.starts_with(&format!("{u}.")));
            let declared = specs.iter().chain(COMMON_OPTIONS).any(|s| s.matches(&leaf));
            if !used && !declared {
                let names = specs.iter().chain(COMMON_OPTIONS).map(|s| s.name);
                let hint = match nearest(&leaf, names) {
                    Some(n) => format!(
                        "did you mean '{n}'? `ferry connectors {}` lists the options",
                        self.location.plugin
                    ),
                    None => format!(
                        "`ferry connectors {}` lists the options",
                        self.location.plugin
                    ),
                };
                return Err(self.location.error_with_hint(&leaf, "unknown option", hint));
            }
        }
        Ok(())
    }
}

fn collect_leaves(m: &Map<String, Value>, prefix: &str, out: &mut Vec<String>) {
    for (k, v) in m {
        let path = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            Value::Object(inner) if !inner.is_empty() => collect_leaves(inner, &path, out),
            _ => out.push(path),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SPECS: &[OptionSpec] = &[
        OptionSpec::optional("row.num", OptionKind::Int, Some("5"), "rows"),
        OptionSpec::optional("*.min", OptionKind::Float, None, "minimum"),
        OptionSpec::optional("schema", OptionKind::Object, None, "schema"),
        OptionSpec::required("path", OptionKind::String, "where"),
    ];

    fn opts(v: Value) -> Options {
        let mut lines = HashMap::new();
        lines.insert("row.nmu".to_string(), 12);
        Options::new(
            v.as_object().unwrap().clone(),
            PluginLocation {
                file: "job.conf".into(),
                section: "source".into(),
                plugin: "FakeSource".into(),
                line: Some(10),
                lines: Arc::new(lines),
            },
        )
    }

    #[test]
    fn reads_flat_and_nested_dotted_keys() {
        let mut o = opts(json!({"row": {"num": 7}, "split.num": "3", "path": "/x"}));
        assert_eq!(o.i64("row.num").unwrap(), Some(7));
        assert_eq!(o.i64("split.num").unwrap(), Some(3));
    }

    #[test]
    fn unknown_option_is_reported_with_line_and_nearest_name() {
        let o = opts(json!({"row": {"nmu": 7}, "path": "/x"}));
        let e = o.finish(SPECS).unwrap_err().to_string();
        assert_eq!(e, "job.conf:12: source FakeSource: option 'row.nmu': unknown option (did you mean 'row.num'? `ferry connectors FakeSource` lists the options)");
    }

    #[test]
    fn wildcard_and_object_specs_cover_their_keys() {
        let o = opts(
            json!({"int": {"min": 1}, "schema": {"fields": {"a": "int"}}, "path": "/x", "plugin_output": "t"}),
        );
        o.finish(SPECS).unwrap();
    }

    #[test]
    fn missing_required_option_is_reported() {
        let e = opts(json!({})).finish(SPECS).unwrap_err().to_string();
        assert_eq!(
            e,
            "job.conf:10: source FakeSource: option 'path': is required but not set"
        );
    }

    #[test]
    fn wrong_types_are_reported_and_secrets_redacted() {
        let mut o = opts(json!({"row.num": "many", "password": {"a": 1}}));
        assert_eq!(o.i64("row.num").unwrap_err().to_string(), "job.conf:10: source FakeSource: option 'row.num': expected a whole number, found 'many'");
        let e = o.string("password").unwrap_err().to_string();
        assert!(e.contains("<redacted>") && !e.contains("\"a\""), "{e}");
    }

    #[test]
    fn enum_values_list_the_valid_ones() {
        let mut o = opts(json!({"mode": "sometimes"}));
        let e = o
            .enum_value("mode", &["range", "template"])
            .unwrap_err()
            .to_string();
        assert!(
            e.ends_with("invalid value 'sometimes' (valid values: range, template)"),
            "{e}"
        );
    }

    #[test]
    fn an_unset_variable_is_named_instead_of_the_type_error() {
        let mut o = opts(json!({
            "row.num": "${rows}",
            "rate": "1.5${rate}",
            "flag": "${on}",
            "mode": "${mode}",
            "tags": ["a", "${tag}"],
            "path": "/x/${table_name}/${now}",
        }));
        let msg = |key: &str, name: &str| {
            format!("job.conf:10: source FakeSource: option '{key}': variable '{name}' is not set (pass -i {name}=VALUE)")
        };
        assert_eq!(
            o.i64("row.num").unwrap_err().to_string(),
            msg("row.num", "rows")
        );
        assert_eq!(o.f64("rate").unwrap_err().to_string(), msg("rate", "rate"));
        assert_eq!(o.bool("flag").unwrap_err().to_string(), msg("flag", "on"));
        let e = o.enum_value("mode", &["a", "b"]).unwrap_err().to_string();
        assert_eq!(e, msg("mode", "mode"));
        // Text options take any text; a reader that finds it wrong names the variable.
        assert_eq!(
            o.string("path").unwrap().as_deref(),
            Some("/x/${table_name}/${now}")
        );
        assert_eq!(
            o.error("tags", "no such tag").to_string(),
            msg("tags", "tag")
        );
        assert_eq!(unset_variable(&json!(["a", "${tag}"])), Some("tag".into()));
        // Connector placeholders are no variables.
        assert_eq!(unset_variable(&json!("/x/${table_name}/${now}")), None);
        assert_eq!(unset_variable(&json!("${transactionId}_${uuid}")), None);
        assert_eq!(unset_variable(&json!("${k0}=${v0}/${kn}=${vn}")), None);
        assert_eq!(unset_variable(&json!("$5 ${ } ${a{b}")), None);
        assert_eq!(unset_variable(&json!("${k}")), Some("k".into()));
    }

    #[test]
    fn bracketed_text_is_a_list() {
        let mut o = opts(json!({"t": "[abc,def]"}));
        assert_eq!(
            o.string_list("t").unwrap(),
            Some(vec!["abc".to_string(), "def".to_string()])
        );
    }
}
