//! Reading a table's or query's columns and keys from the database's own catalog, during
//! [`Source::resolve`](ferry_api::Source::resolve).

use ferry_api::catalog::SortOrder;
use ferry_api::{ConstraintKey, ConstraintType, FerryError, KeyColumn, PrimaryKey, Result};
use mysql_async::prelude::Queryable;

use crate::conn::{pg_error_text, Dialect};
use crate::types::{mysql_column, pg_column, ColumnDef};

/// A SQL string literal (standard quoting; MySQL also escapes backslashes).
pub fn literal(dialect: Dialect, s: &str) -> String {
    match dialect {
        Dialect::Postgres => format!("'{}'", s.replace('\'', "''")),
        Dialect::MySql => format!("'{}'", s.replace('\\', "\\\\").replace('\'', "''")),
    }
}

/// Columns and keys found for one table or query.
#[derive(Debug, Clone, Default)]
pub struct Described {
    /// The columns, in select order.
    pub columns: Vec<ColumnDef>,
    /// The primary key, if the query reads one table that has one.
    pub primary_key: Option<PrimaryKey>,
    /// Unique keys and indexes.
    pub keys: Vec<ConstraintKey>,
}

/// Rows of a simple (text) query on PostgreSQL, every value as text.
pub async fn pg_rows(
    client: &tokio_postgres::Client,
    sql: &str,
    component: &str,
) -> Result<Vec<Vec<Option<String>>>> {
    let msgs = client
        .simple_query(sql)
        .await
        .map_err(|e| FerryError::external(component, format!("{}: {sql}", pg_error_text(&e))))?;
    let mut out = Vec::new();
    for m in msgs {
        if let tokio_postgres::SimpleQueryMessage::Row(r) = m {
            out.push((0..r.len()).map(|i| r.get(i).map(str::to_string)).collect());
        }
    }
    Ok(out)
}

/// Rows of `sql` (one or more statements) run on a new PostgreSQL connection given by a
/// libpq-style string (`host=127.0.0.1 user=postgres dbname=test`): for tools and tests
/// that administer a server outside any job.
pub async fn pg_script(dsn: &str, sql: &str) -> Result<Vec<Vec<Option<String>>>> {
    let (client, connection) = tokio_postgres::connect(dsn, tokio_postgres::NoTls)
        .await
        .map_err(|e| FerryError::external("postgres", pg_error_text(&e)))?;
    tokio::spawn(connection);
    pg_rows(&client, sql, "postgres").await
}

/// Describes what `sql` returns on PostgreSQL; `table` (a quoted path) adds its keys.
pub async fn describe_pg(
    client: &tokio_postgres::Client,
    sql: &str,
    table: Option<&str>,
    component: &str,
) -> Result<Described> {
    let stmt = client
        .prepare(sql)
        .await
        .map_err(|e| FerryError::external(component, format!("{}: {sql}", pg_error_text(&e))))?;
    let mut columns = Vec::with_capacity(stmt.columns().len());
    for c in stmt.columns() {
        // Nullability lives in pg_attribute; a computed column may be NULL.
        let nullable = match (c.table_oid(), c.column_id()) {
            (Some(oid), Some(att)) if oid != 0 && att > 0 => {
                let rows = pg_rows(
                    client,
                    &format!("SELECT attnotnull FROM pg_attribute WHERE attrelid = {oid} AND attnum = {att}"),
                    component,
                )
                .await?;
                rows.first().and_then(|r| r[0].as_deref()) != Some("t")
            }
            _ => true,
        };
        let ty = c.type_();
        let name = match ty.kind() {
            tokio_postgres::types::Kind::Enum(_) => "text".to_string(),
            _ => ty.name().to_string(),
        };
        let mut col = pg_column(c.name(), &name, c.type_modifier(), nullable)
            .map_err(|m| FerryError::config(format!("{component}: {m}")))?;
        if matches!(ty.kind(), tokio_postgres::types::Kind::Enum(_)) {
            col.select = format!("{}::text", Dialect::Postgres.quote(c.name()));
            col.source_type = ty.name().to_string();
        }
        columns.push(col);
    }
    let mut d = Described {
        columns,
        ..Default::default()
    };
    if let Some(t) = table {
        let sql = format!(
            "SELECT c.conname, c.contype, string_agg(a.attname, ',' ORDER BY k.ord) \
             FROM pg_constraint c CROSS JOIN LATERAL unnest(c.conkey) WITH ORDINALITY AS k(attnum, ord) \
             JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum \
             WHERE c.conrelid = {}::regclass AND c.contype IN ('p', 'u') \
             GROUP BY c.conname, c.contype ORDER BY c.contype, c.conname",
            literal(Dialect::Postgres, t)
        );
        for r in pg_rows(client, &sql, component).await? {
            let (Some(name), Some(kind), Some(cols)) = (&r[0], &r[1], &r[2]) else {
                continue;
            };
            let cols: Vec<String> = split_names(cols);
            if kind == "p" {
                d.primary_key = Some(PrimaryKey {
                    name: name.clone(),
                    columns: cols,
                });
            } else {
                d.keys.push(ConstraintKey {
                    name: name.clone(),
                    kind: ConstraintType::Unique,
                    columns: cols
                        .into_iter()
                        .map(|name| KeyColumn {
                            name,
                            order: SortOrder::Asc,
                        })
                        .collect(),
                });
            }
        }
    }
    Ok(d)
}

