//! The allocation benchmark on the system allocator (glibc malloc).
fn main() -> std::process::ExitCode {
    nearflow_allocbench::main("glibc")
}
