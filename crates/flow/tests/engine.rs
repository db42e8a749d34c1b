//! The engine: plan validation, errors, cancellation, and a stress run of many concurrent plans
//! with tiny packets and buffers under every policy.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use nearflow_flow::error::PlanError;
use nearflow_flow::ops::Emitter;
use nearflow_flow::{FlowError, Io, Operator, PlanBuilder, PortType, Status};
use nearflow_policy::PolicyKind;
use nearflow_rt::Runtime;

fn runtime(policy: PolicyKind, preset: &str) -> Runtime {
    let m = nearflow_topo::presets::build(preset).expect("preset");
    Runtime::builder(m).policy(policy).build().expect("runtime")
}

/// A map with a hand-written operator, for the low-level API.
struct Double(Emitter<u64>);
impl Operator for Double {
    fn inputs(&self) -> Vec<PortType> {
        vec![PortType::of::<u64>()]
    }
    fn outputs(&self) -> Vec<PortType> {
        vec![PortType::of::<u64>()]
    }
    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        while !io.blocked() {
            match io.recv::<u64>(0) {
                Some(p) => p.into_iter().for_each(|x| self.0.push(io, x * 2)),
                None if io.finished::<u64>(0) => {
                    self.0.flush(io);
                    return Ok(Status::Done);
                }
                None => return Ok(Status::Idle),
            }
        }
        Ok(Status::Idle)
    }
}

#[test]
fn bad_plans_are_reported_not_panicked() {
    assert_eq!(PlanBuilder::new().build().unwrap_err(), PlanError::Empty);

    // An output nobody consumes.
    let mut b = PlanBuilder::new();
    let s = b.source(0..3u64);
    let _ = b.map(s, |x| x + 1);
    assert!(matches!(
        b.build().unwrap_err(),
        PlanError::UnconnectedOutput { port: 0, .. }
    ));

    // An input nobody feeds (low-level API).
    let mut b = PlanBuilder::new();
    let d = b.add("double", Double(Emitter::new(0)));
    let s = b.stream::<u64>(d, 0).unwrap();
    b.collect(s);
    let e = b.build().unwrap_err();
    assert_eq!(
        e,
        PlanError::UnconnectedInput {
            operator: "double".into(),
            port: 0
        }
    );
    assert!(e
        .to_string()
        .contains("input 0 of operator 'double' is not connected"));

    // A stream consumed twice.
    let mut b = PlanBuilder::new();
    let s = b.source(0..3u64);
    b.collect(s);
    b.collect(s);
    assert!(matches!(
        b.build().unwrap_err(),
        PlanError::OutputReused { .. }
    ));

    // Type mismatch and bad ports, checked at connect time.
    let mut b = PlanBuilder::new();
    let s = b.source(vec!["text"]);
    let d = b.add("double", Double(Emitter::new(0)));
    let e = b.connect(s.operator(), 0, d, 0).unwrap_err();
    assert!(matches!(e, PlanError::TypeMismatch { .. }), "{e}");
    assert!(
        e.to_string().contains("&str") && e.to_string().contains("u64"),
        "{e}"
    );
    assert!(matches!(
        b.connect(s.operator(), 3, d, 0).unwrap_err(),
        PlanError::NoSuchPort { .. }
    ));
    assert!(b.stream::<String>(d, 0).is_err());

    // A cycle: double → double2 → double.
    let mut b = PlanBuilder::new();
    let d1 = b.add("d1", Double(Emitter::new(0)));
    let d2 = b.add("d2", Double(Emitter::new(0)));
    b.connect(d1, 0, d2, 0).unwrap();
    b.connect(d2, 0, d1, 0).unwrap();
    let e = b.build().unwrap_err();
    assert!(matches!(e, PlanError::Cycle(_)), "{e}");
    assert!(e.to_string().contains("d1") && e.to_string().contains("d2"));

    // Settings.
    let mut b = PlanBuilder::new();
    let s = b.source(0..3u64);
    b.collect(s);
    b.packet_bytes(0);
    assert!(matches!(b.build().unwrap_err(), PlanError::Setting(_)));
    let mut b = PlanBuilder::new();
    let s = b.source(0..3u64);
    let parts = b.partition(s, 0, |x: &u64| *x);
    assert!(parts.is_empty());
    assert!(matches!(b.build().unwrap_err(), PlanError::Setting(_)));
    let mut b = PlanBuilder::new();
    let s = b.source(0..3u64);
    let s = b.par_sort(s, Some(0), |x: &u64| *x);
    b.collect(s);
    assert!(matches!(b.build().unwrap_err(), PlanError::Setting(_)));
}

