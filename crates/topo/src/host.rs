//! Facts about the machine this process runs on that hwloc does not give: the CPU's name and
//! L2 as the tables print them, its memory, whether it is a virtual machine, and the hardware counters
//! (`perf_event_open`) where the kernel and the hypervisor offer them.

/// This machine for the tables: CPU model, L2 per core and CPU count, e.g.
/// `AMD EPYC, L2 512K, 2 CPUs` (the brief asks every figure to name its machine).
pub fn cpu_label() -> String {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let l2 = (0..8)
        .filter_map(|i| {
            let dir = format!("/sys/devices/system/cpu/cpu0/cache/index{i}");
            let level = std::fs::read_to_string(format!("{dir}/level")).ok()?;
            let ty = std::fs::read_to_string(format!("{dir}/type")).ok()?;
            (level.trim() == "2" && ty.trim() != "Instruction")
                .then(|| std::fs::read_to_string(format!("{dir}/size")).ok())
                .flatten()
        })
        .next()
        .map_or_else(|| "L2 unknown".into(), |s| format!("L2 {}", s.trim()));
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    format!("{model}, {l2}, {cpus} CPUs")
}

/// This host's memory in bytes (`MemTotal` of `/proc/meminfo`), when it can be read.
pub fn memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib << 10)
}

/// This process's peak resident memory in bytes (`VmHWM` of `/proc/self/status`), 0 where the
/// system does not say.
pub fn peak_resident() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// Bytes an unprivileged writer may still write in the file system that holds `dir`
/// (`statvfs`'s available blocks), when it can be read.
pub fn disk_available(dir: &std::path::Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: all-zero bytes are a valid `statvfs` (integers only), which the call fills.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a struct of the type the call writes.
    let ok = unsafe { libc::statvfs(path.as_ptr(), &mut s) } == 0;
    ok.then(|| (s.f_bavail as u64).saturating_mul(s.f_frsize as u64))
}

/// Whether this host is a virtual machine (the `hypervisor` CPU flag): its NUMA nodes, if
/// several, are emulated, and NUMA timings there say nothing about hardware.
pub fn in_a_vm() -> bool {
    std::fs::read_to_string("/proc/cpuinfo")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("flags") && l.split_whitespace().any(|f| f == "hypervisor"))
        })
        .unwrap_or(false)
}

/// Per-worker LLC-miss and instruction counters (`perf_event_open`), opened on the threads
/// whose ids it is given. Where the kernel or the hypervisor gives
/// no hardware counters (every machine of this project: KVM guests without a PMU), opening
/// fails and the reason is reported.
pub struct LlcCounters {
    /// (misses fd, instructions fd) per worker.
    fds: Vec<(i32, i32)>,
}

impl LlcCounters {
    /// Whether this machine has the counters at all (opened on the calling thread).
    pub fn probe() -> std::result::Result<(), String> {
        let fd = perf_open(PERF_COUNT_HW_CACHE_MISSES, 0)?;
        // SAFETY: `fd` is a descriptor perf_event_open just returned to us.
        unsafe { libc::close(fd) };
        Ok(())
    }

    /// Opens the two counters on each of these threads (Linux thread ids, e.g. a runtime's
    /// `worker_thread_ids`).
    pub fn open(tids: &[i32]) -> std::result::Result<LlcCounters, String> {
        Self::probe()?;
        // Built in place, so that the descriptors opened before a failure are closed by `Drop`.
        let mut counters = LlcCounters { fds: Vec::new() };
        for &tid in tids {
            let misses = perf_open(PERF_COUNT_HW_CACHE_MISSES, tid)?;
            match perf_open(PERF_COUNT_HW_INSTRUCTIONS, tid) {
                Ok(instructions) => counters.fds.push((misses, instructions)),
                Err(e) => {
                    // SAFETY: a descriptor we just opened and own.
                    unsafe { libc::close(misses) };
                    return Err(e);
                }
            }
        }
        Ok(counters)
    }

    /// Misses per thousand instructions per worker, None if a counter cannot be read.
    pub fn rates(&self) -> Option<Vec<f64>> {
        self.fds
            .iter()
            .map(|&(m, i)| {
                let (m, i) = (read_counter(m)?, read_counter(i)?);
                Some(m as f64 * 1000.0 / (i.max(1)) as f64)
            })
            .collect()
    }
}

impl Drop for LlcCounters {
    fn drop(&mut self) {
        for &(a, b) in &self.fds {
            // SAFETY: descriptors we opened and own.
            unsafe {
                libc::close(a);
                libc::close(b);
            }
        }
    }
}

const PERF_COUNT_HW_INSTRUCTIONS: u64 = 1;
const PERF_COUNT_HW_CACHE_MISSES: u64 = 3;

/// `perf_event_open` for a hardware counter of thread `tid` (0: the caller), any CPU, user
/// space only, counting from now.
fn perf_open(config: u64, tid: i32) -> std::result::Result<i32, String> {
    // struct perf_event_attr, PERF_ATTR_SIZE_VER0 (64 bytes): type, size, config, then the
    // flags word at byte 40 (bit 5 exclude_kernel, bit 6 exclude_hv); all else zero.
    let mut attr = [0u64; 8];
    attr[0] = 64u64 << 32; // type = PERF_TYPE_HARDWARE (0), size = 64
    attr[1] = config;
    attr[5] = (1 << 5) | (1 << 6);
    // SAFETY: `attr` is a valid, initialised perf_event_attr of the size it declares; the
    // kernel only reads it.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr.as_ptr(),
            tid,
            -1i32,
            -1i32,
            0u64,
        )
    };
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        return Err(format!("perf_event_open: {e}"));
    }
    Ok(fd as i32)
}

fn read_counter(fd: i32) -> Option<u64> {
    let mut v = 0u64;
    // SAFETY: reading 8 bytes into a u64 we own from a perf descriptor we own.
    let n = unsafe { libc::read(fd, (&mut v as *mut u64).cast(), 8) };
    (n == 8).then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_label_names_model_l2_and_count() {
        let l = cpu_label();
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert!(l.ends_with(&format!(", {cpus} CPUs")), "{l}");
        assert!(l.contains(", L2 "), "{l}");
    }

    #[test]
    fn counters_open_on_threads_exactly_when_the_probe_succeeds() {
        // SAFETY: gettid has no preconditions.
        let me = unsafe { libc::gettid() };
        match (LlcCounters::probe(), LlcCounters::open(&[me])) {
            (Ok(()), Ok(c)) => assert_eq!(c.rates().map(|r| r.len()), Some(1)),
            (Err(a), Err(b)) => {
                assert!(a.starts_with("perf_event_open: "), "{a}");
                assert_eq!(a, b);
            }
            (a, b) => panic!("probe {a:?} but open {:?}", b.map(|_| ())),
        }
    }
}
