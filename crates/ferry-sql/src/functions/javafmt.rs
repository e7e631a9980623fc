//! Java `DateTimeFormatter` / `SimpleDateFormat` patterns (`yyyy-MM-dd HH:mm:ss`) as
//! chrono format strings, so SeaTunnel's FORMATDATETIME, TO_CHAR, PARSEDATETIME and
//! FROM_UNIXTIME patterns work unchanged.

/// Translates a Java pattern; the error names the unsupported letter.
pub(crate) fn to_chrono(pattern: &str) -> Result<String, String> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::with_capacity(pattern.len() * 2);
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' {
            // Quoted literal text; '' is a single quote.
            if chars.get(i + 1) == Some(&'\'') {
                out.push('\'');
                i += 2;
                continue;
            }
            i += 1;
            while i < chars.len() {
                if chars[i] == '\'' {
                    if chars.get(i + 1) == Some(&'\'') {
                        out.push('\'');
                        i += 2;
                        continue;
                    }
                    break;
                }
                push_literal(&mut out, chars[i]);
                i += 1;
            }
            i += 1;
            continue;
        }
        if !c.is_ascii_alphabetic() {
            push_literal(&mut out, c);
            i += 1;
            continue;
        }
        let mut n = 1;
        while i + n < chars.len() && chars[i + n] == c {
            n += 1;
        }
        let spec = match (c, n) {
            ('y' | 'u' | 'Y', 2) => "%y",
            ('y' | 'u' | 'Y', _) => "%Y",
            ('M' | 'L', 1) => "%-m",
            ('M' | 'L', 2) => "%m",
            ('M' | 'L', 3) => "%b",
            ('M' | 'L', _) => "%B",
            ('d', 1) => "%-d",
            ('d', _) => "%d",
            ('D', 1) => "%-j",
            ('D', _) => "%j",
            ('H', 1) => "%-H",
            ('H', _) => "%H",
            ('h', 1) => "%-I",
            ('h', _) => "%I",
            ('m', 1) => "%-M",
            ('m', _) => "%M",
            ('s', 1) => "%-S",
            ('s', _) => "%S",
            ('S', 1..=3) => "%3f",
            ('S', 4..=6) => "%6f",
            ('S', _) => "%9f",
            ('a', _) => "%p",
            ('E', 1..=3) => "%a",
            ('E', _) => "%A",
            ('e' | 'c', _) => "%u",
            _ => return Err(format!("unsupported pattern letter '{c}' in '{pattern}'")),
        };
        out.push_str(spec);
        i += n;
    }
    Ok(out)
}

fn push_literal(out: &mut String, c: char) {
    if c == '%' {
        out.push_str("%%");
    } else {
        out.push(c);
    }
}

/// What a parse pattern yields, as SeaTunnel decides it: with `yy` and `mm` a timestamp,
/// with `yy` a date, with `mm` a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ParseKind {
    /// Date and time.
    Timestamp,
    /// Date only.
    Date,
    /// Time only.
    Time,
}

/// The kind [`ParseKind`] of a PARSEDATETIME pattern, or `None` when it has neither.
pub(crate) fn parse_kind(pattern: &str) -> Option<ParseKind> {
    match (pattern.contains("yy"), pattern.contains("mm")) {
        (true, true) => Some(ParseKind::Timestamp),
        (true, false) => Some(ParseKind::Date),
        (false, true) => Some(ParseKind::Time),
        (false, false) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn translates_common_patterns() {
        assert_eq!(
            to_chrono("yyyy-MM-dd HH:mm:ss").unwrap(),
            "%Y-%m-%d %H:%M:%S"
        );
        assert_eq!(
            to_chrono("yyyy-MM-dd'T'HH:mm:ss.SSS").unwrap(),
            "%Y-%m-%dT%H:%M:%S.%3f"
        );
        assert_eq!(to_chrono("EEEE, MMMM d ''yy").unwrap(), "%A, %B %-d '%y");
        assert_eq!(to_chrono("100%").unwrap(), "100%%");
        assert!(to_chrono("yyyy G").unwrap_err().contains("'G'"));
    }

    #[test]
    fn parse_kinds_follow_seatunnel() {
        assert_eq!(
            parse_kind("yyyy-MM-dd HH:mm:ss"),
            Some(ParseKind::Timestamp)
        );
        assert_eq!(parse_kind("yyyy-MM-dd"), Some(ParseKind::Date));
        assert_eq!(parse_kind("HH:mm:ss"), Some(ParseKind::Time));
        assert_eq!(parse_kind("dd"), None);
    }
}
