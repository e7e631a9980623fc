//! SeaTunnel's sink option placeholders (`${table_name}`, `${database_name}`, …): each
//! input table of a multi-table sink gets its own copy of the options with the table's
//! identifier filled in, as SeaTunnel's `TablePlaceholderProcessor` does.

/// A table identifier split as SeaTunnel's `TablePath.of` splits `database.schema.table`:
/// one part is a table, two are `database.table`, three `database.schema.table`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TableId<'a> {
    pub database: Option<&'a str>,
    pub schema: Option<&'a str>,
    pub table: &'a str,
}

impl<'a> TableId<'a> {
    /// Splits `name` at `.`. SeaTunnel rejects more than three parts; Ferry's tables can
    /// be renamed freely, so the first part is the database, the last the table and the
    /// parts between (joined by `.`) the schema.
    pub fn parse(name: &'a str) -> TableId<'a> {
        let parts: Vec<&str> = name.split('.').collect();
        match parts.as_slice() {
            [table] => TableId {
                database: None,
                schema: None,
                table,
            },
            [db, table] => TableId {
                database: Some(db),
                schema: None,
                table,
            },
            [db, schema, table] => TableId {
                database: Some(db),
                schema: Some(schema),
                table,
            },
            _ => {
                // Four or more parts: split at the first and the last dot.
                let first = name.find('.').unwrap_or(0);
                let last = name.rfind('.').unwrap_or(name.len());
                TableId {
                    database: Some(&name[..first]),
                    schema: Some(&name[first + 1..last]),
                    table: &name[last + 1..],
                }
            }
        }
    }

    /// `database.schema` of the parts present, or `None` when neither is.
    fn schema_full_name(&self) -> Option<String> {
        let parts: Vec<&str> = [self.database, self.schema].into_iter().flatten().collect();
        (!parts.is_empty()).then(|| parts.join("."))
    }

    fn table_full_name(&self) -> String {
        [self.database, self.schema, Some(self.table)]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(".")
    }
}

/// `text` with the table placeholders filled in for table `id` with columns `fields`.
///
/// As SeaTunnel: `${database_name}`, `${schema_name}`, `${table_name}` become the part of
/// the identifier, or the default after a colon (`${database_name:db}`) when the part is
/// absent, or nothing; `${schema_full_name}` is `database.schema` (left as written when the
/// table has neither); `${table_full_name}` the whole identifier; `${field_names}` the
/// columns joined by `,`. Other `${…}` (`${now}`, `${k0}`, `${primary_key}`, which Ferry's
/// tables do not carry) are left as written.
pub(crate) fn substitute(text: &str, id: &TableId<'_>, fields: &[&str]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return out;
        };
        let inner = &after[..end];
        let (key, default) = match inner.split_once(':') {
            Some((k, d)) => (k, Some(d.trim())),
            None => (inner, None),
        };
        // Identifier parts fall back to the default, then to nothing (SeaTunnel's "").
        let part = |v: Option<&str>| -> Option<String> {
            match v.filter(|s| !s.is_empty()) {
                Some(s) => Some(s.to_string()),
                None => Some(default.unwrap_or("").to_string()),
            }
        };
        let value = match key {
            "database_name" => part(id.database),
            "schema_name" => part(id.schema),
            "table_name" => part(Some(id.table)),
            "schema_full_name" => id.schema_full_name(),
            "table_full_name" => Some(id.table_full_name()),
            "field_names" => Some(fields.join(",")),
            _ => None,
        };
        match value {
            Some(v) => out.push_str(&v),
            None => out.push_str(&rest[start..start + 2 + end + 1]),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_split_as_seatunnel_table_path() {
        assert_eq!(
            TableId::parse("fake1"),
            TableId {
                database: None,
                schema: None,
                table: "fake1"
            }
        );
        assert_eq!(
            TableId::parse("test.table1"),
            TableId {
                database: Some("test"),
                schema: None,
                table: "table1"
            }
        );
        assert_eq!(
            TableId::parse("db.public.orders"),
            TableId {
                database: Some("db"),
                schema: Some("public"),
                table: "orders"
            }
        );
        assert_eq!(
            TableId::parse("a.b.c.d"),
            TableId {
                database: Some("a"),
                schema: Some("b.c"),
                table: "d"
            }
        );
    }

    #[test]
    fn placeholders_take_the_parts_defaults_or_nothing() {
        let id = TableId::parse("db.public.orders");
        let s = |t: &str| substitute(t, &id, &["id", "name"]);
        assert_eq!(
            s("/out/${database_name}/${schema_name}/${table_name}"),
            "/out/db/public/orders"
        );
        assert_eq!(
            s("${schema_full_name}|${table_full_name}"),
            "db.public|db.public.orders"
        );
        assert_eq!(s("${field_names}"), "id,name");
        assert_eq!(
            s("${table_name:x}_${now}_${k0}=${v0}"),
            "orders_${now}_${k0}=${v0}"
        );

        let bare = TableId::parse("fake2");
        let b = |t: &str| substitute(t, &bare, &[]);
        assert_eq!(b("/o/${database_name}/${table_name}"), "/o//fake2");
        assert_eq!(
            b("/o/${database_name:dflt}/${schema_name: s }"),
            "/o/dflt/s"
        );
        assert_eq!(
            b("${schema_full_name}/${table_full_name}"),
            "${schema_full_name}/fake2"
        );
        assert_eq!(b("no placeholder"), "no placeholder");
        assert_eq!(b("unclosed ${table_name"), "unclosed ${table_name");
        assert_eq!(b("${primary_key}"), "${primary_key}");
    }
}
