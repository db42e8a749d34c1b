//! Bounded input buffers (one per input port) carrying whole packets.
//!
//! A buffer holds at most `cap` packets. A push to a full buffer is **refused** and the packet
//! stays with its producer (the "rejected packet" of 001 §5.1): the buffer keeps it, typed, in
//! the producer's **held** queue, which only the producer's own task touches (to send it first,
//! `Chan::flush_held`, before anything new); the buffer remembers that its producer is
//! blocked, and the consumer's next pop that makes room schedules the producer again. Both
//! happen under the buffer's lock, so the wake-up cannot be lost. When the consumer has
//! finished early (a `limit`, say), the buffer **discards**: it drops what it holds and accepts
//! and drops everything after, so producers never block on a consumer that is gone.

use std::any::Any;
use std::collections::VecDeque;

use crate::packet::Packet;
use crate::sync::{lock, Mutex};

/// Counters of one buffer; exact once the plan has ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ChanStats {
    /// Packets accepted.
    pub pushed: u64,
    /// Packets taken by the consumer.
    pub popped: u64,
    /// Packets accepted, then dropped because the consumer finished before taking them.
    pub discarded: u64,
    /// Tuples of those packets.
    pub tuples_discarded: u64,
    /// Packets offered after the consumer had finished (dropped, never accepted).
    pub dropped_late: u64,
    /// Tuples accepted.
    pub tuples_pushed: u64,
    /// Tuples taken by the consumer.
    pub tuples_popped: u64,
    /// Pushes refused because the buffer was full.
    pub refused: u64,
    /// Most packets held at once.
    pub high_water: usize,
    /// The capacity in packets.
    pub capacity: usize,
}

struct State<T> {
    q: VecDeque<Packet<T>>,
    /// Refused packets, oldest first, waiting for the producer to send them again.
    held: VecDeque<Packet<T>>,
    closed: bool,
    discard: bool,
    producer_blocked: bool,
    stats: ChanStats,
}

/// What a pop found.
pub(crate) struct Popped<T> {
    pub(crate) packet: Option<Packet<T>>,
    /// The producer was blocked and now has room: schedule it.
    pub(crate) wake_producer: bool,
}

pub(crate) struct Channel<T> {
    cap: usize,
    st: Mutex<State<T>>,
}

impl<T: Send + 'static> Channel<T> {
    pub(crate) fn new(cap: usize) -> Self {
        Channel {
            cap,
            st: Mutex::new(State {
                q: VecDeque::with_capacity(cap),
                held: VecDeque::new(),
                closed: false,
                discard: false,
                producer_blocked: false,
                stats: ChanStats {
                    capacity: cap,
                    ..ChanStats::default()
                },
            }),
        }
    }

    /// Sends a packet from the producer: behind the packets it already holds if any, else
    /// offered to the buffer, and held when refused. `Ok` when the buffer took it (or dropped
    /// it, its consumer having finished): the consumer is to be scheduled; `Err(n)` when it is
    /// held, `n` packets being held now.
    pub(crate) fn send(&self, p: Packet<T>) -> Result<(), usize> {
        let mut s = lock(&self.st);
        if s.held.is_empty() {
            match Self::offer(&mut s, self.cap, p) {
                Ok(()) => return Ok(()),
                Err(p) => s.held.push_back(p),
            }
        } else {
            s.held.push_back(p);
        }
        Err(s.held.len())
    }

    /// Offers a packet to the queue; `Err` gives it back when the queue is full (and marks the
    /// producer blocked).
    fn offer(s: &mut State<T>, cap: usize, p: Packet<T>) -> Result<(), Packet<T>> {
        debug_assert!(!s.closed, "push after end of stream");
        if s.discard {
            s.stats.dropped_late += 1;
            return Ok(());
        }
        if s.q.len() >= cap {
            s.producer_blocked = true;
            s.stats.refused += 1;
            return Err(p);
        }
        s.stats.pushed += 1;
        s.stats.tuples_pushed += p.len() as u64;
        s.q.push_back(p);
        s.stats.high_water = s.stats.high_water.max(s.q.len());
        Ok(())
    }

    /// Takes the oldest packet.
    pub(crate) fn pop(&self) -> Popped<T> {
        let mut s = lock(&self.st);
        let packet = s.q.pop_front();
        if let Some(p) = &packet {
            s.stats.popped += 1;
            s.stats.tuples_popped += p.len() as u64;
        }
        let wake_producer = s.producer_blocked && s.q.len() < self.cap;
        if wake_producer {
            s.producer_blocked = false;
        }
        Popped {
            packet,
            wake_producer,
        }
    }

    /// Whether the consumer has finished, so what is sent is dropped.
    pub(crate) fn dropping(&self) -> bool {
        lock(&self.st).discard
    }

    /// End of stream has arrived and every packet was taken.
    pub(crate) fn finished(&self) -> bool {
        let s = lock(&self.st);
        s.closed && s.q.is_empty()
    }
}

/// What `Chan::flush_held` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Flushed {
    /// At least one held packet went to the buffer: schedule the consumer.
    pub(crate) sent: bool,
    /// Packets still held.
    pub(crate) held: usize,
}

