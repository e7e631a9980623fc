//! Taking fetched records from librdkafka many at a time.
//!
//! rdkafka's `BaseConsumer::poll` returns one record a call: it computes a deadline, and
//! librdkafka takes the queue's lock and reads the clock at the start and end of every
//! poll, several clock readings a record in all. `rd_kafka_consume_batch_queue` takes up
//! to a whole array of records under one poll. It works on any queue, but the consumer's
//! own queue also carries error, commit and log events that rdkafka serves; so each
//! partition's fetched records are sent to a queue of the reader's own ([`FetchQueue`]),
//! which holds nothing but records, and the consumer's queue keeps the events.

use std::ffi::{CStr, CString};
use std::ptr::{self, NonNull};
use std::time::Duration;

use rdkafka::bindings as rd;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::RDKafkaErrorCode;

/// How many records one pop takes at most.
const POP_MAX: usize = 1024;

/// A queue that the fetched records of the partitions routed to it arrive on, and the
/// records of the last pop, handed out one by one by [`FetchQueue::next`].
pub(crate) struct FetchQueue {
    queue: NonNull<rd::rd_kafka_queue_t>,
    popped: Vec<*mut rd::rd_kafka_message_t>,
    /// The next record of `popped` to hand out.
    at: usize,
    /// Pops so far: tells one pop's records from another's (see [`Fetched::run`]).
    pops: u64,
}

// SAFETY: librdkafka's queues and messages may be used from any thread; this one is
// only used through `&mut FetchQueue` and each pointer is released once.
unsafe impl Send for FetchQueue {}

impl FetchQueue {
    /// A new queue on `consumer`'s client. It must be dropped before the consumer.
    pub(crate) fn new(consumer: &BaseConsumer) -> Option<Self> {
        // SAFETY: the client pointer is valid while `consumer` lives.
        let queue = unsafe { rd::rd_kafka_queue_new(consumer.client().native_ptr()) };
        Some(FetchQueue {
            queue: NonNull::new(queue)?,
            popped: Vec::with_capacity(POP_MAX),
            at: 0,
            pops: 0,
        })
    }

    /// Sends the records librdkafka fetches for `topic`-`partition` to this queue rather
    /// than to the consumer's. Done before the partition is assigned, so that none of its
    /// records reach the consumer's queue first; it holds for as long as the client does
    /// (librdkafka marks the forwarding as the application's, so assigning keeps it).
    /// False if librdkafka gave no queue for the partition.
    pub(crate) fn route(&self, consumer: &BaseConsumer, topic: &str, partition: i32) -> bool {
        let Ok(name) = CString::new(topic) else {
            return false;
        };
        // SAFETY: valid client and C string; the partition's queue handle is a new
        // reference, released right after forwarding it (the forwarding stays).
        unsafe {
            let q = rd::rd_kafka_queue_get_partition(
                consumer.client().native_ptr(),
                name.as_ptr(),
                partition,
            );
            if q.is_null() {
                return false;
            }
            rd::rd_kafka_queue_forward(q, self.queue.as_ptr());
            rd::rd_kafka_queue_destroy(q);
        }
        true
    }