#[test]
fn hand_written_operator_runs() {
    let rt = runtime(PolicyKind::Las, "e5310-smp");
    let mut b = PlanBuilder::new();
    let s = b.source(0..1000u64);
    let d = b.add("double", Double(Emitter::new(0)));
    b.feed(s, d, 0);
    let out = b.stream::<u64>(d, 0).unwrap();
    let sink = b.collect(out);
    let res = b.build().unwrap().run(&rt).unwrap();
    assert_eq!(
        res.take(&sink),
        (0..1000u64).map(|x| x * 2).collect::<Vec<_>>()
    );
}

#[test]
fn a_panicking_operator_fails_the_plan_with_its_name_and_message() {
    for policy in PolicyKind::ALL {
        let rt = runtime(policy, "e5310-smp");
        let mut b = PlanBuilder::new();
        b.packet_bytes(64);
        let s = b.source(0..100_000u64);
        let m = b.map(s, |x: u64| if x == 500 { panic!("boom at {x}") } else { x });
        let sink = b.collect(m);
        let _ = sink;
        let e = b.build().unwrap().run(&rt).unwrap_err();
        match &e {
            FlowError::Panicked { operator, message } => {
                assert!(operator.starts_with("map#"), "{operator}");
                assert_eq!(message, "boom at 500");
            }
            other => panic!("{policy:?}: {other}"),
        }
    }
}

#[test]
fn a_bad_row_fails_the_plan_with_the_line() {
    let rt = runtime(PolicyKind::Las, "e5310-smp");
    let mut b = PlanBuilder::new();
    let data = "a,1\nb,2\nc\n";
    let rows = b.csv_reader(
        std::io::Cursor::new(data),
        false,
        |r: &csv::StringRecord| Ok(Some(r[1].to_string())),
    );
    b.collect(rows);
    let e = b.build().unwrap().run(&rt).unwrap_err();
    assert!(matches!(e, FlowError::Operator { .. }), "{e}");
    assert!(e.to_string().contains("csv#0"), "{e}");
    let mut b = PlanBuilder::new();
    assert!(b
        .csv_file(std::path::Path::new("/no/such/file.csv"), true, |_| Ok(
            Some(0u8)
        ))
        .is_err());
}

#[test]
fn cancel_stops_an_endless_plan() {
    for policy in PolicyKind::ALL {
        let rt = runtime(policy, "e5310-smp");
        let mut b = PlanBuilder::new();
        b.packet_bytes(256);
        let s = b.source(0u64..);
        let m = b.map(s, |x: u64| x ^ 1);
        b.collect(m);
        let h = b.build().unwrap().submit(&rt);
        std::thread::sleep(Duration::from_millis(20));
        h.cancel();
        assert_eq!(h.wait().unwrap_err(), FlowError::Cancelled, "{policy:?}");
    }
}

#[test]
fn limit_finishes_early_and_upstream_drains() {
    let rt = runtime(PolicyKind::Las, "e5310-smp");
    let produced = Arc::new(AtomicU64::new(0));
    let p2 = produced.clone();
    let mut b = PlanBuilder::new();
    b.packet_bytes(64).buffer_packets(1);
    let s = b.generate(1_000_000, move |i| {
        p2.fetch_add(1, Ordering::Relaxed);
        i
    });
    let l = b.limit(s, 5, 10);
    let sink = b.collect(l);
    let out = b.build().unwrap().run(&rt).unwrap();
    assert_eq!(out.take(&sink), (5..15).collect::<Vec<u64>>());
    assert!(out.stats.conserved());
    // Once the limit has finished, the source stops too.
    assert!(
        produced.load(Ordering::Relaxed) < 1_000,
        "{}",
        produced.load(Ordering::Relaxed)
    );

    // So an endless source under a limit ends.
    let mut b = PlanBuilder::new();
    let s = b.source(0u64..);
    let m = b.map(s, |x: u64| x * 3);
    let l = b.limit(m, 0, 4);
    let sink = b.collect(l);
    let out = b.build().unwrap().run(&rt).unwrap();
    assert_eq!(out.take(&sink), vec![0, 3, 6, 9]);
}

