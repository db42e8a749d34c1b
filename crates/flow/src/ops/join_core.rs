//! The shared machinery of the hash joins: build a table from one input, then stream the other
//! through it. While the build input has not ended, packets of the probe input are moved into
//! the operator's queue (see the module docs of `ops`), so a common producer of both inputs
//! cannot deadlock the join.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

use super::Emitter;
use crate::error::FlowError;
use crate::plan::Status;
use crate::Io;

pub(crate) struct JoinCore<B, P, K> {
    pub(crate) build_port: usize,
    pub(crate) probe_port: usize,
    pub(crate) table: HashMap<K, Vec<B>>,
    probe: VecDeque<P>,
}

impl<B, P, K> JoinCore<B, P, K>
where
    B: Send + 'static,
    P: Send + 'static,
    K: Hash + Eq,
{
    /// Bytes held: the table's keys and rows, and the probe tuples waiting.
    pub(crate) fn state_bytes(&self) -> usize {
        let rows: usize = self.table.values().map(Vec::len).sum();
        self.table.len() * (std::mem::size_of::<K>() + std::mem::size_of::<Vec<B>>())
            + rows * std::mem::size_of::<B>()
            + self.probe.len() * std::mem::size_of::<P>()
    }

    pub(crate) fn new(build_port: usize, probe_port: usize) -> Self {
        JoinCore {
            build_port,
            probe_port,
            table: HashMap::new(),
            probe: VecDeque::new(),
        }
    }

    /// Moves every waiting packet of the build input (of type `B`) into the table; whether
    /// the build input has ended.
    pub(crate) fn build(&mut self, io: &mut Io<'_>, mut key_b: impl FnMut(&B) -> K) -> bool {
        while let Some(p) = io.recv::<B>(self.build_port) {
            for b in p {
                self.table.entry(key_b(&b)).or_default().push(b);
            }
        }
        io.finished::<B>(self.build_port)
    }

    /// Probes queued and arriving tuples through `on_probe` until blocked; before the build
    /// input has ended (`built` false) it only queues them.
    pub(crate) fn probe<O: Send + 'static>(
        &mut self,
        io: &mut Io<'_>,
        out: &mut Emitter<O>,
        built: bool,
        mut key_p: impl FnMut(&P) -> K,
        mut on_probe: impl FnMut(P, Option<&Vec<B>>, &mut Emitter<O>, &mut Io<'_>),
    ) -> Result<Status, FlowError> {
        loop {
            if io.blocked() {
                return Ok(Status::Idle);
            }
            if built {
                if let Some(p) = self.probe.pop_front() {
                    let k = key_p(&p);
                    on_probe(p, self.table.get(&k), out, io);
                    continue;
                }
            }
            match io.recv::<P>(self.probe_port) {
                Some(p) => self.probe.extend(p),
                None if built && io.finished::<P>(self.probe_port) => {
                    out.flush(io);
                    return Ok(Status::Done);
                }
                None => return Ok(Status::Idle),
            }
        }
    }
}
