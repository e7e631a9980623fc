//! Where to connect and how: the dialect chosen from `url` and `driver`, the URL's host,
//! port, database and properties, and connections on the process's I/O runtime.
//!
//! The password is kept in [`Secret`], whose `Debug` prints nothing, and no message built
//! here contains it: errors name the host and port, the user and the database only.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use ferry_api::{FerryError, Options, Result};

use crate::pg_wire::{PgSocket, SharedSocket};

/// The SQL dialect of the server, which decides quoting, upserts, types and the fast paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// PostgreSQL (`jdbc:postgresql://`, `org.postgresql.Driver`).
    Postgres,
    /// MySQL and MariaDB (`jdbc:mysql://`, `jdbc:mariadb://`, their drivers).
    MySql,
}

/// Java driver class names job files give, and the dialect each selects.
pub const DRIVERS: &[(&str, Dialect)] = &[
    ("org.postgresql.Driver", Dialect::Postgres),
    ("com.mysql.cj.jdbc.Driver", Dialect::MySql),
    ("com.mysql.jdbc.Driver", Dialect::MySql),
    ("org.mariadb.jdbc.Driver", Dialect::MySql),
];

impl Dialect {
    /// The catalog name SeaTunnel gives tables of this dialect.
    pub fn catalog_name(self) -> &'static str {
        match self {
            Dialect::Postgres => "Postgres",
            Dialect::MySql => "MySQL",
        }
    }

    /// Quotes an identifier (`"a"` / `` `a` ``), doubling the quote character inside.
    pub fn quote(self, ident: &str) -> String {
        match self {
            Dialect::Postgres => format!("\"{}\"", ident.replace('"', "\"\"")),
            Dialect::MySql => format!("`{}`", ident.replace('`', "``")),
        }
    }

    /// A dotted table path quoted part by part.
    pub fn quote_path(self, parts: &[&str]) -> String {
        parts
            .iter()
            .map(|p| self.quote(p))
            .collect::<Vec<_>>()
            .join(".")
    }
}

/// A password that never prints.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(pub String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Everything needed to open a connection.
#[derive(Debug, Clone)]
pub struct ConnInfo {
    /// The dialect.
    pub dialect: Dialect,
    /// Host name or address (the first one when the URL lists several).
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// The database the URL names (may be empty for MySQL).
    pub database: String,
    /// User name.
    pub user: String,
    /// Password, if any.
    pub password: Option<Secret>,
    /// URL properties (`?a=b&c=d`) and the `properties` option, as given.
    pub properties: BTreeMap<String, String>,
    /// How long to wait for a connection (`connection_check_timeout_sec`).
    pub connect_timeout: Duration,
}

ferry_api::declare_options! {
    /// How the Jdbc source and sink connect, with SeaTunnel's names.
    pub struct ConnOptions => CONN_OPTIONS {
        /// jdbc:postgresql://host:port/db, jdbc:mysql://host:port/db or jdbc:mariadb://host:port/db, with URL properties after '?'.
        url: String = "url", required;
        /// Java driver class (org.postgresql.Driver, com.mysql.cj.jdbc.Driver, com.mysql.jdbc.Driver, org.mariadb.jdbc.Driver): must match the url's database.
        driver: String = "driver", optional;
        /// User name.
        user: String = "user", optional;
        /// User name (alternative spelling).
        username: String = "username", optional;
        /// Password; never shown in messages.
        password: String = "password", optional;
        /// Connection properties, as URL properties.
        properties: serde_json::Map<String, serde_json::Value> = "properties", optional;
        /// How long to wait for a connection, in seconds.
        connection_check_timeout_sec: u64 = "connection_check_timeout_sec", default 30;
    }
}

