//! `COUNT(*)` of a join of two patterns on one variable ([`Op::StarCount`]): over the matches
//! of the `rows` pattern, a function `f` of the number `m` of the `keys` pattern's matches
//! with its `?s` — `m` for an inner join, `max(1, m)` for OPTIONAL, `[m > 0]` for EXISTS,
//! `[m = 0]` for NOT EXISTS and MINUS — summed. Three ways to read them ([`CountHow`]):
//!
//! - *table*: `keys`' values of `?s` become a set — a bitmap over their id range when the ids
//!   lie close together (at most [`DENSE`] ids of range per key), else a hash set — or, where
//!   `m` matters beyond being zero (`mult`: `keys` has another variable; an inner join or
//!   OPTIONAL), a count per value — an array over their id range when at most
//!   [`DENSE_COUNTS`] ids of range per key, else a hash map; `rows`' matches are then read and
//!   each adds `f` of its `?s`'s count;
//! - *probe*: `rows` has far fewer matches than `keys`: each distinct `?s` of `rows`, in id
//!   order, has its matches in `keys` counted by `keys`' index instead (binary searches, each
//!   near the last, no row read);
//! - *grouped*: `keys` has far fewer matches than `rows`: `keys`' values are counted per
//!   value, and for each distinct value `v` the matches `L(v)` of `rows` with it are counted
//!   by `rows`' index (binary searches), so that the sum is `f(0) · |rows| + Σ L(v) · (f(m(v))
//!   − f(0))`, `|rows|` counted by the index too: `COUNT(*) { ?s rdf:type ?a OPTIONAL { ?s
//!   rdf:_36 ?b } }` reads 100 `rdf:_36` rows and makes 100 counts, not 940 k `rdf:type` reads.
//!
//! No joined row is formed, no exchange or group runs: q3a's count at 5 M triples reads 285 k
//! Articles and 470 k pages rows, where a join forms 470 k rows, partitions them by hash and
//! counts them. The reads are charged to the plan's memory limit and its limits are checked
//! every [`STEP`] rows.

use std::sync::Arc;

use hashbrown::{HashMap, HashSet};
use nearflow_flow::{FlowError, Io, Operator, PlanBuilder, PortType, Status, Stream};

use super::{count_id, row_ports, ExecCx, Reads, Row, Timer};
use crate::minted::Minted;
use crate::physical::{bound_of, CountHow, JoinMode, Op, OpStat, Pat, Phys};
use nearflow_rdf::index::{QuadIndex, Store};
use nearflow_rdf::term::{Id, UNBOUND};

/// Ids of range per key, at most, for the bitmap.
const DENSE: usize = 64;

/// Ids of range per key, at most, for the array of counts (4 bytes per id of range: at most
/// 16 per key, about a hash map's).
const DENSE_COUNTS: usize = 4;

/// Rows read between two checks of the plan's limits.
const STEP: usize = 1 << 16;

/// The values of `?s` the keys pattern holds, or how often.
enum Keys {
    Bits { low: Id, words: Vec<u64> },
    Set(HashSet<Id>),
    Counts { low: Id, counts: Vec<u32> },
    Map(HashMap<Id, u32>),
}

impl Keys {
    /// The set of `ids` (their counts when `mult`), and the bytes it takes.
    fn of(ids: &[Id], mult: bool) -> (Keys, usize) {
        let Some((&low, &high)) = ids.iter().min().zip(ids.iter().max()) else {
            return (Keys::Set(HashSet::new()), 0);
        };
        let range = (high - low) as usize + 1;
        if mult {
            if range <= DENSE_COUNTS * ids.len() {
                let mut counts = vec![0u32; range];
                for &k in ids {
                    counts[(k - low) as usize] += 1;
                }
                let bytes = counts.len() * 4;
                (Keys::Counts { low, counts }, bytes)
            } else {
                let mut map: HashMap<Id, u32> = HashMap::new();
                for &k in ids {
                    *map.entry(k).or_insert(0) += 1;
                }
                let bytes = map.capacity() * 9;
                (Keys::Map(map), bytes)
            }
        } else if range <= DENSE * ids.len() {
            let mut words = vec![0u64; range.div_ceil(64)];
            for &k in ids {
                let i = (k - low) as usize;
                words[i / 64] |= 1 << (i % 64);
            }
            let bytes = words.len() * 8;
            (Keys::Bits { low, words }, bytes)
        } else {
            let set: HashSet<Id> = ids.iter().copied().collect();
            let bytes = set.capacity() * 5;
            (Keys::Set(set), bytes)
        }
    }

