//! A store split into shards for a cluster: `N` stores in one folder, each in the snapshot
//! format, and a manifest (`cluster.manifest`) naming them and the rule that placed each quad.
//!
//! **Ids agree across shards.** Every shard holds the whole dictionary of the store it was cut
//! from, so a term has one id on every shard, a row of ids moved from one shard's executor to
//! another's means the same terms there, and a join on ids across shards is exact. The price is
//! the dictionary's bytes once per shard; the quads are split.
//!
//! **Which shard owns a quad** ([`Sharding::shard_of`]) depends on its terms' text only — a hash
//! of their keys, FNV-1a ([`key_hash`]), never of their ids — so it is the same for a quad
//! loaded and for one added later by an update, whatever ids the update gives new terms:
//! - [`ShardBy::Subject`]: by the subject. Every quad of one subject is on one shard, so a
//!   star pattern (`?x a :Article . ?x :title ?t`) joins inside a shard.
//! - [`ShardBy::Triple`]: by subject, predicate and object together. The quads spread evenly
//!   whatever the subjects' sizes, but a star's rows meet only after an exchange.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::snapshot::{self, SnapshotError};
use crate::store::Store;
use crate::term::{Id, TermRef};

/// The manifest's file name in a cluster's folder.
pub const MANIFEST: &str = "cluster.manifest";

/// The manifest's first line.
const MAGIC: &str = "nearflow-cluster 1";

/// The most shards a store is split into.
pub const MAX_SHARDS: usize = 1024;

/// The rule that places a quad on a shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShardBy {
    /// The subject's hash.
    Subject,
    /// The hash of subject, predicate and object.
    Triple,
}

impl ShardBy {
    /// Its name on the command line and in the manifest.
    pub fn name(self) -> &'static str {
        match self {
            ShardBy::Subject => "subject",
            ShardBy::Triple => "hash",
        }
    }

    /// The rule of a name ([`name`](Self::name)).
    pub fn from_name(name: &str) -> Option<ShardBy> {
        match name {
            "subject" => Some(ShardBy::Subject),
            "hash" => Some(ShardBy::Triple),
            _ => None,
        }
    }
}

/// How a store is split: how many shards, by which rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sharding {
    /// Shards, 1 to [`MAX_SHARDS`].
    pub shards: usize,
    /// The rule.
    pub by: ShardBy,
}

/// FNV-1a, 64 bits, of a term's key: a hash fixed by its definition, the same in every
/// process and build (the standard library's hashers are seeded).
pub fn key_hash(key: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key.as_bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The hash of a term: [`key_hash`] of its key.
pub fn term_hash(term: TermRef<'_>) -> u64 {
    let mut key = String::new();
    term.encode(&mut key);
    key_hash(&key)
}

impl Sharding {
    /// The shard of a quad whose subject, predicate and object hash ([`term_hash`]) to
    /// `s`, `p` and `o`.
    pub fn shard_of(&self, [s, p, o]: [u64; 3]) -> usize {
        let h = match self.by {
            ShardBy::Subject => s,
            // Rotations keep (a, b, c) and (b, a, c) apart; the finaliser spreads the bits.
            ShardBy::Triple => s ^ p.rotate_left(21) ^ o.rotate_left(42),
        };
        (mix(h) % self.shards as u64) as usize
    }

    /// The shard of a quad of terms.
    pub fn shard_of_terms(&self, s: TermRef<'_>, p: TermRef<'_>, o: TermRef<'_>) -> usize {
        self.shard_of([term_hash(s), term_hash(p), term_hash(o)])
    }
}

/// The finaliser of SplitMix64: every input bit reaches every output bit, so a shard count
/// that is a power of two still takes all of the hash.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A cluster's folder as its manifest describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    /// How the store was split.
    pub sharding: Sharding,
    /// Each shard's quads, in shard order.
    pub quads: Vec<u64>,
}

impl Manifest {
    /// The file name of shard `i` in the folder.
    pub fn shard_file(i: usize) -> String {
        format!("shard-{i}.store")
    }

    /// The path of shard `i` of the cluster in `dir`.
    pub fn shard_path(dir: &Path, i: usize) -> PathBuf {
        dir.join(Self::shard_file(i))
    }

