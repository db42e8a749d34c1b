//! The engine's packet buffers come from the runtime's allocator (LAS paper §5, §6.4): from the
//! nearflow allocator when the runtime is built with it (the default), from the system
//! allocator otherwise. This test program installs `nearflow_alloc::Nearflow` as its global
//! allocator, as the `nearflow` binary does.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use nearflow_flow::{FlowError, Io, Operator, PlanBuilder, PortType, Status};
use nearflow_rt::{AllocatorKind, Runtime};

#[global_allocator]
static A: nearflow_alloc::Nearflow = nearflow_alloc::Nearflow;

/// Counts packets by the allocator that made them, and sums and counts their values. It keeps
/// nothing: the only large blocks a run allocates are its packets.
struct Probe {
    ours: Arc<AtomicU64>,
    system: Arc<AtomicU64>,
    values: Arc<AtomicU64>,
    sum: Arc<AtomicU64>,
}

impl Operator for Probe {
    fn inputs(&self) -> Vec<PortType> {
        vec![PortType::of::<u64>()]
    }
    fn outputs(&self) -> Vec<PortType> {
        Vec::new()
    }
    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        while !io.blocked() {
            match io.recv::<u64>(0) {
                Some(p) => {
                    // A packet knows its size and where its buffer lives.
                    assert!(p.bytes() >= p.len() * 8);
                    let ours = nearflow_alloc::GLOBAL.owns(p.as_ptr().cast());
                    assert_eq!(p.node().is_some(), ours, "Packet::node against owns");
                    let c = if ours { &self.ours } else { &self.system };
                    c.fetch_add(1, Ordering::Relaxed);
                    self.values.fetch_add(p.len() as u64, Ordering::Relaxed);
                    let sum = p.into_iter().fold(0u64, u64::wrapping_add);
                    self.sum.fetch_add(sum, Ordering::Relaxed);
                }
                None if io.finished::<u64>(0) => return Ok(Status::Done),
                None => return Ok(Status::Idle),
            }
        }
        Ok(Status::Idle)
    }
}

/// The tests of this file read the process-wide allocator's counters: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn run(allocator: AllocatorKind) -> (u64, u64) {
    run_on(
        "pack:1 l3:1(size=8MiB) l2:2(size=256KiB) core:1 pu:1",
        allocator,
        Some(64 << 10), // 8192 u64 per packet: in the 8–512 KiB range
        200_000,
    )
}

fn run_on(synthetic: &str, allocator: AllocatorKind, packet: Option<usize>, n: u64) -> (u64, u64) {
    let machine = nearflow_topo::from_synthetic(synthetic).expect("a valid synthetic topology");
    let rt = Runtime::builder(machine)
        .allocator(allocator)
        .build()
        .unwrap();
    assert_eq!(rt.allocator_in_effect(), allocator);
    let counter = || Arc::new(AtomicU64::new(0));
    let (ours, system, values, sum) = (counter(), counter(), counter(), counter());
    let mut b = PlanBuilder::for_runtime(&rt);
    if let Some(bytes) = packet {
        b.packet_bytes(bytes);
    }
    let s = b.source(0..n);
    let p = b.add(
        "probe",
        Probe {
            ours: ours.clone(),
            system: system.clone(),
            values: values.clone(),
            sum: sum.clone(),
        },
    );
    b.connect(s.operator(), 0, p, 0).unwrap();
    let plan = b.build().unwrap();
    plan.submit(&rt).wait().unwrap();
    assert_eq!(values.load(Ordering::Relaxed), n);
    assert_eq!(sum.load(Ordering::Relaxed), (n - 1) * n / 2);
    (ours.load(Ordering::Relaxed), system.load(Ordering::Relaxed))
}

#[test]
fn packets_follow_the_runtime_allocator() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let (ours, system) = run(AllocatorKind::Nearflow);
    assert!(
        ours >= 24 && system == 0,
        "nearflow runtime: {ours} ours, {system} system"
    );
    let (ours, system) = run(AllocatorKind::System);
    assert!(
        ours == 0 && system >= 24,
        "system runtime: {ours} ours, {system} system"
    );
}

/// On machines with 2 MiB and 4 MiB of L2 the default packet is 1 MiB and 2 MiB, above the
/// sub-allocators' 512 KiB: the allocator's large tier serves them from its thread and node
/// caches, so after the first run packets need new mappings (a system call and page faults) only
/// when more of them are alive at once than ever before, or when blocks wait in the cache of a
/// worker's heap that the next runtime's workers do not adopt: a few, not one per packet (without
/// the tier, 96 packets took 220 mappings). Under load, 0–9 new mappings for 192 packets were
/// seen; the bound is one per 8 packets. The probe keeps no values, so packets are the only large
/// blocks a run allocates (a collecting sink's growing vector would add blocks of other sizes,
/// and the misses they cause evict cached packets).
#[test]
fn large_packets_are_reused_without_new_mappings() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    for (l2, packet) in [("2MiB", 1usize << 20), ("4MiB", 2 << 20)] {
        let synthetic = format!("pack:1 l3:1(size=32MiB) l2:2(size={l2}) core:1 pu:1");
        let machine = nearflow_topo::from_synthetic(&synthetic).unwrap();
        assert_eq!(nearflow_flow::default_packet_bytes(&machine), packet);
        let n = (24 * packet / 8) as u64; // 24 packets of u64 from the source
        let (first, _) = run_on(&synthetic, AllocatorKind::Nearflow, None, n);
        assert!(first >= 24, "{l2}: {first} packets from the allocator");
        let before = nearflow_alloc::GLOBAL.stats();
        let mut packets = 0;
        for _ in 0..8 {
            let (ours, system) = run_on(&synthetic, AllocatorKind::Nearflow, None, n);
            assert_eq!(system, 0);
            packets += ours;
        }
        let after = nearflow_alloc::GLOBAL.stats();
        let mapped = after.large_mapped - before.large_mapped;
        assert!(
            mapped as u64 * 8 <= packets && packets >= 192,
            "{l2}: {mapped} new large mappings for {packets} packets of {packet} bytes \
             (stats before {before:?}, after {after:?})"
        );
    }
}

