//! The simulator's invariants: every task runs once under every policy on every machine; one
//! PU with free memory gives makespan = Σ work; determinism per seed; remote reads follow homes.

use nearflow_policy::PolicyKind;
use nearflow_sim::workload::{self, PipelineSpec};
use nearflow_sim::{
    simulate, simulate_plan, AllocatorKind, Graph, Model, OpKind, OpModel, PlanModel, Report,
    RunOptions,
};
use nearflow_topo::{from_synthetic, presets, Machine};
use proptest::prelude::*;

const PRESETS: [&str; 5] = ["e5310-smp", "e7-4820", "e7540", "nehalem-2x4", "i7-2600"];

fn run(m: &Machine, p: PolicyKind, g: &Graph) -> Report {
    simulate(m, p, &Model::default(), g, AllocatorKind::Nearflow, 1)
        .unwrap_or_else(|e| panic!("{p} on {}: {e}", nearflow_sim::machine_name(m)))
}

fn check_complete(r: &Report, g: &Graph) {
    assert_eq!(
        r.tasks_run(),
        g.tasks.len() as u64,
        "{} {}",
        r.policy,
        r.machine
    );
    assert_eq!(
        r.rules.iter().map(|x| x.1).sum::<u64>(),
        g.tasks.len() as u64,
        "every task is found by exactly one rule: {} {}",
        r.policy,
        r.machine
    );
    assert!(r
        .request_done_ns
        .iter()
        .all(|&t| t > 0 && t <= r.makespan_ns));
    // Nobody can finish before the work divided over every PU.
    assert!(
        r.makespan_ns as f64 >= g.total_work_ns() / r.pus as f64 - 1.0,
        "{} {}: makespan {} < work {} / {} PUs",
        r.policy,
        r.machine,
        r.makespan_ns,
        g.total_work_ns(),
        r.pus
    );
}

#[test]
fn every_task_runs_once_under_every_policy_and_preset() {
    let graphs = [
        workload::fib(12, 200.0, 3).unwrap(),
        workload::fanout(500, 300.0, 4).unwrap(),
        workload::matmul(24, 1.0).unwrap(),
        workload::stress(5, 400, 500.0, 3).unwrap(),
    ];
    for name in PRESETS {
        let m = presets::build(name).unwrap();
        let pipe = workload::pipeline(&PipelineSpec {
            requests: 6,
            packets: 10,
            operators: 4,
            packet_bytes: 256 << 10,
            ns_per_byte: 0.2,
            homed_input: true,
            nodes: m.node_count(),
        })
        .unwrap();
        for p in PolicyKind::ALL {
            for g in graphs.iter().chain([&pipe]) {
                check_complete(&run(&m, p, g), g);
            }
        }
    }
}

#[test]
fn one_pu_and_free_memory_give_the_sum_of_the_work() {
    let m = from_synthetic("pack:1 l2:1(size=1MiB) core:1 pu:1").unwrap();
    let g = workload::stress(3, 300, 1000.0, 9).unwrap();
    for p in PolicyKind::ALL {
        let r = simulate(&m, p, &Model::free(), &g, AllocatorKind::Nearflow, 1).unwrap();
        let sum: f64 = g.tasks.iter().map(|t| t.work_ns.ceil()).sum();
        assert_eq!(r.makespan_ns as f64, sum, "{p}");
        assert_eq!(r.per_pu[0].utilisation, 1.0, "{p}");
    }
}

#[test]
fn runs_are_deterministic_per_seed() {
    let m = presets::build("e7-4820").unwrap();
    let g = workload::stress(8, 2000, 300.0, 5).unwrap();
    for p in [
        PolicyKind::Las,
        PolicyKind::RandomSteal,
        PolicyKind::Bobox2011,
    ] {
        let a = simulate(&m, p, &Model::default(), &g, AllocatorKind::Nearflow, 42).unwrap();
        let b = simulate(&m, p, &Model::default(), &g, AllocatorKind::Nearflow, 42).unwrap();
        assert_eq!(a.makespan_ns, b.makespan_ns, "{p}");
        assert_eq!(a.events, b.events, "{p}");
        assert_eq!(a.rules, b.rules, "{p}");
    }
}