    /// The shards in `dir` in a line: how many, by which rule, and each one's quads and size.
    pub fn summary(&self, dir: &Path) -> String {
        let shards: Vec<String> = (0..self.sharding.shards)
            .map(|i| {
                let bytes = std::fs::metadata(Self::shard_path(dir, i)).map_or(0, |m| m.len());
                let mib = bytes as f64 / (1 << 20) as f64;
                format!("{} quads, {mib:.1} MiB", self.quads[i])
            })
            .collect();
        format!(
            "saved {} shards by {} in {}: {}",
            self.sharding.shards,
            self.sharding.by.name(),
            dir.display(),
            shards.join("; ")
        )
    }

    /// Every quad of the cluster.
    pub fn total(&self) -> u64 {
        self.quads.iter().sum()
    }

    /// A CRC-32 of the manifest: the same for the same folder's shards, different (but for a
    /// collision) for another split or other data; a cluster's workers check it against the
    /// coordinator's before they answer.
    pub fn fingerprint(&self) -> u32 {
        crc32fast::hash(self.text().as_bytes())
    }

    fn text(&self) -> String {
        let mut t = format!(
            "{MAGIC}\nshards {}\nshard-by {}\n",
            self.sharding.shards,
            self.sharding.by.name()
        );
        for (i, q) in self.quads.iter().enumerate() {
            t.push_str(&format!("shard {i} {} {q}\n", Self::shard_file(i)));
        }
        with_checksum(t)
    }

    /// Reads the manifest of the cluster in `dir`, and checks that its shards are there.
    pub fn read(dir: &Path) -> Result<Manifest, ShardError> {
        let path = dir.join(MANIFEST);
        let text = std::fs::read_to_string(&path).map_err(|error| ShardError::Io {
            path: path.clone(),
            error,
        })?;
        let bad = |why: String| ShardError::Manifest {
            path: path.clone(),
            why,
        };
        // The last line, `end CRC`, is the CRC-32 of all before it: a manifest cut short or
        // changed is refused, never read as a smaller cluster.
        let body = text.strip_suffix('\n').unwrap_or(&text);
        let (body, end) = body.rsplit_once('\n').unwrap_or(("", body));
        let crc = format!("{:08x}", crc32fast::hash(body.as_bytes()));
        if end.strip_prefix("end ") != Some(crc.as_str()) {
            return Err(bad(format!(
                "its last line is `{end}`, not `end {crc}` (the checksum of the lines before it): cut short or changed"
            )));
        }
        let mut lines = body.lines();
        if lines.next() != Some(MAGIC) {
            return Err(bad(format!("does not start with `{MAGIC}`")));
        }
        let mut field = |name: &str| -> Result<String, ShardError> {
            let line = lines.next().unwrap_or_default();
            line.strip_prefix(name)
                .and_then(|v| v.strip_prefix(' '))
                .map(str::to_owned)
                .ok_or_else(|| bad(format!("expected `{name} …`, found `{line}`")))
        };
        let shards = field("shards")?
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=MAX_SHARDS).contains(n))
            .ok_or_else(|| bad(format!("the shard count is not 1 to {MAX_SHARDS}")))?;
        let by_name = field("shard-by")?;
        let by = ShardBy::from_name(&by_name)
            .ok_or_else(|| bad(format!("unknown rule `{by_name}` (subject or hash)")))?;
        let mut quads = Vec::with_capacity(shards);
        for i in 0..shards {
            let line = field("shard")?;
            let parts: Vec<&str> = line.split(' ').collect();
            let file = Self::shard_file(i);
            match parts.as_slice() {
                [n, f, q] if *n == i.to_string() && *f == file => quads.push(
                    q.parse::<u64>()
                        .map_err(|_| bad(format!("`{q}` is not a count")))?,
                ),
                _ => {
                    return Err(bad(format!(
                        "expected `shard {i} {file} COUNT`, found `shard {line}`"
                    )))
                }
            }
            let shard = dir.join(&file);
            if !shard.is_file() {
                return Err(bad(format!("its shard {} is missing", shard.display())));
            }
        }
        if let Some(extra) = lines.find(|l| !l.is_empty()) {
            return Err(bad(format!("unexpected line `{extra}`")));
        }
        Ok(Manifest {
            sharding: Sharding { shards, by },
            quads,
        })
    }
}

/// Whether `path` is a shard of a cluster: `shard-I.store` in a folder whose manifest names it.
pub fn is_shard(path: &Path) -> bool {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return false;
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    dir.join(MANIFEST).is_file()
        && Manifest::read(dir).is_ok_and(|m| {
            (0..m.sharding.shards).any(|i| name == std::ffi::OsStr::new(&Manifest::shard_file(i)))
        })
}