/// Counts entries into an operator and fails if two threads are inside at once.
struct Guarded {
    inside: Arc<AtomicBool>,
    overlaps: Arc<AtomicU64>,
    out: Emitter<u64>,
}
impl Operator for Guarded {
    fn inputs(&self) -> Vec<PortType> {
        vec![PortType::of::<u64>()]
    }
    fn outputs(&self) -> Vec<PortType> {
        vec![PortType::of::<u64>()]
    }
    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        if self.inside.swap(true, Ordering::AcqRel) {
            self.overlaps.fetch_add(1, Ordering::Relaxed);
        }
        std::hint::spin_loop();
        let r = loop {
            if io.blocked() {
                break Status::Idle;
            }
            match io.recv::<u64>(0) {
                Some(p) => p.into_iter().for_each(|x| self.out.push(io, x)),
                None if io.finished::<u64>(0) => {
                    self.out.flush(io);
                    break Status::Done;
                }
                None => break Status::Idle,
            }
        };
        self.inside.store(false, Ordering::Release);
        Ok(r)
    }
}

#[test]
fn stress_many_concurrent_plans_tiny_packets_every_policy() {
    for (policy, preset) in PolicyKind::ALL
        .iter()
        .flat_map(|&p| [(p, "e5310-smp"), (p, "e7540")])
    {
        let rt = runtime(policy, preset);
        let overlaps = Arc::new(AtomicU64::new(0));
        let mut handles = Vec::new();
        for k in 0..12u64 {
            let mut b = PlanBuilder::new();
            b.packet_bytes(8 * (1 + k as usize % 3))
                .buffer_packets(1 + k as usize % 2);
            let n = 3_000 + k * 100;
            let s = b.source(0..n);
            let parts = b.partition(s, 3, |x: &u64| *x);
            let mut branches = Vec::new();
            for p in parts {
                let g = b.add(
                    "guarded",
                    Guarded {
                        inside: Arc::new(AtomicBool::new(false)),
                        overlaps: overlaps.clone(),
                        out: Emitter::new(0),
                    },
                );
                b.feed(p, g, 0);
                let gs = b.stream::<u64>(g, 0).unwrap();
                let m = b.map(gs, |x: u64| x + 1);
                branches.push(m);
            }
            let u = b.union(branches);
            let sorted = b.sort_by_key(u, |x: &u64| *x);
            let sink = b.collect(sorted);
            handles.push((b.build().unwrap().submit(&rt), sink, n));
        }
        for (h, sink, n) in handles {
            let out = h
                .wait()
                .unwrap_or_else(|e| panic!("{policy:?} on {preset}: {e}"));
            assert_eq!(
                out.take(&sink),
                (1..=n).collect::<Vec<_>>(),
                "{policy:?} on {preset}"
            );
            assert!(out.stats.conserved(), "{policy:?}: {:?}", out.stats);
            assert!(out.stats.bounded());
            assert_eq!(out.stats.concurrent_entries, 0);
            // A blocked producer holds at most the packets of one input packet per output.
            assert!(
                out.stats.max_pending_packets <= 6,
                "{}",
                out.stats.max_pending_packets
            );
        }
        assert_eq!(
            overlaps.load(Ordering::Relaxed),
            0,
            "an operator was entered twice at once"
        );
    }
    assert_eq!(nearflow_rt::live_requests(), 0);
}

#[test]
fn trace_records_operator_tasks() {
    let m = nearflow_topo::presets::build("e5310-smp").unwrap();
    let rt = Runtime::builder(m).trace(true).build().unwrap();
    let mut b = PlanBuilder::new();
    b.packet_bytes(128);
    let s = b.source(0..1000u64);
    let m = b.map(s, |x: u64| x + 1);
    b.collect(m);
    let h = b.build().unwrap().submit(&rt);
    let (names, req) = (h.names(), h.request_id());
    h.wait().unwrap();
    let ev = rt.take_trace();
    assert!(ev
        .iter()
        .all(|e| e.request == req && e.end_ns >= e.start_ns && e.worker < 8));
    let map_idx = names.iter().position(|n| n.starts_with("map")).unwrap() as u32;
    assert!(ev.iter().filter(|e| e.label == map_idx).count() >= 2);
    let mut nm = nearflow_flow::trace::Names::new();
    nm.add(req, names);
    let svg = nearflow_flow::trace::svg(&ev, 8, &nm, "test");
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert_eq!(svg.matches("<rect").count(), ev.len());
    assert!(svg.contains("map#1"));
}

