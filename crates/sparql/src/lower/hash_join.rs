//! The hash join, in every mode the algebra needs (inner, OPTIONAL, anti, MINUS, semi and
//! mark): input 1 is built into a table, input 0 probes it. One operator per stream pair of
//! its inputs, which the plan hash-partitioned alike on the join's keys (or left whole). When
//! the build rows bind nothing but the one key (`?x rdf:type bench:Article` joined on `?x`:
//! [`Phys::counts_build_keys`]) the table is only how many build rows hold each key, in an
//! array indexed by id where the keys lie close together.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;

// hashbrown's default hasher (foldhash), not std's SipHash: the join tables are keyed by an
// already mixed u64; SipHash took 7 % of Q4's samples.
use hashbrown::HashMap;
use nearflow_flow::{Emitter, FlowError, Io, Operator, PlanBuilder, PortType, Status, Stream};

use super::{grown, pump, row_ports, table_bytes, ExecCx, Held, KeyFn, Row, Timer};
use crate::expr::{EvalCx, Expr};
use crate::minted::Minted;
use crate::physical::{JoinMode, Op, OpStat, Phys};
use nearflow_rdf::index::Store;
use nearflow_rdf::term::{Id, TermRef, UNBOUND};

/// A hash join's build side: the rows end to end, and per key hash the last row with it, each
/// row linking to the one before it with the same hash. Three vectors in all, where a vector
/// per key cost one allocation per distinct key to build and as many frees to drop (23 % of
/// Q6's time).
struct Table<const N: usize> {
    heads: HashMap<u64, usize>,
    next: Vec<usize>,
    rows: Vec<Row<N>>,
}

/// Bytes of probe rows a join takes in while its table is built.
const PROBE_AHEAD: usize = 16 << 20;

/// The end of a chain.
const NONE: usize = usize::MAX;

impl<const N: usize> Table<N> {
    fn new() -> Self {
        Table {
            heads: HashMap::new(),
            next: Vec::new(),
            rows: Vec::new(),
        }
    }

    fn insert(&mut self, key: u64, row: Row<N>) {
        let head = self.heads.entry(key).or_insert(NONE);
        self.next.push(*head);
        *head = self.rows.len();
        self.rows.push(row);
    }

    /// The bytes the table holds.
    fn bytes(&self) -> usize {
        self.rows.capacity() * std::mem::size_of::<Row<N>>()
            + self.next.capacity() * std::mem::size_of::<usize>()
            + self.heads.allocation_size()
    }

    /// Makes room for `extra` more rows, the growth charged to `held` before it is allocated
    /// (the key table as if every row had a new key).
    fn reserve(&mut self, io: &mut Io<'_>, held: &mut Held, extra: usize) -> Result<(), FlowError> {
        let (rows, next) = (grown(&self.rows, extra), grown(&self.next, extra));
        let heads = table_bytes(self.heads.len() + extra, 16).max(self.heads.allocation_size());
        held.set(
            io,
            rows * std::mem::size_of::<Row<N>>() + next * std::mem::size_of::<usize>() + heads,
        )?;
        self.rows.reserve_exact(rows - self.rows.len());
        self.next.reserve_exact(next - self.next.len());
        self.heads.reserve(extra);
        Ok(())
    }

    /// The first entry of the chain of rows whose key hash is `key` (last inserted first);
    /// [`NONE`] when there is none.
    fn head(&self, key: u64) -> usize {
        self.heads.get(&key).copied().unwrap_or(NONE)
    }

    /// Chain entry `at`: its row and the next entry; `None` past the end.
    fn entry(&self, at: usize) -> Option<(&Row<N>, usize)> {
        Some((self.rows.get(at)?, self.next[at]))
    }
}

/// The build side of a join whose build rows bind nothing but the one key column (a pattern
/// like `?x rdf:type bench:Article` joined on `?x`): each build row is its key, so the table is
/// how many rows hold each key, and a probe row's matches are that many copies of itself. The
/// keys are gathered while the build side runs; once it has ended they are counted into an
/// array indexed by id when their ids lie close together (a few bytes a row: `DENSE` ids of
/// range per key at most), else into a hash map.
enum Counts {
    Gathering(Vec<Id>),
    Dense { low: Id, counts: Vec<u32> },
    Sparse(HashMap<Id, u32>),
}

impl Counts {
    /// At most this many ids of range per key for the array.
    const DENSE: usize = 16;

