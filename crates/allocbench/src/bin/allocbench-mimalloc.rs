//! The allocation benchmark on mimalloc as the global allocator.
#[global_allocator]
static A: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    nearflow_allocbench::main("mimalloc")
}
