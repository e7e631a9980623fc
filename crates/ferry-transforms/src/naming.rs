//! Name rewriting shared by FieldRename and TableRename (`convert_case`, `prefix`, `suffix`,
//! `replacements_with_regex`), and SeaTunnel's `database.schema.table` paths.

use ferry_api::{Options, Result};
use regex::Regex;

use crate::common::{block_bool, block_string, check_block_keys, compile_regex, Blocks};

/// The valid `convert_case` values.
pub(crate) const CASES: &[&str] = &["UPPER", "LOWER"];

ferry_api::declare_options! {
    /// The options [`RenameRules::read`] reads.
    pub(crate) struct RuleOptions => RULE_OPTIONS {
        /// Convert names to UPPER or LOWER case.
        convert_case: String = "convert_case", optional, one_of CASES;
        /// Text added before every name (trimmed).
        prefix: String = "prefix", optional;
        /// Text added after every name (trimmed).
        suffix: String = "suffix", optional;
        /// Replacement rules [{ replace_from = regex, replace_to = text, is_regex = true }]; the last rule that matches a name applies.
        replacements: Blocks = "replacements_with_regex", optional;
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Case {
    Upper,
    Lower,
}

#[derive(Debug)]
enum Matcher {
    Regex(Regex),
    Exact(String),
}

#[derive(Debug)]
struct Replacement {
    from: Matcher,
    to: String,
}

/// How names are rewritten, in SeaTunnel's order: the matches of the last
/// `replacements_with_regex` rule that matches the original name are replaced, the rest of
/// the name is case-converted, then prefix and suffix are added.
#[derive(Debug, Default)]
pub(crate) struct RenameRules {
    case: Option<Case>,
    prefix: String,
    suffix: String,
    replacements: Vec<Replacement>,
}

impl RenameRules {
    /// Reads the rule options.
    pub(crate) fn read(options: &mut Options) -> Result<Self> {
        let o = RuleOptions::read(options)?;
        let case = match o.convert_case.as_deref() {
            Some("UPPER") => Some(Case::Upper),
            Some(_) => Some(Case::Lower),
            None => None,
        };
        // SeaTunnel trims prefix, suffix and replace_to.
        let prefix = o.prefix.map(|s| s.trim().to_string()).unwrap_or_default();
        let suffix = o.suffix.map(|s| s.trim().to_string()).unwrap_or_default();
        let key = "replacements_with_regex";
        let mut replacements = Vec::new();
        for (i, block) in o
            .replacements
            .map(|b| b.0)
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            check_block_keys(
                options,
                key,
                i,
                block,
                &["replace_from", "replace_to", "is_regex"],
            )?;
            let from = block_string(options, key, i, block, "replace_from")?.unwrap_or_default();
            let to = block_string(options, key, i, block, "replace_to")?.ok_or_else(|| {
                options.error(&format!("{key}[{i}].replace_to"), "is required but not set")
            })?;
            if from.is_empty() {
                // SeaTunnel skips a rule with an empty replace_from.
                continue;
            }
            let from = if block_bool(options, key, i, block, "is_regex")?.unwrap_or(true) {
                Matcher::Regex(compile_regex(
                    options,
                    &format!("{key}[{i}].replace_from"),
                    &from,
                )?)
            } else {
                Matcher::Exact(from)
            };
            replacements.push(Replacement {
                from,
                to: to.trim().to_string(),
            });
        }
        Ok(RenameRules {
            case,
            prefix,
            suffix,
            replacements,
        })
    }

    /// Case-converts `s`.
    pub(crate) fn convert_case(&self, s: &str) -> String {
        match self.case {
            Some(Case::Upper) => s.to_uppercase(),
            Some(Case::Lower) => s.to_lowercase(),
            None => s.to_string(),
        }
    }

    /// The new name for `name`.
    pub(crate) fn rename(&self, name: &str) -> String {
        let mut ranges: Vec<(usize, usize)> = Vec::new();
        let mut to = "";
        for r in &self.replacements {
            let found: Vec<(usize, usize)> = match &r.from {
                Matcher::Exact(s) if s == name => vec![(0, name.len())],
                Matcher::Exact(_) => Vec::new(),
                Matcher::Regex(re) => re.find_iter(name).map(|m| (m.start(), m.end())).collect(),
            };
            if !found.is_empty() {
                ranges = found;
                to = &r.to;
            }
        }
        let mut out = String::with_capacity(self.prefix.len() + name.len() + self.suffix.len());
        out.push_str(&self.prefix);
        let mut pos = 0;
        for (a, b) in ranges {
            out.push_str(&self.convert_case(&name[pos..a]));
            out.push_str(to);
            pos = b;
        }
        out.push_str(&self.convert_case(&name[pos..]));
        out.push_str(&self.suffix);
        out
    }
}

/// A table identifier split as SeaTunnel's `TablePath.of(name)`: `table`,
/// `database.table` or `database.schema.table`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TablePath {
    pub(crate) database: Option<String>,
    pub(crate) schema: Option<String>,
    pub(crate) table: String,
}

