//! Placement checks: are the allocator's pages where §5.2 says they are? Asks the kernel with
//! `move_pages(2)` (no move, status only). Used by the tests, by `nearflow check placement` and
//! inside the two-node guest of `scripts/numa-vm-test.sh`.

use std::fmt;

use crate::os::{self, PAGE};
use crate::Allocator;

/// One check's outcome.
#[derive(Clone, Debug)]
pub struct Check {
    /// What was checked.
    pub name: String,
    /// Whether it held.
    pub ok: bool,
    /// Figures behind the verdict.
    pub detail: String,
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = if self.ok { "PASS" } else { "FAIL" };
        write!(f, "{v} {}: {}", self.name, self.detail)
    }
}

/// The NUMA nodes of this machine with their CPUs, from sysfs (`/sys/devices/system/node`);
/// one node with every CPU where sysfs has no node directories.
pub fn nodes() -> Vec<(usize, Vec<usize>)> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir("/sys/devices/system/node") {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(n) = name
                .strip_prefix("node")
                .and_then(|n| n.parse::<usize>().ok())
            else {
                continue;
            };
            let list = std::fs::read_to_string(e.path().join("cpulist")).unwrap_or_default();
            out.push((n, parse_cpulist(list.trim())));
        }
    }
    out.sort();
    if out.is_empty() {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        out.push((0, (0..n).collect()));
    }
    out
}

/// Parses a kernel CPU list such as `0-3,8,10-11`.
pub fn parse_cpulist(s: &str) -> Vec<usize> {
    let mut v = Vec::new();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) {
                    v.extend(a..=b);
                }
            }
            None => v.extend(part.parse::<usize>().ok()),
        }
    }
    v
}

/// Pins the calling thread to one CPU.
pub fn pin_to_cpu(cpu: usize) -> std::io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET stays inside it for cpu < 1024.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if cpu >= 8 * std::mem::size_of::<libc::cpu_set_t>() {
            return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
        }
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Counts of pages of `[p, p+len)` per status from `move_pages` (node ≥ 0, or −errno).
pub fn page_census(p: *const u8, len: usize) -> std::io::Result<Vec<(i32, usize)>> {
    let start = p as usize & !(PAGE - 1);
    let pages: Vec<*const u8> = (start..p as usize + len)
        .step_by(PAGE)
        .map(|a| a as *const u8)
        .collect();
    let status = os::page_nodes(&pages)?;
    let mut census: Vec<(i32, usize)> = Vec::new();
    for s in status {
        match census.iter_mut().find(|(k, _)| *k == s) {
            Some((_, n)) => *n += 1,
            None => census.push((s, 1)),
        }
    }
    census.sort();
    Ok(census)
}

fn all_on(census: &[(i32, usize)], node: usize) -> bool {
    census.len() == 1 && census[0].0 == node as i32
}

