//! Handing librdkafka many messages in one call.
//!
//! rdkafka's `BaseProducer::send` names the topic of every message: librdkafka then copies
//! the name into a C string and looks the topic up under its lock, reads the clock, and
//! takes the topic's lock again to enqueue, once a message. `rd_kafka_produce_batch` takes
//! a topic handle and many messages: one lookup, one clock reading and one lock a call.
//! The sink gathers a run of rows' bodies in one buffer ([`Messages`]) and sends them so.

use std::collections::HashMap;
use std::ffi::CString;
use std::ops::Deref;
use std::ptr::{self, NonNull};
use std::time::Duration;

use rdkafka::bindings as rd;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseProducer, Producer, ProducerContext};

/// librdkafka's `RD_KAFKA_PARTITION_UA`: let the partitioner choose (a macro in C, not in
/// the generated bindings).
const PARTITION_UA: i32 = -1;

/// A `BaseProducer` and the librdkafka topic handles it has produced through.
pub(crate) struct BatchProducer<C: ProducerContext + 'static> {
    /// Declared before `producer`: a topic handle must go before its client.
    topics: HashMap<String, TopicHandle>,
    producer: BaseProducer<C>,
}

impl<C: ProducerContext + 'static> Deref for BatchProducer<C> {
    type Target = BaseProducer<C>;
    fn deref(&self) -> &BaseProducer<C> {
        &self.producer
    }
}

impl<C: ProducerContext + 'static> From<BaseProducer<C>> for BatchProducer<C> {
    fn from(producer: BaseProducer<C>) -> Self {
        BatchProducer {
            topics: HashMap::new(),
            producer,
        }
    }
}

/// An application reference to a librdkafka topic (`rd_kafka_topic_new`), released when
/// dropped.
struct TopicHandle(NonNull<rd::rd_kafka_topic_t>);

// SAFETY: librdkafka's topic handles may be used from any thread; this one is only used
// through `&mut BatchProducer`, and released once.
unsafe impl Send for TopicHandle {}

impl Drop for TopicHandle {
    fn drop(&mut self) {
        // SAFETY: the handle came from `rd_kafka_topic_new` and is released once, before
        // its client (field order in `BatchProducer`).
        unsafe { rd::rd_kafka_topic_destroy(self.0.as_ptr()) }
    }
}

/// Message bodies and keys gathered for one [`BatchProducer::send`]: all bytes in one
/// buffer, so that gathering a run of rows allocates nothing once the buffers have grown.
#[derive(Default)]
pub(crate) struct Messages {
    bytes: Vec<u8>,
    /// Per message: where its body ends in `bytes`, its key's range, its partition.
    spans: Vec<Span>,
    /// The array librdkafka reads, rebuilt from `spans` by each send.
    raw: Vec<rd::rd_kafka_message_t>,
}

// SAFETY: `raw`'s pointers point into `bytes` (owned) or are null, and are only read by
// `BatchProducer::send`, which rebuilds them first and empties `raw` when done.
unsafe impl Send for Messages {}

#[derive(Clone, Copy)]
struct Span {
    start: usize,
    body_end: usize,
    key_end: Option<usize>,
    partition: i32,
}

impl Messages {
    /// The buffer the next message's body is written to: append it, then call
    /// [`Messages::end_body`].
    pub(crate) fn bytes(&mut self) -> &mut Vec<u8> {
        &mut self.bytes
    }

    /// Ends the body appended to [`Messages::bytes`] since the last message; `key`, if
    /// any, is copied after it. `partition` is the message's partition, or `None` for
    /// librdkafka's partitioner.
    pub(crate) fn end_body(&mut self, key: Option<&[u8]>, partition: Option<i32>) {
        let start = self.next_start();
        let body_end = self.bytes.len();
        let key_end = key.map(|k| {
            self.bytes.extend_from_slice(k);
            self.bytes.len()
        });
        self.spans.push(Span {
            start,
            body_end,
            key_end,
            partition: partition.unwrap_or(PARTITION_UA),
        });
    }

    /// The body of the message begun last but not yet ended.
    pub(crate) fn pending_body(&self) -> &[u8] {
        &self.bytes[self.next_start()..]
    }

