//! The source-chain executor both engines run: poll a source reader, stamp the table name
//! the plan gives its batches, and run the transforms chained after it, in the caller's
//! thread. The embedded engine's reader threads and the Spark engine's read tasks (and its
//! `mapInArrow` transform steps) all go through here, so that a batch is named and
//! transformed the same way on both.

use std::sync::Arc;
use std::time::Duration;

use ferry_api::{ChangeBatch, FerryError, ReadStatus, Result, SourceReader, TransformInstance};

use crate::plan::{JobPlan, TransformNode};

/// One instance of a transform of the plan, with the table name its output gets.
pub struct ChainedTransform {
    instance: Box<dyn TransformInstance>,
    rename: Option<Arc<str>>,
    /// The plugin name as written, for errors.
    plugin: String,
}

impl ChainedTransform {
    /// A new instance of `node`'s transform.
    pub fn new(node: &TransformNode) -> Result<Self> {
        Ok(ChainedTransform {
            instance: node.transform.create_instance()?,
            rename: node.rename.clone(),
            plugin: node.plugin.clone(),
        })
    }

    /// Transforms `batch`; the output carries the transform's stream name when it emits
    /// one table. `None` when no row remains (nothing to pass on).
    pub fn apply(&mut self, batch: ChangeBatch) -> Result<Option<ChangeBatch>> {
        // A transform would compute from, or pass on, NULLs that are not the values.
        batch.refuse_unchanged(&format!("transform `{}`", self.plugin))?;
        match self.instance.transform(batch)? {
            Some(mut out) if out.num_rows() > 0 => {
                if let Some(name) = &self.rename {
                    out.table = name.clone();
                }
                Ok(Some(out))
            }
            _ => Ok(None),
        }
    }
}

/// What one [`SourceChain::poll`] produced.
#[derive(Debug)]
pub enum Polled {
    /// The reader returned `read` rows (0: an empty batch); `out` is what is left of them
    /// after the chained transforms, `None` when no row is.
    Batch {
        /// Rows the reader returned, before transforms (what replays and metrics count).
        read: usize,
        /// The chain's output.
        out: Option<ChangeBatch>,
    },
    /// The reader has nothing now (it has caught up); poll again after about this long.
    Idle(Duration),
    /// The reader has read all its splits and will get no more.
    Finished,
}

/// A source reader of the plan with the transforms that run after it in the same task.
pub struct SourceChain {
    reader: Box<dyn SourceReader>,
    rename: Option<Arc<str>>,
    transforms: Vec<ChainedTransform>,
}

impl SourceChain {
    /// `reader`, a reader of source `source` of `plan`, followed by the plan's transforms
    /// `transforms`, in that order (a [`crate::Chain`]'s, or none).
    pub fn new(
        plan: &JobPlan,
        source: usize,
        reader: Box<dyn SourceReader>,
        transforms: &[usize],
    ) -> Result<Self> {
        let node = plan
            .sources
            .get(source)
            .ok_or_else(|| FerryError::internal(format!("no source {source}")))?;
        let mut chain = SourceChain {
            reader,
            rename: node.rename.clone(),
            transforms: Vec::new(),
        };
        chain.chain(plan, transforms)?;
        Ok(chain)
    }

    /// Appends the plan's transforms `transforms` to the chain, in order.
    pub fn chain(&mut self, plan: &JobPlan, transforms: &[usize]) -> Result<()> {
        for &i in transforms {
            let node = plan
                .transforms
                .get(i)
                .ok_or_else(|| FerryError::internal(format!("no transform {i}")))?;
            self.transforms.push(ChainedTransform::new(node)?);
        }
        Ok(())
    }

    /// The reader, for the protocol calls between polls (splits, snapshots, completion).
    pub fn reader(&mut self) -> &mut dyn SourceReader {
        self.reader.as_mut()
    }

    /// The reader alone, for keeping it open beyond this chain (Spark's reader cache).
    pub fn into_reader(self) -> Box<dyn SourceReader> {
        self.reader
    }

    /// Polls the reader once. `cut` sees the reader's batch first and may shorten it (a
    /// Spark replay reads exactly the rows of the first attempt); then the batch gets the
    /// source's table name and goes through the chained transforms.
    pub fn poll(&mut self, cut: impl FnOnce(ChangeBatch) -> ChangeBatch) -> Result<Polled> {
        Ok(match self.reader.poll_next()? {
            ReadStatus::Batch(b) => {
                let mut b = cut(b);
                let read = b.num_rows();
                if read == 0 {
                    return Ok(Polled::Batch { read, out: None });
                }
                if let Some(name) = &self.rename {
                    b.table = name.clone();
                }
                let mut out = Some(b);
                for t in &mut self.transforms {
                    out = match out {
                        Some(b) => t.apply(b)?,
                        None => break,
                    };
                }
                Polled::Batch { read, out }
            }
            ReadStatus::Idle(d) => Polled::Idle(d),
            ReadStatus::Finished => Polled::Finished,
        })
    }
}
