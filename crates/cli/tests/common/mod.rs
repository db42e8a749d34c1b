//! Running the binary under test from the CLI tests: `nearflow` in `crates/cli`'s,
//! `nearflow-lab` (the same commands and the experiments) in `crates/lab-cli`'s.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::fmt::Debug;
use std::process::{Command, Output};

/// The binary under test.
pub const BIN: &str = match option_env!("CARGO_BIN_EXE_nearflow-lab") {
    Some(lab) => lab,
    None => match option_env!("CARGO_BIN_EXE_nearflow") {
        Some(product) => product,
        None => panic!("a test of crates/cli or crates/lab-cli"),
    },
};

/// Runs the binary under test with `ARGS…`.
pub fn nearflow<S: AsRef<OsStr>>(args: &[S]) -> Output {
    Command::new(BIN).args(args).output().expect("run nearflow")
}

/// Its standard output; it must succeed.
pub fn ok<S: AsRef<OsStr> + Debug>(args: &[S]) -> String {
    let out = nearflow(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The `HOST:PORT` that a server's line names ("serving 2 triples at
/// http://127.0.0.1:PORT/query …"), if it names one.
pub fn served_at(line: &str) -> Option<String> {
    let rest = line.split("http://").nth(1)?;
    Some(rest.split('/').next()?.to_owned())
}

/// Whether process `pid` ignores SIGPIPE, from the `SigIgn` mask of `/proc/PID/status`: a
/// server must, so that a write to a peer that left fails with EPIPE instead of ending it.
pub fn ignores_sigpipe(pid: u32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let mask = status
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:"))
        .unwrap_or_else(|| panic!("no SigIgn in /proc/{pid}/status"));
    let mask = u64::from_str_radix(mask.trim(), 16).unwrap();
    // SIGPIPE is signal 13 on Linux; bit n-1 of the mask is signal n.
    mask & (1 << (13 - 1)) != 0
}

/// It must fail, without a panic, saying `needle` on stderr; returns stderr.
pub fn fails_with<S: AsRef<OsStr> + Debug>(args: &[S], needle: &str) -> String {
    let out = nearflow(args);
    assert!(!out.status.success(), "{args:?} should fail");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        err.contains(needle),
        "{args:?}: stderr lacks {needle:?}: {err}"
    );
    assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    for line in err.lines() {
        assert!(
            repeated_tail(line).is_none(),
            "{args:?}: the message says {:?} twice: {line}",
            repeated_tail(line).unwrap_or_default()
        );
    }
    err
}

/// The part of an error line said twice in a row, as an error that shows its cause in its own
/// message and also names it as its source prints with `{:#}`: "A: B: B". Only parts of 12
/// characters or more count, so that "x: x" in a quoted input does not.
pub fn repeated_tail(line: &str) -> Option<&str> {
    line.match_indices(": ").find_map(|(i, _)| {
        let (left, right) = (&line[..i], &line[i + 2..]);
        (right.len() >= 12 && left.ends_with(right)).then_some(right)
    })
}

#[test]
fn a_message_said_twice_is_seen() {
    assert_eq!(
        repeated_tail("error: the query was stopped: the query was stopped"),
        Some("the query was stopped")
    );
    assert_eq!(
        repeated_tail("error: bad workload: no such node 3: no such node 3"),
        Some("no such node 3")
    );
    assert_eq!(
        repeated_tail("error: reading a.nt: line 3: no such file"),
        None
    );
}

/// [`fails_with`], and the first line of stderr says it (clap adds a "try --help" line to usage
/// errors).
pub fn fails_on_first_line<S: AsRef<OsStr> + Debug>(args: &[S], needle: &str) -> String {
    let err = fails_with(args, needle);
    let first = err.lines().next().unwrap_or("");
    assert!(
        first.contains(needle),
        "{args:?}: the first line lacks {needle:?}: {err}"
    );
    err
}

/// Its standard output as one JSON document; it must succeed.
pub fn json(args: &[&str]) -> serde_json::Value {
    let out = nearflow(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{args:?}: not JSON: {e}"))
}

/// `sparql --quiet SOURCE_FLAG SOURCE -e QUERY EXTRA…`.
pub fn sparql(source_flag: &str, source: &str, query: &str, extra: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = ["sparql", "--quiet", source_flag, source, "-e", query]
        .iter()
        .map(|s| s.to_string())
        .collect();
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}
