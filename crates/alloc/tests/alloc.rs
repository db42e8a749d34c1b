//! Behaviour of the allocator through its public API: routing by size, C semantics, foreign
//! frees, thread exit, and a stress test that counts every block.

use std::collections::HashSet;
use std::sync::{mpsc, Arc, Mutex};

use nearflow_alloc::{AllocError, Allocator, Config, MAX_NODES};

/// A small configuration, so superblocks fill, empty and move between threads often.
fn small() -> &'static Allocator {
    Allocator::new(Config {
        min_block: 1024,
        max_block: 16 << 10,
        growth_permille: 1250,
        superblock_size: 256 << 10,
        cached_superblocks: 2,
        large_max: 256 << 10,
        node_reserve_bytes: 0,
        purge_delay_ms: 0,
    })
    .unwrap()
}

fn fill(p: *mut u8, len: usize, tag: u64) {
    // SAFETY: the tests own `len` bytes at `p`.
    unsafe {
        for i in (0..len - 16).step_by(512) {
            p.add(i).cast::<u64>().write_unaligned(tag ^ i as u64);
        }
        p.add(len - 8).cast::<u64>().write_unaligned(!tag);
    }
}

fn verify(p: *mut u8, len: usize, tag: u64) -> bool {
    // SAFETY: as in `fill`.
    unsafe {
        (0..len - 16)
            .step_by(512)
            .all(|i| p.add(i).cast::<u64>().read_unaligned() == tag ^ i as u64)
            && p.add(len - 8).cast::<u64>().read_unaligned() == !tag
    }
}

#[test]
fn routes_by_size_and_keeps_alignment() {
    let a = Allocator::new(Config::DEFAULT).unwrap();
    let small = a.alloc(100);
    assert!(
        !small.is_null() && !a.owns(small),
        "below 8 KiB: the system allocator"
    );
    for size in [8 << 10, (8 << 10) + 1, 100_000, 512 << 10] {
        let p = a.alloc(size);
        assert!(a.owns(p), "{size}: a sub-allocator");
        assert_eq!(p as usize % 64, 0);
        // SAFETY: a live block of ours.
        let usable = unsafe { a.usable_size(p) };
        assert!(usable >= size && (usable - size) as f64 / (usable as f64) < 0.071);
        fill(p, size, size as u64);
        assert!(verify(p, size, size as u64));
        // SAFETY: ours, unused.
        unsafe { a.free(p) };
    }
    let big = a.alloc((512 << 10) + 1);
    assert!(
        a.owns(big) && a.stats().large_blocks == 1,
        "above 512 KiB: its own mapping"
    );
    fill(big, (512 << 10) + 1, 9);
    // SAFETY: ours, unused.
    unsafe { a.free(big) };
    assert_eq!(a.stats().large_blocks, 0);
    let aligned = a.alloc_aligned(1 << 20, 1 << 16);
    assert_eq!(aligned as usize % (1 << 16), 0);
    // SAFETY: ours / the system's, unused.
    unsafe {
        a.free(aligned);
        a.free(small);
        a.free(std::ptr::null_mut());
    }
    assert!(
        a.alloc_aligned(100, 3).is_null(),
        "alignment must be a power of two"
    );
    assert_eq!(
        a.superblock_size(),
        10 << 20,
        "only GLOBAL reads the environment"
    );
    assert!(a.check_thread());
}

#[test]
fn calloc_and_realloc_follow_c() {
    let a = small();
    let p = a.alloc(2000);
    fill(p, 2000, 5);
    let p = unsafe { a.realloc(p, 2040) };
    assert!(
        verify(p, 2000, 5) || {
            // The block may have moved to a larger class; the first 2000 bytes must be kept.
            false
        }
    );
    let q = unsafe { a.realloc(p, 12 << 10) };
    assert!(a.owns(q) && verify(q, 2000, 5));
    let r = unsafe { a.realloc(q, 40 << 10) }; // beyond max_block: a large mapping
    assert!(verify(r, 2000, 5));
    let s = unsafe { a.realloc(r, 100) }; // back to the system allocator
    assert!(!a.owns(s));
    assert!(unsafe { a.realloc(s, 0) }.is_null());
    let z = a.calloc(3, 5000);
    // SAFETY: 15000 bytes.
    assert!(unsafe { std::slice::from_raw_parts(z, 15000) }
        .iter()
        .all(|&b| b == 0));
    unsafe { a.free(z) };
    assert!(a.calloc(usize::MAX, 2).is_null(), "overflow is refused");
    assert!(a.check_thread());
}

