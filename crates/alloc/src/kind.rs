//! [`AllocatorKind`]: the choice of allocator, a plain value every crate above shares (built
//! under loom too, where the allocator itself is not).

/// Which allocator a thread's requests in the sub-allocators' range go to, through
/// [`crate::Nearflow`]: the one choice of allocator of the whole project (the runtime's
/// `Builder::allocator`, the simulator's written blocks, the CLI's `--allocator`), re-exported
/// by `nearflow-rt` and `nearflow-sim`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
#[repr(u8)]
pub enum AllocatorKind {
    /// The nearflow allocator (LAS paper §5): blocks from the thread's node.
    #[default]
    Nearflow = 1,
    /// The system allocator (glibc malloc), for everything.
    System = 2,
}

impl AllocatorKind {
    /// Both, for experiments.
    pub const ALL: [AllocatorKind; 2] = [AllocatorKind::Nearflow, AllocatorKind::System];

    /// The name on command lines and in tables.
    pub fn name(self) -> &'static str {
        match self {
            AllocatorKind::Nearflow => "nearflow",
            AllocatorKind::System => "system",
        }
    }
}

impl std::fmt::Display for AllocatorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for AllocatorKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "nearflow" => Ok(AllocatorKind::Nearflow),
            "system" => Ok(AllocatorKind::System),
            _ => Err(format!(
                "unknown allocator {s:?} (expected nearflow or system)"
            )),
        }
    }
}
