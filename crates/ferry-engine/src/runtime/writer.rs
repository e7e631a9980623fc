//! A sink writer's thread: writes rows, aligns barriers from its inputs (exactly-once
//! mode), prepares commits and acknowledges checkpoints.

use std::collections::{BTreeMap, HashMap, VecDeque};

use crossbeam_channel::{Receiver, Sender};
use ferry_api::Result;

use super::messages::{Event, Msg};
use crate::metrics::Flow;

#[allow(clippy::too_many_arguments)]
pub(super) fn writer_loop(
    mut writer: Box<dyn ferry_api::SinkWriter>,
    rx: Receiver<(usize, Msg)>,
    senders: usize,
    aligned: bool,
    sink: usize,
    subtask: usize,
    ev: &Sender<Event>,
    rows: &Flow,
    who: &str,
) -> Result<()> {
    // Senders are numbered per sink across all readers; this writer hears from a subset.
    let mut barrier_from: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
    let mut held: HashMap<usize, VecDeque<Msg>> = HashMap::new();
    let mut ended: Vec<usize> = Vec::new();
    let expected = senders;
    let mut pending: VecDeque<(usize, Msg)> = VecDeque::new();
    loop {
        let (from, msg) = match pending.pop_front() {
            Some(m) => m,
            None => match rx.recv() {
                Ok(m) => m,
                Err(_) => return Ok(()), // upstream gone: the job is being cancelled
            },
        };
        if aligned && barrier_from.values().any(|v| v.contains(&from)) {
            held.entry(from).or_default().push_back(msg);
            continue;
        }
        match msg {
            Msg::Data(b) => {
                rows.add(b.num_rows(), b.data.get_array_memory_size());
                if !writer.keeps_unchanged() {
                    b.refuse_unchanged(who)?;
                }
                writer.write(&b)?;
            }
            Msg::Barrier(id) => {
                let got = barrier_from.entry(id).or_default();
                got.push(from);
                if got.len() >= expected.max(1) {
                    barrier_from.remove(&id);
                    let commit = writer.prepare_commit(id)?;
                    let state = writer.snapshot(id)?;
                    let _ = ev.send(Event::WriterAck {
                        sink,
                        subtask,
                        id,
                        commit,
                        state,
                    });
                    // Release what the inputs sent after the barrier, in order.
                    for (f, q) in held.drain() {
                        for m in q {
                            pending.push_back((f, m));
                        }
                    }
                }
            }
            Msg::End => {
                ended.push(from);
                if ended.len() >= expected.max(1) {
                    writer.close()?;
                    let _ = ev.send(Event::WriterClosed);
                    return Ok(());
                }
            }
        }
    }
}
