//! FakeSource: generates rows of any schema, deterministically under a seed.
//!
//! A port of Apache SeaTunnel's `FakeSource` connector: the same options (schema, `rows`,
//! `row.num`, `split.num`, `split.read-interval`, sizes, ranges, templates,
//! `tables_configs`) and the same split plan, with one addition: generation is seeded, so
//! that a split read again from a checkpoint yields exactly the rows it would have
//! yielded (exactly-once). See `docs/connectors/FakeSource.md`.

mod config;
mod generate;
mod source;

use std::collections::HashSet;
use std::sync::Arc;

use ferry_api::options::COMMON_OPTIONS;
use ferry_api::{FerryError, JobContext, OptionSpec, Options, Result, Source, SourceFactory};
use serde_json::Value;

use crate::config::{read_table, stray_fake_modes, SeedOption, TopOptions, OPTIONS, TABLE_OPTIONS};
pub use crate::source::{FakeSource, BATCH_ROWS};

/// The factory of SeaTunnel's `FakeSource` plugin; register it with the binary.
pub struct FakeSourceFactory;

fn warn_stray_modes(o: &Options, where_: &str) {
    for k in stray_fake_modes(o.raw()) {
        // SeaTunnel ignores these silently; a warning helps spot a misspelt type.
        tracing::warn!("FakeSource{where_}: option '{k}' names no generated type and is ignored");
    }
}

fn default_table_name(o: &mut Options) -> Result<Option<String>> {
    Ok(match o.string("plugin_output")? {
        Some(n) => Some(n),
        None => o.string("result_table_name")?,
    })
}

impl SourceFactory for FakeSourceFactory {
    fn name(&self) -> &'static str {
        "FakeSource"
    }

    fn description(&self) -> &'static str {
        "Generates rows of any schema (random within ranges/templates, or given rows), deterministically under a seed"
    }

    fn options(&self) -> &'static [OptionSpec] {
        OPTIONS
    }

    fn create(&self, options: &mut Options, job: &JobContext) -> Result<Box<dyn Source>> {
        let seed = SeedOption::read(options)?.seed as u64;
        let tables = match TopOptions::read(options)?.tables_configs {
            None => {
                let name = default_table_name(options)?;
                let t = read_table(options, name.as_deref(), seed)?;
                warn_stray_modes(options, "");
                vec![t]
            }
            Some(items) => {
                if items.is_empty() {
                    return Err(
                        options.error("tables_configs", "is empty: give at least one table")
                    );
                }
                // SeaTunnel reads nothing else when tables_configs is set; say so rather
                // than silently ignoring an option the user meant to apply.
                for k in options.raw().keys() {
                    let top = k.split('.').next().unwrap_or(k);
                    if k != "tables_configs"
                        && k != "seed"
                        && !COMMON_OPTIONS.iter().any(|c| c.name == top)
                    {
                        return Err(options.error(
                            k,
                            "has no effect when tables_configs is set (SeaTunnel ignores it too): set it inside each table's block",
                        ));
                    }
                }
                let mut tables = Vec::with_capacity(items.len());
                let mut names = HashSet::new();
                for (i, item) in items.into_iter().enumerate() {
                    let prefix = format!("tables_configs[{i}]");
                    let Value::Object(m) = item else {
                        return Err(options
                            .error(&prefix, "expected a block { schema { … }, row.num = … }"));
                    };
                    let mut sub = Options::new(m, options.location().nested(&prefix));
                    let t = (|| {
                        let name = default_table_name(&mut sub)?;
                        let t = read_table(&mut sub, name.as_deref(), seed)?;
                        sub.finish(TABLE_OPTIONS)?;
                        Ok::<_, FerryError>(t)
                    })()
                    .map_err(|e| e.within(&prefix))?;
                    warn_stray_modes(&sub, &format!(" {prefix}"));
                    if !names.insert(t.name.clone()) {
                        return Err(options.error(
                            &format!("{prefix}.schema.table"),
                            format!("table name '{}' is used twice; every table needs its own schema.table", t.name),
                        ));
                    }
                    tables.push(t);
                }
                tables
            }
        };
        options.finish(OPTIONS)?;
        Ok(Box::new(FakeSource {
            tables: Arc::new(tables),
            mode: job.mode,
        }))
    }
}

#[cfg(test)]
mod protocol_tests;
#[cfg(test)]
mod tests;
