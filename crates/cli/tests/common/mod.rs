//! Running the `nearflow` binary from the CLI tests.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::fmt::Debug;
use std::process::{Command, Output};

/// Runs `nearflow ARGS…`.
pub fn nearflow<S: AsRef<OsStr>>(args: &[S]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nearflow"))
        .args(args)
        .output()
        .expect("run nearflow")
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
    err
}
