//! Mapped execution (StreamMap, `streammap-cache-topology-mapping.txt` §IV.A) and the
//! thread profiles the mappers read: a plan's threads mapped to PUs run there and only there
//! under the `pinned` policy, whatever the mapping; the profile counts every byte sent and puts
//! it between the right workers.

use nearflow_flow::PlanBuilder;
use nearflow_policy::PolicyKind;
use nearflow_rt::Runtime;

const N: u64 = 200_000;

/// source+map on thread 0 → window on thread 1 → (no thread) filter → sort+sink on thread 2.
fn pipeline(b: &mut PlanBuilder) -> nearflow_flow::Sink<(u64, u64)> {
    b.on_thread(Some(0));
    let src = b.generate(N, |i| i);
    let keyed = b.map(src, |x: u64| (x % 7, x));
    b.on_thread(Some(1));
    let w = b.window_aggregate(keyed, 100, |t: &(u64, u64)| t.0, Sum);
    b.on_thread(None);
    let f = b.filter(w, |t: &(u64, u64)| t.1 % 3 == 0);
    b.on_thread(Some(2));
    let s = b.sort_by_key(f, |t: &(u64, u64)| t.1);
    b.collect(s)
}

struct Sum;
impl nearflow_flow::ops::window_agg::WindowAgg<(u64, u64)> for Sum {
    type Acc = u64;
    type Out = (u64, u64);
    fn add(&mut self, acc: &mut u64, t: &(u64, u64)) {
        *acc += t.1;
    }
    fn remove(&mut self, acc: &mut u64, t: &(u64, u64)) {
        *acc -= t.1;
    }
    fn output(&mut self, acc: &u64, t: &(u64, u64), _len: usize) -> Option<(u64, u64)> {
        Some((t.0, *acc))
    }
}

fn expected() -> Vec<(u64, u64)> {
    let mut windows = vec![std::collections::VecDeque::new(); 7];
    let mut out = Vec::new();
    for x in 0..N {
        let w = &mut windows[(x % 7) as usize];
        w.push_back(x);
        if w.len() > 100 {
            w.pop_front();
        }
        let s: u64 = w.iter().sum();
        if s % 3 == 0 {
            out.push((x % 7, s));
        }
    }
    out.sort_by_key(|t| t.1);
    out
}

#[test]
fn mapped_threads_run_only_on_their_pus() {
    // 6 PUs, not the host's: workers are not bound, so this runs on any machine.
    let m = nearflow_topo::from_synthetic("pack:2 l2:3(size=1MiB) core:1 pu:1").unwrap();
    let rt = Runtime::builder(m)
        .policy(PolicyKind::Pinned)
        .build()
        .unwrap();
    let want = expected();
    for pus in [[4usize, 1, 5], [0, 0, 3], [2, 2, 2]] {
        let mut b = PlanBuilder::for_runtime(&rt);
        b.packet_bytes(4096).profile_threads(true);
        let sink = pipeline(&mut b);
        let mut plan = b.build().unwrap();
        assert_eq!(plan.threads(), 3);
        plan.map_threads(&rt, &pus).unwrap();
        let shape = plan.shape();
        let out = plan.submit(&rt).wait().unwrap();
        let mut got = out.take(&sink);
        got.sort_by_key(|t| t.1);
        assert_eq!(got.len(), want.len(), "{pus:?}");
        assert_eq!(got, want, "{pus:?}");
        assert!(out.stats.conserved());
        let prof = out.stats.threads.as_ref().expect("profiled");
        for (op, s) in shape.operators.iter().enumerate() {
            let ran: Vec<usize> = (0..prof.workers)
                .filter(|&w| prof.runs_on[op][w] > 0)
                .collect();
            match s.thread {
                Some(t) => assert_eq!(ran, vec![pus[t]], "{} on {pus:?}", s.name),
                // The unthreaded filter runs where its input comes from: thread 1's PU.
                None => assert_eq!(ran, vec![pus[1]], "{} on {pus:?}", s.name),
            }
        }
        // Every byte sent is in the matrix, between the mapped PUs.
        let sent: u64 = prof.communication.iter().flatten().sum();
        // Channels are listed operator by operator, input by input, as in the shape.
        let sizes = shape
            .operators
            .iter()
            .flat_map(|o| o.input_tuple_bytes.iter());
        let bytes: u64 = out
            .stats
            .channels
            .iter()
            .zip(sizes)
            .map(|(c, &size)| c.tuples_pushed * size as u64)
            .sum();
        assert_eq!(sent, bytes, "{pus:?}");
        // By thread (the plan has threads), whatever PUs they share.
        assert!(prof.by_thread);
        assert_eq!(prof.communication.len(), 3);
        assert_eq!(prof.communication[0][1], N * 16, "map→window, {pus:?}");
        assert_eq!(prof.communication[0][0], N * 8, "source→map, {pus:?}");
        // The window's state was reported (7 keys x 100 tuples of 16 bytes, at least).
        let wop = shape
            .operators
            .iter()
            .position(|o| o.name.starts_with("window_agg"))
            .unwrap();
        assert!(
            prof.state_bytes[wop] >= 7 * 100 * 16,
            "{}",
            prof.state_bytes[wop]
        );
    }
    // A mapping of the wrong length, or onto a PU that does not exist, is refused.
    let mut b = PlanBuilder::for_runtime(&rt);
    let _ = pipeline(&mut b);
    let mut plan = b.build().unwrap();
    assert!(plan.map_threads(&rt, &[0, 1]).is_err());
    let e = plan.map_threads(&rt, &[0, 1, 6]).unwrap_err().to_string();
    assert!(e.contains("PU 6 does not exist"), "{e}");
}