/// On one node nothing is remote. On a 4-node machine, 16 requests whose input is on node 0 are
/// run by all four nodes, so most first reads are remote; with each request's input on its own
/// node and LAS, none are (its packets are spawned homed, and consumers run where the producer
/// wrote); the system allocator puts written packets anywhere.
#[test]
fn remote_reads_follow_homes() {
    let one = presets::build("e5310-smp").unwrap();
    let four = presets::build("e7-4820").unwrap();
    let g = workload::matmul(64, 1.0).unwrap();
    assert_eq!(run(&one, PolicyKind::Las, &g).dram_remote_share, 0.0);
    let spec = |homed_input| PipelineSpec {
        requests: 16,
        packets: 64,
        operators: 3,
        packet_bytes: 128 << 10,
        ns_per_byte: 0.5,
        homed_input,
        nodes: 4,
    };
    let on_node_0 = workload::pipeline(&spec(false)).unwrap();
    for p in [PolicyKind::Las, PolicyKind::Nls] {
        let r = run(&four, p, &on_node_0);
        assert!(r.utilisation() > 0.5, "{p}: {}", r.utilisation());
        assert!(r.dram_remote_share > 0.3, "{p}: {}", r.dram_remote_share);
    }
    let homed = workload::pipeline(&spec(true)).unwrap();
    assert_eq!(run(&four, PolicyKind::Las, &homed).dram_remote_share, 0.0);
    let sys = simulate(
        &four,
        PolicyKind::FifoRr,
        &Model::default(),
        &homed,
        AllocatorKind::System,
        1,
    )
    .unwrap();
    assert!(sys.dram_remote_bytes > 0);
}

/// A missing node or a bad graph is an error, not a panic.
#[test]
fn bad_workloads_are_errors() {
    let m = presets::build("nehalem-2x4").unwrap();
    let g = workload::pipeline(&PipelineSpec {
        requests: 4,
        packets: 2,
        operators: 1,
        packet_bytes: 1024,
        ns_per_byte: 1.0,
        homed_input: true,
        nodes: 4,
    })
    .unwrap();
    let e = simulate(
        &m,
        PolicyKind::Las,
        &Model::default(),
        &g,
        AllocatorKind::Nearflow,
        1,
    )
    .unwrap_err();
    assert!(e.to_string().contains("node 2"), "{e}");
    let mut g = workload::fanout(3, 1.0, 1).unwrap();
    g.roots.clear();
    assert!(simulate(
        &m,
        PolicyKind::Las,
        &Model::default(),
        &g,
        AllocatorKind::Nearflow,
        1
    )
    .is_err());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    /// Random trees on random synthetic machines: every task runs once, under every policy.
    #[test]
    fn random_trees_complete(
        packs in 1usize..3, cores in 1usize..5, pus in 1usize..3, numa in any::<bool>(),
        requests in 1u32..6, tasks in 1u32..300, seed in any::<u64>(), policy in 0usize..7,
    ) {
        let desc = if numa {
            format!("pack:{packs} [numa] l3:1(size=4MiB) l2:{cores}(size=256KiB) core:1 pu:{pus}")
        } else {
            format!("pack:{packs} l3:1(size=4MiB) l2:{cores}(size=256KiB) core:1 pu:{pus}")
        };
        let m = from_synthetic(&desc).unwrap();
        let g = workload::stress(requests, tasks, 400.0, seed).unwrap();
        let p = PolicyKind::ALL[policy];
        let r = simulate(&m, p, &Model::default(), &g, AllocatorKind::Nearflow, seed).unwrap();
        check_complete(&r, &g);
    }
}

