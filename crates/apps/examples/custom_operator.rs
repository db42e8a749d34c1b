//! An operator written by hand: declare its ports, then move packets in `run`.
//! `cargo run --release -p nearflow-apps --example custom_operator [ROWS]`
//!
//! `RunningMax` emits, for each input tuple, the largest value seen so far. It keeps its state
//! between runs (the engine runs an operator on one thread at a time), stops as soon as its
//! output is blocked (backpressure), and finishes when its input has ended.

use nearflow_flow::ops::{example_runtime, Emitter};
use nearflow_flow::{FlowError, Io, Operator, PlanBuilder, PortType, Status};

struct RunningMax {
    max: u64,
    out: Emitter<u64>,
}

impl Operator for RunningMax {
    fn inputs(&self) -> Vec<PortType> {
        vec![PortType::of::<u64>()]
    }

    fn outputs(&self) -> Vec<PortType> {
        vec![PortType::of::<u64>()]
    }

    fn run(&mut self, io: &mut Io<'_>) -> Result<Status, FlowError> {
        while !io.blocked() {
            let Some(packet) = io.recv::<u64>(0) else {
                break;
            };
            for x in packet {
                self.max = self.max.max(x);
                self.out.push(io, self.max);
            }
        }
        if io.finished::<u64>(0) {
            self.out.flush(io);
            return Ok(Status::Done);
        }
        Ok(Status::Idle)
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rows: u64 = std::env::args().nth(1).map_or(Ok(100_000), |s| s.parse())?;
    let rt = example_runtime();
    let mut b = PlanBuilder::for_runtime(&rt);
    let xs = b.generate(rows, |i| (i * 7919) % 1_000_003);
    let op = b.add(
        "running_max",
        RunningMax {
            max: 0,
            out: Emitter::new(0),
        },
    );
    b.feed(xs, op, 0);
    let maxes = b.stream::<u64>(op, 0)?;
    let sink = b.collect(maxes);
    let out = b.build()?.run(&rt)?;
    let got = out.take(&sink);
    assert_eq!(got.len() as u64, rows);
    assert!(
        got.windows(2).all(|w| w[0] <= w[1]),
        "a running maximum never decreases"
    );
    println!(
        "{rows} rows, final maximum {}, {} packets moved",
        got.last().copied().unwrap_or(0),
        out.stats.packets()
    );
    Ok(())
}