#[test]
fn allocate_on_node_and_its_errors() {
    let a = small();
    let p = a.alloc_on_node(3 << 20, 0).expect("node 0 exists");
    assert_eq!(a.node_of(p.as_ptr()), Some(0));
    fill(p.as_ptr(), 3 << 20, 1);
    unsafe { a.free(p.as_ptr()) };
    assert!(matches!(
        a.alloc_on_node(4096, MAX_NODES),
        Err(AllocError::NoSuchNode { .. })
    ));
    let nodes = nearflow_alloc::checks::nodes();
    let missing = nodes.iter().map(|n| n.0).max().unwrap() + 1;
    let e = a.alloc_on_node(4096, missing).unwrap_err();
    assert!(
        matches!(e, AllocError::NoSuchNode { node, .. } if node == missing),
        "{e}"
    );
    assert_eq!(
        a.stats().large_blocks,
        0,
        "nothing left behind by the failures"
    );
}

#[test]
fn placement_checks_pass_on_this_machine() {
    let a = Allocator::new(Config::DEFAULT).unwrap();
    let checks = nearflow_alloc::checks::run_all(a);
    assert!(checks.len() >= 4);
    for c in &checks {
        assert!(c.ok, "{c}");
    }
}

/// A thread allocates blocks and exits; another thread frees them afterwards. The exiting
/// thread's allocator is abandoned; the frees reclaim it, so every superblock ends up back at
/// the node and no block stays in a bin.
#[test]
fn blocks_of_an_exited_thread_are_reclaimed() {
    let a = small();
    let blocks: Vec<usize> = std::thread::spawn(move || {
        (0..200)
            .map(|i| {
                let p = a.alloc(1024 + i * 50);
                fill(p, 1024 + i * 50, i as u64);
                p as usize
            })
            .collect()
    })
    .join()
    .unwrap();
    let s = a.stats();
    assert_eq!(s.heaps_abandoned, 1);
    assert_eq!(s.used_blocks, 200);
    assert!(s.superblocks_in_heaps > 0);
    for (i, &p) in blocks.iter().enumerate() {
        assert!(verify(p as *mut u8, 1024 + i * 50, i as u64));
        // SAFETY: the exited thread's blocks, now ours to free.
        unsafe { a.free(p as *mut u8) };
    }
    let s = a.stats();
    assert_eq!(s.used_blocks, 0, "{s:?}");
    assert_eq!(
        s.superblocks_in_heaps, 0,
        "an abandoned allocator keeps nothing: {s:?}"
    );
    assert!(s.reclaims > 0);
    assert_eq!(
        s.superblocks, s.superblocks_cached,
        "no superblock lost: {s:?}"
    );
    assert!(a.check_abandoned());
    // A new thread adopts the abandoned allocator instead of making a new one.
    std::thread::spawn(move || {
        let p = a.alloc(4096);
        unsafe { a.free(p) };
    })
    .join()
    .unwrap();
    let s = a.stats();
    assert_eq!((s.heaps_created, s.heaps_adopted), (1, 1));
}

