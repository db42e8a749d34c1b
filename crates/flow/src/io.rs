//! [`Io`]: what an operator sees while it runs, its inputs and outputs.

use crate::sync::os::{Arc, Ordering};
use std::collections::VecDeque;

use nearflow_policy::dataflow::consumer_kind;
use nearflow_policy::TaskKind;
use nearflow_rt::TaskCx;

use crate::channel::{Chan, Channel};
use crate::exec::Exec;
use crate::packet::{packet_capacity, Packet};

/// What an operator sees while it runs: its inputs and outputs.
pub struct Io<'a> {
    pub(crate) exec: &'a Arc<Exec>,
    pub(crate) node: usize,
    pub(crate) cx: &'a TaskCx<'a>,
    /// Per output: packets its buffer holds for this operator (`Chan::held`).
    pub(crate) held: &'a mut Vec<usize>,
    pub(crate) held_high: &'a mut usize,
    /// Bytes this operator has charged and not given back, given back by the engine when
    /// it is done.
    pub(crate) charged: &'a mut usize,
    /// Outputs (bit = port, the first 64) whose consumer was seen finished by a send of this
    /// run: what they are sent is dropped.
    pub(crate) gone: u64,
}

impl Io<'_> {
    fn input<T: Send + 'static>(&self, port: usize) -> &Channel<T> {
        self.typed(&*self.exec.ops[self.node].ins[port].0, "read input", port)
    }

    /// `chan` as a buffer of `T`: the one check of a port's type at run time (a type-id
    /// compare); a mismatch is the operator's bug, reported with its name.
    fn typed<'c, T: Send + 'static>(
        &self,
        chan: &'c dyn Chan,
        what: &str,
        port: usize,
    ) -> &'c Channel<T> {
        chan.as_any()
            .downcast_ref::<Channel<T>>()
            .unwrap_or_else(|| {
                panic!(
                    "operator '{}' {what} {port} as {}, which is not its declared type",
                    self.exec.ops[self.node].name,
                    std::any::type_name::<T>()
                )
            })
    }

    /// Takes the oldest packet waiting on input `port`, if any.
    pub fn recv<T: Send + 'static>(&mut self, port: usize) -> Option<Packet<T>> {
        let popped = self.input::<T>(port).pop();
        if popped.wake_producer {
            let producer = self.exec.ops[self.node].ins[port].1;
            self.exec.schedule(self.cx, producer, TaskKind::Deferred);
        }
        popped.packet
    }

    /// Moves every packet waiting on input `port` into `queue`, tuple by tuple; returns whether
    /// the input has ended. (For operators that hold their inputs, see [`crate::ops`].)
    pub fn recv_all<T: Send + 'static>(&mut self, port: usize, queue: &mut VecDeque<T>) -> bool {
        while let Some(p) = self.recv::<T>(port) {
            queue.extend(p);
        }
        self.finished::<T>(port)
    }

    /// Whether input `port` has ended: end of stream arrived and every packet was taken.
    pub fn finished<T: Send + 'static>(&self, port: usize) -> bool {
        self.input::<T>(port).finished()
    }

    /// Sends a packet on output `port` (an empty one is dropped). If the consumer's buffer is
    /// full, the buffer holds the packet for this operator and the engine sends it first when
    /// the consumer makes room; meanwhile [`blocked`](Self::blocked) is true.
    pub fn send<T: Send + 'static>(&mut self, port: usize, packet: impl Into<Packet<T>>) {
        let packet = packet.into();
        if packet.is_empty() {
            return;
        }
        let me = &self.exec.ops[self.node];
        // Relaxed (these three): statistics, read after the plan ended; `closed` is read under
        // each buffer's lock.
        if !me.ins.is_empty()
            && !me.inputs_closed.load(Ordering::Relaxed)
            && me.ins.iter().all(|(c, _)| c.closed())
        {
            me.inputs_closed.store(true, Ordering::Relaxed);
        }
        if me.inputs_closed.load(Ordering::Relaxed) {
            me.sent_closed.fetch_add(1, Ordering::Relaxed);
        } else {
            me.sent_open.fetch_add(1, Ordering::Relaxed);
        }
        let (consumer, _, chan) = &me.outs[port];
        if let Some(prof) = &self.exec.profile {
            let w = self.cx.worker();
            let from = prof.who(self.exec, self.node, w);
            let bytes = (packet.len() * std::mem::size_of::<T>()) as u64;
            prof.sent(from, prof.receiver(self.exec, *consumer, from, w), bytes);
        }
        let chan = self.typed::<T>(&**chan, "sent on output", port);
        match chan.send(packet) {
            Ok(()) => {
                if port < 64 && chan.dropping() {
                    self.gone |= 1 << port;
                }
                self.exec
                    .schedule(self.cx, *consumer, consumer_kind(me.outs.len()))
            }
            Err(held) => {
                self.held[port] = held;
                let all: usize = self.held.iter().sum();
                *self.held_high = (*self.held_high).max(all);
            }
        }
    }

    /// Whether the operator should stop producing and return [`Status::Idle`](crate::Status::Idle):
    /// some output holds refused packets (the engine runs the operator again when the consumer
    /// makes room), or every consumer has finished, as a send of this run found (a `limit`
    /// downstream has its rows: nothing more is wanted, and the engine finishes the operator).
    /// An operator whose one input row can make many output rows (a join) checks it between
    /// them, so that a plan that has its answer stops within a packet.
    pub fn blocked(&self) -> bool {
        self.held.iter().any(|&h| h > 0) || self.unwanted()
    }

    /// Whether every output's consumer has finished, as the sends of this run found.
    pub fn unwanted(&self) -> bool {
        let outs = self.exec.ops[self.node].outs.len();
        outs > 0 && outs <= 64 && self.gone == u64::MAX >> (64 - outs)
    }

    /// Charges `bytes` of state this operator now holds (rows of a sort, a hash table)
    /// against the plan's memory limit ([`Limits::memory`](crate::Limits::memory)). Past the
    /// limit it is an error and nothing is charged: return it, and the plan stops, or hold
    /// less (write rows to disk) and go on.
    pub fn charge(&mut self, bytes: usize) -> Result<(), crate::FlowError> {
        self.exec.charge(self.node, bytes)?;
        *self.charged += bytes;
        Ok(())
    }

    /// The plan's memory limit ([`Limits::memory`](crate::Limits::memory)), if it has one.
    pub fn memory_limit(&self) -> Option<usize> {
        self.exec.account.limit()
    }

    /// The bytes the plan may still charge before its memory limit (`usize::MAX` without one):
    /// an operator that builds its state in one go bounds it by this, and charges it after.
    pub fn memory_room(&self) -> usize {
        self.exec.account.room()
    }

    /// An error when the plan should stop now: it ran past its time limit
    /// ([`Limits::time`](crate::Limits::time)), a part of its request beside it passed the
    /// memory limit ([`Account::refuse`](crate::Account::refuse)), or its request was
    /// cancelled or failed. The
    /// engine checks both before each step; an operator whose one step can run long (an
    /// expression over a long `IN` list on every row, a sort's keys, a closure) calls this
    /// between pieces of work and returns the error, so that the limit holds within a step.
    pub fn check(&self) -> Result<(), crate::FlowError> {
        if let Some((limit, deadline)) = self.exec.time_limit {
            if std::time::Instant::now() >= deadline {
                return Err(crate::FlowError::TimeLimit { limit });
            }
        }
        if let Some(e) = self.exec.account.refusal() {
            return Err(e);
        }
        if self.cx.request_failed() {
            return Err(crate::FlowError::Cancelled);
        }
        Ok(())
    }

    /// Gives back `bytes` charged before that the operator no longer holds (at most what it
    /// charged).
    pub fn uncharge(&mut self, bytes: usize) {
        let bytes = bytes.min(*self.charged);
        *self.charged -= bytes;
        self.exec.uncharge(bytes);
    }

    /// The plan's packet size in bytes.
    pub fn packet_bytes(&self) -> usize {
        self.exec.packet_bytes
    }

    /// Tuples of `T` per packet at the plan's packet size.
    pub fn capacity_of<T>(&self) -> usize {
        packet_capacity(self.exec.packet_bytes, std::mem::size_of::<T>())
    }

    /// Tuples of `T` in an emitter's first packet (`PlanBuilder::first_packet_bytes`; the
    /// plan's packet size when it sets none).
    pub fn first_capacity_of<T>(&self) -> usize {
        packet_capacity(self.exec.first_packet_bytes, std::mem::size_of::<T>())
    }

    /// The NUMA node of the worker running this operator now (of the runtime's machine): an
    /// operator that reads data kept once per node reads this node's copy.
    pub fn numa_node(&self) -> usize {
        self.cx.node()
    }
}