impl ConnInfo {
    /// `host:port`, for messages.
    pub fn address(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// Reads `url`, `driver`, `user`/`username`, `password`, `properties` and
    /// `connection_check_timeout_sec` ([`CONN_OPTIONS`]).
    pub fn from_options(o: &mut Options) -> Result<ConnInfo> {
        let c = ConnOptions::read(o)?;
        let parts = parse_url(&c.url).map_err(|m| o.location().error("url", m))?;
        let dialect = parts.dialect;
        if let Some(driver) = c.driver {
            let supported = || {
                DRIVERS
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            match DRIVERS.iter().find(|(n, _)| *n == driver.trim()) {
                None => {
                    return Err(o.location().error_with_hint(
                        "driver",
                        format!("driver '{driver}' is not supported"),
                        format!("supported drivers: {}", supported()),
                    ))
                }
                Some((_, d)) if *d != dialect => {
                    return Err(o.location().error(
                        "driver",
                        format!("driver '{driver}' does not match the url's database"),
                    ))
                }
                Some(_) => {}
            }
        }
        let UrlParts {
            host,
            port,
            database: db,
            mut properties,
            ..
        } = parts;
        if let Some(extra) = c.properties {
            for (k, v) in extra {
                let v = match v {
                    serde_json::Value::String(s) => s,
                    other => other.to_string(),
                };
                properties.insert(k, v);
            }
        }
        let user = match c.user {
            Some(u) => u,
            None => match c.username {
                Some(u) => u,
                None => properties
                    .get("user")
                    .cloned()
                    .unwrap_or_else(|| match dialect {
                        Dialect::Postgres => "postgres".into(),
                        Dialect::MySql => "root".into(),
                    }),
            },
        };
        let password = c
            .password
            .or_else(|| properties.get("password").cloned())
            .filter(|p| !p.is_empty())
            .map(Secret);
        let timeout = c.connection_check_timeout_sec.max(1);
        Ok(ConnInfo {
            dialect,
            host,
            port,
            database: db,
            user,
            password,
            properties,
            connect_timeout: Duration::from_secs(timeout),
        })
    }
}

/// What a JDBC URL names.
#[derive(Debug, Clone)]
pub struct UrlParts {
    /// The database kind.
    pub dialect: Dialect,
    /// The first host.
    pub host: String,
    /// Its port.
    pub port: u16,
    /// The database (may be empty).
    pub database: String,
    /// URL properties after `?`.
    pub properties: BTreeMap<String, String>,
}

/// Reads `jdbc:postgresql://h:p/db?k=v`, `jdbc:mysql://…` or `jdbc:mariadb://…`; the error
/// says what is wrong.
pub fn parse_url(url: &str) -> std::result::Result<UrlParts, String> {
    let (dialect, rest) = if let Some(r) = url.strip_prefix("jdbc:postgresql://") {
        (Dialect::Postgres, r)
    } else if let Some(r) = url
        .strip_prefix("jdbc:mysql://")
        .or_else(|| url.strip_prefix("jdbc:mariadb://"))
    {
        (Dialect::MySql, r)
    } else {
        return Err("is not a URL of a supported database (jdbc:postgresql://host:port/db, jdbc:mysql://host:port/db, jdbc:mariadb://host:port/db)".into());
    };
    let (authority, path_query) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => match rest.find('?') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        },
    };
    let (db, query) = match path_query.find('?') {
        Some(i) => (&path_query[..i], &path_query[i + 1..]),
        None => (path_query, ""),
    };
    // Several hosts (failover lists) are allowed in JDBC URLs; Ferry connects to the first.
    let first = authority.split(',').next().unwrap_or("");
    let first = first.rsplit('@').next().unwrap_or(first);
    let default_port = match dialect {
        Dialect::Postgres => 5432,
        Dialect::MySql => 3306,
    };
    let (host, port) = split_host_port(first, default_port)
        .ok_or_else(|| format!("invalid host:port '{first}'"))?;
    let mut properties = BTreeMap::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        properties.insert(k.to_string(), v.to_string());
    }
    Ok(UrlParts {
        dialect,
        host: host.to_string(),
        port,
        database: db.to_string(),
        properties,
    })
}

fn split_host_port(s: &str, default: u16) -> Option<(&str, u16)> {
    if s.is_empty() {
        return Some(("localhost", default));
    }
    if let Some(rest) = s.strip_prefix('[') {
        let end = rest.find(']')?;
        let host = &rest[..end];
        let port = match rest[end + 1..].strip_prefix(':') {
            Some(p) => p.parse().ok()?,
            None => default,
        };
        return Some((host, port));
    }
    match s.rsplit_once(':') {
        Some((h, p)) => Some((h, p.parse().ok()?)),
        None => Some((s, default)),
    }
}

