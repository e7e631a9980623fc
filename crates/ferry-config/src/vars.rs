//! SeaTunnel's user variables: `${name}` and `${name:default}` replaced in the job file's
//! text before HOCON parsing, inside quoted strings too.
//!
//! The replacement knows where it stands in the HOCON text (outside strings, inside a
//! `"…"` string, inside a `"""…"""` string, in a comment), so that:
//! - a value replaced inside a quoted string is escaped (a `"` in the value cannot end
//!   the string);
//! - a value replaced outside strings becomes a quoted string, as in SeaTunnel, where
//!   variables arrive as text (`-i rowNum=10` gives `"10"`, `-i t=[a,b]` gives `"[a,b]"`,
//!   which `Options` getters read as a number and a list);
//! - a placeholder that is neither given nor defaulted stays as written: inside strings
//!   it is plain text already; outside strings it becomes the quoted text `"${name}"`,
//!   unless it names a key of the config, in which case it is left to HOCON as a
//!   substitution (`a = ${env.parallelism}`).
//!
//! Comments are copied untouched.

pub use ferry_api::options::SYSTEM_PLACEHOLDERS;

/// What becomes of an unquoted `${name}` that is neither given nor defaulted.
#[derive(Clone, Copy)]
pub(crate) enum Unresolved<'a> {
    /// First pass: an optional HOCON substitution `${?name}`, which resolves when `name`
    /// is a key of the file and vanishes otherwise; the parsed result tells which
    /// names are keys.
    Probe,
    /// Kept as a HOCON substitution when the function says `name` is a key of the
    /// file; otherwise the literal text `"${name}"`.
    Keep(&'a dyn Fn(&str) -> bool),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Normal,
    Quoted,
    Triple,
}

/// Replaces SeaTunnel variables in `text`.
///
/// `lookup` gives a variable's value (user variables first, then, when loading a file,
/// the process environment). `unresolved` says what becomes of an unquoted placeholder
/// that is neither given nor defaulted.
pub(crate) fn substitute(
    text: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
    unresolved: Unresolved<'_>,
) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let mut state = State::Normal;
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        match state {
            State::Normal => {
                if rest.starts_with("\"\"\"") {
                    out.push_str("\"\"\"");
                    rest = &rest[3..];
                    state = State::Triple;
                } else if c == '"' {
                    out.push('"');
                    rest = &rest[1..];
                    state = State::Quoted;
                } else if c == '#' || rest.starts_with("//") {
                    // A comment runs to the end of the line; it is copied as it is.
                    let end = rest.find('\n').unwrap_or(rest.len());
                    out.push_str(&rest[..end]);
                    rest = &rest[end..];
                } else if rest.starts_with("${") {
                    rest = placeholder(rest, state, lookup, unresolved, &mut out);
                } else {
                    out.push(c);
                    rest = &rest[c.len_utf8()..];
                }
            }
            State::Quoted => {
                if c == '\\' {
                    // Copy the escape and the escaped character, so `\"` does not end the string.
                    out.push('\\');
                    rest = &rest[1..];
                    if let Some(n) = rest.chars().next() {
                        out.push(n);
                        rest = &rest[n.len_utf8()..];
                    }
                } else if c == '"' || c == '\n' {
                    // A newline ends an unterminated string; the parser reports it.
                    out.push(c);
                    rest = &rest[1..];
                    state = State::Normal;
                } else if rest.starts_with("${") {
                    rest = placeholder(rest, state, lookup, unresolved, &mut out);
                } else {
                    out.push(c);
                    rest = &rest[c.len_utf8()..];
                }
            }
            State::Triple => {
                if rest.starts_with("\"\"\"") {
                    // HOCON ends a triple-quoted string at the last quote of a run of quotes.
                    let run = rest.len() - rest.trim_start_matches('"').len();
                    out.push_str(&rest[..run]);
                    rest = &rest[run..];
                    state = State::Normal;
                } else if rest.starts_with("${") {
                    rest = placeholder(rest, state, lookup, unresolved, &mut out);
                } else {
                    out.push(c);
                    rest = &rest[c.len_utf8()..];
                }
            }
        }
    }
    out
}

/// Handles the `${…}` at the start of `rest`; returns the text after it.
fn placeholder<'a>(
    rest: &'a str,
    state: State,
    lookup: &dyn Fn(&str) -> Option<String>,
    unresolved: Unresolved<'_>,
    out: &mut String,
) -> &'a str {
    // SeaTunnel's pattern: `\$\{([^:{}]+)(?::[^}]*)?\}`. A body holding `{` or a
    // newline is no placeholder: copy the `$` and go on.
    let body_end = rest[2..].find(['}', '{', '\n']).map(|i| i + 2);
    let Some(end) = body_end.filter(|&e| rest.as_bytes()[e] == b'}') else {
        out.push('$');
        return &rest[1..];
    };
    let whole = &rest[..=end];
    let body = &rest[2..end];
    let (name, default) = match body.split_once(':') {
        Some((n, d)) => (n, Some(d)),
        None => (body, None),
    };
    let optional = name.starts_with('?');
    let key = name.trim_start_matches('?').trim();
    let after = &rest[end + 1..];
    if key.is_empty() || SYSTEM_PLACEHOLDERS.contains(&key) {
        literal(whole, state, out);
        return after;
    }
    match lookup(key).or_else(|| default.map(str::to_string)) {
        Some(value) => match state {
            State::Normal => {
                out.push('"');
                push_escaped(&value, out);
                out.push('"');
            }
            State::Quoted => push_escaped(&value, out),
            State::Triple => out.push_str(&value),
        },
        None if state != State::Normal || optional => literal(whole, state, out),
        None => match unresolved {
            Unresolved::Probe => {
                out.push_str("${?");
                out.push_str(key);
                out.push('}');
            }
            Unresolved::Keep(is_config_path) if is_config_path(key) => out.push_str(whole),
            Unresolved::Keep(_) => literal(whole, state, out),
        },
    }
    after
}