    /// Counts the gathered keys; the bytes the table then takes. `charge` is called with
    /// those bytes before they are allocated, beside the gathered keys.
    fn count(
        &mut self,
        charge: impl FnOnce(usize) -> Result<(), FlowError>,
    ) -> Result<usize, FlowError> {
        let Counts::Gathering(keys) = self else {
            return Ok(0);
        };
        let keys = std::mem::take(keys);
        let (low, high) = keys
            .iter()
            .fold((Id::MAX, 0), |(l, h), &k| (l.min(k), h.max(k)));
        let range = if keys.is_empty() {
            0
        } else {
            (high - low) as usize + 1
        };
        if range <= Self::DENSE * keys.len() + 1024 {
            charge(range * 4)?;
            let mut counts = vec![0u32; range];
            for k in keys {
                counts[(k - low) as usize] += 1;
            }
            let bytes = counts.len() * 4;
            *self = Counts::Dense { low, counts };
            Ok(bytes)
        } else {
            charge(table_bytes(keys.len(), 8))?;
            let mut m: HashMap<Id, u32> = HashMap::with_capacity(keys.len());
            for k in keys {
                *m.entry(k).or_insert(0) += 1;
            }
            let bytes = m.allocation_size();
            *self = Counts::Sparse(m);
            Ok(bytes)
        }
    }

    /// Build rows holding `key`.
    #[inline]
    fn of(&self, key: Id) -> u32 {
        match self {
            Counts::Gathering(_) => 0,
            Counts::Dense { low, counts } => key
                .checked_sub(*low)
                .and_then(|i| counts.get(i as usize))
                .copied()
                .unwrap_or(0),
            Counts::Sparse(m) => m.get(&key).copied().unwrap_or(0),
        }
    }
}

struct JoinOp<const N: usize> {
    mode: JoinMode,
    keys: Arc<Vec<usize>>,
    /// Whether a key that is not a pairing column exists (MINUS counts only those as shared).
    shares_key: bool,
    check: Vec<usize>,
    residual: Option<Arc<Expr>>,
    store: Arc<Store>,
    minted: Arc<Minted>,
    probe_key: KeyFn,
    build_key: KeyFn,
    /// The ids of `true` and `false` (a mark join's answers).
    marks: [Id; 2],
    table: Table<N>,
    /// With a build side that binds only the one key column: its keys' counts, used instead of
    /// `table`.
    counts: Option<Counts>,
    built: bool,
    /// What the table (or the counts) holds, as charged.
    held: Held,
    /// Probe rows waiting for the table, or for the output.
    queue: VecDeque<Row<N>>,
    /// What `queue` held ahead of the table, as charged.
    ahead: Held,
    /// A probe row whose matches were interrupted.
    probing: Option<Probing<N>>,
    out: Emitter<Row<N>>,
    stat: Arc<OpStat>,
    timing: bool,
}

/// A probe row part way through its matches: the output blocked (or its consumer finished)
/// between two of them.
struct Probing<const N: usize> {
    row: Row<N>,
    /// The next entry of the row's chain in the table.
    at: usize,
    /// Whether some match was found so far (OPTIONAL, anti-join, MINUS and mark need it).
    matched: bool,
}