/// Many threads allocate, fill, pass half of their blocks to the next thread (foreign frees),
/// free the rest, and exit at different times. Every block handed out is checked to be unique
/// among the live ones and to keep its contents; at the end every block and superblock is
/// accounted for.
fn stress(a: &'static Allocator, threads: usize, rounds: usize, max: usize) {
    let live = Arc::new(Mutex::new(HashSet::<usize>::new()));
    let mut senders = Vec::new();
    let mut receivers = Vec::new();
    for _ in 0..threads {
        let (tx, rx) = mpsc::channel::<(usize, usize, u64)>();
        senders.push(tx);
        receivers.push(rx);
    }
    let mut handles = Vec::new();
    for (t, rx) in receivers.into_iter().enumerate() {
        let next = senders[(t + 1) % threads].clone();
        let live = live.clone();
        let min = a.config().min_block;
        handles.push(std::thread::spawn(move || {
            let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ t as u64;
            let mut rand = move || {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed
            };
            let mut mine: Vec<(usize, usize, u64)> = Vec::new();
            let mut freed = 0usize;
            let free = |(p, len, tag): (usize, usize, u64), live: &Mutex<HashSet<usize>>| {
                assert!(
                    verify(p as *mut u8, len, tag),
                    "block {p:#x} was overwritten"
                );
                assert!(live.lock().unwrap().remove(&p));
                // SAFETY: a live block handed to us.
                unsafe { a.free(p as *mut u8) };
            };
            // Threads stop at different rounds, so some exit while others still free their
            // blocks.
            let my_rounds = rounds / 2 + (t * rounds) / (2 * threads);
            for r in 0..my_rounds {
                let len = min + (rand() as usize) % (max - min);
                let p = a.alloc(len);
                assert!(!p.is_null());
                let tag = rand();
                fill(p, len, tag);
                assert!(
                    live.lock().unwrap().insert(p as usize),
                    "block {p:?} handed out twice"
                );
                mine.push((p as usize, len, tag));
                if r % 3 == 0 {
                    let i = rand() as usize % mine.len();
                    let b = mine.swap_remove(i);
                    if r % 2 == 0 {
                        let _ = next.send(b).map_err(|e| free(e.0, &live));
                    } else {
                        free(b, &live);
                        freed += 1;
                    }
                }
                while let Ok(b) = rx.try_recv() {
                    free(b, &live);
                }
                if r % 64 == 0 {
                    a.collect();
                    assert!(a.check_thread(), "invariants of thread {t}");
                }
            }
            for b in mine.drain(..) {
                free(b, &live);
            }
            assert!(a.check_thread());
            drop(next);
            // Whatever arrives after this thread stops allocating is freed as it comes.
            for b in rx {
                free(b, &live);
            }
            freed
        }));
    }
    drop(senders);
    for h in handles {
        h.join().unwrap();
    }
    assert!(live.lock().unwrap().is_empty());
    let s = a.stats();
    assert_eq!(s.used_blocks, 0, "every block returned to its owner: {s:?}");
    assert_eq!(s.superblocks_in_heaps, 0, "{s:?}");
    assert_eq!(
        s.superblocks, s.superblocks_cached,
        "no superblock lost: {s:?}"
    );
    assert_eq!(
        s.heaps_idle, s.heaps_created,
        "every thread's allocator abandoned: {s:?}"
    );
    assert!(a.check_abandoned());
}

#[test]
fn stress_small_superblocks() {
    stress(small(), 8, 4000, 16 << 10);
}

#[test]
fn stress_paper_settings() {
    let a = Allocator::new(Config::DEFAULT).unwrap();
    stress(a, 6, 1500, 512 << 10);
}

/// The pages under a set of blocks, and how many of them the kernel has backed (`mincore(2)`).
fn residency(blocks: &[(usize, usize)]) -> (usize, usize) {
    let mut pages: Vec<usize> = blocks
        .iter()
        .flat_map(|&(p, len)| (p & !4095..p + len).step_by(4096))
        .collect();
    pages.sort_unstable();
    pages.dedup();
    let resident = pages
        .iter()
        .filter(|&&page| {
            let mut v = [0u8; 1];
            // SAFETY: mincore reads the residency of one mapped page into `v`.
            let r = unsafe { libc::mincore(page as *mut libc::c_void, 4096, v.as_mut_ptr()) };
            assert_eq!(r, 0, "mincore: {}", std::io::Error::last_os_error());
            v[0] & 1 == 1
        })
        .count();
    (pages.len(), resident)
}

