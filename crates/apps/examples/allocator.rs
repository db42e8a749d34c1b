//! The NUMA-aware allocator as the program's global allocator: blocks of 8–512 KiB come from
//! per-thread local allocators on the thread's NUMA node, larger ones from the large tier, the
//! rest from the system allocator. `cargo run --release -p nearflow-apps --example allocator [BLOCKS]`

use nearflow_alloc::{Nearflow, GLOBAL};

#[global_allocator]
static ALLOCATOR: Nearflow = Nearflow;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let blocks: usize = std::env::args().nth(1).map_or(Ok(1_000), |s| s.parse())?;
    let threads: Vec<_> = (0..4)
        .map(|t| {
            std::thread::spawn(move || {
                // Packet-sized buffers, written and dropped on this thread.
                let mut sum = 0u64;
                for i in 0..blocks {
                    let v = vec![(t + i) as u8; 64 << 10];
                    assert!(GLOBAL.owns(v.as_ptr()), "a 64 KiB block is ours");
                    sum += u64::from(v[i % v.len()]);
                }
                sum
            })
        })
        .collect();
    let sums: Vec<u64> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let small: Vec<u8> = Vec::with_capacity(100);
    let s = GLOBAL.stats();
    println!(
        "{} blocks of 64 KiB on 4 threads (checksums {sums:?}); a 100-byte block is {}ours; \
         {} superblocks mapped, {} MiB",
        4 * blocks,
        if GLOBAL.owns(small.as_ptr()) {
            ""
        } else {
            "not "
        },
        s.superblocks,
        s.mapped_bytes >> 20
    );
    Ok(())
}
