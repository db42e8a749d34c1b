//! A wait inside a task helps instead of blocking: requests that each wait for an inner
//! request, eight levels deep, four at once, on two workers (this hung before `join.rs`).
//!
//! `cargo run --release -p nearflow --example nested`

use nearflow::{from_synthetic, Runtime};

fn level(rt: &'static Runtime, depth: u32) -> u64 {
    if depth == 0 {
        return (1..=1000u64).sum();
    }
    // Submitted and waited for from inside a task: the worker runs other tasks meanwhile.
    rt.submit(move |_| level(rt, depth - 1))
        .wait()
        .expect("the inner request")
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rt: &'static Runtime = Box::leak(Box::new(
        Runtime::builder(from_synthetic("core:2 pu:1")?).build()?,
    ));
    let outer: Vec<_> = (0..4).map(|_| rt.submit(move |_| level(rt, 8))).collect();
    for h in outer {
        println!("{}", h.wait()?);
    }
    Ok(())
}
