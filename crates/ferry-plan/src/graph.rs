//! Questions about the shape of a [`JobPlan`], asked by both engines: who reads a stream,
//! which tables a stream carries at a given point, and the chains a task can run from a
//! source to the end. Stream names are unique in a plan, and a transform reads only
//! streams defined before it, so every answer is found by a walk in file order.

use std::collections::HashMap;

use ferry_api::{FerryError, Result, TableSchema};
use serde::Serialize;

use crate::plan::JobPlan;

/// The plugins that read one stream, by index, in file order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Readers {
    /// Transforms that read it.
    pub transforms: Vec<usize>,
    /// Sinks that read it.
    pub sinks: Vec<usize>,
}

/// A run of the plan that one task can carry from end to end: a source, the transforms
/// that follow it one after another (each the only reader of the stream before it, with
/// no other input), and the sink after them when it is the only reader of the last stream
/// and has no other input.
///
/// The embedded engine chains every transform into its source's reader thread anyway;
/// the Spark engine runs a chain's transforms inside the source's read task rather than
/// as a `mapInArrow` step each, and in batch mode the sink too, so that rows never cross
/// into the JVM.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Chain {
    /// The source's index.
    pub source: usize,
    /// The transforms' indices, in the order they apply.
    pub transforms: Vec<usize>,
    /// The sink's index, when the chain ends in one.
    pub sink: Option<usize>,
    /// The stream the chain produces (the last transform's output, or the source's).
    pub output: String,
}

impl JobPlan {
    /// The transforms and sinks that read `stream`.
    pub fn readers_of(&self, stream: &str) -> Readers {
        let reads = |inputs: &[String]| inputs.iter().any(|i| i == stream);
        Readers {
            transforms: (0..self.transforms.len())
                .filter(|t| reads(&self.transforms[*t].inputs))
                .collect(),
            sinks: (0..self.sinks.len())
                .filter(|k| reads(&self.sinks[*k].inputs))
                .collect(),
        }
    }

    /// The tables stream `stream` carries (its last definition).
    pub fn stream_tables(&self, stream: &str) -> Result<&[TableSchema]> {
        self.stream_tables_before(stream, self.transforms.len())
    }

    /// The tables of stream `stream` as the transforms before transform `index` leave it.
    pub fn stream_tables_before(&self, stream: &str, index: usize) -> Result<&[TableSchema]> {
        self.transforms[..index.min(self.transforms.len())]
            .iter()
            .rev()
            .find(|t| t.output == stream)
            .map(|t| t.tables.as_slice())
            .or_else(|| {
                self.sources
                    .iter()
                    .find(|s| s.output == stream)
                    .map(|s| s.tables.as_slice())
            })
            .ok_or_else(|| FerryError::internal(format!("no stream named '{stream}' in the plan")))
    }

    /// The tables transform `index` receives: those of its input streams, in order.
    pub fn transform_input(&self, index: usize) -> Result<Vec<TableSchema>> {
        let t = self
            .transforms
            .get(index)
            .ok_or_else(|| FerryError::internal(format!("no transform {index}")))?;
        let mut out = Vec::new();
        for input in &t.inputs {
            out.extend(self.stream_tables_before(input, index)?.iter().cloned());
        }
        Ok(out)
    }

    /// The job cut into [`Chain`]s, one per source, in source order.
    pub fn chains(&self) -> Vec<Chain> {
        #[derive(Clone, Copy, PartialEq, Eq, Hash)]
        enum Node {
            Source(usize),
            Transform(usize),
            Sink(usize),
        }
        let mut producer: HashMap<&str, Node> = HashMap::new();
        let mut consumers: HashMap<Node, Vec<Node>> = HashMap::new();
        for (i, s) in self.sources.iter().enumerate() {
            producer.insert(&s.output, Node::Source(i));
        }
        for (i, t) in self.transforms.iter().enumerate() {
            for input in &t.inputs {
                if let Some(n) = producer.get(input.as_str()) {
                    consumers.entry(*n).or_default().push(Node::Transform(i));
                }
            }
            producer.insert(&t.output, Node::Transform(i));
        }
        for (k, s) in self.sinks.iter().enumerate() {
            for input in &s.inputs {
                if let Some(n) = producer.get(input.as_str()) {
                    consumers.entry(*n).or_default().push(Node::Sink(k));
                }
            }
        }
        self.sources
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let mut chain = Chain {
                    source: i,
                    transforms: Vec::new(),
                    sink: None,
                    output: s.output.clone(),
                };
                let mut node = Node::Source(i);
                loop {
                    match consumers.get(&node).map(Vec::as_slice) {
                        Some([Node::Transform(t)]) if self.transforms[*t].inputs.len() == 1 => {
                            chain.transforms.push(*t);
                            chain.output = self.transforms[*t].output.clone();
                            node = Node::Transform(*t);
                        }
                        Some([Node::Sink(k)]) if self.sinks[*k].inputs.len() == 1 => {
                            chain.sink = Some(*k);
                            break;
                        }
                        _ => break,
                    }
                }
                chain
            })
            .collect()
    }
}
