//! Behaviour tests of the topology model on presets, synthetic strings, XML and the host.

use nearflow_topo::{presets, CacheDistance, Machine, TopologySpec};

fn groups(m: &Machine) -> Vec<usize> {
    m.groups().iter().map(|g| g.pus.len()).collect()
}

#[test]
fn every_preset_has_the_papers_core_groups() {
    let expect: &[(&str, usize, usize, &[usize])] = &[
        ("e5310-smp", 8, 1, &[2, 2, 2, 2]),
        ("e7-4820", 64, 4, &[16, 16, 16, 16]),
        ("e7540", 48, 4, &[12, 12, 12, 12]),
        ("i7-2600", 8, 1, &[8]),
        ("x5355", 4, 1, &[2, 2]),
        ("nehalem-2x4", 8, 2, &[4, 4]),
        ("e5320-uma", 8, 1, &[2, 2, 2, 2]),
    ];
    assert_eq!(expect.len(), presets::PRESETS.len(), "a preset is untested");
    for &(name, pus, nodes, g) in expect {
        let m = presets::build(name).unwrap();
        assert_eq!(m.pu_count(), pus, "{name}");
        assert_eq!(m.node_count(), nodes, "{name}");
        assert_eq!(groups(&m), g, "{name}");
        for grp in m.groups() {
            assert!(
                grp.pus.iter().all(|&p| m.node_of(p) == grp.node),
                "{name}: group spans nodes"
            );
        }
    }
}

#[test]
fn e7_4820_distances() {
    let m = presets::build("e7-4820").unwrap();
    // PUs 0 and 1 are hyper-threads of one core: they share L1.
    assert_eq!(m.cache_distance(0, 1), CacheDistance::Level(1));
    // Two cores of one package share only the L3.
    assert_eq!(m.cache_distance(0, 2), CacheDistance::Level(3));
    // Two packages share nothing.
    assert_eq!(m.cache_distance(0, 16), CacheDistance::Infinite);
    assert_eq!(m.numa_distance(0, 15), 0);
    assert_eq!(m.numa_distance(0, 16), 1);
    assert_eq!(m.cache_size(0, 2), Some(256 << 10));
    assert_eq!(m.cache_size(0, 3), Some(18 << 20));
    // Its NUMA factors are the measured ones of the same platform (the E7540 of the
    // task-scheduling paper's Table 1), 1.4–1.5, not a generic 2.0.
    let e7540 = presets::build("e7540").unwrap();
    assert_eq!(m.numa_raw(), e7540.numa_raw());
    let raw = m.numa_raw().unwrap();
    assert!(raw.iter().enumerate().all(|(i, r)| r[i] == 10
        && r.iter()
            .enumerate()
            .all(|(j, &d)| i == j || (14..=15).contains(&d))));
}

#[test]
fn e5310_cache_distances() {
    let m = presets::build("e5310-smp").unwrap();
    assert_eq!(m.cache_distance(0, 1), CacheDistance::Level(2));
    assert_eq!(m.cache_distance(0, 2), CacheDistance::Infinite);
    assert_eq!(m.numa_distance(0, 7), 0);
}

#[test]
fn e7540_uses_table_1() {
    let m = presets::build("e7540").unwrap();
    let raw = m.numa_raw().unwrap();
    assert_eq!(raw[0], vec![10, 14, 15, 14]);
    // All nodes are one hop apart on that fully connected machine.
    assert!(m
        .node_hops()
        .iter()
        .enumerate()
        .all(|(a, r)| r.iter().enumerate().all(|(b, &h)| h == u32::from(a != b))));
}

#[test]
fn synthetic_strings_and_errors() {
    let m = nearflow_topo::from_synthetic("pack:2 [numa] core:3 pu:2").unwrap();
    assert_eq!(m.pu_count(), 12);
    assert_eq!(m.node_count(), 2);
    for bad in ["", "pack:x", "bogus:3 pu:2", "pack:2 pu:0"] {
        let err = nearflow_topo::from_synthetic(bad).unwrap_err().to_string();
        assert!(err.contains("synthetic"), "{bad:?}: {err}");
    }
}

#[test]
fn xml_with_distance_matrix() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");
    let m = nearflow_topo::from_xml_file(format!("{dir}/two-nodes.xml")).unwrap();
    assert_eq!(m.pu_count(), 4);
    assert_eq!(m.node_count(), 2);
    assert_eq!(m.numa_raw().unwrap(), &[vec![10, 21], vec![21, 10]]);
    assert_eq!(m.numa_distance(0, 3), 1);
    assert_eq!(groups(&m), vec![2, 2]);
    let err = nearflow_topo::from_xml_file(format!("{dir}/broken.xml")).unwrap_err();
    assert!(err.to_string().contains("broken.xml"), "{err}");
    let err = nearflow_topo::from_xml_file(format!("{dir}/missing.xml")).unwrap_err();
    assert!(err.to_string().contains("no such file"), "{err}");
}

/// A real-machine shape: two Opteron-like nodes whose cores have private L2s and no L3, with
/// firmware that reports the remote distance equal to the local one (17). It loads, with warnings;
/// each node is one core group (LAS §6.1.2), and the other node is 1 hop away.
#[test]
fn xml_with_private_caches_and_equal_distances() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");
    let m = nearflow_topo::from_xml_file(format!("{dir}/opteron-private-l2.xml")).unwrap();
    assert_eq!(m.numa_raw().unwrap(), &[vec![17, 17], vec![17, 17]]);
    assert_eq!(m.node_distance(0, 1), 1);
    assert_eq!(m.numa_distance(0, 0), 0);
    assert_eq!(groups(&m), vec![2, 2]);
    assert_eq!(m.groups()[1].node, 1);
    let w = m.warnings().join("\n");
    assert!(w.contains("equals the local distance"), "{w}");
    assert!(w.contains("share no cache"), "{w}");
}