/// source (100 packets, 2 per run) → filter (keeps half) → sort (blocking) → sink.
fn small_plan(buffer_packets: usize) -> PlanModel {
    let op = |name: &str,
              fed_by: Vec<(usize, usize)>,
              feeds: Vec<(usize, usize)>,
              kind,
              ns,
              out: Vec<f64>| OpModel {
        name: name.into(),
        tuple_bytes_out: vec![16; feeds.len()],
        fed_by,
        feeds,
        kind,
        ns_per_tuple: ns,
        out_per_in: out,
        input_bytes_per_tuple: 0.0,
        home: None,
        pu: None,
        state_bytes: 0,
        state_bytes_per_tuple: 0.0,
        lookup_bytes_per_tuple: 0.0,
    };
    PlanModel {
        name: "small".into(),
        operators: vec![
            op(
                "source",
                vec![],
                vec![(1, 0)],
                OpKind::Source {
                    packets: 100,
                    per_run: 2,
                },
                2.0,
                vec![4096.0],
            ),
            op(
                "filter",
                vec![(0, 0)],
                vec![(2, 0)],
                OpKind::Stream,
                1.0,
                vec![0.5],
            ),
            op(
                "sort",
                vec![(1, 0)],
                vec![(3, 0)],
                OpKind::Blocking,
                10.0,
                vec![1.0],
            ),
            op("sink", vec![(2, 0)], vec![], OpKind::Stream, 0.5, vec![]),
        ],
        buffer_packets,
        packet_bytes: 64 << 10,
        store: Default::default(),
    }
}

/// Every plan instance finishes under every policy and preset, with bounded buffers of one
/// packet too, and the work done is exactly the plan's: 409,600 tuples through the filter,
/// half of them through the sort and the sink.
#[test]
fn plans_finish_with_all_their_work() {
    let opts = RunOptions {
        alloc: AllocatorKind::Nearflow,
        seed: 1,
        traced: false,
    };
    let tuples = 100.0 * 4096.0;
    let per_request = tuples * 2.0 + tuples * 1.0 + tuples / 2.0 * 10.0 + tuples / 2.0 * 0.5;
    for name in PRESETS {
        let m = presets::build(name).unwrap();
        for buffers in [1, 4] {
            let plan = small_plan(buffers);
            for p in PolicyKind::ALL {
                let (r, _) = simulate_plan(&m, p, &Model::default(), &plan, 3, opts)
                    .unwrap_or_else(|e| panic!("{p} on {name}: {e}"));
                assert!(r.request_done_ns.iter().all(|&t| t > 0), "{p} on {name}");
                assert!(
                    (r.total_work_ns - 3.0 * per_request).abs() < 1.0,
                    "{p} on {name}: {}",
                    r.total_work_ns
                );
            }
        }
    }
    let mut bad = small_plan(4);
    bad.operators[1].fed_by = vec![(2, 0)];
    let m = presets::build("e5310-smp").unwrap();
    assert!(simulate_plan(&m, PolicyKind::Las, &Model::default(), &bad, 1, opts).is_err());
}

/// A source that reads a store partition moves that data from memory: every byte of it comes
/// from DRAM once at least (no one wrote it, so no cache holds it), the work does not change,
/// and on a one-node machine all of it is local.
#[test]
fn reading_sources_move_their_data_from_memory() {
    let opts = RunOptions {
        alloc: AllocatorKind::Nearflow,
        seed: 1,
        traced: false,
    };
    let dram = |r: &nearflow_sim::Report| r.dram_local_bytes + r.dram_remote_bytes;
    let data = 100 * 4096 * 8;
    for (name, home) in [("e7540", Some(1)), ("e5310-smp", Some(0)), ("e7540", None)] {
        let m = presets::build(name).unwrap();
        let plain = small_plan(4);
        let (base, _) =
            simulate_plan(&m, PolicyKind::Las, &Model::default(), &plain, 1, opts).unwrap();
        let mut reading = small_plan(4);
        reading.operators[0].input_bytes_per_tuple = 8.0;
        reading.operators[0].home = home;
        let (r, _) =
            simulate_plan(&m, PolicyKind::Las, &Model::default(), &reading, 1, opts).unwrap();
        assert!(dram(&r) >= data, "{name}: {} B from DRAM", dram(&r));
        assert!(
            (r.total_work_ns - base.total_work_ns).abs() < 1.0,
            "{name}: same work"
        );
        if m.node_count() == 1 {
            assert_eq!(r.dram_remote_bytes, 0, "{name}");
        }
    }
}