/// `body` (lines, each ended by a newline) and its last line, `end CRC`.
fn with_checksum(body: String) -> String {
    let crc = crc32fast::hash(body.trim_end_matches('\n').as_bytes());
    format!("{body}end {crc:08x}\n")
}

/// Why a cluster's folder could not be written or read.
#[derive(Debug)]
pub enum ShardError {
    /// A file could not be read or written.
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        error: std::io::Error,
    },
    /// A shard's snapshot could not be written.
    Snapshot(SnapshotError),
    /// The manifest is damaged.
    Manifest {
        /// Its path.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// The caller stopped the write.
    Interrupted,
    /// The folder cannot take a cluster.
    Refused {
        /// The folder.
        path: PathBuf,
        /// Why.
        why: String,
    },
}

impl fmt::Display for ShardError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShardError::Io { path, error } => write!(f, "{}: {error}", path.display()),
            ShardError::Snapshot(e) => e.fmt(f),
            ShardError::Manifest { path, why } => {
                write!(f, "{}: not a cluster manifest: {why}", path.display())
            }
            ShardError::Refused { path, why } => write!(f, "{}: {why}", path.display()),
            ShardError::Interrupted => f.write_str("interrupted"),
        }
    }
}

impl std::error::Error for ShardError {}

impl From<SnapshotError> for ShardError {
    fn from(e: SnapshotError) -> Self {
        ShardError::Snapshot(e)
    }
}

/// Checks that `dir` may become a cluster's folder: absent, or an empty folder.
pub fn check_target(dir: &Path) -> Result<(), ShardError> {
    let refuse = |why: &str| ShardError::Refused {
        path: dir.to_owned(),
        why: why.to_owned(),
    };
    match std::fs::read_dir(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => Err(refuse(
            "exists and is not a folder; a sharded load writes a folder of shards",
        )),
        Err(error) => Err(ShardError::Io {
            path: dir.to_owned(),
            error,
        }),
        Ok(mut entries) => match entries.next() {
            Some(_) => Err(refuse(
                "is a folder that is not empty; a sharded load writes a new folder",
            )),
            None => Ok(()),
        },
    }
}

/// Writes `store` split by `sharding` into the folder `dir` (absent or empty, as
/// [`check_target`] checks): the shards are written into a temporary folder beside it, each
/// synced, with the manifest last, and the folder renamed to `dir` at the end, so an error or
/// an interruption leaves no folder that looks like a cluster. `done(i)` is called as shard
/// `i` is finished, and says whether to go on: `false` stops the write with
/// [`ShardError::Interrupted`], the temporary folder removed. Each shard is one pass over
/// `store`'s indexes, streamed: nothing of them is copied in memory but a hash per term (8
/// bytes a term).
pub fn write_shards(
    store: &Store,
    dir: &Path,
    sharding: Sharding,
    mut done: impl FnMut(usize) -> bool,
) -> Result<Manifest, ShardError> {
    if !(1..=MAX_SHARDS).contains(&sharding.shards) {
        return Err(ShardError::Refused {
            path: dir.to_owned(),
            why: format!("{} shards: give 1 to {MAX_SHARDS}", sharding.shards),
        });
    }
    check_target(dir)?;
    let tmp = temporary_beside(dir)?;
    let written = (|| {
        let dict = store.dict();
        let hashes: Vec<u64> = (1..=dict.len() as Id)
            .map(|id| key_hash(&dict.key_of(id)))
            .collect();
        let hash = |id: Id| hashes[id as usize - 1];
        let mut quads = Vec::with_capacity(sharding.shards);
        for i in 0..sharding.shards {
            let kept = std::cell::Cell::new(0u64);
            let keep = |[_, s, p, o]: [Id; 4]| {
                let mine = sharding.shard_of([hash(s), hash(p), hash(o)]) == i;
                kept.set(kept.get() + u64::from(mine));
                mine
            };
            snapshot::save_kept(store, &Manifest::shard_path(&tmp, i), &keep)?;
            // Each quad was offered once per permutation.
            quads.push(kept.get() / crate::layout::Permutation::ALL.len() as u64);
            if !done(i) {
                return Err(ShardError::Interrupted);
            }
        }
        let manifest = Manifest { sharding, quads };
        let path = tmp.join(MANIFEST);
        snapshot::write_atomically(&path, |mut file, at| {
            use std::io::Write;
            file.write_all(manifest.text().as_bytes())
                .and_then(|()| file.sync_all())
                .map_err(|error| ShardError::Io {
                    path: at.to_owned(),
                    error,
                })
        })?;
        std::fs::rename(&tmp, dir).map_err(|error| ShardError::Io {
            path: dir.to_owned(),
            error,
        })?;
        if let Some(parent) = dir.parent().and_then(|p| std::fs::File::open(p).ok()) {
            let _ = parent.sync_all();
        }
        Ok(manifest)
    })();
    if written.is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    written
}