    /// The next record, waiting up to `wait` for one when none is at hand. The record
    /// before it is released, so a [`Fetched`] lives until the next call.
    pub(crate) fn next(&mut self, wait: Duration) -> Option<Fetched<'_>> {
        if self.at == self.popped.len() {
            self.release();
            // Whatever is queued, without waiting; then, only if nothing was, wait for one.
            self.pop(Duration::ZERO, POP_MAX);
            if self.popped.is_empty() && !wait.is_zero() {
                self.pop(wait, 1);
            }
            if self.popped.is_empty() {
                return None;
            }
        }
        let m = self.popped[self.at];
        self.at += 1;
        // SAFETY: popped messages stay valid until released, which happens only when
        // `at` has passed them and `&mut self` is taken again.
        Some(Fetched(unsafe { &*m }, self.pops))
    }

    /// Hands the record [`FetchQueue::next`] gave last out again on the next call: it
    /// belongs to the batch after this one.
    pub(crate) fn put_back(&mut self) {
        self.at = self.at.saturating_sub(1);
    }

    /// Whether records popped are still to be handed out.
    pub(crate) fn holds_records(&self) -> bool {
        self.at < self.popped.len()
    }

    fn pop(&mut self, wait: Duration, max: usize) {
        self.popped.clear();
        self.at = 0;
        self.pops += 1;
        self.popped.resize(max, ptr::null_mut());
        let ms = i32::try_from(wait.as_millis()).unwrap_or(i32::MAX);
        // SAFETY: the array has room for `max` pointers; librdkafka fills the first `n`.
        let n = unsafe {
            rd::rd_kafka_consume_batch_queue(self.queue.as_ptr(), ms, self.popped.as_mut_ptr(), max)
        };
        self.popped.truncate(usize::try_from(n).unwrap_or(0));
    }

    /// Releases every popped record.
    fn release(&mut self) {
        for m in self.popped.drain(..) {
            // SAFETY: each popped message is released once.
            unsafe { rd::rd_kafka_message_destroy(m) }
        }
        self.at = 0;
    }
}

impl Drop for FetchQueue {
    fn drop(&mut self) {
        self.release();
        // SAFETY: the queue came from `rd_kafka_queue_new` and is released once, before
        // its client (the reader drops it first). Partitions still forwarding to it keep
        // it alive; librdkafka refuses what they send once its owner let go.
        unsafe { rd::rd_kafka_queue_destroy(self.queue.as_ptr()) }
    }
}

/// A record (or a partition's error) from a [`FetchQueue`].
pub(crate) struct Fetched<'a>(&'a rd::rd_kafka_message_t, u64);

impl Fetched<'_> {
    /// The error librdkafka reports in place of a record, if it is one.
    pub(crate) fn error(&self) -> Option<RDKafkaErrorCode> {
        let code = RDKafkaErrorCode::from(self.0.err);
        (code != RDKafkaErrorCode::NoError).then_some(code)
    }

    /// Equal for records of one partition, cheaper to compare than the topic's name: the
    /// pop, the topic's handle and the partition. (A handle is only compared within one
    /// pop, whose records keep their topics alive, so an address freed and given to
    /// another topic is never taken for the same one.)
    pub(crate) fn run(&self) -> (u64, *const rd::rd_kafka_topic_t, i32) {
        (self.1, self.0.rkt, self.0.partition)
    }

    pub(crate) fn topic(&self) -> &str {
        if self.0.rkt.is_null() {
            return "";
        }
        // SAFETY: a message's topic handle and its name live as long as the message.
        unsafe { CStr::from_ptr(rd::rd_kafka_topic_name(self.0.rkt)) }
            .to_str()
            .unwrap_or("")
    }

    pub(crate) fn partition(&self) -> i32 {
        self.0.partition
    }

    pub(crate) fn offset(&self) -> i64 {
        self.0.offset
    }

    pub(crate) fn payload(&self) -> Option<&[u8]> {
        if self.0.payload.is_null() {
            return None;
        }
        // SAFETY: librdkafka's payload pointer and length describe bytes the message owns.
        Some(unsafe { std::slice::from_raw_parts(self.0.payload.cast::<u8>(), self.0.len) })
    }

    /// The record's timestamp in milliseconds since the epoch, if it has one.
    pub(crate) fn timestamp_ms(&self) -> Option<i64> {
        let mut kind = rd::rd_kafka_timestamp_type_t::RD_KAFKA_TIMESTAMP_NOT_AVAILABLE;
        // SAFETY: a valid message and an out-parameter of the right type.
        let ts = unsafe { rd::rd_kafka_message_timestamp(self.0, &mut kind) };
        (kind != rd::rd_kafka_timestamp_type_t::RD_KAFKA_TIMESTAMP_NOT_AVAILABLE && ts >= 0)
            .then_some(ts)
    }
}
