//! The table of connector and transform factories. The binary fills it in — one line per
//! plugin — and hands it to an engine; engines know no plugin by name.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::connector::{SinkFactory, SourceFactory, TransformFactory};

/// Factories by lower-cased plugin name (job files name plugins case-insensitively).
#[derive(Default, Clone)]
pub struct Registry {
    sources: BTreeMap<String, Arc<dyn SourceFactory>>,
    sinks: BTreeMap<String, Arc<dyn SinkFactory>>,
    transforms: BTreeMap<String, Arc<dyn TransformFactory>>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }
    /// Adds a source.
    pub fn source(mut self, f: impl SourceFactory + 'static) -> Self {
        self.sources
            .insert(f.name().to_ascii_lowercase(), Arc::new(f));
        self
    }
    /// Adds a sink.
    pub fn sink(mut self, f: impl SinkFactory + 'static) -> Self {
        self.sinks
            .insert(f.name().to_ascii_lowercase(), Arc::new(f));
        self
    }
    /// Adds a transform.
    pub fn transform(mut self, f: impl TransformFactory + 'static) -> Self {
        self.transforms
            .insert(f.name().to_ascii_lowercase(), Arc::new(f));
        self
    }
    /// The source named `name` (any case).
    pub fn find_source(&self, name: &str) -> Option<&Arc<dyn SourceFactory>> {
        self.sources.get(&name.to_ascii_lowercase())
    }
    /// The sink named `name` (any case).
    pub fn find_sink(&self, name: &str) -> Option<&Arc<dyn SinkFactory>> {
        self.sinks.get(&name.to_ascii_lowercase())
    }
    /// The transform named `name` (any case).
    pub fn find_transform(&self, name: &str) -> Option<&Arc<dyn TransformFactory>> {
        self.transforms.get(&name.to_ascii_lowercase())
    }
    /// All sources, by name.
    pub fn sources(&self) -> impl Iterator<Item = &Arc<dyn SourceFactory>> {
        self.sources.values()
    }
    /// All sinks, by name.
    pub fn sinks(&self) -> impl Iterator<Item = &Arc<dyn SinkFactory>> {
        self.sinks.values()
    }
    /// All transforms, by name.
    pub fn transforms(&self) -> impl Iterator<Item = &Arc<dyn TransformFactory>> {
        self.transforms.values()
    }
}