fn census_text(c: &[(i32, usize)]) -> String {
    c.iter()
        .map(|(k, n)| {
            if *k >= 0 {
                format!("{n} pages on node {k}")
            } else {
                format!("{n} pages errno {}", -k)
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Runs every check on this machine with allocator `a`: superblocks of a thread pinned to each
/// node are on that node; allocate-on-node places pages on each node and refuses a node that
/// does not exist; a block freed by a thread of another node goes back to its owner, who reuses
/// it on its own node.
pub fn run_all(a: &'static Allocator) -> Vec<Check> {
    let nodes = nodes();
    let mut out = Vec::new();
    for (node, cpus) in &nodes {
        let Some(&cpu) = cpus.first() else { continue };
        out.push(first_touch_check(a, *node, cpu));
    }
    for (node, _) in &nodes {
        out.push(on_node_check(a, *node));
    }
    let missing = nodes.iter().map(|(n, _)| n + 1).max().unwrap_or(1);
    out.push(match a.alloc_on_node(1 << 20, missing) {
        Err(e) => Check {
            name: format!("allocate on missing node {missing}"),
            ok: true,
            detail: format!("refused: {e}"),
        },
        Ok(p) => {
            // SAFETY: ours, unused.
            unsafe { a.free(p.as_ptr()) };
            Check {
                name: format!("allocate on missing node {missing}"),
                ok: false,
                detail: "was accepted".into(),
            }
        }
    });
    let with_cpu: Vec<_> = nodes.iter().filter(|(_, c)| !c.is_empty()).collect();
    if let (Some(first), Some(last)) = (with_cpu.first(), with_cpu.last()) {
        out.push(foreign_free_check(
            a,
            (last.0, last.1[0]),
            (first.0, *first.1.last().unwrap_or(&first.1[0])),
        ));
    }
    out
}

/// A thread pinned to `cpu` of `node` allocates and writes blocks of three sizes of the
/// sub-allocators and two of the large tier: every page of each block, and the header page of
/// its mapping, must be on `node` (first touch by the allocating thread, §5.2; superblocks are
/// not touched in full when taken, so the blocks' own pages are what is checked). A large block
/// freed and allocated again by the thread must come back from its cache, still on `node`.
pub fn first_touch_check(a: &'static Allocator, node: usize, cpu: usize) -> Check {
    let name = format!("superblocks and large blocks of a thread on cpu {cpu} are on node {node}");
    let r = std::thread::spawn(move || -> Result<(bool, String), String> {
        pin_to_cpu(cpu).map_err(|e| format!("pin: {e}"))?;
        let mut sizes = vec![a.config().min_block, 64 << 10, a.config().max_block];
        sizes.extend(
            [1 << 20, 4 << 20]
                .into_iter()
                .filter(|&s| s > a.config().max_block && s <= a.config().large_max),
        );
        let blocks: Vec<*mut u8> = sizes.iter().map(|&s| a.alloc(s)).collect();
        let mut ok = true;
        let mut detail = Vec::new();
        for (&b, &s) in blocks.iter().zip(&sizes) {
            if b.is_null() || !a.owns(b) {
                return Err(format!("block of {s} bytes not from the allocator"));
            }
            // SAFETY: `s` bytes of ours; writing them is the first touch.
            unsafe { b.write_bytes(0x5a, s) };
            let sb = a.map.lookup(b).expect("ours");
            // SAFETY: a live header.
            let base = unsafe { (*sb.as_ptr()).base };
            let mut census = page_census(b, s).map_err(|e| format!("move_pages: {e}"))?;
            let header = page_census(base, PAGE).map_err(|e| format!("move_pages: {e}"))?;
            for (k, n) in header {
                match census.iter_mut().find(|(c, _)| *c == k) {
                    Some((_, m)) => *m += n,
                    None => census.push((k, n)),
                }
            }
            ok &= all_on(&census, node) && a.node_of(b) == Some(node);
            detail.push(format!("{}K: {}", s >> 10, census_text(&census)));
        }
        if let (Some(&big), Some(&s)) = (blocks.last(), sizes.last()) {
            if s > a.config().max_block {
                // SAFETY: ours, unused; then the same size again.
                unsafe { a.free(big) };
                let again = a.alloc(s);
                let same = again == big;
                ok &= same && a.node_of(again) == Some(node);
                detail.push(format!(
                    "{}K freed and allocated again: same block {same}",
                    s >> 10
                ));
                // SAFETY: ours, unused.
                unsafe { a.free(again) };
            }
        }
        for b in &blocks[..blocks.len() - usize::from(sizes.last() > Some(&a.config().max_block))] {
            // SAFETY: ours, unused.
            unsafe { a.free(*b) };
        }
        Ok((ok, detail.join("; ")))
    })
    .join();
    match r {
        Ok(Ok((ok, detail))) => Check { name, ok, detail },
        Ok(Err(e)) => Check {
            name,
            ok: false,
            detail: e,
        },
        Err(_) => Check {
            name,
            ok: false,
            detail: "the check thread panicked".into(),
        },
    }
}

/// `alloc_on_node(4 MiB, node)`: every page on `node`.
pub fn on_node_check(a: &'static Allocator, node: usize) -> Check {
    let name = format!("allocate on node {node}");
    let len = 4 << 20;
    match a.alloc_on_node(len, node) {
        Ok(p) => {
            let c = page_census(p.as_ptr(), len);
            // SAFETY: ours, unused.
            unsafe { a.free(p.as_ptr()) };
            match c {
                Ok(c) => Check {
                    name,
                    ok: all_on(&c, node),
                    detail: census_text(&c),
                },
                Err(e) => Check {
                    name,
                    ok: false,
                    detail: format!("move_pages: {e}"),
                },
            }
        }
        Err(e) => Check {
            name,
            ok: false,
            detail: e.to_string(),
        },
    }
}

/// A thread on `owner` allocates a block; a thread on `freer` frees it (a foreign free, into the
/// owner's recollection bin); the owner collects and allocates again: it must get the same block
/// back (LIFO), still on the owner's node.
pub fn foreign_free_check(
    a: &'static Allocator,
    owner: (usize, usize),
    freer: (usize, usize),
) -> Check {
    let name = format!(
        "block of a thread on node {} freed by a thread on node {} returns to its owner",
        owner.0, freer.0
    );
    let (to_freer, from_owner) = std::sync::mpsc::channel::<usize>();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let size = 64 << 10;
    let owner_t = std::thread::spawn(move || -> Result<(bool, String), String> {
        pin_to_cpu(owner.1).map_err(|e| format!("pin: {e}"))?;
        let b = a.alloc(size);
        if b.is_null() {
            return Err("allocation failed".into());
        }
        to_freer.send(b as usize).map_err(|e| e.to_string())?;
        done_rx.recv().map_err(|e| e.to_string())?;
        a.collect();
        let again = a.alloc(size);
        let census = page_census(again, size).map_err(|e| format!("move_pages: {e}"))?;
        let ok = again == b && all_on(&census, owner.0) && a.node_of(again) == Some(owner.0);
        let detail = format!(
            "reused the same block: {}; {}",
            again == b,
            census_text(&census)
        );
        // SAFETY: ours, unused.
        unsafe { a.free(again) };
        Ok((ok, detail))
    });
    let freer_t = std::thread::spawn(move || -> Result<(), String> {
        pin_to_cpu(freer.1).map_err(|e| format!("pin: {e}"))?;
        let b = from_owner.recv().map_err(|e| e.to_string())? as *mut u8;
        // SAFETY: the owner handed the block over.
        unsafe { a.free(b) };
        done_tx.send(()).map_err(|e| e.to_string())
    });
    let f = freer_t.join();
    match (owner_t.join(), f) {
        (Ok(Ok((ok, detail))), Ok(Ok(()))) => Check { name, ok, detail },
        (Ok(Err(e)), _) | (_, Ok(Err(e))) => Check {
            name,
            ok: false,
            detail: e,
        },
        _ => Check {
            name,
            ok: false,
            detail: "a check thread panicked".into(),
        },
    }
}
