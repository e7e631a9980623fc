//! SeaTunnel's `Sql` transform on Apache DataFusion.
//!
//! The query is parsed, planned and optimized once, when the job is built, against the
//! input table's schema: unknown columns or functions, type mismatches and syntax errors
//! fail there, quoting the query. What remains is a chain of column selections, filters and
//! projections as DataFusion physical expressions, evaluated on each Arrow batch; row kinds
//! follow the rows they belong to.
//!
//! SeaTunnel's functions (ASCII, REGEXP_LIKE, TO_CHAR with Java patterns, DATEADD,
//! DES_ENCRYPT, …) are registered as vectorized DataFusion UDFs under SeaTunnel's names,
//! replacing DataFusion's functions of the same name, with SeaTunnel's argument orders,
//! null handling and result types.

mod functions;
mod plan;

use std::sync::Arc;

use ferry_api::{
    ChangeBatch, FerryError, JobContext, OptionSpec, Options, Result, TableSchema, Transform,
    TransformFactory, TransformInstance,
};

/// The `Sql` transform's factory (plugin name `Sql`; job files also write `sql`).
pub struct SqlTransformFactory;

ferry_api::declare_options! {
    /// The `Sql` transform's options.
    struct SqlOptions => SPECS {
        /// The SELECT to run on each row of the input table, named by its table name (`select * from fake where id > 1`).
        query: String = "query", required;
    }
}

impl TransformFactory for SqlTransformFactory {
    fn name(&self) -> &'static str {
        "Sql"
    }

    fn description(&self) -> &'static str {
        "Maps and filters rows with a SQL SELECT over the input table (SeaTunnel's SQL functions)."
    }

    fn options(&self) -> &'static [OptionSpec] {
        SPECS
    }

    fn create(
        &self,
        options: &mut Options,
        input: &[TableSchema],
        _job: &JobContext,
    ) -> Result<Arc<dyn Transform>> {
        let query = SqlOptions::read(options)?.query;
        options.finish(SPECS)?;
        let table = match input {
            [t] => t,
            [] => {
                return Err(options.error(
                    "",
                    "the Sql transform needs an input table (set plugin_input)",
                ))
            }
            many => {
                let names: Vec<&str> = many.iter().map(|t| t.name.as_ref()).collect();
                return Err(options.error(
                    "",
                    format!(
                        "the Sql transform reads exactly one table, got {} ({})",
                        many.len(),
                        names.join(", ")
                    ),
                ));
            }
        };
        let compiled = plan::compile(&query, &table.name, &table.schema)
            .map_err(|e| options.error("query", format!("{e}, in query `{}`", query.trim())))?;
        Ok(Arc::new(SqlTransform {
            output: table.derive(table.name.clone(), compiled.output.clone()),
            name: table.name.clone(),
            compiled: Arc::new(compiled),
        }))
    }
}

/// A configured Sql transform.
#[derive(Debug)]
struct SqlTransform {
    /// The output table: keys whose columns the query keeps by name stay, as in SeaTunnel.
    output: TableSchema,
    name: Arc<str>,
    compiled: Arc<plan::Compiled>,
}

impl Transform for SqlTransform {
    fn output_tables(&self) -> Vec<TableSchema> {
        vec![self.output.clone()]
    }

    fn create_instance(&self) -> Result<Box<dyn TransformInstance>> {
        Ok(Box::new(SqlInstance {
            name: self.name.clone(),
            compiled: self.compiled.clone(),
        }))
    }
}

struct SqlInstance {
    name: Arc<str>,
    compiled: Arc<plan::Compiled>,
}

impl TransformInstance for SqlInstance {
    fn transform(&mut self, batch: ChangeBatch) -> Result<Option<ChangeBatch>> {
        let out = self
            .compiled
            .run(batch)
            .map_err(|e| FerryError::data("transform Sql", plan::df_message(&e)))?;
        Ok(out.map(|mut b| {
            b.table = self.name.clone();
            b
        }))
    }
}

#[cfg(test)]
mod tests;
