//! Every operator and parallel form against a sequential reference on random inputs
//! (including empty and one-tuple streams, packets of one tuple and one-packet buffers).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::OnceLock;

use nearflow_flow::ops::window_agg::WindowAgg;
use nearflow_flow::ops::window_join::Windows;
use nearflow_flow::{PlanBuilder, PlanOutput};
use nearflow_rt::Runtime;
use proptest::prelude::*;

type Row = (u8, u32);

fn rt() -> &'static Runtime {
    static RT: OnceLock<Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        let m = nearflow_topo::presets::build("e5310-smp").expect("preset");
        Runtime::builder(m).build().expect("runtime")
    })
}

/// Packet sizes (bytes) and buffer capacities to try: 1 byte = one tuple per packet.
fn settings() -> impl Strategy<Value = (usize, usize)> {
    (prop_oneof![Just(1usize), Just(24), 1usize..4096], 1usize..4)
}

fn builder(s: (usize, usize)) -> PlanBuilder {
    let mut b = PlanBuilder::new();
    b.packet_bytes(s.0).buffer_packets(s.1).default_dop(3);
    b
}

fn run(b: PlanBuilder) -> PlanOutput {
    let out = b.build().expect("valid plan").run(rt()).expect("plan runs");
    assert!(
        out.stats.conserved(),
        "packets lost or duplicated: {:?}",
        out.stats
    );
    assert!(out.stats.bounded(), "a buffer overflowed");
    assert_eq!(out.stats.concurrent_entries, 0);
    out
}

fn rows() -> impl Strategy<Value = Vec<Row>> {
    prop_oneof![
        Just(Vec::new()),
        any::<Row>().prop_map(|r| vec![r]),
        prop::collection::vec((0u8..16, any::<u32>()), 0..400),
    ]
}

fn sorted<T: Ord>(mut v: Vec<T>) -> Vec<T> {
    v.sort();
    v
}

