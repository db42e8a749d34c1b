//! Salvage: opening the way past what an open refuses (a damaged log cut at its first bad
//! record, after a copy of it), under the store's write lock.

use super::*;

/// What [`salvage`] did to a store's log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Salvaged {
    /// Records kept: those before the damage (all of them when there was none).
    pub kept: usize,
    /// Acknowledged records dropped: the damaged one and those still readable after it.
    pub dropped: usize,
    /// Where the damaged log was copied before it was cut (`None`: nothing was damaged).
    pub copy: Option<PathBuf>,
    /// Where and how it was damaged.
    pub why: Option<String>,
    /// Acknowledged updates past the log's end (`STORE.acked` recorded a later one), given up:
    /// the record now names the log's last update.
    pub unlogged: u64,
    /// The last update of a delta segment the store needed and did not find (or found
    /// written beside another snapshot), given up.
    pub segment_lost: Option<u64>,
    /// Records of a log that follows another snapshot, given up (the log is copied to
    /// [`copy`](Self::copy) and started afresh): the snapshot opens as it is.
    pub foreign: Option<usize>,
}

/// Opens the way past what an open refuses, under the store's write lock, saying what it
/// gives up: a damaged log is cut back to its good records (a copy of it kept as
/// `STORE.log.damaged`); a log that follows another snapshot is started afresh (a copy kept as
/// `STORE.log.foreign`); acknowledged updates past the log's end and a segment the store needs
/// and lacks (or finds written beside another snapshot) are given up. A store that needs none
/// of this is left as it is; a log whose header is damaged cannot be salvaged.
pub fn salvage(path: &Path) -> Result<Salvaged, DbError> {
    let _lock = lock(path)?;
    let lp = log_path(path);
    let print = segment::fingerprint(path)?;
    let ap = acked_path(path);
    let acked = match read_acked(&ap) {
        Ok(a) => a,
        // A damaged record says nothing to keep.
        Err(DbError::Damaged { .. }) => Some(Acked {
            seq: u64::MAX,
            ..Acked::default()
        }),
        Err(e) => return Err(e),
    };
    let next = acked.and_then(|a| a.next);
    let floor = acked.map_or(0, |a| a.seq).min(u64::MAX - 1);
    let (mut out, last) = match std::fs::read(&lp) {
        Ok(bytes) => salvage_log(&lp, &bytes, print, next, floor)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (Salvaged::default(), 0),
        Err(e) => return Err(io(&lp)(e)),
    };
    // The segment is the snapshot's own, or a checkpoint wrote this snapshot over the one it
    // belonged to (and the snapshot holds what it held).
    let seg = segment::base_of(path)?;
    let usable = seg == Some(print) || next == Some(print);
    if seg.is_some_and(|f| f != print) {
        remove_segment(path)?;
    }
    match acked {
        Some(a) if a.seq > last || (a.segment > 0 && !usable) || out.foreign.is_some() => {
            if a.seq > last && a.seq != u64::MAX && out.foreign.is_none() {
                out.unlogged = a.seq - last;
            }
            if a.segment > 0 && !usable {
                out.segment_lost = Some(a.segment);
            }
            let segment = if usable && seg == Some(print) {
                a.segment
            } else {
                0
            };
            record_acked(
                path,
                Acked {
                    seq: a.seq.min(last).max(segment),
                    segment,
                    // A log started afresh follows this snapshot; else the record of a
                    // snapshot being written still tells the next open which it is.
                    next: a.next.filter(|_| out.foreign.is_none()),
                },
            )?;
        }
        _ => {}
    }
    Ok(out)
}

/// [`salvage`] of the log's bytes beside the snapshot of fingerprint `print` (`next`: the
/// snapshot `STORE.acked` says a checkpoint or a replacement was writing; `floor`: the last
/// acknowledged update it records): what was kept and dropped, and the last update the log
/// now holds.
pub(super) fn salvage_log(
    lp: &Path,
    bytes: &[u8],
    print: Fingerprint,
    next: Option<Fingerprint>,
    floor: u64,
) -> Result<(Salvaged, u64), DbError> {
    let scan = logfmt::scan(bytes).map_err(|why| DbError::Damaged {
        path: lp.to_owned(),
        why,
    })?;
    let keep_copy = |suffix: &str| -> Result<PathBuf, DbError> {
        let mut copy = lp.as_os_str().to_owned();
        copy.push(suffix);
        let copy = PathBuf::from(copy);
        std::fs::write(&copy, bytes)
            .and_then(|()| File::open(&copy)?.sync_all())
            .map_err(io(&copy))?;
        Ok(copy)
    };
    let foreign = scan.snap.is_some_and(|f| f != print)
        && next != Some(print)
        && next != Some(Fingerprint::REPLACING);
    if foreign {
        let copy = keep_copy(".foreign")?;
        // Numbered on from every update the store acknowledged or the log held.
        let last = scan.last_seq.max(floor);
        write_log(lp, last, print, &[])?;
        return Ok((
            Salvaged {
                copy: Some(copy),
                foreign: Some(scan.records.len()),
                ..Salvaged::default()
            },
            last,
        ));
    }
    let End::Damaged { at, record, why } = &scan.end else {
        return Ok((
            Salvaged {
                kept: scan.records.len(),
                ..Salvaged::default()
            },
            scan.last_seq,
        ));
    };
    let dropped = 1 + logfmt::readable_after(bytes, scan.version, *at, scan.last_seq);
    let copy = keep_copy(".damaged")?;
    write_log(lp, scan.base_seq, print, &reframed(bytes, &scan))?;
    Ok((
        Salvaged {
            kept: scan.records.len(),
            dropped,
            copy: Some(copy),
            why: Some(format!("at byte {at} (record {record}): {why}")),
            ..Salvaged::default()
        },
        scan.last_seq,
    ))
}