    /// The matches of the keys pattern with `?s` = `k`.
    #[inline]
    fn times(&self, k: Id) -> u64 {
        match self {
            Keys::Bits { low, words } => u64::from(k.checked_sub(*low).is_some_and(|i| {
                let i = i as usize;
                words.get(i / 64).is_some_and(|w| w & (1 << (i % 64)) != 0)
            })),
            Keys::Set(s) => u64::from(s.contains(&k)),
            Keys::Counts { low, counts } => k
                .checked_sub(*low)
                .and_then(|i| counts.get(i as usize))
                .map_or(0, |&c| u64::from(c)),
            Keys::Map(m) => m.get(&k).map_or(0, |&c| u64::from(c)),
        }
    }
}

struct StarCountOp<const N: usize> {
    store: Arc<Store>,
    minted: Arc<Minted>,
    keys: Pat,
    rows: Pat,
    s: usize,
    col: usize,
    how: CountHow,
    mult: bool,
    mode: JoinMode,
    stat: Arc<OpStat>,
    timing: bool,
}

impl<const N: usize> StarCountOp<N> {
    /// The matches of `pat` whose `?s` is `v`, counted by the index (binary searches).
    fn matches_with(&self, pat: &Pat, v: Id) -> u64 {
        let graph = pat[3].id().expect("a star count reads one graph");
        let mut bound = bound_of(pat);
        let at = pat[..3]
            .iter()
            .position(|x| x.var() == Some(self.s))
            .expect("the pattern has the shared variable");
        bound[at] = Some(v);
        self.store.count_in(graph, bound)
    }

    /// Reads every match of `pat`, handing its `?s` to `each`: the one key column, a block at
    /// a time ([`QuadIndex::for_each_value`]); checks the plan's limits every [`STEP`] rows,
    /// charging `bytes` per row read since the last check.
    fn read(
        &self,
        pat: &Pat,
        bytes: usize,
        reads: &mut Reads<'_>,
        io: &mut Io<'_>,
        mut each: impl FnMut(Id),
    ) -> Result<(), FlowError> {
        let (mut read, mut stopped) = (0usize, None);
        let graph = pat[3].id().expect("a star count reads one graph");
        let pos = pat[..3]
            .iter()
            .position(|x| x.var() == Some(self.s))
            .expect("the pattern has the shared variable");
        self.store
            .for_each_value(graph, bound_of(pat), pos, reads.tally(), |v| {
                each(v);
                read += 1;
                if read % STEP == 0 {
                    stopped = io.check().and_then(|()| io.charge(STEP * bytes)).err();
                }
                stopped.is_none()
            });
        match stopped {
            Some(e) => Err(e),
            None => io.charge(read % STEP * bytes),
        }
    }
}

impl<const N: usize> Operator for StarCountOp<N> {
    fn inputs(&self) -> Vec<PortType> {
        row_ports::<N>(0)
    }