struct Sum;
impl WindowAgg<Row> for Sum {
    type Acc = u64;
    type Out = (u8, u64, usize);
    fn add(&mut self, acc: &mut u64, t: &Row) {
        *acc += u64::from(t.1);
    }
    fn remove(&mut self, acc: &mut u64, t: &Row) {
        *acc -= u64::from(t.1);
    }
    fn output(&mut self, acc: &u64, t: &Row, len: usize) -> Option<(u8, u64, usize)> {
        Some((t.0, *acc, len))
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn streaming_operators(xs in rows(), s in settings(), off in 0u64..50, lim in 0u64..500) {
        let mut b = builder(s);
        let src = b.source(xs.clone());
        let copies = b.broadcast(src, 6);
        let m = b.map(copies[0], |r: Row| u64::from(r.1) * 2);
        let f = b.filter(copies[1], |r: &Row| r.1 % 3 == 0);
        let fm = b.flat_map(copies[2], |r: Row| std::iter::repeat_n(r.0, usize::from(r.0 % 3)));
        let d = b.distinct(copies[3]);
        let l = b.limit(copies[4], off, lim);
        let rowv = b.map(copies[5], |r: Row| vec![u64::from(r.0), u64::from(r.1), 7]);
        let p = b.project(rowv, vec![2, 0]);
        let (sm, sf, sfm, sd, sl, sp) = (b.collect(m), b.collect(f), b.collect(fm), b.collect(d), b.collect(l), b.collect(p));
        let out = run(b);
        prop_assert_eq!(out.take(&sm), xs.iter().map(|r| u64::from(r.1) * 2).collect::<Vec<_>>());
        prop_assert_eq!(out.take(&sf), xs.iter().copied().filter(|r| r.1 % 3 == 0).collect::<Vec<_>>());
        prop_assert_eq!(out.take(&sfm), xs.iter().flat_map(|r| std::iter::repeat_n(r.0, usize::from(r.0 % 3))).collect::<Vec<_>>());
        let mut seen = HashSet::new();
        prop_assert_eq!(out.take(&sd), xs.iter().copied().filter(|r| seen.insert(*r)).collect::<Vec<_>>());
        prop_assert_eq!(out.take(&sl), xs.iter().copied().skip(off as usize).take(lim as usize).collect::<Vec<_>>());
        prop_assert_eq!(out.take(&sp), xs.iter().map(|r| vec![7, u64::from(r.0)]).collect::<Vec<_>>());
    }

    #[test]
    fn blocking_operators(xs in rows(), s in settings(), w in 1usize..6) {
        let mut b = builder(s);
        let src = b.source(xs.clone());
        let c = b.broadcast(src, 4);
        let so = b.sort_by_key(c[0], |r: &Row| r.0);
        let g = b.group_by(c[1], |r: &Row| r.0, 0u64, |a: &mut u64, r: Row| *a += u64::from(r.1));
        let wa = b.window_aggregate(c[2], w, |r: &Row| r.0, Sum);
        let parts = b.partition(c[3], 3, |r: &Row| r.0);
        let held = b.barrier(parts);
        let un = b.union(held);
        let (sso, sg, swa, sun) = (b.collect(so), b.collect(g), b.collect(wa), b.collect(un));
        let out = run(b);
        let mut expect_sort = xs.clone();
        expect_sort.sort_by_key(|r| r.0); // stable
        prop_assert_eq!(out.take(&sso), expect_sort);
        let mut groups: BTreeMap<u8, u64> = BTreeMap::new();
        for r in &xs { *groups.entry(r.0).or_default() += u64::from(r.1); }
        prop_assert_eq!(sorted(out.take(&sg)), groups.into_iter().collect::<Vec<_>>());
        let mut wins: HashMap<u8, Vec<u32>> = HashMap::new();
        let mut expect_w = Vec::new();
        for r in &xs {
            let v = wins.entry(r.0).or_default();
            v.push(r.1);
            let tail = &v[v.len().saturating_sub(w)..];
            expect_w.push((r.0, tail.iter().map(|&x| u64::from(x)).sum::<u64>(), tail.len()));
        }
        prop_assert_eq!(out.take(&swa), expect_w);
        prop_assert_eq!(sorted(out.take(&sun)), sorted(xs.clone()));
    }

    #[test]
    fn joins(ls in rows(), rs in rows(), s in settings()) {
        let mut b = builder(s);
        let l = b.source(ls.clone());
        let r = b.source(rs.clone());
        let lc = b.broadcast(l, 5);
        let rc = b.broadcast(r, 5);
        let hj = b.hash_join(lc[0], rc[0], |x: &Row| x.0, |y: &Row| y.0, |x, y| (x.0, x.1, y.1));
        let lj = b.left_join(lc[1], rc[1], |x: &Row| x.0, |y: &Row| y.0, |x, y| (x.1, y.map(|y| y.1)));
        let aj = b.anti_join(lc[2], rc[2], |x: &Row| x.0, |y: &Row| y.0);
        let ls_sorted = b.sort_by_key(lc[3], |x: &Row| x.0);
        let rs_sorted = b.sort_by_key(rc[3], |y: &Row| y.0);
        let mj = b.merge_join(ls_sorted, rs_sorted, |x: &Row| x.0, |y: &Row| y.0, |x, y| (x.0, x.1, y.1));
        let pj = b.par_hash_join(lc[4], rc[4], None, |x: &Row| x.0, |y: &Row| y.0, |x, y| (x.0, x.1, y.1));
        let (shj, slj, saj, smj, spj) = (b.collect(hj), b.collect(lj), b.collect(aj), b.collect(mj), b.collect(pj));
        let out = run(b);
        let mut inner = Vec::new();
        let mut left = Vec::new();
        let mut anti = Vec::new();
        for x in &ls {
            let m: Vec<&Row> = rs.iter().filter(|y| y.0 == x.0).collect();
            if m.is_empty() { left.push((x.1, None)); anti.push(*x); }
            for y in m { inner.push((x.0, x.1, y.1)); left.push((x.1, Some(y.1))); }
        }
        prop_assert_eq!(sorted(out.take(&shj)), sorted(inner.clone()));
        prop_assert_eq!(sorted(out.take(&slj)), sorted(left));
        prop_assert_eq!(out.take(&saj), anti);
        let mj_out = out.take(&smj);
        prop_assert!(mj_out.windows(2).all(|w| w[0].0 <= w[1].0), "merge join output sorted by key");
        prop_assert_eq!(sorted(mj_out), sorted(inner.clone()));
        prop_assert_eq!(sorted(out.take(&spj)), sorted(inner));
    }

    #[test]
    fn merges_and_parallel_forms(xs in rows(), ys in rows(), s in settings(), dop in 1usize..6) {
        let mut b = builder(s);
        let x = b.source(xs.clone());
        let xc = b.broadcast(x, 3);
        let xs_sorted = b.sort_by_key(xc[0], |r: &Row| *r);
        let y = b.source(ys.clone());
        let ys_sorted = b.sort_by_key(y, |r: &Row| *r);
        let merged = b.merge_sorted(vec![xs_sorted, ys_sorted], |r: &Row| *r);
        let ps = b.par_sort(xc[1], Some(dop), |r: &Row| *r);
        let pg = b.par_group_by(xc[2], Some(dop), |r: &Row| r.0, 0u64, |a: &mut u64, r: Row| *a += u64::from(r.1));
        let (sm, sps, spg) = (b.collect(merged), b.collect(ps), b.collect(pg));
        let out = run(b);
        let mut all = xs.clone();
        all.extend(ys.iter().copied());
        prop_assert_eq!(out.take(&sm), sorted(all));
        prop_assert_eq!(out.take(&sps), sorted(xs.clone()));
        let mut groups: BTreeMap<u8, u64> = BTreeMap::new();
        for r in &xs { *groups.entry(r.0).or_default() += u64::from(r.1); }
        prop_assert_eq!(sorted(out.take(&spg)), groups.into_iter().collect::<Vec<_>>());
    }

    #[test]
    fn window_join_equals_a_sequential_pass(ls in rows(), rs in rows(), s in settings(), wl in 0usize..3, wr in 0usize..3) {
        // Give both sides distinct sequence numbers interleaved by position.
        let lt: Vec<(u64, Row)> = ls.iter().enumerate().map(|(i, r)| (2 * i as u64, *r)).collect();
        let rt_: Vec<(u64, Row)> = rs.iter().enumerate().map(|(i, r)| (2 * i as u64 + 1, *r)).collect();
        let mut b = builder(s);
        let l = b.source(lt.clone());
        let r = b.source(rt_.clone());
        let j = b.window_join(l, r, Windows { left: wl, right: wr },
            (|x: &(u64, Row)| x.0, |y: &(u64, Row)| y.0),
            (|x: &(u64, Row)| x.1 .0, |y: &(u64, Row)| y.1 .0),
            |x, y| Some((x.0, y.0)));
        let sj = b.collect(j);
        let out = run(b);
        // Reference: walk the merged stream in sequence order.
        let mut all: Vec<(u64, bool, Row)> = lt.iter().map(|x| (x.0, true, x.1)).chain(rt_.iter().map(|y| (y.0, false, y.1))).collect();
        all.sort_by_key(|t| t.0);
        let mut lw: HashMap<u8, Vec<u64>> = HashMap::new();
        let mut rw: HashMap<u8, Vec<u64>> = HashMap::new();
        let mut expect = Vec::new();
        for (seq, is_left, row) in all {
            let (mine, other, cap) = if is_left { (&mut lw, &rw, wl) } else { (&mut rw, &lw, wr) };
            for &o in other.get(&row.0).map(|v| v.as_slice()).unwrap_or(&[]) {
                expect.push(if is_left { (seq, o) } else { (o, seq) });
            }
            let v = mine.entry(row.0).or_default();
            if cap > 0 { v.push(seq); if v.len() > cap { v.remove(0); } }
        }
        prop_assert_eq!(out.take(&sj), expect);
    }
}
