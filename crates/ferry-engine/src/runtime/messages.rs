//! What the tasks of a run send each other: rows and barriers from readers to writers,
//! control from the coordinator to readers, events from every task to the coordinator.

use ferry_api::{ChangeBatch, FerryError, Split, SplitEnumerator};
use serde_json::Value;

/// Batches a writer may have queued before its upstream waits.
pub(super) const CHANNEL_CAPACITY: usize = 8;

/// What flows from readers to writers.
pub(super) enum Msg {
    Data(ChangeBatch),
    Barrier(u64),
    End,
}

/// What the coordinator tells a reader.
pub(super) enum Control {
    AddSplits(Vec<Split>),
    NoMoreSplits,
    Checkpoint(u64),
    Complete(u64),
    /// Send end of input downstream and stop.
    EndInput,
}

/// What tasks tell the coordinator.
pub(super) enum Event {
    ReaderSnapshot {
        source: usize,
        subtask: usize,
        id: u64,
        splits: Vec<Split>,
    },
    ReaderFinished {
        source: usize,
        subtask: usize,
        reader: usize,
    },
    /// Reader `reader` has read all it has for now (only with `checkpoint.on-idle`).
    /// `pending`: it emitted rows after its last barrier, `last_barrier`.
    ReaderCaughtUp {
        reader: usize,
        last_barrier: Option<u64>,
        pending: bool,
    },
    /// Reader `reader`, after catching up, emits rows again.
    ReaderBusy {
        reader: usize,
    },
    WriterAck {
        sink: usize,
        subtask: usize,
        id: u64,
        commit: Option<Value>,
        state: Option<Value>,
    },
    WriterClosed,
    /// Source `source`'s enumerator is back from a discovery on its own thread, with the
    /// splits it found and whether it is exhausted.
    Discovered {
        source: usize,
        enumerator: Box<dyn SplitEnumerator>,
        found: Vec<(usize, Split)>,
        exhausted: bool,
    },
    Failed(FerryError),
}