/// Removes what loads into the cluster folder `dir` left beside it when they were killed
/// before they could clean up (`kill -9`, a power cut): their temporary folders of shards
/// (`.NAME.PID.tmp`), their temporary whole stores (`.NAME.whole.PID.tmp` and its lock and
/// log) and those stores' own temporary files and folders; how many. Only what belongs to a
/// process that no longer runs is removed, so a load running beside it keeps its files.
pub fn remove_stale(dir: &Path) -> usize {
    let Some(name) = dir.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return 0;
    };
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    };
    let Ok(entries) = std::fs::read_dir(&parent) else {
        return 0;
    };
    let stale = |entry: &str| -> bool {
        let Some(rest) = entry.strip_prefix('.') else {
            return false;
        };
        let rest = rest.trim_start_matches('.');
        let Some(rest) = rest
            .strip_prefix(name.as_str())
            .and_then(|r| r.strip_prefix('.'))
        else {
            return false;
        };
        let rest = rest.strip_prefix("whole.").unwrap_or(rest);
        let Some((pid, tail)) = rest.split_once('.') else {
            return false;
        };
        tail.starts_with("tmp")
            && !pid.is_empty()
            && pid.bytes().all(|b| b.is_ascii_digit())
            && !Path::new("/proc").join(pid).exists()
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| stale(&e.file_name().to_string_lossy()))
        .filter(|e| match e.file_type() {
            Ok(t) if t.is_dir() => std::fs::remove_dir_all(e.path()).is_ok(),
            Ok(_) => std::fs::remove_file(e.path()).is_ok(),
            Err(_) => false,
        })
        .count()
}