/// One task of request 0, its root homed on `root_home`, reading `blocks` blocks of 1 MiB homed
/// on `block_home` (in that order, a block read twice when its index repeats).
fn reader(reads: Vec<u32>, blocks: usize, block_home: usize, root_home: usize) -> Graph {
    Graph {
        name: "reader".into(),
        tasks: vec![nearflow_sim::workload::Task {
            request: 0,
            reads,
            ..Default::default()
        }],
        blocks: (0..blocks)
            .map(|_| nearflow_sim::workload::Block {
                bytes: 1 << 20,
                home: Some(block_home),
            })
            .collect(),
        roots: vec![(0, Some(root_home))],
    }
}

/// A task reading its blocks from memory streams once from their node, not once per block: alone
/// on the machine, its memory time grows with its blocks, not with their square (a stream
/// per block would share the bandwidth with the task's own later blocks), locally
/// and over a link.
#[test]
fn a_task_does_not_compete_with_itself_for_bandwidth() {
    let m = from_synthetic("pack:2 [numa] core:1 pu:1").unwrap();
    let one_reader = |blocks: usize, home: usize| -> u64 {
        let r = run(
            &m,
            PolicyKind::Las,
            &reader((0..blocks as u32).collect(), blocks, home, 0),
        );
        assert_eq!(r.tasks_run(), 1);
        r.makespan_ns
    };
    for home in [0, 1] {
        for k in [8, 32] {
            let (a, b) = (one_reader(k, home), one_reader(2 * k, home));
            let ratio = b as f64 / a as f64;
            assert!(
                (1.9..=2.1).contains(&ratio),
                "home {home}: {k} blocks {a} ns, {} blocks {b} ns ({ratio:.2}x)",
                2 * k
            );
        }
    }
}

/// The two remote shares, each what its name says: a task that reads one remote block twice
/// reads it once from the other node's memory and once from its cache, so every DRAM byte was
/// remote but only half of what it read (the one share counted DRAM reads
/// alone, so a policy that kept data in its caches looked more remote).
#[test]
fn remote_shares_count_dram_reads_and_all_reads() {
    let m = from_synthetic("pack:2 [numa] l3:1(size=8MiB) core:1 pu:1").unwrap();
    let r = run(&m, PolicyKind::Las, &reader(vec![0, 0], 1, 1, 0));
    // The root is homed on node 0 and runs there (the simulator is deterministic per seed).
    assert_eq!(r.dram_remote_bytes, 1 << 20);
    assert_eq!(r.dram_remote_share, 1.0);
    assert_eq!(r.read_remote_share, 0.5);
}

/// A remote read pays the NUMA factor once: as the core's slower rate (a latency ratio) or as
/// the link's share, whichever is slower, not both (the time was the
/// link-limited time times the factor).
#[test]
fn a_remote_read_pays_the_numa_factor_once() {
    let m = presets::build("e7540").unwrap();
    let factor = {
        let raw = m.numa_raw().unwrap();
        raw[0][1] as f64 / raw[0][0] as f64
    };
    // Blocks homed on node 1, read by the root homed on node 0, and by one homed on node 1.
    let reader = |root_home: usize| Graph {
        name: "reader".into(),
        tasks: vec![nearflow_sim::workload::Task {
            request: 0,
            reads: (0..8).collect(),
            ..Default::default()
        }],
        blocks: (0..8)
            .map(|_| nearflow_sim::workload::Block {
                bytes: 1 << 20,
                home: Some(1),
            })
            .collect(),
        roots: vec![(0, Some(root_home))],
    };
    let time = |model: &Model, home: usize| {
        let r = simulate(
            &m,
            PolicyKind::Las,
            model,
            &reader(home),
            AllocatorKind::Nearflow,
            1,
        )
        .unwrap();
        assert_eq!(r.dram_remote_bytes > 0, home != 1);
        r.makespan_ns as f64
    };
    let mut core_bound = Model::free();
    core_bound.core_dram_bw = 4.0;
    let (local, remote) = (time(&core_bound, 1), time(&core_bound, 0));
    assert!(
        (remote / local - factor).abs() < 0.02,
        "{remote} / {local} vs {factor}"
    );
    let mut link_bound = core_bound.clone();
    link_bound.link_bw = 1.0;
    let remote = time(&link_bound, 0);
    let link_time = 8.0 * (1u64 << 20) as f64 / 1.0;
    assert!(
        (remote / link_time - 1.0).abs() < 0.02,
        "{remote} vs {link_time}"
    );
}

