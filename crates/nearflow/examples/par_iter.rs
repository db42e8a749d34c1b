//! Parallel iterators with rayon's names: over a range, a `Vec` by reference and by value,
//! chunks, and a `SplittableData` whose partitions each run on their own NUMA node.
//!
//! `cargo run --release -p nearflow --example par_iter`

use nearflow::prelude::*;
use nearflow::{presets, Runtime, SplitBy, SplittableData};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // On the global runtime (this machine).
    let primes = (2..50_000u64)
        .into_par_iter()
        .filter(|&n| (2..).take_while(|d| d * d <= n).all(|d| n % d != 0))
        .count();
    println!("primes below 50,000: {primes}");
    let words = vec!["parallel", "iterators", "keep", "their", "order"];
    let lens: Vec<usize> = words.par_iter().map(|w| w.len()).collect();
    println!("{words:?} -> {lens:?}");
    let longest = words.into_par_iter().max_by_key(|w| w.len());
    println!("longest: {longest:?}");
    let mut grid = vec![0u32; 64];
    grid.par_chunks_mut(8)
        .enumerate()
        .for_each(|(row, r)| r.iter_mut().for_each(|x| *x = row as u32));
    println!(
        "row sums: {:?}",
        grid.par_chunks(8)
            .map(|r| r.iter().sum::<u32>())
            .collect::<Vec<_>>()
    );

    // On a runtime of the 2-node Nehalem preset: data split per node, each partition's work
    // homed on its node.
    let machine = presets::build("nehalem-2x4")?;
    let rt = Runtime::builder(machine.clone()).build()?;
    let data = SplittableData::build(&machine, SplitBy::Node, |info| {
        (0..100_000u64)
            .map(|i| i + 100_000 * info.index as u64)
            .collect::<Vec<_>>()
    })?;
    let total: u64 = rt.install(|| data.par_iter().sum());
    let per_part: Vec<(usize, usize)> = rt.install(|| {
        data.par_partitions()
            .map(|(info, v)| (info.node, v.len()))
            .collect()
    });
    println!(
        "sum over {} partitions: {total}; (node, items): {per_part:?}",
        data.len()
    );
    Ok(())
}