/// A thread writes and frees large blocks and superblocks, then exits: everything goes back to
/// the node. With no reserve and no delay, a purge gives every page back (the mappings stay and
/// are reused: no new mapping, zeros); with a long delay nothing is purged.
#[test]
fn node_caches_purge_pages_beyond_the_reserve() {
    for delay in [0u32, 3_600_000] {
        let a = Allocator::new(Config {
            max_block: 64 << 10,
            superblock_size: 1 << 20,
            large_max: 8 << 20,
            node_reserve_bytes: 0,
            purge_delay_ms: delay,
            ..Config::DEFAULT
        })
        .unwrap();
        let blocks = std::thread::spawn(move || {
            let mut v = Vec::new();
            for i in 0..6 {
                let s = 1 << 20; // large tier
                let p = a.alloc(s);
                fill(p, s, i);
                v.push((p as usize, s));
            }
            for i in 0..64 {
                let s = 64 << 10; // 15 per superblock: 5 superblocks
                let p = a.alloc(s);
                fill(p, s, i);
                v.push((p as usize, s));
            }
            for &(p, _) in &v {
                // SAFETY: ours, unused.
                unsafe { a.free(p as *mut u8) };
            }
            v
        })
        .join()
        .unwrap();
        let before = a.stats();
        assert_eq!(before.large_cached, 6, "{before:?}");
        assert!(before.superblocks_cached >= 5, "{before:?}");
        a.purge();
        let s = a.stats();
        let (all, resident) = residency(&blocks);
        if delay == 0 {
            assert!(s.purges >= 11, "{s:?}");
            assert_eq!(resident, 0, "every purged page is given back");
            let p = a.alloc(1 << 20);
            assert_eq!(
                a.stats().large_mapped,
                before.large_mapped,
                "reused, not mapped"
            );
            // SAFETY: 1 MiB of ours.
            assert!(unsafe { std::slice::from_raw_parts(p, 1 << 20) }
                .iter()
                .all(|&b| b == 0));
            // SAFETY: ours, unused.
            unsafe { a.free(p) };
        } else {
            assert_eq!(s.purges, 0, "{s:?}");
            assert_eq!(resident, all, "nothing purged before the delay");
        }
    }
}

/// A thread about to go idle gives its kept superblocks and cached large blocks back to the
/// node (`release_cached`); the sole superblock of each size stays.
#[test]
fn an_idle_thread_releases_what_it_keeps() {
    let a = Allocator::new(Config {
        max_block: 64 << 10,
        superblock_size: 1 << 20,
        large_max: 8 << 20,
        ..Config::DEFAULT
    })
    .unwrap();
    std::thread::spawn(move || {
        // Two or more superblocks of 64 KiB blocks (at most 15 each), then all freed: all kept.
        let blocks: Vec<*mut u8> = (0..30).map(|_| a.alloc(64 << 10)).collect();
        let large: Vec<*mut u8> = (0..3).map(|_| a.alloc(1 << 20)).collect();
        for p in blocks.into_iter().chain(large) {
            // SAFETY: ours, unused.
            unsafe { a.free(p) };
        }
        let before = a.stats();
        assert!(before.superblocks_in_heaps >= 2, "{before:?}");
        assert_eq!(before.large_cached, 0, "in the thread's cache: {before:?}");
        a.release_cached();
        let after = a.stats();
        assert_eq!(after.superblocks_in_heaps, 0, "{after:?}");
        assert_eq!(
            after.superblocks_cached,
            before.superblocks_cached + before.superblocks_in_heaps
        );
        assert_eq!(after.large_cached, 3, "{after:?}");
        assert!(a.check_thread());
        // One block: its superblock is the only one of its size and stays when it empties,
        // and when the thread goes idle.
        let p = a.alloc(64 << 10);
        // SAFETY: ours, unused.
        unsafe { a.free(p) };
        a.release_cached();
        assert_eq!(a.stats().superblocks_in_heaps, 1, "{:?}", a.stats());
        assert!(a.check_thread());
        // They are reused from the node, not mapped again.
        let p = a.alloc(1 << 20);
        assert_eq!(a.stats().large_mapped, before.large_mapped);
        // SAFETY: ours, unused.
        unsafe { a.free(p) };
    })
    .join()
    .unwrap();
}
