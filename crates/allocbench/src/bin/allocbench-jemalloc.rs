//! The allocation benchmark on jemalloc as the global allocator.
#[global_allocator]
static A: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    nearflow_allocbench::main("jemalloc")
}
