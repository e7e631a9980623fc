//! Errors that say who must act: the user (a bad job file), the outside world
//! (a database down, a file missing) or Ferry itself (a bug).

use std::fmt;

/// Result alias used across Ferry.
pub type Result<T, E = FerryError> = std::result::Result<T, E>;

/// Where in a job file something was written, for error messages.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Location {
    /// The job file's path as the user gave it.
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{}", self.file, line),
            None => write!(f, "{}", self.file),
        }
    }
}

/// Every error Ferry reports. The variant says who must act.
#[derive(Debug, thiserror::Error)]
pub enum FerryError {
    /// The job file or command line is wrong: the user must fix it.
    #[error("{}{}{message}{}", location_prefix(.location), plugin_prefix(.plugin, .option), hint_suffix(.hint))]
    Config {
        /// File and line.
        location: Location,
        /// Plugin, as `source FakeSource` or `sink Assert`, when the error is inside one.
        plugin: Option<String>,
        /// The option at fault.
        option: Option<String>,
        /// What is wrong.
        message: String,
        /// What would be right (valid values, the nearest option name…).
        hint: Option<String>,
    },
    /// Something outside Ferry failed (a file is missing, a database is down).
    #[error("{component}: {message}")]
    External {
        /// The plugin or subsystem that met the failure.
        component: String,
        /// What happened.
        message: String,
    },
    /// The data does not fit what the job declared (a type mismatch, a broken assertion).
    #[error("{component}: {message}")]
    Data {
        /// The plugin that found the problem.
        component: String,
        /// What is wrong with which value.
        message: String,
    },
    /// A bug in Ferry: please report it.
    #[error("internal error (a bug in Ferry, please report it): {0}")]
    Internal(String),
    /// The job was cancelled.
    #[error("cancelled")]
    Cancelled,
}

/// `job.conf:7: `, or nothing for an error with no position (a command-line argument).
fn location_prefix(location: &Location) -> String {
    if location.file.is_empty() && location.line.is_none() {
        String::new()
    } else {
        format!("{location}: ")
    }
}

fn plugin_prefix(plugin: &Option<String>, option: &Option<String>) -> String {
    match (plugin, option) {
        (Some(p), Some(o)) => format!("{p}: option '{o}': "),
        (Some(p), None) => format!("{p}: "),
        (None, Some(o)) => format!("option '{o}': "),
        (None, None) => String::new(),
    }
}

fn hint_suffix(hint: &Option<String>) -> String {
    match hint {
        Some(h) => format!(" ({h})"),
        None => String::new(),
    }
}

impl FerryError {
    /// A configuration error with no position (command-line input, for example).
    pub fn config(message: impl Into<String>) -> Self {
        FerryError::Config {
            location: Location::default(),
            plugin: None,
            option: None,
            message: message.into(),
            hint: None,
        }
    }

    /// An error from outside Ferry met by `component`.
    pub fn external(component: impl Into<String>, message: impl fmt::Display) -> Self {
        FerryError::External {
            component: component.into(),
            message: message.to_string(),
        }
    }

    /// A data error found by `component`.
    pub fn data(component: impl Into<String>, message: impl fmt::Display) -> Self {
        FerryError::Data {
            component: component.into(),
            message: message.to_string(),
        }
    }

    /// A bug.
    pub fn internal(message: impl fmt::Display) -> Self {
        FerryError::Internal(message.to_string())
    }

    /// Places an error met while reading the nested block `prefix` (a `tables_configs[1]`
    /// item, read with [`PluginLocation::nested`]): a configuration error's option becomes
    /// `prefix.option`; an external or data error's message starts with `prefix: `.
    pub fn within(self, prefix: &str) -> Self {
        match self {
            FerryError::Config {
                location,
                plugin,
                option,
                message,
                hint,
            } => FerryError::Config {
                location,
                plugin,
                option: Some(match option {
                    Some(o) => format!("{prefix}.{o}"),
                    None => prefix.to_string(),
                }),
                message,
                hint,
            },
            FerryError::External { component, message } => FerryError::External {
                component,
                message: format!("{prefix}: {message}"),
            },
            FerryError::Data { component, message } => FerryError::Data {
                component,
                message: format!("{prefix}: {message}"),
            },
            other => other,
        }
    }

    /// Whether the user (rather than the environment or Ferry) must act.
    pub fn is_user_error(&self) -> bool {
        matches!(self, FerryError::Config { .. })
    }

    /// Wraps an I/O error on `path`, met by `component`.
    pub fn io(component: impl Into<String>, path: impl fmt::Display, err: std::io::Error) -> Self {
        FerryError::external(component, format!("{path}: {err}"))
    }
}

impl From<arrow::error::ArrowError> for FerryError {
    fn from(e: arrow::error::ArrowError) -> Self {
        FerryError::Data {
            component: "arrow".into(),
            message: e.to_string(),
        }
    }
}

/// Edit distance, to suggest the nearest valid name for a misspelt one.
pub fn nearest<'a>(wrong: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let wrong_l = wrong.to_ascii_lowercase();
    candidates
        .into_iter()
        .map(|c| (levenshtein(&wrong_l, &c.to_ascii_lowercase()), c))
        .filter(|(d, c)| *d <= 2.max(c.len() / 3))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_error_names_file_line_plugin_option_and_hint() {
        let e = FerryError::Config {
            location: Location {
                file: "job.conf".into(),
                line: Some(7),
            },
            plugin: Some("source FakeSource".into()),
            option: Some("row.nmu".into()),
            message: "unknown option".into(),
            hint: Some("did you mean 'row.num'?".into()),
        };
        assert_eq!(
            e.to_string(),
            "job.conf:7: source FakeSource: option 'row.nmu': unknown option (did you mean 'row.num'?)"
        );
    }

    #[test]
    fn an_error_without_a_position_starts_with_its_message() {
        let e = FerryError::config("-i x: expected NAME=VALUE");
        assert_eq!(e.to_string(), "-i x: expected NAME=VALUE");
    }

    #[test]
    fn nearest_finds_close_names_only() {
        assert_eq!(
            nearest("row.nmu", ["row.num", "split.num"]),
            Some("row.num")
        );
        assert_eq!(nearest("zzzzzzzz", ["row.num", "split.num"]), None);
    }
}