impl<const N: usize> JoinOp<N> {
    /// Probes one row from chain entry `at` (a fresh row starts at its key's head), pushing
    /// merged rows until the chain ends or the output blocks between two matches; then the
    /// rest waits in `self.probing`. Returns the rows pushed.
    fn probe(&mut self, io: &mut Io<'_>, mut st: Probing<N>) -> u64 {
        if self.counts.is_some() {
            return self.probe_counted(io, st);
        }
        let cx = EvalCx::new(&self.store, &self.minted);
        let p = st.row;
        let mut emitted = 0;
        while let Some((b, next)) = self.table.entry(st.at) {
            if io.blocked() {
                self.probing = Some(st);
                return emitted;
            }
            st.at = next;
            if self.keys.iter().any(|&c| p[c] != b[c]) {
                continue;
            }
            let mut overlap = self.shares_key;
            let mut ok = true;
            for &c in &self.check {
                let (x, y) = (p[c], b[c]);
                if x != UNBOUND && y != UNBOUND {
                    if x != y {
                        ok = false;
                        break;
                    }
                    overlap = true;
                }
            }
            if !ok {
                continue;
            }
            if self.mode == JoinMode::Minus {
                if overlap {
                    st.matched = true;
                    break;
                }
                continue;
            }
            let mut merged = p;
            for (m, &y) in merged.iter_mut().zip(b.iter()) {
                if *m == UNBOUND {
                    *m = y;
                }
            }
            if let Some(e) = &self.residual {
                if !e.holds(cx, &merged) {
                    continue;
                }
            }
            st.matched = true;
            match self.mode {
                JoinMode::Anti | JoinMode::Mark(_) => break,
                JoinMode::Semi => {
                    self.out.push(io, p);
                    emitted += 1;
                    break;
                }
                _ => {
                    self.out.push(io, merged);
                    emitted += 1;
                }
            }
        }
        match self.mode {
            JoinMode::Inner | JoinMode::Semi => {}
            JoinMode::Mark(col) => {
                let mut r = p;
                r[col] = self.marks[usize::from(!st.matched)];
                self.out.push(io, r);
                emitted += 1;
            }
            JoinMode::Left | JoinMode::Anti | JoinMode::Minus if !st.matched => {
                self.out.push(io, p);
                emitted += 1;
            }
            _ => {}
        }
        emitted
    }

    /// [`probe`](Self::probe) against key counts: each match is the probe row itself (the
    /// build row adds no column), so the row is pushed once per match, `st.at` counting the
    /// matches still to push; every mode's answer as the table's would give it.
    fn probe_counted(&mut self, io: &mut Io<'_>, mut st: Probing<N>) -> u64 {
        let p = st.row;
        if st.matched {
            // Resumed between two copies of an inner or left join's match.
            return self.push_copies(io, st);
        }
        let n = self.counts.as_ref().map_or(0, |c| c.of(p[self.keys[0]])) as usize;
        let holds = n > 0
            && self.residual.as_ref().is_none_or(|e| {
                let cx = EvalCx::new(&self.store, &self.minted);
                e.holds(cx, &p)
            });
        let copies = match self.mode {
            JoinMode::Inner => usize::from(holds) * n,
            JoinMode::Left => {
                if holds {
                    n
                } else {
                    1
                }
            }
            JoinMode::Semi => usize::from(holds),
            JoinMode::Anti => usize::from(!holds),
            // A shared variable (the key) and a match: the row is removed.
            JoinMode::Minus => usize::from(!(holds && self.shares_key)),
            JoinMode::Mark(col) => {
                let mut r = p;
                r[col] = self.marks[usize::from(!holds)];
                self.out.push(io, r);
                return 1;
            }
        };
        st.at = copies;
        st.matched = true;
        self.push_copies(io, st)
    }

    /// Pushes `st.at` more copies of the probe row, until the output blocks (then the rest
    /// waits in `self.probing`). Returns the rows pushed.
    fn push_copies(&mut self, io: &mut Io<'_>, mut st: Probing<N>) -> u64 {
        let mut emitted = 0;
        while st.at > 0 {
            if io.blocked() {
                self.probing = Some(st);
                return emitted;
            }
            st.at -= 1;
            self.out.push(io, st.row);
            emitted += 1;
        }
        emitted
    }

    /// A fresh probe of row `p`.
    fn start(&self, p: Row<N>) -> Probing<N> {
        Probing {
            row: p,
            at: if self.counts.is_some() {
                0
            } else {
                self.table.head(self.probe_key.key(&p))
            },
            matched: false,
        }
    }
}

impl<const N: usize> Operator for JoinOp<N> {
    fn inputs(&self) -> Vec<PortType> {
        row_ports::<N>(2)
    }

    fn outputs(&self) -> Vec<PortType> {
        row_ports::<N>(1)
    }

