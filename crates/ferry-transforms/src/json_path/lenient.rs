//! A permissive JSON reader, for text that strict JSON rejects but SeaTunnel reads.
//!
//! SeaTunnel's JsonPath transform parses with Jayway's default provider, json-smart, in
//! its permissive mode: keys and text values may be unquoted, strings may be in single
//! quotes, and a comma may trail the last item. SeaTunnel's own e2e job
//! (`json_path_basic_type_test.conf`) relies on it, because HOCON strips the inner double
//! quotes of its template: `{data:{c_string: this is a string, c_date:'2023-10-29'}}`.
//! Only text that strict parsing rejected comes here.

use serde_json::{Map, Value};

/// Reads `text` permissively, or `None` when even that fails.
pub(crate) fn parse(text: &str) -> Option<Value> {
    let mut p = Parser {
        s: text.as_bytes(),
        src: text,
        pos: 0,
        depth: 0,
    };
    let v = p.value(b"")?;
    p.skip_ws();
    (p.pos == p.s.len()).then_some(v)
}

/// Nesting deeper than this is refused, so that hostile input cannot exhaust the stack.
const MAX_DEPTH: usize = 128;

struct Parser<'a> {
    s: &'a [u8],
    src: &'a str,
    pos: usize,
    depth: usize,
}

impl Parser<'_> {
    fn skip_ws(&mut self) {
        while self.pos < self.s.len() && self.s[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    /// A value; an unquoted one ends before any of `stops`.
    fn value(&mut self, stops: &[u8]) -> Option<Value> {
        self.skip_ws();
        match self.peek()? {
            b'{' => self.nested(|p| p.object()),
            b'[' => self.nested(|p| p.array()),
            q @ (b'"' | b'\'') => self.quoted(q).map(Value::String),
            _ => {
                let token = self.unquoted(stops)?;
                // A bare number, `true`, `false` or `null` is that; anything else is text.
                Some(match serde_json::from_str::<Value>(token) {
                    Ok(v @ (Value::Number(_) | Value::Bool(_) | Value::Null)) => v,
                    _ => Value::String(token.to_string()),
                })
            }
        }
    }

    fn nested(&mut self, f: impl FnOnce(&mut Self) -> Option<Value>) -> Option<Value> {
        if self.depth >= MAX_DEPTH {
            return None;
        }
        self.depth += 1;
        let v = f(self);
        self.depth -= 1;
        v
    }

    fn object(&mut self) -> Option<Value> {
        self.pos += 1; // '{'
        let mut map = Map::new();
        loop {
            self.skip_ws();
            match self.peek()? {
                b'}' => {
                    self.pos += 1;
                    return Some(Value::Object(map));
                }
                q @ (b'"' | b'\'') => {
                    let key = self.quoted(q)?;
                    self.colon_and_value(&mut map, key)?;
                }
                _ => {
                    let key = self.unquoted(b":")?.to_string();
                    self.colon_and_value(&mut map, key)?;
                }
            }
            self.skip_ws();
            match self.peek()? {
                b',' => self.pos += 1,
                b'}' => {}
                _ => return None,
            }
        }
    }

    fn colon_and_value(&mut self, map: &mut Map<String, Value>, key: String) -> Option<()> {
        self.skip_ws();
        if self.peek()? != b':' {
            return None;
        }
        self.pos += 1;
        let v = self.value(b",}")?;
        map.insert(key, v);
        Some(())
    }

    fn array(&mut self) -> Option<Value> {
        self.pos += 1; // '['
        let mut items = Vec::new();
        loop {
            self.skip_ws();
            if self.peek()? == b']' {
                self.pos += 1;
                return Some(Value::Array(items));
            }
            items.push(self.value(b",]")?);
            self.skip_ws();
            match self.peek()? {
                b',' => self.pos += 1,
                b']' => {}
                _ => return None,
            }
        }
    }

    /// Text up to (not including) the first of `stops` or a line end, trimmed; never empty.
    fn unquoted(&mut self, stops: &[u8]) -> Option<&str> {
        let start = self.pos;
        while let Some(c) = self.peek() {
            if stops.contains(&c) || c == b'\n' || c == b'\r' {
                break;
            }
            self.pos += 1;
        }
        // Stops are ASCII, so `start..pos` lies on character boundaries.
        let token = self.src.get(start..self.pos)?.trim();
        (!token.is_empty()).then_some(token)
    }

    /// A string in `q` quotes, with JSON's escapes (and `\'`).
    fn quoted(&mut self, q: u8) -> Option<String> {
        self.pos += 1;
        let mut out = String::new();
        loop {
            let start = self.pos;
            while let Some(c) = self.peek() {
                if c == q || c == b'\\' {
                    break;
                }
                self.pos += 1;
            }
            out.push_str(self.src.get(start..self.pos)?);
            match self.peek()? {
                b'\\' => {
                    self.pos += 1;
                    let c = self.peek()?;
                    self.pos += 1;
                    match c {
                        b'n' => out.push('\n'),
                        b't' => out.push('\t'),
                        b'r' => out.push('\r'),
                        b'b' => out.push('\u{8}'),
                        b'f' => out.push('\u{c}'),
                        b'u' => {
                            let hex = self.src.get(self.pos..self.pos + 4)?;
                            let code = u32::from_str_radix(hex, 16).ok()?;
                            out.push(char::from_u32(code).unwrap_or('\u{fffd}'));
                            self.pos += 4;
                        }
                        // `\"`, `\'`, `\\`, `\/` and any other escaped character stand for themselves.
                        other if other.is_ascii() => out.push(other as char),
                        _ => return None,
                    }
                }
                _ => {
                    self.pos += 1; // closing quote
                    return Some(out);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_what_hocon_leaves_of_seatunnels_template() {
        let text = r#"{data:{c_string: this is a string,c_boolean: true,c_integer: 42,c_float: 2.5,c_decimal: 10.55,c_date:'2023-10-29',c_datetime:"16:12:43.459"}}"#;
        assert_eq!(
            parse(text),
            Some(
                json!({"data": {"c_string": "this is a string", "c_boolean": true,
                "c_integer": 42, "c_float": 2.5, "c_decimal": 10.55,
                "c_date": "2023-10-29", "c_datetime": "16:12:43.459"}})
            )
        );
    }

    #[test]
    fn arrays_escapes_and_trailing_commas() {
        assert_eq!(
            parse(r#"[1, 'a\'b', "\u0041\n", x y, [], {},]"#),
            Some(json!([1, "a'b", "A\n", "x y", [], {}]))
        );
        assert_eq!(parse("  plain  "), Some(json!("plain")));
    }

    #[test]
    fn rejects_what_is_not_even_permissive_json() {
        for bad in ["", "{a 1}", "{'a': 1", "'open", "{a: 1} x", "[,]"] {
            assert_eq!(parse(bad), None, "{bad}");
        }
        let deep = "[".repeat(MAX_DEPTH + 1) + &"]".repeat(MAX_DEPTH + 1);
        assert_eq!(parse(&deep), None);
    }
}