/// The same rule on synthetic machines: private L2 per core (with and without hyper-threads) gives
/// one group per node; a shared L3 keeps the usual groups and no warning.
#[test]
fn synthetic_private_caches_group_by_node() {
    let m = nearflow_topo::from_synthetic("pack:4 [numa] l2:4(size=1MiB) core:1 pu:1").unwrap();
    assert_eq!(groups(&m), vec![4, 4, 4, 4]);
    assert_eq!(m.warnings().len(), 4);
    let m = nearflow_topo::from_synthetic("pack:2 [numa] l2:2(size=512KiB) core:1 pu:2").unwrap();
    assert_eq!(groups(&m), vec![4, 4]);
    let m =
        nearflow_topo::from_synthetic("pack:2 [numa] l3:1(size=8MiB) l2:4 core:1 pu:1").unwrap();
    assert_eq!(groups(&m), vec![4, 4]);
    assert!(m.warnings().is_empty(), "{:?}", m.warnings());
    let m = nearflow_topo::from_synthetic("pack:1 [numa] l2:1 core:1 pu:2").unwrap();
    assert_eq!(groups(&m), vec![2]);
    assert!(m.warnings().is_empty());
}

#[test]
fn host_is_detected_and_consistent() {
    let m = TopologySpec::Host.load().unwrap();
    assert!(m.source().is_host());
    assert_eq!(
        m.pu_count(),
        std::thread::available_parallelism().unwrap().get()
    );
    let covered: usize = m.groups().iter().map(|g| g.pus.len()).sum();
    assert_eq!(covered, m.pu_count());
    // Against what the kernel says without hwloc: the PUs are the CPUs this process may run on
    // (sched_getaffinity), and the L2 of the first is the one sysfs lists for its CPU.
    let allowed = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).unwrap();
    let mut os: Vec<usize> = m.pus().iter().map(|p| p.os_index).collect();
    os.sort_unstable();
    let want: Vec<usize> = (0..nix::sched::CpuSet::count())
        .filter(|&c| allowed.is_set(c).unwrap_or(false))
        .collect();
    assert_eq!(os, want);
    let cpu = m.pus()[0].os_index;
    let sysfs_l2 = (0..8).find_map(|i| {
        let dir = format!("/sys/devices/system/cpu/cpu{cpu}/cache/index{i}");
        let level = std::fs::read_to_string(format!("{dir}/level")).ok()?;
        let ty = std::fs::read_to_string(format!("{dir}/type")).ok()?;
        if level.trim() != "2" || ty.trim() == "Instruction" {
            return None;
        }
        let size = std::fs::read_to_string(format!("{dir}/size")).ok()?;
        let kib: u64 = size.trim().strip_suffix('K')?.parse().ok()?;
        Some(kib * 1024)
    });
    if let Some(l2) = sysfs_l2 {
        assert_eq!(m.cache_size(0, 2), Some(l2));
    }
}

#[test]
fn spec_parsing() {
    assert_eq!("host".parse::<TopologySpec>().unwrap(), TopologySpec::Host);
    assert!(matches!(
        "e7540".parse::<TopologySpec>().unwrap(),
        TopologySpec::Preset(_)
    ));
    let err = "e9999".parse::<TopologySpec>().unwrap_err().to_string();
    assert!(
        err.contains("e7-4820"),
        "the error lists the known presets: {err}"
    );
}

/// Sizes and counts are bounded at load with a clear error, before anything
/// allocates by them: too many PUs (also before hwloc builds them), absurd cache sizes, OS
/// indices hwloc would size a bitmap by.
#[test]
fn absurd_sizes_and_counts_are_refused_at_load() {
    for (bad, why) in [
        ("pu:100000", "100000 PUs"),
        ("pack:64 core:64 pu:2", "8192 PUs"),
        ("pack:99999999999999999999 pu:2", "more than 2^64"),
        ("l2:1(size=4TiB) pu:2", "at most 64 GiB"),
        ("l2:1(size=-1) pu:2", "at most 64 GiB"),
    ] {
        let err = nearflow_topo::from_synthetic(bad).unwrap_err().to_string();
        assert!(err.contains(why), "{bad:?}: {err}");
    }
    let m = nearflow_topo::from_synthetic("pack:4 core:512 pu:2").unwrap();
    assert_eq!(m.pu_count(), nearflow_topo::MAX_PUS);

    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");
    let good = std::fs::read_to_string(format!("{dir}/two-nodes.xml")).unwrap();
    let tmp = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("nearflow-topo");
    std::fs::create_dir_all(&tmp).unwrap();
    let variants = [
        (
            "os-index.xml",
            good.replacen(
                r#"<object type="PU" os_index="1""#,
                r#"<object type="PU" os_index="4294967295""#,
                1,
            ),
            "os_index 4294967295",
        ),
        (
            "cache.xml",
            good.replacen(
                r#"cache_size="262144""#,
                r#"cache_size="18446744073709551615""#,
                1,
            ),
            "at most 64 GiB",
        ),
    ];
    for (name, text, why) in variants {
        assert_ne!(text, good, "{name}: the edit applies");
        let f = tmp.join(name);
        std::fs::write(&f, text).unwrap();
        let err = nearflow_topo::from_xml_file(&f).unwrap_err().to_string();
        assert!(err.contains(why), "{name}: {err}");
    }
}