impl TablePath {
    /// Splits a table name on dots.
    pub(crate) fn parse(name: &str) -> Self {
        let parts: Vec<&str> = name.split('.').collect();
        match parts.as_slice() {
            [t] => TablePath {
                database: None,
                schema: None,
                table: t.to_string(),
            },
            [d, t] => TablePath {
                database: Some(d.to_string()),
                schema: None,
                table: t.to_string(),
            },
            [d, s, t] => TablePath {
                database: Some(d.to_string()),
                schema: Some(s.to_string()),
                table: t.to_string(),
            },
            // More dots than SeaTunnel allows: the middle parts are taken as the schema.
            [d, middle @ .., t] => TablePath {
                database: Some(d.to_string()),
                schema: Some(middle.join(".")),
                table: t.to_string(),
            },
            [] => TablePath {
                database: None,
                schema: None,
                table: String::new(),
            },
        }
    }

    /// The dotted name.
    pub(crate) fn full_name(&self) -> String {
        let mut parts: Vec<&str> = Vec::with_capacity(3);
        if let Some(d) = &self.database {
            parts.push(d);
        }
        if let Some(s) = &self.schema {
            parts.push(s);
        }
        parts.push(&self.table);
        parts.join(".")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::testutil::opts;
    use serde_json::json;

    fn rules(v: serde_json::Value) -> RenameRules {
        RenameRules::read(&mut opts("FieldRename", v)).unwrap()
    }

    #[test]
    fn case_prefix_suffix_and_replacements_in_seatunnel_order() {
        let r = rules(json!({
            "convert_case": "UPPER", "prefix": " F_ ", "suffix": "_S",
            "replacements_with_regex": [{"replace_from": "create_time", "replace_to": "SOURCE_CREATE_TIME"}]
        }));
        assert_eq!(r.rename("id"), "F_ID_S");
        assert_eq!(r.rename("create_time"), "F_SOURCE_CREATE_TIME_S");
        // Replaced text is not case-converted.
        let r = rules(
            json!({"convert_case": "lower", "replacements_with_regex": [{"replace_from": "_T", "replace_to": "_Tbl"}]}),
        );
        assert_eq!(r.rename("MY_T_X_T"), "my_Tbl_x_Tbl");
    }

    #[test]
    fn last_matching_rule_wins_and_exact_rules_match_whole_names() {
        let r = rules(json!({"replacements_with_regex": [
            {"replace_from": "a", "replace_to": "1"},
            {"replace_from": "b", "replace_to": "2"},
            {"replace_from": "ab", "replace_to": "X", "is_regex": false}
        ]}));
        assert_eq!(r.rename("ab"), "X");
        assert_eq!(r.rename("abc"), "a2c");
        assert_eq!(r.rename("aa"), "11");
        assert_eq!(r.rename("zz"), "zz");
    }

    #[test]
    fn bad_rules_are_reported() {
        let e = RenameRules::read(&mut opts(
            "FieldRename",
            json!({"replacements_with_regex": [{"replace_from": "("}]}),
        ))
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("option 'replacements_with_regex[0].replace_to': is required"),
            "{e}"
        );
        let e = RenameRules::read(&mut opts(
            "FieldRename",
            json!({"replacements_with_regex": [{"replace_from": "(", "replace_to": "x"}]}),
        ))
        .unwrap_err();
        assert!(
            e.to_string().contains(
                "option 'replacements_with_regex[0].replace_from': invalid regular expression"
            ),
            "{e}"
        );
        let e = RenameRules::read(&mut opts(
            "FieldRename",
            json!({"replacements_with_regex": [{"replace_form": "a", "replace_to": "x"}]}),
        ))
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("'replacements_with_regex[0].replace_form': unknown entry"),
            "{e}"
        );
        let e = RenameRules::read(&mut opts("FieldRename", json!({"convert_case": "title"})))
            .unwrap_err();
        assert!(e.to_string().contains("valid values: UPPER, LOWER"), "{e}");
    }

    #[test]
    fn table_paths_split_like_seatunnel() {
        assert_eq!(TablePath::parse("t").full_name(), "t");
        let p = TablePath::parse("db.t");
        assert_eq!(
            (p.database.as_deref(), p.schema.as_deref(), p.table.as_str()),
            (Some("db"), None, "t")
        );
        let p = TablePath::parse("db.s.t");
        assert_eq!(
            (p.database.as_deref(), p.schema.as_deref(), p.table.as_str()),
            (Some("db"), Some("s"), "t")
        );
        assert_eq!(p.full_name(), "db.s.t");
    }
}
