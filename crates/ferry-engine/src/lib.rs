//! Ferry's embedded engine: runs a job plan as a DAG of threads connected by bounded channels