/// A join node (`Task::joins`) runs once, after the last of the tasks that spawn it.
#[test]
fn a_join_node_runs_once_after_its_predecessors() {
    use nearflow_policy::TaskKind;
    use nearflow_sim::workload::{Spawn, Task};
    let t = |work_ns: f64, spawns: Vec<u32>, joins: u32| Task {
        request: 0,
        work_ns,
        spawns: spawns
            .into_iter()
            .map(|c| Spawn {
                task: c,
                kind: TaskKind::Immediate,
                home: None,
                pu: None,
            })
            .collect(),
        joins,
        ..Task::default()
    };
    // 0 forks 1 (long) and 2 (short); both spawn 3, the join node, which spawns 4.
    let g = Graph {
        name: "join".into(),
        tasks: vec![
            t(100.0, vec![1, 2], 0),
            t(50_000.0, vec![3], 0),
            t(1_000.0, vec![3], 0),
            t(500.0, vec![4], 2),
            t(100.0, vec![], 0),
        ],
        blocks: vec![],
        roots: vec![(0, None)],
    };
    let m = presets::build("e5310-smp").unwrap();
    for p in PolicyKind::ALL {
        let (r, spans) =
            nearflow_sim::simulate_traced(&m, p, &Model::default(), &g, AllocatorKind::Nearflow, 1)
                .unwrap();
        check_complete(&r, &g);
        let span = |task: u32| {
            let s: Vec<_> = spans.iter().filter(|s| s.task == task).collect();
            assert_eq!(s.len(), 1, "{p}: task {task} ran {} times", s.len());
            (s[0].start_ns, s[0].end_ns)
        };
        let (_, end1) = span(1);
        let (_, end2) = span(2);
        let (start3, end3) = span(3);
        assert!(
            start3 >= end1.max(end2),
            "{p}: the join started before its predecessors ended"
        );
        assert!(span(4).0 >= end3, "{p}");
    }
    // A join node spawned by fewer tasks than it waits for is refused.
    let mut bad = g.clone();
    bad.tasks[2].spawns.clear();
    assert!(bad.validate().is_err());
}

#[test]
fn a_join_side_taken_back_by_its_spawner_costs_a_call() {
    use nearflow_policy::TaskKind;
    use nearflow_sim::workload::{Spawn, Task};
    // A chain of 100 tasks, each spawning the next immediate, on one PU: every child is taken
    // back from the spawner's own queue.
    let chain = |call: bool| Graph {
        name: "chain".into(),
        tasks: (0..100u32)
            .map(|i| Task {
                work_ns: 1_000.0,
                spawns: (i < 99)
                    .then(|| Spawn {
                        task: i + 1,
                        kind: TaskKind::Immediate,
                        home: None,
                        pu: None,
                    })
                    .into_iter()
                    .collect(),
                call: call && i > 0,
                ..Task::default()
            })
            .collect(),
        blocks: vec![],
        roots: vec![(0, None)],
    };
    let m = from_synthetic("core:1 pu:1").unwrap();
    let model = Model {
        task_ns: 45.0,
        call_ns: 5.0,
        ..Model::free()
    };
    for p in [PolicyKind::Las, PolicyKind::Nls] {
        let ms = |g: &Graph| {
            let r = simulate(&m, p, &model, g, AllocatorKind::Nearflow, 1).unwrap();
            check_complete(&r, g);
            r.makespan_ns
        };
        // The root is a task; the 99 join sides are calls.
        assert_eq!(ms(&chain(true)), 100_000 + 45 + 99 * 5, "{p}");
        // Unmarked, every one is a task.
        assert_eq!(ms(&chain(false)), 100_000 + 100 * 45, "{p}");
    }
}