/// A buffer with its tuple type erased, for the engine's bookkeeping.
pub(crate) trait Chan: Send + Sync {
    fn as_any(&self) -> &dyn Any;
    /// Offers the held packets again, oldest first, until one is refused (producer side).
    fn flush_held(&self) -> Flushed;
    /// Refused packets held for the producer.
    fn held(&self) -> usize;
    /// End of stream.
    fn close(&self);
    /// The consumer has finished: drop everything queued; returns whether the producer was
    /// blocked. (Held packets stay: the producer's next flush drops them as `dropped_late`.)
    fn discard(&self) -> bool;
    fn stats(&self) -> ChanStats;
    /// Whether the consumer has finished (everything sent is dropped).
    fn discarding(&self) -> bool;
    /// Whether end of stream has arrived (packets may still wait).
    fn closed(&self) -> bool;
}

impl<T: Send + 'static> Chan for Channel<T> {
    fn closed(&self) -> bool {
        lock(&self.st).closed
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn flush_held(&self) -> Flushed {
        let mut s = lock(&self.st);
        let mut sent = false;
        while let Some(p) = s.held.pop_front() {
            match Self::offer(&mut s, self.cap, p) {
                Ok(()) => sent = true,
                Err(p) => {
                    s.held.push_front(p);
                    let held = s.held.len();
                    return Flushed { sent, held };
                }
            }
        }
        Flushed { sent, held: 0 }
    }

    fn held(&self) -> usize {
        lock(&self.st).held.len()
    }

    fn close(&self) {
        lock(&self.st).closed = true;
    }

    fn discard(&self) -> bool {
        let mut s = lock(&self.st);
        s.discard = true;
        s.stats.discarded += s.q.len() as u64;
        s.stats.tuples_discarded += s.q.iter().map(|p| p.len() as u64).sum::<u64>();
        s.q.clear();
        std::mem::take(&mut s.producer_blocked)
    }

    fn stats(&self) -> ChanStats {
        lock(&self.st).stats
    }

    fn discarding(&self) -> bool {
        lock(&self.st).discard
    }
}

/// Loom models of backpressure (`RUSTFLAGS="--cfg loom" cargo test -p nearflow-flow --lib loom`):
/// a producer sends three one-tuple packets into a buffer of one while the consumer pops. When
/// both have stopped, a producer holding packets must either have a wake-up on its way (a pop
/// returned one that no flush has answered yet) or face a full buffer it is marked blocked on
/// (the next pop will wake it): no producer is left asleep with room available. The engine's
/// reaction is then played out (each wake-up runs the producer's flush, the consumer pops), and
/// every packet must arrive once and in order, or be counted as dropped when the consumer
/// finished early.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;

    const SENT: u32 = 3;

    /// Checks the no-sleeping-producer invariant, then runs wake-ups and pops to the end;
    /// returns the tuples the consumer got after `got`.
    fn settle(ch: &Channel<u32>, mut wakes: usize, mut got: Vec<u32>, consume: bool) -> Vec<u32> {
        {
            let s = lock(&ch.st);
            assert!(
                s.held.is_empty() || wakes > 0 || (s.q.len() == ch.cap && s.producer_blocked),
                "producer holds {} packets with room in the buffer and no wake-up",
                s.held.len()
            );
        }
        for _ in 0..4 * SENT {
            if wakes > 0 {
                wakes -= 1;
                ch.flush_held();
            }
            if consume {
                let p = ch.pop();
                got.extend(p.packet.into_iter().flatten());
                wakes += usize::from(p.wake_producer);
            }
        }
        assert_eq!(ch.held(), 0, "packets left held");
        got
    }

    /// A producer thread sending `SENT` one-tuple packets, numbered from 0.
    fn produce(ch: &Arc<Channel<u32>>) -> loom::thread::JoinHandle<()> {
        let ch = ch.clone();
        loom::thread::spawn(move || {
            for i in 0..SENT {
                let _ = ch.send(vec![i].into());
            }
        })
    }

    #[test]
    fn loom_backpressure_loses_no_packet_and_no_wakeup() {
        loom::model(|| {
            let ch = Arc::new(Channel::<u32>::new(1));
            let producer = produce(&ch);
            let (mut got, mut wakes) = (Vec::new(), 0);
            for _ in 0..2 {
                let p = ch.pop();
                got.extend(p.packet.into_iter().flatten());
                wakes += usize::from(p.wake_producer);
            }
            producer.join().unwrap();
            let got = settle(&ch, wakes, got, true);
            assert_eq!(got, (0..SENT).collect::<Vec<_>>());
            let st = ch.stats();
            assert_eq!((st.pushed, st.popped, st.dropped_late), (3, 3, 0));
        });
    }

    /// The consumer takes one packet and finishes early (a `limit`): every other packet is
    /// discarded from the buffer or dropped late from the held queue, and the producer is not
    /// left holding any.
    #[test]
    fn loom_discard_releases_a_blocked_producer() {
        loom::model(|| {
            let ch = Arc::new(Channel::<u32>::new(1));
            let producer = produce(&ch);
            let p = ch.pop();
            let mut wakes = usize::from(p.wake_producer);
            let first: Vec<u32> = p.packet.into_iter().flatten().collect();
            wakes += usize::from(ch.discard());
            producer.join().unwrap();
            settle(&ch, wakes, Vec::new(), false);
            let st = ch.stats();
            assert_eq!(st.popped, first.len() as u64);
            assert_eq!(
                st.popped + st.discarded + st.dropped_late,
                u64::from(SENT),
                "every packet taken, discarded or dropped: {st:?}"
            );
        });
    }
}
