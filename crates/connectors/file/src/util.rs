//! Small pieces of Java behaviour SeaTunnel's options rely on: `String.split` regex
//! delimiters, `SimpleDateFormat` patterns and `Float.toString`.

use regex::Regex;

/// A field separator as SeaTunnel's source uses it: Java's `String.split(regex)`.
/// Most delimiters are plain text (`,`, `\u0001`) or an escaped character (`\\|`);
/// those split without a regex engine.
#[derive(Debug, Clone)]
pub enum Splitter {
    /// Split on this exact text.
    Literal(String),
    /// Split on matches of a real regular expression.
    Regex(Regex),
}

/// Characters that are special in a Java regex (outside a character class).
const META: &str = ".$|()[{^?*+\\";

impl Splitter {
    /// Interprets `delim` as Java's `String.split` does.
    pub fn from_java_regex(delim: &str) -> Result<Splitter, String> {
        if delim.is_empty() {
            return Err("the delimiter is empty".into());
        }
        match literal_of_regex(delim) {
            Some(l) => Ok(Splitter::Literal(l)),
            None => Regex::new(delim)
                .map(Splitter::Regex)
                .map_err(|e| format!("'{delim}' is not a valid regular expression: {e}")),
        }
    }

    /// The literal text, when the splitter is one.
    pub fn literal(&self) -> Option<&str> {
        match self {
            Splitter::Literal(s) => Some(s),
            Splitter::Regex(_) => None,
        }
    }

    /// Calls `f` with each piece of `s` (all of them, trailing empty ones included, as
    /// `split(regex, -1)`), stopping early when `f` returns false.
    pub fn for_each<'a>(&self, s: &'a str, mut f: impl FnMut(&'a str) -> bool) {
        match self {
            Splitter::Literal(d) => {
                for p in s.split(d.as_str()) {
                    if !f(p) {
                        return;
                    }
                }
            }
            Splitter::Regex(r) => {
                for p in r.split(s) {
                    if !f(p) {
                        return;
                    }
                }
            }
        }
    }
}

/// The text a regex matches when it matches exactly one text, for the regexes people
/// use as delimiters; `None` for anything else.
fn literal_of_regex(re: &str) -> Option<String> {
    let mut out = String::new();
    let mut chars = re.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            let e = chars.next()?;
            match e {
                't' => out.push('\t'),
                'n' => out.push('\n'),
                'r' => out.push('\r'),
                'f' => out.push('\u{c}'),
                'e' => out.push('\u{1b}'),
                'a' => out.push('\u{7}'),
                'u' => {
                    let hex: String = chars.by_ref().take(4).collect();
                    out.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                }
                'x' => {
                    let hex: String = chars.by_ref().take(2).collect();
                    out.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                }
                c if c.is_ascii_alphanumeric() => return None, // \d, \s, \1…: a real regex
                c => out.push(c),
            }
        } else if META.contains(c) {
            return None;
        } else {
            out.push(c);
        }
    }
    Some(out)
}

/// Translates a Java `SimpleDateFormat`/`DateTimeFormatter` pattern (`yyyy.MM.dd`,
/// `yyyy-MM-dd HH:mm:ss.SSS`) to a chrono format string.
pub fn java_pattern_to_chrono(p: &str) -> String {
    let chars: Vec<char> = p.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' {
            // Quoted literal text; '' is a quote.
            i += 1;
            while i < chars.len() && chars[i] != '\'' {
                push_literal(&mut out, chars[i]);
                i += 1;
            }
            if i + 1 < chars.len() && chars[i + 1] == '\'' && i > 0 && chars[i - 1] == '\'' {
                out.push('\'');
            }
            i += 1;
            continue;
        }
        let mut n = 1;
        while i + n < chars.len() && chars[i + n] == c {
            n += 1;
        }
        let spec = match (c, n) {
            ('y' | 'u', 2) => "%y".to_string(),
            ('y' | 'u', _) => "%Y".to_string(),
            ('M', 1 | 2) => "%m".to_string(),
            ('M', 3) => "%b".to_string(),
            ('M', _) => "%B".to_string(),
            ('d', _) => "%d".to_string(),
            ('H', _) => "%H".to_string(),
            ('h', _) => "%I".to_string(),
            ('m', _) => "%M".to_string(),
            ('s', _) => "%S".to_string(),
            ('S', n) => format!("%{}f", n.min(9)),
            ('a', _) => "%p".to_string(),
            ('E', 1..=3) => "%a".to_string(),
            ('E', _) => "%A".to_string(),
            ('D', _) => "%j".to_string(),
            ('Z', _) => "%z".to_string(),
            _ => {
                let mut s = String::new();
                for _ in 0..n {
                    push_literal(&mut s, c);
                }
                s
            }
        };
        out.push_str(&spec);
        i += n;
    }
    out
}

fn push_literal(out: &mut String, c: char) {
    if c == '%' {
        out.push_str("%%");
    } else {
        out.push(c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(s: &Splitter, line: &str) -> Vec<String> {
        let mut v = Vec::new();
        s.for_each(line, |p| {
            v.push(p.to_string());
            true
        });
        v
    }

    #[test]
    fn escaped_pipe_is_a_literal_pipe() {
        let s = Splitter::from_java_regex("\\|").unwrap();
        assert_eq!(s.literal(), Some("|"));
        assert_eq!(pieces(&s, "a|b||"), vec!["a", "b", "", ""]);
    }

    #[test]
    fn plain_and_control_delimiters_are_literal() {
        assert_eq!(
            Splitter::from_java_regex("\u{1}").unwrap().literal(),
            Some("\u{1}")
        );
        assert_eq!(
            Splitter::from_java_regex("\\t").unwrap().literal(),
            Some("\t")
        );
        assert_eq!(
            Splitter::from_java_regex("##").unwrap().literal(),
            Some("##")
        );
    }

    #[test]
    fn real_regexes_split_as_regexes() {
        let s = Splitter::from_java_regex("\\s+").unwrap();
        assert!(s.literal().is_none());
        assert_eq!(pieces(&s, "a  b\tc"), vec!["a", "b", "c"]);
        assert!(Splitter::from_java_regex("(").is_err());
    }

    #[test]
    fn java_patterns_translate() {
        assert_eq!(java_pattern_to_chrono("yyyy.MM.dd"), "%Y.%m.%d");
        assert_eq!(
            java_pattern_to_chrono("yyyy-MM-dd HH:mm:ss.SSS"),
            "%Y-%m-%d %H:%M:%S.%3f"
        );
        assert_eq!(java_pattern_to_chrono("yyyyMMdd'T'HH"), "%Y%m%dT%H");
    }
}