/// One seeded, untraced run with the nearflow allocator.
const PLAN_OPTS: RunOptions = RunOptions {
    alloc: AllocatorKind::Nearflow,
    seed: 1,
    traced: false,
};

/// Every byte a run read, from any cache or memory.
fn bytes_read(r: &Report) -> u64 {
    r.levels.iter().map(|l| l.hit_bytes).sum::<u64>() + r.dram_local_bytes + r.dram_remote_bytes
}

/// An operator's state: read by the pages its tuples touch when a tuple
/// touches part of it (a hash table), all of it every run otherwise (a window), and all of it
/// when a blocking operator emits from it.
#[test]
fn state_is_read_by_the_pages_its_tuples_touch() {
    let (opts, read) = (PLAN_OPTS, bytes_read);
    let m = presets::build("e7-4820").unwrap();
    let run = |plan: &PlanModel| {
        let (r, _) = simulate_plan(&m, PolicyKind::Las, &Model::default(), plan, 1, opts).unwrap();
        read(&r)
    };
    let base = run(&small_plan(4));
    // The filter takes 409,600 tuples; 64 B of its state each.
    let touched = 409_600 * 64;
    let filter = |state: u64, per_tuple: f64| {
        let mut p = small_plan(4);
        p.operators[1].state_bytes = state;
        p.operators[1].state_bytes_per_tuple = per_tuple;
        run(&p) - base
    };
    let big = filter(1 << 30, 64.0);
    assert!(
        big >= touched && big <= 2 * touched,
        "1 GiB of state, 64 B a tuple: {big} B read for {touched} B touched"
    );
    let per_tuple = filter(8 << 20, 64.0);
    let whole = filter(8 << 20, 0.0);
    assert!(per_tuple <= 2 * touched, "{per_tuple}");
    assert!(
        whole > 4 * per_tuple,
        "a window read whole every run ({whole} B) against pages touched ({per_tuple} B)"
    );
    // The sort emits from its state: all of it is read at least once.
    let mut sort = small_plan(4);
    sort.operators[2].state_bytes = 64 << 20;
    sort.operators[2].state_bytes_per_tuple = 64.0;
    assert!(run(&sort) - base >= 64 << 20);
}

/// An index join's lookups read the plan's store: about the bytes its
/// tuples look up, from the nodes the store is split over; with replicas, from the reader's
/// own node.
#[test]
fn lookups_read_the_store_where_it_lies() {
    let (opts, read) = (PLAN_OPTS, bytes_read);
    let m = presets::build("e7540").unwrap();
    let run = |plan: &PlanModel| {
        simulate_plan(&m, PolicyKind::Las, &Model::default(), plan, 2, opts)
            .unwrap()
            .0
    };
    let base = run(&small_plan(4));
    let lookups = |nodes: Vec<usize>| {
        let mut p = small_plan(4);
        p.operators[1].lookup_bytes_per_tuple = 76.0;
        p.store = nearflow_sim::StoreModel {
            bytes: 256 << 20,
            nodes,
        };
        run(&p)
    };
    let split = lookups(vec![0, 1, 2, 3]);
    // Two requests' filters take 409,600 tuples each.
    let looked_up = 2 * 409_600 * 76;
    let extra = read(&split) - read(&base);
    assert!(
        extra >= looked_up && extra <= 2 * looked_up,
        "{extra} B read for {looked_up} B looked up"
    );
    assert!(split.dram_remote_bytes > base.dram_remote_bytes + looked_up / 2);
    let replicated = lookups(Vec::new());
    assert!(
        replicated.dram_remote_bytes < split.dram_remote_bytes / 2,
        "replicas are read locally: {} against {}",
        replicated.dram_remote_bytes,
        split.dram_remote_bytes
    );
    // A store on a node the machine lacks is an error, not a panic.
    let mut beyond = small_plan(4);
    beyond.operators[1].lookup_bytes_per_tuple = 76.0;
    beyond.store = nearflow_sim::StoreModel {
        bytes: 1 << 20,
        nodes: vec![0, 9],
    };
    assert!(simulate_plan(&m, PolicyKind::Las, &Model::default(), &beyond, 1, opts).is_err());
}
