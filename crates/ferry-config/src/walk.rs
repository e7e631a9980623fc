//! A light walk over HOCON tokens that recovers what the parsed values lose: the line of
//! every key, and the plugin blocks of each section in the order written, including a
//! plugin name written twice in one section (HOCON would merge the two blocks).
//!
//! The walk never fails: malformed input is left for the parser to report.

use std::collections::HashMap;

use hocon::{Token, TokenKind};

/// The sections that hold plugin blocks.
pub(crate) const PLUGIN_SECTIONS: &[&str] = &["source", "transform", "sink"];

/// Prefix given to the key of a repeated plugin block so that HOCON keeps it apart.
pub(crate) const DUP_PREFIX: &str = "__ferry_dup";

#[derive(Debug, Clone, PartialEq, Eq)]
enum Seg {
    Key(String),
    Index(usize),
}

/// One plugin block as written.
#[derive(Debug, Clone)]
pub(crate) struct Block {
    /// `source`, `transform` or `sink`.
    pub section: String,
    /// The key the block has in the parsed section object (object form), after renaming.
    pub key: Option<String>,
    /// The position in the section list (array form, as in JSON job files).
    pub index: Option<usize>,
    /// The plugin name as written (object form).
    pub name: String,
    /// The line of the block's key or first token.
    pub line: usize,
    /// Line of every key path inside the block.
    pub lines: HashMap<String, usize>,
    /// Whether a `Name { … }` key opened the block (rather than only dotted keys).
    opened: bool,
}

/// What the walk found.
#[derive(Debug, Default)]
pub(crate) struct Walk {
    /// Line of every key path outside plugin blocks (`env.job.mode`, `source`).
    pub lines: HashMap<String, usize>,
    /// Plugin blocks in the order written.
    pub blocks: Vec<Block>,
    /// Text to insert at (line, column) so that repeated plugin blocks get unique keys.
    pub inserts: Vec<(usize, usize, String)>,
}

impl Walk {
    /// Every key path written in the file, from the top (`source.FakeSource.row.num`).
    pub(crate) fn key_paths(&self) -> Vec<String> {
        let mut out: Vec<String> = self.lines.keys().cloned().collect();
        for b in self.blocks.iter().filter(|b| b.index.is_none()) {
            let prefix = format!("{}.{}", b.section, b.name);
            out.extend(b.lines.keys().map(|k| format!("{prefix}.{k}")));
            out.push(prefix);
        }
        out
    }
}

struct Walker<'t> {
    tokens: &'t [Token],
    pos: usize,
    out: Walk,
}

/// Walks `tokens` (from `hocon::tokenize`).
pub(crate) fn walk(tokens: &[Token]) -> Walk {
    let mut w = Walker {
        tokens,
        pos: 0,
        out: Walk::default(),
    };
    w.skip(&[TokenKind::Newline]);
    let mut path = Vec::new();
    if w.kind() == Some(&TokenKind::LBrace) {
        w.pos += 1;
        w.object(&mut path, None, true);
    } else {
        w.object(&mut path, None, false);
    }
    w.out
}

/// `a.b[0].c`: how paths are written in `PluginLocation::lines`.
fn dotted(path: &[Seg]) -> String {
    let mut s = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) => {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(k);
            }
            Seg::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

fn section_of(path: &[Seg]) -> Option<&str> {
    match path.first() {
        Some(Seg::Key(k)) => PLUGIN_SECTIONS.iter().copied().find(|s| s == k),
        _ => None,
    }
}

/// A key as written: its path segments, the line, and where its last segment starts.
struct Key {
    segs: Vec<String>,
    line: usize,
    last_start: (usize, usize, bool),
}