/// A PostgreSQL connection whose driver task runs on the I/O runtime.
pub async fn connect_pg(info: &ConnInfo, component: &str) -> Result<tokio_postgres::Client> {
    Ok(connect_pg_lendable(info, component).await?.0)
}

/// A PostgreSQL connection, with the handle that lends its socket out of the driver for a
/// bulk `COPY` ([`crate::pg_wire`]); `None` for a Unix socket, which the driver opens.
pub async fn connect_pg_lendable(
    info: &ConnInfo,
    component: &str,
) -> Result<(tokio_postgres::Client, Option<PgSocket>)> {
    let mut cfg = tokio_postgres::Config::new();
    cfg.host(&info.host)
        .port(info.port)
        .user(&info.user)
        .connect_timeout(info.connect_timeout)
        // pgJDBC's `ApplicationName` property, so that operators can tell jobs apart in
        // pg_stat_activity.
        .application_name(
            info.properties
                .get("ApplicationName")
                .map_or("ferry", String::as_str),
        );
    if !info.database.is_empty() {
        cfg.dbname(&info.database);
    }
    if let Some(p) = &info.password {
        cfg.password(&p.0);
    }
    // pgJDBC's `currentSchema` property: the schema unqualified names resolve in.
    if let Some(schema) = info.properties.get("currentSchema") {
        cfg.options(format!("-c search_path={schema}"));
    }
    let fut = async {
        if info.host.starts_with('/') {
            // A Unix socket directory: the driver connects itself.
            let (client, connection) = cfg
                .connect(tokio_postgres::NoTls)
                .await
                .map_err(|e| pg_error_text(&e))?;
            spawn_pg_connection(connection);
            return Ok((client, None));
        }
        let tcp = tokio::net::TcpStream::connect((info.host.as_str(), info.port))
            .await
            .map_err(|e| format!("error connecting to server: {e}"))?;
        // What the driver's own connect sets: no Nagle delay, TCP keepalives.
        tcp.set_nodelay(true)
            .and_then(|()| socket2::SockRef::from(&tcp).set_keepalive(true))
            .map_err(|e| format!("error setting up the connection: {e}"))?;
        let stream = tokio::io::BufReader::with_capacity(PG_READ_BUFFER, tcp);
        let (stream, lender) = SharedSocket::new(stream);
        let (client, connection) = cfg
            .connect_raw(stream, tokio_postgres::NoTls)
            .await
            .map_err(|e| pg_error_text(&e))?;
        spawn_pg_connection(connection);
        Ok((client, Some(lender)))
    };
    match tokio::time::timeout(info.connect_timeout, fut).await {
        Ok(r) => r.map_err(|why: String| connect_error(info, component, &why)),
        Err(_) => Err(connect_error(
            info,
            component,
            &format!("no answer within {} s", info.connect_timeout.as_secs()),
        )),
    }
}

/// Bytes read from a PostgreSQL server's socket at a time. The driver reads 8 KiB a call:
/// a 400 MB binary COPY took 73,000 `recvfrom` calls, each a wake-up of the connection's
/// task; through this buffer a call takes what the socket holds, up to 256 KiB.
const PG_READ_BUFFER: usize = 256 << 10;

fn spawn_pg_connection<S, T>(connection: tokio_postgres::Connection<S, T>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!("PostgreSQL connection ended: {e}");
        }
    });
}