/// A new, empty folder beside `dir` (`.NAME.PID.tmp`), for [`write_shards`].
fn temporary_beside(dir: &Path) -> Result<PathBuf, ShardError> {
    let name = dir.file_name().ok_or_else(|| ShardError::Refused {
        path: dir.to_owned(),
        why: "is not a folder name".into(),
    })?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".{}.tmp", std::process::id()));
    let tmp = dir.with_file_name(tmp_name);
    if tmp.exists() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    std::fs::create_dir(&tmp).map_err(|error| ShardError::Io {
        path: tmp.clone(),
        error,
    })?;
    // An empty folder at `dir` (checked) is replaced by the rename.
    Ok(tmp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_fnv1a() {
        // FNV-1a's published values for "" and "a".
        assert_eq!(key_hash(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(key_hash("a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn every_shard_gets_quads() {
        for by in [ShardBy::Subject, ShardBy::Triple] {
            let sharding = Sharding { shards: 4, by };
            let mut seen = [0usize; 4];
            for i in 0..4000u64 {
                let s = key_hash(&format!("<http://x/s{}>", i / 10));
                let o = key_hash(&format!("<http://x/o{i}>"));
                seen[sharding.shard_of([s, 7, o])] += 1;
            }
            assert!(seen.iter().all(|&n| n > 700), "{by:?}: {seen:?}");
        }
    }

    /// A store of `n` quads over 50 subjects, in the default graph and one named graph.
    fn store(machine: &nearflow_topo::Machine, n: usize) -> Store {
        let mut d = crate::dict::Dict::new();
        let mut id = |t: String| d.intern(TermRef::Iri(&t)).unwrap();
        let quads: Vec<crate::store::Quad> = (0..n)
            .map(|i| {
                let g = if i % 5 == 0 {
                    id("http://g/1".into())
                } else {
                    crate::DEFAULT_GRAPH
                };
                [
                    id(format!("http://s/{}", i % 50)),
                    id(format!("http://p/{}", i % 3)),
                    id(format!("http://o/{i}")),
                    g,
                ]
            })
            .collect();
        Store::build(machine, d, quads).unwrap()
    }

    #[test]
    fn shards_hold_every_quad_once_with_the_same_ids() {
        let machine = nearflow_topo::from_synthetic("core:2 pu:1").unwrap();
        let whole = store(&machine, 2000);
        let mut all = whole.quads();
        all.sort();
        for by in [ShardBy::Subject, ShardBy::Triple] {
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path().join("cluster");
            let sharding = Sharding { shards: 3, by };
            let mut finished = Vec::new();
            let m = write_shards(&whole, &dir, sharding, |i| {
                finished.push(i);
                true
            })
            .unwrap();
            assert_eq!(finished, [0, 1, 2]);
            assert_eq!(Manifest::read(&dir).unwrap(), m);
            assert_eq!(m.total(), 2000);
            let mut union = Vec::new();
            let mut owner = std::collections::HashMap::new();
            let mut split_subjects = std::collections::HashSet::new();
            for i in 0..3 {
                let shard = snapshot::open(&Manifest::shard_path(&dir, i), &machine).unwrap();
                assert_eq!(
                    shard.dict().len(),
                    whole.dict().len(),
                    "the whole dictionary"
                );
                assert_eq!(shard.len(), m.quads[i]);
                assert!(m.quads[i] > 0, "{by:?}: shard {i} is empty");
                for q in shard.quads() {
                    let first = *owner.entry(q[0]).or_insert(i);
                    if first != i {
                        split_subjects.insert(q[0]);
                    }
                    // The ids mean the same terms as in the whole store.
                    assert_eq!(shard.dict().term(q[2]), whole.dict().term(q[2]));
                    union.push(q);
                }
            }
            union.sort();
            assert_eq!(union, all, "{by:?}");
            // By subject no subject is split; by triple most of the 50 are (40 quads each).
            match by {
                ShardBy::Subject => assert!(split_subjects.is_empty(), "a subject on two shards"),
                ShardBy::Triple => assert!(split_subjects.len() > 40, "{}", split_subjects.len()),
            }
        }
    }

    #[test]
    fn a_folder_in_use_or_a_damaged_manifest_is_refused() {
        let machine = nearflow_topo::from_synthetic("core:2 pu:1").unwrap();
        let whole = store(&machine, 100);
        let tmp = tempfile::tempdir().unwrap();
        let sharding = Sharding {
            shards: 2,
            by: ShardBy::Subject,
        };
        std::fs::write(tmp.path().join("file"), "x").unwrap();
        let e = write_shards(&whole, tmp.path(), sharding, |_| true).unwrap_err();
        assert!(e.to_string().contains("not empty"), "{e}");
        let e = write_shards(&whole, &tmp.path().join("file"), sharding, |_| true).unwrap_err();
        assert!(e.to_string().contains("not a folder"), "{e}");
        // An empty folder is taken.
        let dir = tmp.path().join("c");
        std::fs::create_dir(&dir).unwrap();
        write_shards(&whole, &dir, sharding, |_| true).unwrap();
        let manifest = dir.join(MANIFEST);
        let text = std::fs::read_to_string(&manifest).unwrap();
        let body = text.rsplit_once("end ").unwrap().0.to_owned();
        for (from, to, says) in [
            ("shard-by subject", "shard-by object", "unknown rule"),
            ("shards 2", "shards 0", "shard count"),
            (
                "shard 1 shard-1.store",
                "shard 1 shard-9.store",
                "expected `shard 1",
            ),
            ("nearflow-cluster 1", "nearflow-cluster 9", "does not start"),
        ] {
            // Changed, the checksum refuses it; with its checksum made again, the line does.
            std::fs::write(&manifest, text.replace(from, to)).unwrap();
            let e = Manifest::read(&dir).unwrap_err().to_string();
            assert!(e.contains("cut short or changed"), "{from} → {to}: {e}");
            std::fs::write(&manifest, with_checksum(body.replace(from, to))).unwrap();
            let e = Manifest::read(&dir).unwrap_err().to_string();
            assert!(e.contains(says), "{from} → {to}: {e}");
        }
        // Cut short after a line: refused.
        let cut = &text[..text.find("shard 1").unwrap()];
        std::fs::write(&manifest, cut).unwrap();
        let e = Manifest::read(&dir).unwrap_err().to_string();
        assert!(e.contains("cut short or changed"), "{e}");
        std::fs::write(&manifest, &text).unwrap();
        std::fs::remove_file(Manifest::shard_path(&dir, 1)).unwrap();
        let e = Manifest::read(&dir).unwrap_err().to_string();
        assert!(e.contains("missing"), "{e}");
        // No shards, or too many: refused.
        for shards in [0, MAX_SHARDS + 1] {
            let e = write_shards(
                &whole,
                &tmp.path().join("n"),
                Sharding { shards, ..sharding },
                |_| true,
            );
            assert!(e.unwrap_err().to_string().contains("give 1 to"));
        }
        // Stopped after its first shard: nothing is left of it.
        let e = write_shards(&whole, &tmp.path().join("stopped"), sharding, |_| false);
        assert!(matches!(e, Err(ShardError::Interrupted)));
        // No temporary folder is left beside the clusters.
        let names: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }

    #[test]
    fn what_killed_loads_left_is_removed_and_a_running_one_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("c.d");
        // No process has this id: Linux's ids stop at 2^22.
        let dead = 1u32 << 23;
        let alive = std::process::id();
        let names = |pid: u32| {
            [
                format!(".c.d.{pid}.tmp"),
                format!(".c.d.whole.{pid}.tmp"),
                format!(".c.d.whole.{pid}.tmp.lock"),
                format!(".c.d.whole.{pid}.tmp.log"),
                format!("..c.d.whole.{pid}.tmp.{pid}.tmp"),
                format!("..c.d.whole.{pid}.tmp.load-{pid}"),
            ]
        };
        for pid in [dead, alive] {
            for (i, n) in names(pid).iter().enumerate() {
                let p = tmp.path().join(n);
                if i % 5 == 0 {
                    std::fs::create_dir(&p).unwrap();
                    std::fs::write(p.join("f"), "x").unwrap();
                } else {
                    std::fs::write(p, "x").unwrap();
                }
            }
        }
        // Others' files that look alike are not touched.
        for other in [".c.dx.1.tmp", ".c.d.x.tmp", "c.d.5.tmp", ".c.d.whole.7"] {
            std::fs::write(tmp.path().join(other), "x").unwrap();
        }
        assert_eq!(remove_stale(&dir), 6);
        let mut left: Vec<String> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        let mut want: Vec<String> = names(alive).to_vec();
        want.extend([".c.dx.1.tmp", ".c.d.x.tmp", "c.d.5.tmp", ".c.d.whole.7"].map(String::from));
        want.sort();
        assert_eq!(left, want);
    }

    proptest::proptest! {
        /// Any bytes as a manifest, and a good one with a line changed or put in: an error or
        /// a manifest, never a panic.
        #[test]
        fn any_manifest_is_read_or_refused(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200),
            line in 0usize..6,
            replace in proptest::prelude::any::<bool>(),
            with in "[ a-z0-9.-]{0,24}",
        ) {
            let tmp = tempfile::tempdir().unwrap();
            std::fs::write(tmp.path().join(MANIFEST), &bytes).unwrap();
            let _ = Manifest::read(tmp.path());
            let good = Manifest {
                sharding: Sharding { shards: 2, by: ShardBy::Subject },
                quads: vec![3, 4],
            };
            for i in 0..2 {
                std::fs::write(Manifest::shard_path(tmp.path(), i), "").unwrap();
            }
            let mut lines: Vec<String> = good.text().lines().map(String::from).collect();
            // A line of the 5 replaced, or a line put in before one (or at the end).
            if replace && line < lines.len() {
                lines[line] = with.clone();
            } else {
                lines.insert(line.min(lines.len()), with.clone());
            }
            std::fs::write(tmp.path().join(MANIFEST), lines.join("\n")).unwrap();
            let _ = Manifest::read(tmp.path());
            // The same lines under a good checksum: they reach the parser.
            let body = lines[..lines.len() - 1].iter().map(|l| format!("{l}\n")).collect();
            std::fs::write(tmp.path().join(MANIFEST), with_checksum(body)).unwrap();
            if let Ok(m) = Manifest::read(tmp.path()) {
                proptest::prop_assert_eq!(m.quads.len(), m.sharding.shards);
            }
        }
    }

    #[test]
    fn by_subject_keeps_a_subject_on_one_shard() {
        let sharding = Sharding {
            shards: 3,
            by: ShardBy::Subject,
        };
        let s = key_hash("<http://x/s>");
        let first = sharding.shard_of([s, 1, 2]);
        for (p, o) in [(3, 4), (5, 6), (99, 100)] {
            assert_eq!(sharding.shard_of([s, p, o]), first);
        }
    }
}