/// An operator run by two threads (a shared operator, §III.D) shows up in the state moves:
/// a zip fed by two mapped sources runs on whichever delivers while it is idle. Which one that
/// is, and whether tuples wait in it then, depends on timing, so the run is repeated until its
/// state moved (almost always the first time); state never moves on the diagonal, and only
/// when the zip ran on both.
#[test]
fn a_shared_operator_moves_its_state_between_threads() {
    let m = nearflow_topo::from_synthetic("pack:1 core:2 pu:1").unwrap();
    let rt = Runtime::builder(m)
        .policy(PolicyKind::Pinned)
        .build()
        .unwrap();
    let mut moved_once = false;
    for _ in 0..5 {
        let mut b = PlanBuilder::for_runtime(&rt);
        b.packet_bytes(1024).profile_threads(true);
        b.on_thread(Some(0));
        let a = b.generate(50_000, |i| i);
        b.on_thread(Some(1));
        let c = b.generate(60_000, |i| 2 * i);
        b.on_thread(None);
        let z = b.zip(a, c);
        let sink = b.collect(z);
        let mut plan = b.build().unwrap();
        plan.map_threads(&rt, &[0, 1]).unwrap();
        let out = plan.submit(&rt).wait().unwrap();
        let got = out.take(&sink);
        assert_eq!(got.len(), 50_000);
        assert!(got.iter().all(|&(x, y)| y == 2 * x));
        let prof = out.stats.threads.as_ref().unwrap();
        let zip = 2;
        let on_both = prof.runs_on[zip].iter().all(|&r| r > 0);
        let moved = prof.state_moves[0][1] + prof.state_moves[1][0];
        assert_eq!(prof.state_moves[0][0] + prof.state_moves[1][1], 0);
        assert!(
            moved == 0 || on_both,
            "{:?} {:?}",
            prof.state_moves,
            prof.runs_on
        );
        if moved > 0 {
            moved_once = true;
            break;
        }
    }
    assert!(
        moved_once,
        "the zip's state never moved between the threads in 5 runs"
    );
}

/// Re-mapping a running plan (`PlanHandle::remap`): the result is unchanged, every operator
/// ran only on its old or its new PU, and bad mappings are refused.
#[test]
fn remapping_a_running_plan_moves_its_threads() {
    let m = nearflow_topo::from_synthetic("pack:2 l2:3(size=1MiB) core:1 pu:1").unwrap();
    let rt = Runtime::builder(m)
        .policy(PolicyKind::Pinned)
        .build()
        .unwrap();
    let want = expected();
    let (old, new) = ([0usize, 1, 2], [5usize, 4, 3]);
    let mut b = PlanBuilder::for_runtime(&rt);
    b.packet_bytes(1024).profile_threads(true);
    let sink = pipeline(&mut b);
    let mut plan = b.build().unwrap();
    plan.map_threads(&rt, &old).unwrap();
    let shape = plan.shape();
    let h = plan.submit(&rt);
    assert!(h.remap(&[0, 1]).is_err());
    let e = h.remap(&[0, 1, 6]).unwrap_err().to_string();
    assert!(e.contains("PU 6 does not exist"), "{e}");
    assert_eq!(h.threads_of().len(), shape.operators.len());
    let mid = h.profile_now().expect("profiled");
    assert!(mid.by_thread);
    h.remap(&new).unwrap();
    let out = h.wait().unwrap();
    let mut got = out.take(&sink);
    got.sort_by_key(|t| t.1);
    assert_eq!(got, want);
    let prof = out.stats.threads.as_ref().unwrap();
    for (op, t) in shape.effective_threads().iter().enumerate() {
        let Some(t) = t else { continue };
        for (w, &r) in prof.runs_on[op].iter().enumerate() {
            assert!(
                r == 0 || w == old[*t] || w == new[*t],
                "{} ran on {w}",
                shape.operators[op].name
            );
        }
    }
    // Counters only grow: the final profile holds at least what the snapshot did.
    assert!(prof.communication[0][1] >= mid.communication[0][1]);
}