/// A MySQL/MariaDB connection.
pub async fn connect_mysql(info: &ConnInfo, component: &str) -> Result<mysql_async::Conn> {
    let mut opts = mysql_async::OptsBuilder::default()
        .ip_or_hostname(info.host.clone())
        .tcp_port(info.port)
        .user(Some(info.user.clone()))
        .pass(info.password.as_ref().map(|p| p.0.clone()))
        .prefer_socket(false);
    if !info.database.is_empty() {
        opts = opts.db_name(Some(info.database.clone()));
    }
    let fut = mysql_async::Conn::new(opts);
    let mut conn = match tokio::time::timeout(info.connect_timeout, fut).await {
        Ok(r) => r.map_err(|e| connect_error(info, component, &e.to_string()))?,
        Err(_) => {
            return Err(connect_error(
                info,
                component,
                &format!("no answer within {} s", info.connect_timeout.as_secs()),
            ))
        }
    };
    use mysql_async::prelude::Queryable;
    // Text results in UTF-8 and times as stored, whatever the server's defaults.
    conn.query_drop("SET NAMES utf8mb4, time_zone = '+00:00'")
        .await
        .map_err(|e| FerryError::external(component, format!("{}: {e}", info.address())))?;
    Ok(conn)
}

fn connect_error(info: &ConnInfo, component: &str, why: &str) -> FerryError {
    let why = match &info.password {
        Some(p) if !p.0.is_empty() => why.replace(&p.0, "<redacted>"),
        _ => why.to_string(),
    };
    FerryError::external(
        component,
        format!(
            "cannot connect to {} (database '{}', user '{}') within {} s: {why}",
            info.address(),
            info.database,
            info.user,
            info.connect_timeout.as_secs()
        ),
    )
}

/// A PostgreSQL error with the server's message, detail and constraint when there are any
/// (the driver's `Display` says only "db error").
pub fn pg_error_text(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => server_error_text(
            db.severity(),
            db.message(),
            db.detail(),
            db.table(),
            db.constraint(),
        ),
        None => {
            let mut s = e.to_string();
            let mut src = std::error::Error::source(e);
            while let Some(inner) = src {
                s.push_str(&format!(": {inner}"));
                src = inner.source();
            }
            s
        }
    }
}

/// A server's error as Ferry words it: severity, message, detail, and the table and
/// constraint it names (for a constraint violation).
pub(crate) fn server_error_text(
    severity: &str,
    message: &str,
    detail: Option<&str>,
    table: Option<&str>,
    constraint: Option<&str>,
) -> String {
    let mut s = format!("{severity}: {message}");
    if let Some(d) = detail {
        s.push_str(&format!(" ({d})"));
    }
    if let (Some(t), Some(c)) = (table, constraint) {
        s.push_str(&format!(" [table {t}, constraint {c}]"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn info(v: serde_json::Value) -> Result<ConnInfo> {
        ConnInfo::from_options(&mut Options::from_json("Jdbc", v))
    }

    #[test]
    fn urls_of_each_dialect_give_host_port_database_and_properties() {
        let i = info(json!({"url": "jdbc:postgresql://db.example:6543/shop?sslmode=disable&stringtype=unspecified", "driver": "org.postgresql.Driver", "user": "u", "password": "p"})).unwrap();
        assert_eq!(i.dialect, Dialect::Postgres);
        assert_eq!(i.address(), "db.example:6543");
        assert_eq!(i.database, "shop");
        assert_eq!(i.properties["stringtype"], "unspecified");
        let i = info(json!({"url": "jdbc:mysql://127.0.0.1/test?useSSL=false", "driver": "com.mysql.cj.jdbc.Driver"})).unwrap();
        assert_eq!(
            (i.dialect, i.port, i.database.as_str()),
            (Dialect::MySql, 3306, "test")
        );
        let i = info(json!({"url": "jdbc:mariadb://h1:3307,h2:3308/x"})).unwrap();
        assert_eq!(i.address(), "h1:3307");
    }

    #[test]
    fn an_unknown_driver_names_the_supported_ones_and_a_password_never_prints() {
        let e = info(json!({"url": "jdbc:postgresql://h/db", "driver": "oracle.jdbc.OracleDriver", "password": "hunter2"})).unwrap_err().to_string();
        assert!(
            e.contains("org.postgresql.Driver") && e.contains("org.mariadb.jdbc.Driver"),
            "{e}"
        );
        let e = info(json!({"url": "jdbc:sqlserver://h"}))
            .unwrap_err()
            .to_string();
        assert!(e.contains("jdbc:postgresql://"), "{e}");
        let i = info(json!({"url": "jdbc:postgresql://h/db", "password": "hunter2"})).unwrap();
        assert!(!format!("{i:?}").contains("hunter2"));
    }
}