/// Writes a placeholder that stays as written: outside strings it is quoted so that
/// HOCON does not try to resolve it, except an optional `${?path}`, which is HOCON's.
fn literal(whole: &str, state: State, out: &mut String) {
    if state == State::Normal && !whole.starts_with("${?") {
        out.push('"');
        push_escaped(whole, out);
        out.push('"');
    } else {
        out.push_str(whole);
    }
}

/// Escapes `s` for a HOCON (JSON) quoted string.
fn push_escaped(s: &str, out: &mut String) {
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn sub(text: &str, vars: &[(&str, &str)], paths: &[&str]) -> String {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        substitute(
            text,
            &|k| map.get(k).cloned(),
            Unresolved::Keep(&|p| paths.contains(&p)),
        )
    }

    #[test]
    fn replaces_unquoted_variables_with_quoted_text() {
        assert_eq!(sub("a = ${x}\n", &[("x", "10")], &[]), "a = \"10\"\n");
        assert_eq!(
            sub("t = ${t}", &[("t", "[abc,def]")], &[]),
            "t = \"[abc,def]\""
        );
    }

    #[test]
    fn replaces_inside_quoted_strings_with_escaping() {
        assert_eq!(
            sub(r#"q = "from ${t} where""#, &[("t", "a\"b")], &[]),
            r#"q = "from a\"b where""#
        );
        assert_eq!(
            sub(r#"q = "select * from "${t}" x""#, &[("t", "tab")], &[]),
            r#"q = "select * from ""tab"" x""#
        );
    }

    #[test]
    fn defaults_apply_when_the_variable_is_missing() {
        assert_eq!(
            sub(r#"a = "${r:fake_test}_table""#, &[], &[]),
            r#"a = "fake_test_table""#
        );
        assert_eq!(
            sub(r#"a = "${r:fake_test}_table""#, &[("r", "x")], &[]),
            r#"a = "x_table""#
        );
        assert_eq!(sub("a = ${r:}", &[], &[]), "a = \"\"");
        assert_eq!(sub("a = ${r:50}", &[], &[]), "a = \"50\"");
    }

    #[test]
    fn missing_variables_stay_literal() {
        assert_eq!(
            sub(r#"f = "${transactionId}_${now}""#, &[], &[]),
            r#"f = "${transactionId}_${now}""#
        );
        assert_eq!(sub("p = /tmp/${k0}/x", &[], &[]), "p = /tmp/\"${k0}\"/x");
    }

    #[test]
    fn config_paths_stay_hocon_substitutions() {
        assert_eq!(sub("a = ${b}", &[], &["b"]), "a = ${b}");
        assert_eq!(sub("a = ${?b}", &[], &[]), "a = ${?b}");
        // A user variable wins over a config key of the same name.
        assert_eq!(sub("a = ${b}", &[("b", "v")], &["b"]), "a = \"v\"");
    }

    #[test]
    fn probing_makes_unresolved_placeholders_optional() {
        let out = substitute(
            "a = ${b}\nc = \"${d}\"\ne = ${x:1}",
            &|_| None,
            Unresolved::Probe,
        );
        assert_eq!(out, "a = ${?b}\nc = \"${d}\"\ne = \"1\"");
    }

    #[test]
    fn system_placeholders_are_never_replaced() {
        assert_eq!(
            sub(r#"p = "/x/${table_name}""#, &[("table_name", "t")], &[]),
            r#"p = "/x/${table_name}""#
        );
    }

    #[test]
    fn comments_escapes_and_triple_quotes() {
        assert_eq!(
            sub("# ${x}\na = 1 // ${x}\n", &[("x", "v")], &[]),
            "# ${x}\na = 1 // ${x}\n"
        );
        assert_eq!(
            sub(r#"a = "\"${x}\"""#, &[("x", "v")], &[]),
            r#"a = "\"v\"""#
        );
        assert_eq!(
            sub("a = \"\"\"x ${x} \"y\"\"\"\"", &[("x", "v\"")], &[]),
            "a = \"\"\"x v\" \"y\"\"\"\""
        );
        assert_eq!(sub("a = $5 ${ x", &[], &[]), "a = $5 ${ x");
    }
}