/// Records the length of every packet it receives.
struct Lengths {
    seen: Arc<std::sync::Mutex<Vec<usize>>>,
}

impl Operator for Lengths {
    fn inputs(&self) -> Vec<PortType> {
        vec![PortType::of::<u64>()]
    }
    fn outputs(&self) -> Vec<PortType> {
        Vec::new()
    }
    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        while let Some(p) = io.recv::<u64>(0) {
            self.seen.lock().unwrap().push(p.len());
        }
        if io.finished::<u64>(0) {
            return Ok(Status::Done);
        }
        Ok(Status::Idle)
    }
}

/// With `first_packet_bytes`, an emitter's packets start at that size and double up to the
/// plan's packet size; every value still arrives once. Without it, every packet but the last is
/// full.
#[test]
fn first_packets_are_small_and_double_up_to_the_packet_size() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let machine = nearflow_topo::from_synthetic("pack:1 core:2 pu:1").unwrap();
    let rt = Runtime::builder(machine).build().unwrap();
    let lengths = |first: Option<usize>| {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut b = PlanBuilder::for_runtime(&rt);
        b.packet_bytes(64 << 10); // 8192 u64
        if let Some(f) = first {
            b.first_packet_bytes(f);
        }
        let s = b.source(0..100_000u64);
        let l = b.add("lengths", Lengths { seen: seen.clone() });
        b.connect(s.operator(), 0, l, 0).unwrap();
        b.build().unwrap().submit(&rt).wait().unwrap();
        let v = seen.lock().unwrap().clone();
        assert_eq!(v.iter().sum::<usize>(), 100_000);
        v
    };
    let grown = lengths(Some(1024));
    assert_eq!(
        grown[..7],
        [128, 256, 512, 1024, 2048, 4096, 8192],
        "{grown:?}"
    );
    assert!(
        grown[7..grown.len() - 1].iter().all(|&n| n == 8192),
        "{grown:?}"
    );
    let full = lengths(None);
    assert!(
        full[..full.len() - 1].iter().all(|&n| n == 8192),
        "{full:?}"
    );
    // A first packet larger than the packet size is the packet size.
    let capped = lengths(Some(1 << 20));
    assert!(
        capped[..capped.len() - 1].iter().all(|&n| n == 8192),
        "{capped:?}"
    );
}

/// Passes on every thousandth value through an [`Emitter`], going idle (and telling the
/// emitter so) whenever its input runs dry before it has ended.
struct Sparse {
    out: nearflow_flow::Emitter<u64>,
}

impl Operator for Sparse {
    fn inputs(&self) -> Vec<PortType> {
        vec![PortType::of::<u64>()]
    }
    fn outputs(&self) -> Vec<PortType> {
        vec![PortType::of::<u64>()]
    }
    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        while let Some(p) = io.recv::<u64>(0) {
            for v in p {
                if v % 1000 == 0 {
                    self.out.push(io, v);
                }
            }
        }
        if io.finished::<u64>(0) {
            self.out.flush(io);
            return Ok(Status::Done);
        }
        self.out.idle(io);
        Ok(Status::Idle)
    }
}

/// While packets grow, an operator that runs out of input sends the rows it holds at once (so
/// the first rows a limit wants are not kept until more input fills the packet); with full-size
/// packets it keeps them until the packet is full or its input ends. On one PU with one packet
/// a buffer, the source's first packet (0..128) reaches the filter alone, and the filter goes
/// idle after it.
#[test]
fn a_growing_packet_is_sent_when_its_operator_goes_idle() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let machine = nearflow_topo::from_synthetic("pack:1 core:1 pu:1").unwrap();
    let rt = Runtime::builder(machine).build().unwrap();
    let lengths = |first: Option<usize>| {
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut b = PlanBuilder::for_runtime(&rt);
        b.packet_bytes(64 << 10); // 8192 u64
        b.buffer_packets(1);
        if let Some(f) = first {
            b.first_packet_bytes(f);
        }
        let s = b.source(0..100_000u64);
        let f = b.add(
            "sparse",
            Sparse {
                out: nearflow_flow::Emitter::new(0),
            },
        );
        b.connect(s.operator(), 0, f, 0).unwrap();
        let l = b.add("lengths", Lengths { seen: seen.clone() });
        b.connect(f, 0, l, 0).unwrap();
        b.build().unwrap().submit(&rt).wait().unwrap();
        let v = seen.lock().unwrap().clone();
        assert_eq!(v.iter().sum::<usize>(), 100, "{v:?}");
        v
    };
    let grown = lengths(Some(1024)); // 128 u64 first
    assert_eq!(grown[0], 1, "only 0 of 0..128 passes: {grown:?}");
    assert!(grown.len() > 2, "{grown:?}");
    assert_eq!(lengths(None), [100], "full-size packets are not sent early");
}