    fn outputs(&self) -> Vec<PortType> {
        row_ports::<N>(1)
    }

    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        let stat = self.stat.clone();
        let _t = Timer::new(self.timing, &stat);
        let mut reads = Reads::new(io.numa_node(), &stat);
        let f = |m: u64| -> u64 {
            match self.mode {
                JoinMode::Left => m.max(1),
                JoinMode::Semi => u64::from(m > 0),
                JoinMode::Anti | JoinMode::Minus => u64::from(m == 0),
                JoinMode::Inner | JoinMode::Mark(_) => m,
            }
        };
        // Only an inner join and OPTIONAL tell one match from several.
        let counts = self.mult && matches!(self.mode, JoinMode::Inner | JoinMode::Left);
        let size = std::mem::size_of::<Id>();
        let mut count: u64 = 0;
        match self.how {
            CountHow::Probe => {
                // Each distinct `?s` of the rows looked up in the keys pattern's index, its
                // matches counted there (binary searches, no row read), in id order so that
                // one search lands near the last.
                let mut ids = Vec::new();
                self.read(&self.rows, size, &mut reads, io, |k| ids.push(k))?;
                ids.sort_unstable();
                for (i, run) in ids.chunk_by(|a, b| a == b).enumerate() {
                    if i % STEP == STEP - 1 {
                        io.check()?;
                    }
                    let m = self.matches_with(&self.keys, run[0]);
                    count += run.len() as u64 * f(m);
                }
                io.uncharge(ids.len() * size);
            }
            CountHow::Table => {
                let mut ids = Vec::new();
                self.read(&self.keys, size, &mut reads, io, |k| ids.push(k))?;
                let (keys, bytes) = Keys::of(&ids, counts);
                io.charge(bytes)?;
                io.uncharge(ids.len() * size);
                drop(ids);
                self.read(&self.rows, 0, &mut reads, io, |k| {
                    count += f(keys.times(k));
                })?;
            }
            CountHow::Grouped => {
                let mut ids = Vec::new();
                self.read(&self.keys, size, &mut reads, io, |k| ids.push(k))?;
                ids.sort_unstable();
                let graph = self.rows[3].id().expect("a star count reads one graph");
                // Signed: NOT EXISTS takes each value's rows away from all of them.
                let all = self.store.count_in(graph, bound_of(&self.rows));
                let mut sum = i128::from(f(0)) * i128::from(all);
                for (i, run) in ids.chunk_by(|a, b| a == b).enumerate() {
                    if i % STEP == STEP - 1 {
                        io.check()?;
                    }
                    let l = self.matches_with(&self.rows, run[0]);
                    let d = i128::from(f(run.len() as u64)) - i128::from(f(0));
                    sum += i128::from(l) * d;
                }
                io.uncharge(ids.len() * size);
                count = u64::try_from(sum).expect("a count of rows is not negative");
            }
        }
        let mut row = [UNBOUND; N];
        row[self.col] = count_id(crate::expr::EvalCx::new(&self.store, &self.minted), count);
        io.send(0, vec![row]);
        stat.rows.store(1, std::sync::atomic::Ordering::Relaxed);
        Ok(Status::Done)
    }
}

/// The count's one operator.
pub(super) fn build<const N: usize>(
    cx: &ExecCx,
    b: &mut PlanBuilder,
    p: &Phys,
) -> Vec<Stream<Row<N>>> {
    let Op::StarCount {
        keys,
        rows,
        s,
        col,
        how,
        mult,
        mode,
    } = &p.op
    else {
        unreachable!("a star count node")
    };
    let op = b.add(
        "star count",
        StarCountOp::<N> {
            store: cx.store.clone(),
            minted: cx.minted.clone(),
            keys: *keys,
            rows: *rows,
            s: *s,
            col: *col,
            how: *how,
            mult: *mult,
            mode: *mode,
            stat: p.stat.clone(),
            timing: cx.timing,
        },
    );
    vec![b.stream::<Row<N>>(op, 0).expect("the count outputs rows")]
}

#[cfg(test)]
mod tests {
    use super::Keys;

    /// Each representation answers the count of every value, in its range and outside it.
    #[test]
    fn keys_count_each_value_as_often_as_it_is_given() {
        let dense: Vec<u32> = vec![10, 11, 11, 13, 10, 11];
        let sparse: Vec<u32> = vec![5, 5_000_000, 5, 4_000_000_000];
        for (ids, mult, kind) in [
            (&dense, false, "bits"),
            (&sparse, false, "set"),
            (&dense, true, "counts"),
            (&sparse, true, "map"),
        ] {
            let (keys, bytes) = Keys::of(ids, mult);
            let got = match keys {
                Keys::Bits { .. } => "bits",
                Keys::Set(_) => "set",
                Keys::Counts { .. } => "counts",
                Keys::Map(_) => "map",
            };
            assert_eq!(got, kind);
            assert!(bytes > 0);
            for k in [
                0,
                4,
                5,
                9,
                10,
                11,
                12,
                13,
                14,
                5_000_000,
                4_000_000_000,
                u32::MAX,
            ] {
                let n = ids.iter().filter(|&&i| i == k).count() as u64;
                assert_eq!(keys.times(k), if mult { n } else { n.min(1) }, "{kind} {k}");
            }
        }
        let (empty, _) = Keys::of(&[], true);
        assert_eq!(empty.times(3), 0);
    }
}