impl Walker<'_> {
    fn kind(&self) -> Option<&TokenKind> {
        self.tokens.get(self.pos).map(|t| &t.kind)
    }

    fn skip(&mut self, kinds: &[TokenKind]) {
        while self.kind().is_some_and(|k| kinds.contains(k)) {
            self.pos += 1;
        }
    }

    fn at_end(&self) -> bool {
        matches!(self.kind(), None | Some(TokenKind::Eof))
    }

    /// An object's fields, up to its `}` (consumed) when `braced`, else to the end.
    fn object(&mut self, path: &mut Vec<Seg>, block: Option<(usize, usize)>, braced: bool) {
        loop {
            self.skip(&[TokenKind::Newline, TokenKind::Comma]);
            if self.at_end() {
                return;
            }
            if self.kind() == Some(&TokenKind::RBrace) {
                self.pos += 1;
                if braced {
                    return;
                }
                continue;
            }
            let tok = &self.tokens[self.pos];
            if tok.kind == TokenKind::Unquoted && tok.value == "include" {
                // `include "file"`: the parser reads it; skip to the end of the line.
                while !self.at_end()
                    && !matches!(
                        self.kind(),
                        Some(TokenKind::Newline | TokenKind::Comma | TokenKind::RBrace)
                    )
                {
                    self.pos += 1;
                }
                continue;
            }
            let Some(key) = self.key() else {
                // Not a key: leave it to the parser, but make progress.
                self.pos += 1;
                continue;
            };
            let depth = path.len();
            path.extend(key.segs.iter().cloned().map(Seg::Key));
            let inner = match block {
                Some(b) => Some(b),
                None => self.enter_block(path, depth, &key),
            };
            // `row.num = 1` also places `row` (the first time it is written).
            for end in depth + 1..path.len() {
                self.record_first(&path[..end], inner, key.line);
            }
            self.record(path, inner, key.line);
            match self.kind() {
                Some(TokenKind::Colon | TokenKind::Equals | TokenKind::PlusEquals) => {
                    self.pos += 1;
                    self.value(path, inner);
                }
                Some(TokenKind::LBrace) => self.value(path, inner),
                _ => {}
            }
            path.truncate(depth);
        }
    }

    /// When the key at `path` (written from `depth`) reaches into a plugin block of a
    /// section in object form, the block (its index, and the length of its path prefix).
    fn enter_block(&mut self, path: &[Seg], depth: usize, key: &Key) -> Option<(usize, usize)> {
        let section = section_of(path)?.to_string();
        if path.len() < 2 || depth >= 2 {
            return None;
        }
        let Seg::Key(name) = &path[1] else {
            return None;
        };
        let starts_block = path.len() == 2;
        let first = self
            .out
            .blocks
            .iter()
            .position(|b| b.section == section && b.key.as_deref() == Some(name));
        if let Some(i) = first {
            // `source.FakeSource.row.num = 1`, or a first `FakeSource { … }` after such
            // dotted keys: HOCON merges them into the first block of that name.
            if !starts_block || !self.out.blocks[i].opened {
                self.out.blocks[i].opened |= starts_block;
                return Some((i, 2));
            }
        }
        let opened = self
            .out
            .blocks
            .iter()
            .filter(|b| b.section == section && b.name == *name && b.opened)
            .count();
        let key_name = if opened > 0 {
            // A repeated block: give it a key of its own, so that HOCON keeps it apart.
            let prefix = format!("{DUP_PREFIX}{opened}__");
            let (line, col, quoted) = key.last_start;
            self.out
                .inserts
                .push((line, if quoted { col + 1 } else { col }, prefix.clone()));
            format!("{prefix}{name}")
        } else {
            name.clone()
        };
        self.out.blocks.push(Block {
            section,
            name: name.clone(),
            key: Some(key_name),
            index: None,
            line: key.line,
            lines: HashMap::new(),
            opened: starts_block,
        });
        Some((self.out.blocks.len() - 1, 2))
    }

    fn record_first(&mut self, path: &[Seg], block: Option<(usize, usize)>, line: usize) {
        match block {
            Some((b, prefix)) if path.len() > prefix => {
                self.out.blocks[b]
                    .lines
                    .entry(dotted(&path[prefix..]))
                    .or_insert(line);
            }
            Some(_) => {}
            None => {
                self.out.lines.entry(dotted(path)).or_insert(line);
            }
        }
    }

    fn record(&mut self, path: &[Seg], block: Option<(usize, usize)>, line: usize) {
        match block {
            Some((b, prefix)) if path.len() > prefix => {
                self.out.blocks[b]
                    .lines
                    .insert(dotted(&path[prefix..]), line);
            }
            Some(_) => {}
            None => {
                self.out.lines.insert(dotted(path), line);
            }
        }
    }

    /// A key: unquoted runs split on `.`, quoted parts kept whole.
    fn key(&mut self) -> Option<Key> {
        let first = self.tokens.get(self.pos)?;
        if !matches!(first.kind, TokenKind::Unquoted | TokenKind::QuotedString) {
            return None;
        }
        let line = first.line;
        let mut segs = vec![String::new()];
        let mut last_start = (first.line, first.col, first.kind == TokenKind::QuotedString);
        while let Some(tok) = self.tokens.get(self.pos) {
            match tok.kind {
                TokenKind::Unquoted => {
                    if segs.last().is_some_and(|s| !s.is_empty()) {
                        if let Some(s) = segs.last_mut() {
                            s.push_str(&tok.preceding_whitespace);
                        }
                    }
                    let mut offset = 0;
                    for (i, part) in tok.value.split('.').enumerate() {
                        if i > 0 {
                            segs.push(String::new());
                            last_start = (tok.line, tok.col + offset, false);
                        }
                        if let Some(s) = segs.last_mut() {
                            s.push_str(part);
                        }
                        offset += part.chars().count() + 1;
                    }
                }
                TokenKind::QuotedString => {
                    if let Some(s) = segs.last_mut() {
                        if s.is_empty() {
                            last_start = (tok.line, tok.col, true);
                        } else {
                            s.push_str(&tok.preceding_whitespace);
                        }
                        s.push_str(&tok.value);
                    }
                }
                _ => break,
            }
            self.pos += 1;
        }
        Some(Key {
            segs,
            line,
            last_start,
        })
    }

    /// A value (possibly a concatenation), up to the end of the field or element.
    fn value(&mut self, path: &mut Vec<Seg>, block: Option<(usize, usize)>) {
        // The value may start on the next line (`rules =\n {`).
        self.skip(&[TokenKind::Newline]);
        loop {
            match self.kind() {
                Some(TokenKind::LBrace) => {
                    self.pos += 1;
                    self.object(path, block, true);
                }
                Some(TokenKind::LBracket) => {
                    self.pos += 1;
                    self.array(path, block);
                }
                Some(
                    TokenKind::QuotedString
                    | TokenKind::TripleQuotedString
                    | TokenKind::Unquoted
                    | TokenKind::Substitution
                    | TokenKind::Colon
                    | TokenKind::Equals
                    | TokenKind::PlusEquals,
                ) => self.pos += 1,
                _ => return,
            }
        }
    }

    /// An array's elements, up to its `]` (consumed).
    fn array(&mut self, path: &mut Vec<Seg>, block: Option<(usize, usize)>) {
        let mut index = 0;
        loop {
            self.skip(&[TokenKind::Newline, TokenKind::Comma]);
            match self.kind() {
                None | Some(TokenKind::Eof) => return,
                Some(TokenKind::RBracket) => {
                    self.pos += 1;
                    return;
                }
                Some(TokenKind::RBrace) => return,
                _ => {}
            }
            let start = self.pos;
            let line = self.tokens[self.pos].line;
            path.push(Seg::Index(index));
            let inner = match block {
                Some(b) => Some(b),
                None if path.len() == 2 && section_of(path).is_some() => {
                    // A section written as a list of blocks with `plugin_name` (JSON job files).
                    let section = section_of(path).unwrap_or_default().to_string();
                    self.out.blocks.push(Block {
                        section,
                        name: String::new(),
                        key: None,
                        index: Some(index),
                        line,
                        lines: HashMap::new(),
                        opened: true,
                    });
                    Some((self.out.blocks.len() - 1, 2))
                }
                None => None,
            };
            self.record(path, inner, line);
            self.value(path, inner);
            path.pop();
            if self.pos == start {
                self.pos += 1;
            }
            index += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(text: &str) -> Walk {
        walk(&hocon::tokenize(text).unwrap())
    }

    #[test]
    fn records_lines_of_nested_dotted_and_array_keys() {
        let w = run("env {\n  job.mode = BATCH\n}\nsource {\n  FakeSource {\n    row.num = 5\n    schema {\n      fields {\n        c_int = int\n      }\n    }\n    rules = [\n      { a = 1 },\n      {\n        b = 2\n      }\n    ]\n  }\n}\n");
        assert_eq!(w.lines.get("env.job.mode"), Some(&2));
        assert_eq!(w.lines.get("source"), Some(&4));
        assert_eq!(w.blocks.len(), 1);
        let b = &w.blocks[0];
        assert_eq!(
            (b.section.as_str(), b.key.as_deref(), b.line),
            ("source", Some("FakeSource"), 5)
        );
        assert_eq!(b.lines.get("row.num"), Some(&6));
        assert_eq!(b.lines.get("row"), Some(&6));
        assert_eq!(b.lines.get("schema.fields.c_int"), Some(&9));
        assert_eq!(b.lines.get("rules[0].a"), Some(&13));
        assert_eq!(b.lines.get("rules[1]"), Some(&14));
        assert_eq!(b.lines.get("rules[1].b"), Some(&15));
    }

    #[test]
    fn repeated_blocks_get_unique_keys() {
        let w = run("transform {\n  Copy {\n    a = 1\n  }\n  \"Copy\" {\n    a = 2\n  }\n}\nsink.Copy { }\n");
        assert_eq!(w.blocks.len(), 3);
        assert_eq!(w.blocks[0].key.as_deref(), Some("Copy"));
        assert_eq!(w.blocks[1].key.as_deref(), Some("__ferry_dup1__Copy"));
        assert_eq!(w.blocks[1].lines.get("a"), Some(&6));
        assert_eq!(w.blocks[2].section, "sink");
        assert_eq!(w.inserts, vec![(5, 4, "__ferry_dup1__".to_string())]);
    }

    #[test]
    fn dotted_root_keys_and_list_sections() {
        let w = run("source.Fake.row.num = 1\nsource.Fake { b = 2 }\n");
        assert_eq!(w.blocks.len(), 1, "{:?}", w.blocks);
        assert_eq!(w.blocks[0].lines.get("row.num"), Some(&1));
        assert_eq!(w.blocks[0].lines.get("b"), Some(&2));
        let w = run("{\"sink\": [\n {\"plugin_name\": \"Console\",\n \"x\": 1},\n {\"plugin_name\": \"Assert\"}]}");
        assert_eq!(w.blocks.len(), 2);
        assert_eq!(w.blocks[1].index, Some(1));
        assert_eq!(w.blocks[0].lines.get("x"), Some(&3));
        assert_eq!(w.blocks[1].line, 4);
    }
}