/// A sink handle takes only from its own plan's output, once.
#[test]
fn a_sink_takes_from_its_own_plan_only() {
    let rt = runtime(PolicyKind::Las, "e5310-smp");
    let run = |v: Vec<u64>| {
        let mut b = PlanBuilder::new();
        let s = b.source(v);
        let sink = b.collect(s);
        (sink, b.build().unwrap().run(&rt).unwrap())
    };
    let (sink_a, out_a) = run(vec![1, 2, 3]);
    let (sink_b, out_b) = run(vec![7]);
    // Same slot index and type in both plans: each handle still reads its own plan.
    assert!(out_a.take(&sink_b).is_empty());
    assert_eq!(out_b.take(&sink_b), vec![7]);
    assert_eq!(out_a.take(&sink_a), vec![1, 2, 3]);
    assert!(out_a.take(&sink_a).is_empty());
    assert!(out_b.take(&sink_a).is_empty());
}

/// An operator with a home has its deferred tasks (a source's start and reschedules) queued for
/// that home: the runtime counts them as homed; without a home, none is.
#[test]
fn a_homed_source_runs_its_deferred_tasks_as_homed() {
    let machine = nearflow_topo::presets::build("nehalem-2x4").unwrap();
    let rt = nearflow_rt::Runtime::builder(machine.clone())
        .build()
        .unwrap();
    let run = |home: Option<usize>| {
        let before = rt.counters().homed();
        let mut b = PlanBuilder::for_runtime(&rt);
        b.packet_bytes(64);
        let src = b.generate(1_000, |i| i);
        if let Some(node) = home {
            let id = src.operator();
            b.home(id, nearflow_rt::Home::node(&machine, node).unwrap());
        }
        let sink = b.collect(src);
        let out = b.build().unwrap().run(&rt).unwrap();
        assert_eq!(out.take(&sink).len(), 1_000);
        let after = rt.counters().homed();
        (after.0 + after.1) - (before.0 + before.1)
    };
    assert_eq!(run(None), 0);
    // 1000 u64s in 64-byte packets: the source reschedules itself many times, all homed.
    assert!(run(Some(1)) > 10);
}

/// `Plan::shape` lists the operators and their connections, and `PlanStats::sends` tells an
/// operator that produces while its input is open (map) from one that produces only after it
/// ended (sort): what the simulator's calibration reads.
#[test]
fn shape_and_sends_describe_the_plan() {
    let rt = runtime(PolicyKind::Las, "e5310-smp");
    let mut b = PlanBuilder::new();
    b.packet_bytes(256);
    let s = b.source(0u64..5000);
    let m = b.map(s, |x: u64| x ^ 1);
    let sorted = b.sort_by_key(m, |x: &u64| *x);
    b.collect(sorted);
    let plan = b.build().unwrap();
    let shape = plan.shape();
    assert_eq!(shape.operators.len(), 4);
    let (src, map, sort) = (
        &shape.operators[0],
        &shape.operators[1],
        &shape.operators[2],
    );
    assert!(src.fed_by.is_empty() && src.feeds == vec![(1, 0)]);
    assert_eq!(
        (map.fed_by.clone(), map.feeds.clone()),
        (vec![(0, 0)], vec![(2, 0)])
    );
    assert_eq!(sort.output_tuple_bytes, vec![8]);
    let out = plan.run(&rt).unwrap();
    let sends = &out.stats.sends;
    assert!(
        sends[0].while_inputs_open > 1,
        "a source counts as open: {sends:?}"
    );
    assert!(sends[1].while_inputs_open > 1, "map: {sends:?}");
    assert_eq!(sends[2].while_inputs_open, 0, "sort: {sends:?}");
    assert!(sends[2].after_inputs_closed > 1, "sort: {sends:?}");
    assert_eq!(sends[3], Default::default(), "collect sends nothing");
}
