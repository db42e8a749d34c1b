//! The allocation benchmark on the nearflow allocator as the global allocator.
#[global_allocator]
static A: nearflow_alloc::Nearflow = nearflow_alloc::Nearflow;

fn main() -> std::process::ExitCode {
    nearflow_allocbench::main("nearflow")
}
