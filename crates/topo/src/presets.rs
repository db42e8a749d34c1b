//! Named machines of the papers, as hwloc synthetic descriptions plus a NUMA distance matrix.
//!
//! Each preset cites where its shape comes from. Sizes are the papers' figures; where a paper
//! gives no NUMA latency, `10` local / `20` remote (one hop, the ACPI SLIT convention) is used.

use crate::model::{Machine, Source};
use crate::TopoError;

/// One named machine.
#[derive(Clone, Debug)]
pub struct Preset {
    /// The name accepted by `--preset`.
    pub name: &'static str,
    /// What the machine is and where the papers describe it.
    pub about: &'static str,
    /// hwloc synthetic description.
    pub synthetic: &'static str,
    /// NUMA latency matrix (10 = local), when there is more than one node.
    pub numa: Option<&'static [&'static [u64]]>,
}

/// The NUMA factors of Table 1 of the task-scheduling paper (`task-scheduling-in-data-stream-
/// processing.txt` §4.2), measured on a 4-socket Xeon E7540 (Nehalem-EX), stored ×10.
const TABLE_1: &[&[u64]] = &[
    &[10, 14, 15, 14],
    &[15, 10, 14, 14],
    &[14, 15, 10, 15],
    &[15, 15, 15, 10],
];

/// Every preset, in the order `nearflow topo --list` prints them.
pub const PRESETS: &[Preset] = &[
    Preset {
        name: "e5310-smp",
        about: "2x Xeon E5310: 2 packages x 4 cores, each pair of cores shares a 4 MB L2, one memory node \
                (las-scheduler-and-numa-allocator.txt §6.1.2)",
        synthetic: "pack:2 l2:2(size=4MiB) l1d:2(size=32KiB) core:1 pu:1",
        numa: None,
    },
    Preset {
        name: "e7-4820",
        about: "4x Xeon E7-4820: 4 NUMA nodes x 8 cores x 2 hyper-threads, L2 256 KB per core, L3 18 MB per \
                package (las-scheduler-and-numa-allocator.txt §6.1.2); all sockets one hop apart, with the \
                NUMA factors measured on the E7540 of the same 4-socket platform (Table 1 of the \
                task-scheduling paper, 1.4-1.5; the LAS paper gives none)",
        synthetic: "pack:4 [numa] l3:1(size=18MiB) l2:8(size=256KiB) l1d:1(size=32KiB) core:1 pu:2",
        numa: Some(TABLE_1),
    },
    Preset {
        name: "e7540",
        about: "4x Xeon E7540: 4 nodes x 6 cores x 2 HT = 48 PUs, L2 256 KB, L3 18 MB; NUMA factors of Table 1 \
                (task-scheduling-in-data-stream-processing.txt §4.2, §6), stored x10",
        synthetic: "pack:4 [numa] l3:1(size=18MiB) l2:6(size=256KiB) l1d:1(size=32KiB) core:1 pu:2",
        numa: Some(TABLE_1),
    },
    Preset {
        name: "i7-2600",
        about: "Core i7 2600: 4 cores x 2 HT, L2 256 KB per core, shared L3 8 MB \
                (las-scheduler-and-numa-allocator.txt §6.4.1)",
        synthetic: "pack:1 l3:1(size=8MiB) l2:4(size=256KiB) l1d:1(size=32KiB) core:1 pu:2",
        numa: None,
    },
    Preset {
        name: "nehalem-2x4",
        about: "2-socket Nehalem: 2 NUMA nodes x 4 cores, L3 8 MB per socket; local 50 ns vs remote 90 ns \
                (numa-template-library-splittable-data.txt §2.1), stored as 10/18",
        synthetic: "pack:2 [numa] l3:1(size=8MiB) l2:4(size=256KiB) l1d:1(size=32KiB) core:1 pu:1",
        numa: Some(&[&[10, 18], &[18, 10]]),
    },
    Preset {
        name: "x5355",
        about: "Xeon X5355: 4 cores in one socket, each pair of cores shares an L2, UMA \
                (streammap-cache-topology-mapping.txt Fig. 2a)",
        synthetic: "pack:1 l2:2(size=4MiB) l1d:2(size=32KiB) core:1 pu:1",
        numa: None,
    },
    Preset {
        name: "e5320-uma",
        about: "2x Xeon E5320: 2 packages x 4 cores, L2 shared by pairs, UMA \
                (streammap-cache-topology-mapping.txt Fig. 2b)",
        synthetic: "pack:2 l2:2(size=4MiB) l1d:2(size=32KiB) core:1 pu:1",
        numa: None,
    },
];

/// Looks a preset up by name.
pub fn find(name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.name == name)
}

/// Builds the machine of a preset.
pub fn build(name: &str) -> Result<Machine, TopoError> {
    let p = find(name).ok_or_else(|| TopoError::UnknownPreset {
        name: name.to_string(),
        known: PRESETS
            .iter()
            .map(|p| p.name)
            .collect::<Vec<_>>()
            .join(", "),
    })?;
    let numa = p.numa.map(|m| m.iter().map(|r| r.to_vec()).collect());
    crate::hwloc::from_synthetic_with(p.synthetic, Source::Preset(p.name.to_string()), numa)
}