    /// Where the next message's body starts: after the last message's key, or its body.
    fn next_start(&self) -> usize {
        self.spans
            .last()
            .map_or(0, |s| s.key_end.unwrap_or(s.body_end))
    }

    /// Messages gathered.
    pub(crate) fn len(&self) -> usize {
        self.spans.len()
    }

    /// Bytes gathered.
    pub(crate) fn byte_len(&self) -> usize {
        self.bytes.len()
    }

    /// Forgets every message (the buffers keep their room).
    pub(crate) fn clear(&mut self) {
        self.bytes.clear();
        self.spans.clear();
        self.raw.clear();
    }
}

impl<C: ProducerContext + 'static> BatchProducer<C> {
    /// Hands every message in `messages` to librdkafka for `topic`, in order, and clears
    /// `messages`. When librdkafka's queue is full, serves delivery reports (which empties
    /// it) and goes on from the first message it refused.
    pub(crate) fn send(&mut self, topic: &str, messages: &mut Messages) -> Result<(), KafkaError> {
        if messages.spans.is_empty() {
            return Ok(());
        }
        let rkt = self.topic(topic)?;
        let base = messages.bytes.as_ptr();
        messages.raw.clear();
        messages.raw.extend(messages.spans.iter().map(|s| {
            // SAFETY: every span lies inside `bytes`, which is not changed until the
            // messages are sent (librdkafka copies them: RD_KAFKA_MSG_F_COPY).
            let at = |i: usize| unsafe { base.add(i) } as *mut std::ffi::c_void;
            let (key, key_len) = match s.key_end {
                Some(end) => (at(s.body_end), end - s.body_end),
                None => (ptr::null_mut(), 0),
            };
            rd::rd_kafka_message_t {
                err: rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR,
                rkt: ptr::null_mut(),
                partition: s.partition,
                payload: at(s.start),
                len: s.body_end - s.start,
                key,
                key_len,
                offset: 0,
                // The delivery opaque: `()`.
                _private: ptr::null_mut(),
            }
        }));
        let mut from = 0;
        while from < messages.raw.len() {
            let rest = &mut messages.raw[from..];
            let count = i32::try_from(rest.len()).unwrap_or(i32::MAX);
            // SAFETY: `rkt` is a live handle of this producer's client; `rest` holds
            // `count` initialised messages whose bytes outlive the call.
            unsafe {
                rd::rd_kafka_produce_batch(
                    rkt,
                    PARTITION_UA,
                    rd::RD_KAFKA_MSG_F_COPY | rd::RD_KAFKA_MSG_F_PARTITION,
                    rest.as_mut_ptr(),
                    count,
                );
            }
            let refused = rest[..count as usize]
                .iter()
                .position(|m| m.err != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR);
            match refused {
                None => from += count as usize,
                Some(i) => {
                    let err = rest[i].err;
                    if err != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR__QUEUE_FULL {
                        messages.clear();
                        return Err(KafkaError::MessageProduction(err.into()));
                    }
                    // librdkafka refuses every message after the first it could not
                    // queue: the order holds. A message leaves the queue once its
                    // delivery report is served: serve them for a millisecond (a poll
                    // returns only when its time is up).
                    from += i;
                    self.producer.poll(Duration::from_millis(1));
                }
            }
        }
        messages.clear();
        Ok(())
    }

    /// The handle of `topic`, made the first time.
    fn topic(&mut self, topic: &str) -> Result<*mut rd::rd_kafka_topic_t, KafkaError> {
        if let Some(h) = self.topics.get(topic) {
            return Ok(h.0.as_ptr());
        }
        let name = CString::new(topic).map_err(KafkaError::from)?;
        // SAFETY: a live client and a NUL-terminated name; no topic configuration (the
        // client's defaults apply).
        let raw = unsafe {
            rd::rd_kafka_topic_new(
                self.producer.client().native_ptr(),
                name.as_ptr(),
                ptr::null_mut(),
            )
        };
        let handle = NonNull::new(raw).ok_or_else(|| {
            // SAFETY: reads this thread's last librdkafka error.
            let code = unsafe { rd::rd_kafka_last_error() };
            KafkaError::MessageProduction(RDKafkaErrorCode::from(code))
        })?;
        self.topics.insert(topic.to_string(), TopicHandle(handle));
        Ok(handle.as_ptr())
    }
}