    fn state_bytes(&self) -> usize {
        self.held.bytes() + self.queue.len() * std::mem::size_of::<Row<N>>()
    }

    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        let stat = self.stat.clone();
        let _t = Timer::new(self.timing, &stat);
        if !self.built {
            while let Some(p) = io.recv::<Row<N>>(1) {
                if let Some(Counts::Gathering(keys)) = &mut self.counts {
                    self.held.grow(io, keys, p.len(), 0)?;
                    let k = self.keys[0];
                    keys.extend(p.iter().map(|b| b[k]));
                    continue;
                }
                self.table.reserve(io, &mut self.held, p.len())?;
                for b in p {
                    self.table.insert(self.build_key.key(&b), b);
                }
                self.held.set(io, self.table.bytes())?;
            }
            self.built = io.finished::<Row<N>>(1);
            if self.built {
                if let Some(c) = &mut self.counts {
                    let gathered = self.held.bytes();
                    let held = &mut self.held;
                    let bytes = c.count(|b| held.set(io, gathered + b))?;
                    self.held.set(io, bytes)?;
                }
            }
        }
        let row = std::mem::size_of::<Row<N>>();
        if !self.built {
            // Probe rows are taken in ahead while the table is built, so that both sides'
            // producers run at once, up to `PROBE_AHEAD` bytes (charged); past that they wait
            // in their stream, whose bounded buffer holds back their producer. Taken in
            // without a bound, they would be held by every join of a chain at once (a star
            // of hash joins: most of SP²Bench q2's memory).
            while self.queue.len() * row < PROBE_AHEAD {
                let Some(p) = io.recv::<Row<N>>(0) else {
                    break;
                };
                self.queue.extend(p);
                self.ahead.set(io, self.queue.capacity() * row)?;
            }
            return Ok(Status::Idle);
        }
        let mut n = 0;
        if let Some(st) = self.probing.take() {
            n += self.probe(io, st);
        }
        let mut queue = std::mem::take(&mut self.queue);
        let done = self.probing.is_none()
            && pump(io, &mut queue, 0, self.built, |io, p| {
                let st = self.start(p);
                n += self.probe(io, st)
            });
        self.queue = queue;
        if self.queue.is_empty() && self.ahead.bytes() > 0 {
            self.queue = VecDeque::new();
            self.ahead.set(io, 0)?;
        }
        self.stat.rows.fetch_add(n, Ordering::Relaxed);
        if done {
            self.out.flush(io);
            return Ok(Status::Done);
        }
        self.out.idle(io);
        Ok(Status::Idle)
    }
}

/// One join per pair of streams (the plan partitioned both inputs alike).
pub(super) fn build<const N: usize>(
    cx: &ExecCx,
    b: &mut PlanBuilder,
    p: &Phys,
    probe: Vec<Stream<Row<N>>>,
    bld: Vec<Stream<Row<N>>>,
) -> Vec<Stream<Row<N>>> {
    let Op::HashJoin {
        mode,
        keys,
        value_key,
        check,
        residual,
        pairs,
    } = &p.op
    else {
        unreachable!("a hash join node")
    };
    debug_assert_eq!(probe.len(), bld.len(), "both inputs partitioned alike");
    let keys = Arc::new(keys.clone());
    let key_fn = |value_col: Option<usize>| KeyFn {
        store: cx.store.clone(),
        minted: cx.minted.clone(),
        keys: keys.clone(),
        value_col,
    };
    let (probe_key, build_key) = (
        key_fn(value_key.map(|v| v.0)),
        key_fn(value_key.map(|v| v.1)),
    );
    let ecx = cx.eval();
    let boolean = |v: &str| {
        ecx.id_of_term(TermRef::Literal {
            value: v,
            datatype: "http://www.w3.org/2001/XMLSchema#boolean",
            lang: None,
        })
        .unwrap_or(UNBOUND)
    };
    let marks = [boolean("true"), boolean("false")];
    let counted = p.counts_build_keys();
    probe
        .into_iter()
        .zip(bld)
        .map(|(ps, bs)| {
            let op = b.add(
                format!("{mode:?} hash join"),
                JoinOp::<N> {
                    mode: *mode,
                    keys: keys.clone(),
                    shares_key: keys.iter().any(|k| !pairs.contains(k)),
                    check: check.clone(),
                    residual: residual.clone(),
                    store: cx.store.clone(),
                    minted: cx.minted.clone(),
                    probe_key: probe_key.clone(),
                    build_key: build_key.clone(),
                    marks,
                    table: Table::new(),
                    counts: counted.then(|| Counts::Gathering(Vec::new())),
                    built: false,
                    held: Held::default(),
                    ahead: Held::default(),
                    queue: VecDeque::new(),
                    probing: None,
                    out: Emitter::new(0),
                    stat: p.stat.clone(),
                    timing: cx.timing,
                },
            );
            b.feed(ps, op, 0);
            b.feed(bs, op, 1);
            b.stream::<Row<N>>(op, 0).expect("a join outputs rows")
        })
        .collect()
}
