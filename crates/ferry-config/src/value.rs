//! HOCON text → `serde_json` values (key order kept, numbers exact), with the walk of
//! its tokens for line numbers.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::str::FromStr;

use ferry_api::error::Location;
use ferry_api::{FerryError, Result};
use hocon::{HoconError, HoconValue, ParseOptions, ScalarType};
use serde_json::{Map, Number, Value};

use crate::walk::{self, Walk};

/// Parses HOCON `text` (after variable replacement) into its root object and the walk of
/// its tokens. Repeated plugin blocks are given unique keys before parsing.
pub(crate) fn parse_hocon(
    text: &str,
    file: &str,
    base_dir: Option<&Path>,
) -> Result<(Map<String, Value>, Walk)> {
    let tokens =
        hocon::tokenize(text).map_err(|e| syntax_error(file, e.line, e.col, &e.message))?;
    let walk = walk::walk(&tokens);
    let edited = apply_inserts(text, &walk.inserts);
    // No environment for HOCON itself: SeaTunnel variables (which include the
    // environment when loading a file) were replaced already.
    let mut opts = ParseOptions::defaults()
        .with_env(HashMap::new())
        .with_origin_description(file.to_string());
    if let Some(dir) = base_dir {
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        opts = opts.with_base_dir(dir.to_path_buf());
    }
    let config =
        hocon::parse_string_with_options(&edited, opts).map_err(|e| hocon_error(file, e))?;
    let mut root = Map::new();
    for key in config.keys() {
        // `Config::get` takes a path: quote keys that hold dots.
        let path = if key.contains('.') || key.contains('"') {
            format!("\"{}\"", key.replace('\\', "\\\\").replace('"', "\\\""))
        } else {
            key.to_string()
        };
        if let Some(v) = config.get(&path) {
            root.insert(key.to_string(), to_json(v));
        }
    }
    Ok((root, walk))
}

/// Inserts text at (line, column) positions (1-based, columns in characters).
fn apply_inserts(text: &str, inserts: &[(usize, usize, String)]) -> String {
    if inserts.is_empty() {
        return text.to_string();
    }
    let mut at: HashMap<(usize, usize), &str> = HashMap::new();
    for (line, col, s) in inserts {
        at.insert((*line, *col), s);
    }
    let mut out = String::with_capacity(text.len() + 32 * inserts.len());
    let (mut line, mut col) = (1, 1);
    for c in text.chars() {
        if let Some(s) = at.get(&(line, col)) {
            out.push_str(s);
        }
        out.push(c);
        if c == '\n' {
            line += 1;
            col = 1;
        } else {
            col += 1;
        }
    }
    out
}

/// A HOCON value as JSON: strings, exact numbers, booleans, null, lists, objects.
pub(crate) fn to_json(v: &HoconValue) -> Value {
    match v {
        HoconValue::Object(m) => {
            Value::Object(m.iter().map(|(k, v)| (k.clone(), to_json(v))).collect())
        }
        HoconValue::Array(items) => Value::Array(items.iter().map(to_json).collect()),
        HoconValue::Scalar(s) => match s.value_type {
            ScalarType::Number => match Number::from_str(&s.raw) {
                Ok(n) => Value::Number(n),
                Err(_) => Value::String(s.raw.clone()),
            },
            ScalarType::Boolean => match s.raw.as_str() {
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                other => Value::String(other.to_string()),
            },
            ScalarType::Null => Value::Null,
            _ => Value::String(s.raw.clone()),
        },
        // Unresolved placeholders never survive a resolving parse.
        _ => Value::Null,
    }
}

/// Every key path of `root` (`env`, `env.job`, `env.job.mode`…), for deciding which
/// `${path}` are HOCON substitutions.
pub(crate) fn config_paths(root: &Map<String, Value>) -> HashSet<String> {
    fn walk(m: &Map<String, Value>, prefix: &str, out: &mut HashSet<String>) {
        for (k, v) in m {
            let p = if prefix.is_empty() {
                k.clone()
            } else {
                format!("{prefix}.{k}")
            };
            if let Value::Object(inner) = v {
                walk(inner, &p, out);
            }
            out.insert(p);
        }
    }
    let mut out = HashSet::new();
    walk(root, "", &mut out);
    out
}

fn syntax_error(file: &str, line: usize, col: usize, message: &str) -> FerryError {
    FerryError::Config {
        location: Location {
            file: file.to_string(),
            line: Some(line),
        },
        plugin: None,
        option: None,
        message: format!("syntax error at column {col}: {message}"),
        hint: None,
    }
}

fn hocon_error(file: &str, e: HoconError) -> FerryError {
    match e {
        HoconError::Parse(p) => syntax_error(file, p.line, p.col, &p.message),
        HoconError::Resolve(r) => FerryError::Config {
            location: Location { file: file.to_string(), line: (r.line > 0).then_some(r.line) },
            plugin: None,
            option: None,
            message: if r.path.is_empty() {
                r.message
            } else {
                format!("cannot resolve '${{{}}}': {}", r.path, r.message)
            },
            hint: Some("SeaTunnel variables are given with -i name=value; a HOCON substitution names a key of the file".into()),
        },
        other => FerryError::Config {
            location: Location { file: file.to_string(), line: None },
            plugin: None,
            option: None,
            message: other.to_string(),
            hint: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(text: &str) -> Result<Map<String, Value>> {
        parse_hocon(text, "t.conf", None).map(|(m, _)| m)
    }

    #[test]
    fn keeps_key_order_exact_numbers_and_types() {
        let m = parse("b = 99999.99999999\na = [1, true, null, x]\nc { z = 1, y = \"s\" }\nd = 12345678901234567890123").unwrap();
        assert_eq!(m.keys().collect::<Vec<_>>(), ["b", "a", "c", "d"]);
        assert_eq!(m["b"].to_string(), "99999.99999999");
        assert_eq!(m["d"].to_string(), "12345678901234567890123");
        assert_eq!(m["a"], json!([1, true, null, "x"]));
        assert_eq!(
            m["c"]
                .as_object()
                .map(|o| o.keys().cloned().collect::<Vec<_>>()),
            Some(vec!["z".to_string(), "y".to_string()])
        );
    }

    #[test]
    fn hocon_features() {
        let m = parse(
            "a = 1\nb = ${a}\nc : \"x\" y z\nd { e = 1 }\nd.f = 2\ng = [1]\ng += 2\n// comment\n# comment\nh = \"\"\"multi\n\"line\"\"\"\"\ni = ${d} { j = 3 }\n",
        )
        .unwrap();
        assert_eq!(m["b"], json!(1));
        assert_eq!(m["c"], json!("x y z"));
        assert_eq!(m["d"], json!({"e": 1, "f": 2}));
        assert_eq!(m["g"], json!([1, 2]));
        assert_eq!(m["h"], json!("multi\n\"line\""));
        assert_eq!(m["i"], json!({"e": 1, "f": 2, "j": 3}));
    }

    #[test]
    fn syntax_errors_name_file_line_and_column() {
        let e = parse("a {\n  b = [1, 2\n}\n").unwrap_err().to_string();
        assert!(e.starts_with("t.conf:"), "{e}");
        assert!(e.contains("syntax error at column"), "{e}");
        let e = parse("a = 1\nb = \"open\n").unwrap_err().to_string();
        assert!(e.starts_with("t.conf:2: syntax error at column 5"), "{e}");
    }

    #[test]
    fn inserts_at_line_and_column() {
        assert_eq!(
            apply_inserts("ab\ncd", &[(2, 2, "X".into()), (1, 1, "Y".into())]),
            "Yab\ncXd"
        );
    }
}
