//! `Nearflow` as the global allocator of a whole test program: std collections, threads, and a
//! change of choice while blocks of both kinds are alive.

use nearflow_alloc::{set_thread_choice, AllocatorKind, Nearflow, GLOBAL};

#[global_allocator]
static A: Nearflow = Nearflow;

#[test]
fn std_collections_run_on_it() {
    let v: Vec<u8> = vec![7; 64 << 10];
    assert!(
        GLOBAL.owns(v.as_ptr()),
        "a 64 KiB Vec comes from the local allocator"
    );
    let small = Box::new([1u8; 100]);
    assert!(!GLOBAL.owns(small.as_ptr()));
    let mut grow: Vec<u64> = Vec::new();
    for i in 0..200_000u64 {
        grow.push(i); // reallocates through 8 KiB … 512 KiB and beyond
    }
    assert_eq!(grow.iter().sum::<u64>(), 199_999 * 200_000 / 2);
    let s: String = (0..50_000)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    assert_eq!(s.len(), 50_000);
    assert!(v.iter().all(|&b| b == 7));
}

#[test]
fn blocks_cross_threads_and_choices() {
    let handles: Vec<_> = (0..4)
        .map(|t| {
            std::thread::spawn(move || {
                if t % 2 == 1 {
                    set_thread_choice(AllocatorKind::System);
                }
                (0..100)
                    .map(|i| vec![t as u8; 8192 + i * 1000])
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let all: Vec<Vec<Vec<u8>>> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    for (t, vs) in all.iter().enumerate() {
        for v in vs {
            assert_eq!(GLOBAL.owns(v.as_ptr()), t % 2 == 0);
            assert!(v.iter().all(|&b| b == t as u8));
        }
    }
    // Freed here, on another thread, under the default choice: each block goes to its maker.
    drop(all);
    GLOBAL.collect();
    assert!(GLOBAL.check_thread());
}