fn split_names(s: &str) -> Vec<String> {
    s.split(',')
        .map(|c| c.trim_matches('"').to_string())
        .collect()
}

/// Describes what `sql` returns on MySQL/MariaDB, through a temporary table made from it
/// (`SHOW COLUMNS` then gives the exact column types, `tinyint(1)`, `bigint(20) unsigned`);
/// `table` (`db`, `name`) adds its keys.
pub async fn describe_mysql(
    conn: &mut mysql_async::Conn,
    sql: &str,
    table: Option<(&str, &str)>,
    component: &str,
) -> Result<Described> {
    let err =
        |e: mysql_async::Error, sql: &str| FerryError::external(component, format!("{e}: {sql}"));
    let probe = "`ferry_describe_probe`";
    let create = format!("CREATE TEMPORARY TABLE {probe} AS SELECT * FROM ({sql}) AS t LIMIT 0");
    conn.query_drop(format!("DROP TEMPORARY TABLE IF EXISTS {probe}"))
        .await
        .map_err(|e| err(e, "DROP TEMPORARY TABLE"))?;
    conn.query_drop(&create).await.map_err(|e| err(e, sql))?;
    let rows: Vec<mysql_async::Row> = conn
        .query(format!("SHOW COLUMNS FROM {probe}"))
        .await
        .map_err(|e| err(e, "SHOW COLUMNS"))?;
    conn.query_drop(format!("DROP TEMPORARY TABLE {probe}"))
        .await
        .map_err(|e| err(e, "DROP TEMPORARY TABLE"))?;
    let text = |r: &mysql_async::Row, i: usize| -> String {
        match r.as_ref(i) {
            Some(mysql_async::Value::Bytes(b)) => String::from_utf8_lossy(b).into_owned(),
            _ => String::new(),
        }
    };
    let mut columns = Vec::with_capacity(rows.len());
    for r in &rows {
        let name = text(r, 0);
        let ty = text(r, 1);
        let nullable = text(r, 2).eq_ignore_ascii_case("YES");
        let (data_type, args) = parse_mysql_type(&ty);
        let (precision, scale) = (args.first().copied(), args.get(1).copied());
        let col = mysql_column(
            &name, &data_type, &ty, precision, scale, precision, nullable,
        )
        .map_err(|m| FerryError::config(format!("{component}: {m}")))?;
        columns.push(col);
    }
    let mut d = Described {
        columns,
        ..Default::default()
    };
    if let Some((db, t)) = table {
        let q = format!(
            "SELECT INDEX_NAME, NON_UNIQUE, COLUMN_NAME FROM information_schema.STATISTICS \
             WHERE TABLE_SCHEMA = {} AND TABLE_NAME = {} ORDER BY INDEX_NAME, SEQ_IN_INDEX",
            literal(Dialect::MySql, db),
            literal(Dialect::MySql, t)
        );
        let rows: Vec<mysql_async::Row> = conn.query(&q).await.map_err(|e| err(e, &q))?;
        for r in &rows {
            let (index, non_unique, column) = (text(r, 0), text(r, 1), text(r, 2));
            if index == "PRIMARY" {
                d.primary_key
                    .get_or_insert_with(|| PrimaryKey {
                        name: "PRIMARY".into(),
                        columns: vec![],
                    })
                    .columns
                    .push(column);
                continue;
            }
            let kind = if non_unique == "0" {
                ConstraintType::Unique
            } else {
                ConstraintType::Index
            };
            match d.keys.iter_mut().find(|k| k.name == index) {
                Some(k) => k.columns.push(KeyColumn {
                    name: column,
                    order: SortOrder::Asc,
                }),
                None => d.keys.push(ConstraintKey {
                    name: index,
                    kind,
                    columns: vec![KeyColumn {
                        name: column,
                        order: SortOrder::Asc,
                    }],
                }),
            }
        }
    }
    Ok(d)
}

/// `decimal(10,2) unsigned` → (`decimal`, [10, 2]).
fn parse_mysql_type(ty: &str) -> (String, Vec<u64>) {
    let lower = ty.to_ascii_lowercase();
    let name: String = lower
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    let args = match (lower.find('('), lower.find(')')) {
        (Some(a), Some(b)) if b > a && !name.starts_with("enum") && !name.starts_with("set") => {
            lower[a + 1..b]
                .split(',')
                .filter_map(|x| x.trim().parse().ok())
                .collect()
        }
        _ => vec![],
    };
    (name, args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mysql_type_text_splits_into_name_and_arguments() {
        assert_eq!(
            parse_mysql_type("decimal(10,2) unsigned"),
            ("decimal".into(), vec![10, 2])
        );
        assert_eq!(parse_mysql_type("enum('a','b')"), ("enum".into(), vec![]));
        assert_eq!(literal(Dialect::MySql, r"a'b\"), r"'a''b\\'");
    }
}
