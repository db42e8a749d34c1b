//! The peak RSS a benchmark program reports is its own, not its parent's: Linux carries a
//! parent's high-water mark into a child across fork and exec (`ru_maxrss`), which made every
//! pattern of `./run.sh` report the demo's peak.

use std::process::Command;

/// This process first touches 256 MiB (its high-water mark), frees it, then runs a small
/// pattern in a child: the child must report a small peak.
#[test]
fn a_small_run_after_a_large_one_reports_a_small_peak() {
    let big = vec![1u8; 256 << 20];
    assert_eq!(
        big.iter().step_by(4096).map(|&b| b as usize).sum::<usize>(),
        65536
    );
    drop(big);
    let out = Command::new(env!("CARGO_BIN_EXE_allocbench-glibc"))
        .args([
            "--pattern",
            "cache-scratch",
            "--threads",
            "2",
            "--scale",
            "0.01",
        ])
        .output()
        .expect("the benchmark program runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = String::from_utf8(out.stdout).unwrap();
    let v: serde_json::Value = serde_json::from_str(line.trim()).unwrap();
    let peak = v["peak_rss_bytes"].as_u64().unwrap();
    assert!(
        peak > 0 && peak < 64 << 20,
        "the child reports {} MiB",
        peak >> 20
    );
}
