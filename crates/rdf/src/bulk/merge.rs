//! Passes 2 to 4: the k-way merge of the runs' terms, each run's quads sorted once per
//! permutation, and the k-way merge of those into the snapshot's packed blocks.

use super::*;
use crate::snapshot::Sink;

/// Pass 2: the k-way merge of the runs' terms into the snapshot (written at `out`), in key
/// order, each distinct key one id; each run's map from its ids to those written to `map-R`.
/// The terms written. A failed write of the keys or their ends is an error of `out`.
pub(super) fn merge_terms(
    tmp: &TempDir,
    runs: &[Run],
    sink: &mut dyn Sink,
    out: &Path,
    stage: &Stage,
    cancelled: &dyn Fn() -> Result<(), LoadError>,
) -> Result<u64, LoadError> {
    stage.enter(1, runs.iter().map(|r| r.terms).sum());
    let mut readers = Vec::with_capacity(runs.len());
    let mut maps = Vec::with_capacity(runs.len());
    for (r, run) in runs.iter().enumerate() {
        let path = tmp.file("terms", r);
        let rd = RunReader::open(&path).map_err(spill_err(&path))?;
        if rd.count != run.terms {
            return Err(spill_err(&path)(damaged("its count of terms is wrong")));
        }
        readers.push((rd, path, 0u64));
        let path = tmp.file("map", r);
        maps.push((
            RunWriter::create(&path, run.terms).map_err(spill_err(&path))?,
            path,
        ));
    }
    // The next key of run `r` and its id in the run, or `None` when it has no more.
    let next =
        |rd: &mut (RunReader, PathBuf, u64), key: &mut Vec<u8>| -> Result<Option<Id>, LoadError> {
            let (reader, path, read) = rd;
            if *read == reader.count {
                return Ok(None);
            }
            *read += 1;
            let n = reader.varint().map_err(spill_err(path))?;
            if n == 0 || n > 1 << 30 {
                return Err(spill_err(path)(damaged("a term's length out of range")));
            }
            reader.bytes(n as usize, key).map_err(spill_err(path))?;
            reader.id().map(Some).map_err(spill_err(path))
        };
    let mut heap = BinaryHeap::with_capacity(runs.len());
    for (r, rd) in readers.iter_mut().enumerate() {
        let mut key = Vec::new();
        if let Some(id) = next(rd, &mut key)? {
            heap.push(Reverse((key, r, id)));
        }
    }
    let spool_path = tmp.path().join("term-ends");
    let mut spool = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&spool_path)
        .map_err(spill_err(&spool_path))?;
    let mut global: Id = 0;
    let mut last: Vec<u8> = Vec::new();
    let done = &stage.done;
    // The merged keys are in key order, so a format that asks finds every id in order.
    let in_order = std::cell::Cell::new(None);
    let mut sort_rest = |ordered: usize| {
        in_order.set(Some(ordered));
        Vec::new()
    };
    sink.terms_or(&mut spool, spill_err(out), &mut sort_rest, |push| {
        let mut n = 0u64;
        while let Some(Reverse((mut key, r, id))) = heap.pop() {
            if global == 0 || key != last {
                if global >= Id::MAX - 1 {
                    return Err(LoadError::Full(DictFull));
                }
                global += 1;
                let text = std::str::from_utf8(&key)
                    .map_err(|_| spill_err(&readers[r].1)(damaged("a term that is not UTF-8")))?;
                if text.as_bytes()[0] > crate::term::TAG_TYPED {
                    return Err(spill_err(&readers[r].1)(damaged("a term with a bad tag")));
                }
                push(text).map_err(spill_err(out))?;
                std::mem::swap(&mut last, &mut key);
            }
            let (m, path) = &mut maps[r];
            m.varint(u64::from(id))
                .and_then(|()| m.varint(u64::from(global)))
                .map_err(spill_err(path))?;
            if let Some(id) = next(&mut readers[r], &mut key)? {
                if key < last {
                    return Err(spill_err(&readers[r].1)(damaged("its terms out of order")));
                }
                heap.push(Reverse((key, r, id)));
            }
            n += 1;
            if n % 65536 == 0 {
                done.store(n, Ordering::Relaxed);
                cancelled()?;
            }
        }
        Ok(())
    })?;
    // The spool of term offsets is counted once whole, as it is now, then removed.
    if let Ok(m) = std::fs::metadata(&spool_path) {
        tmp.added(m.len());
    }
    tmp.remove(&spool_path);
    for ((reader, path, _), (map, map_path)) in readers.into_iter().zip(maps) {
        reader.end().map_err(spill_err(&path))?;
        tmp.remove(&path);
        tmp.added(map.finish().map_err(spill_err(&map_path))?);
    }
    if in_order.get().is_some_and(|n| n != global as usize) {
        return Err(spill_err(tmp.path())(damaged(
            "the merged terms are out of order",
        )));
    }
    Ok(u64::from(global))
}

/// A permutation's sort key of a quad: graph first.
pub(super) fn key_of(order: Permutation, q: &Quad) -> [Id; 4] {
    let p = order.positions();
    [q[3], q[p[0]], q[p[1]], q[p[2]]]
}

/// The name of a permutation's sorted run files.
pub(super) fn sorted_name(order: Permutation) -> &'static str {
    match order {
        Permutation::Spo => "spo",
        Permutation::Pos => "pos",
        Permutation::Osp => "osp",
    }
}

/// Pass 3: each run's quads in final ids (its map read back), sorted once per permutation,
/// without duplicates, delta-encoded (`spo-R`, `pos-R`, `osp-R`): each row as the first of its
/// four key columns that differs from the row before, that column's increase, and the columns
/// after it whole.
pub(super) fn sort_runs(
    tmp: &TempDir,
    runs: &[Run],
    terms: u64,
    stage: &Stage,
    cancelled: &dyn Fn() -> Result<(), LoadError>,
) -> Result<(), LoadError> {
    stage.enter(2, runs.len() as u64);
    for (r, run) in runs.iter().enumerate() {
        cancelled()?;
        let path = tmp.file("map", r);
        let mut rd = RunReader::open(&path).map_err(spill_err(&path))?;
        if rd.count != run.terms {
            return Err(spill_err(&path)(damaged("its count of terms is wrong")));
        }
        let mut map = vec![0 as Id; run.terms as usize + 1];
        for _ in 0..run.terms {
            let (local, global) = (
                rd.id().map_err(spill_err(&path))?,
                rd.id().map_err(spill_err(&path))?,
            );
            if local == 0 || local as u64 > run.terms || global == 0 || u64::from(global) > terms {
                return Err(spill_err(&path)(damaged("an id out of range")));
            }
            map[local as usize] = global;
        }
        rd.end().map_err(spill_err(&path))?;
        tmp.remove(&path);
        let path = tmp.file("quads", r);
        let mut rd = RunReader::open(&path).map_err(spill_err(&path))?;
        if rd.count != run.quads {
            return Err(spill_err(&path)(damaged("its count of quads is wrong")));
        }
        let mut quads: Vec<Quad> = Vec::with_capacity(run.quads as usize);
        for _ in 0..run.quads {
            let mut q = [0 as Id; 4];
            for (c, x) in q.iter_mut().enumerate() {
                let local = rd.id().map_err(spill_err(&path))?;
                *x = match map.get(local as usize) {
                    // Only the graph may be 0 (the default graph).
                    Some(&g) if g != 0 => g,
                    Some(_) if c == 3 && local == 0 => 0,
                    _ => return Err(spill_err(&path)(damaged("an id out of range"))),
                };
            }
            quads.push(q);
        }
        rd.end().map_err(spill_err(&path))?;
        tmp.remove(&path);
        drop(map);
        for order in Permutation::ALL {
            quads.sort_unstable_by_key(|q| key_of(order, q));
            quads.dedup();
            let path = tmp.file(sorted_name(order), r);
            let mut w = RunWriter::create(&path, quads.len() as u64).map_err(spill_err(&path))?;
            let mut prev = [0 as Id; 4];
            for q in &quads {
                let k = key_of(order, q);
                let d = (0..4).find(|&c| k[c] != prev[c]).unwrap_or(3);
                w.bytes(&[d as u8])
                    .and_then(|()| w.varint(u64::from(k[d] - prev[d])))
                    .and_then(|()| k[d + 1..].iter().try_for_each(|&x| w.varint(u64::from(x))))
                    .map_err(spill_err(&path))?;
                prev = k;
            }
            tmp.added(w.finish().map_err(spill_err(&path))?);
        }
        stage.done.store(r as u64 + 1, Ordering::Relaxed);
    }
    Ok(())
}

/// Reads back a sorted run of [`sort_runs`].
pub(super) struct SortedRun {
    pub(super) rd: RunReader,
    pub(super) path: PathBuf,
    pub(super) left: u64,
    pub(super) prev: [Id; 4],
}

impl SortedRun {
    pub(super) fn next(&mut self) -> Result<Option<[Id; 4]>, LoadError> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        let err = spill_err(&self.path);
        let d = self.rd.byte().map_err(&err)? as usize;
        if d > 3 {
            return Err(err(damaged("a bad row header")));
        }
        let mut k = self.prev;
        let step = self.rd.id().map_err(&err)?;
        k[d] = k[d]
            .checked_add(step)
            .ok_or_else(|| err(damaged("an id past 32 bits")))?;
        for x in &mut k[d + 1..] {
            *x = self.rd.id().map_err(&err)?;
        }
        if k <= self.prev && self.left + 1 < self.rd.count {
            return Err(err(damaged("its rows out of order")));
        }
        self.prev = k;
        Ok(Some(k))
    }
}

/// Pass 4: for each permutation, the k-way merge of the runs' sorted rows into the snapshot
/// (written at `out`), duplicates dropped; the graph table (from SPO) and the statistics.
pub(super) fn merge_quads(
    tmp: &TempDir,
    runs: &[Run],
    sink: &mut dyn Sink,
    out: &Path,
    stage: &Stage,
    cancelled: &dyn Fn() -> Result<(), LoadError>,
) -> Result<(Vec<(Id, usize)>, crate::store::Stats), LoadError> {
    let mut stats = StatsBuilder::default();
    let mut graphs: Vec<(Id, usize)> = Vec::new();
    for order in Permutation::ALL {
        let mut sorted = Vec::with_capacity(runs.len());
        let mut total = 0;
        for r in 0..runs.len() {
            let path = tmp.file(sorted_name(order), r);
            let rd = RunReader::open(&path).map_err(spill_err(&path))?;
            total += rd.count;
            sorted.push(SortedRun {
                left: rd.count,
                rd,
                path,
                prev: [0; 4],
            });
        }
        stage.enter(3, total);
        let mut heap = BinaryHeap::with_capacity(runs.len());
        for (r, s) in sorted.iter_mut().enumerate() {
            if let Some(k) = s.next()? {
                heap.push(Reverse((k, r)));
            }
        }
        let mut rows = 0usize;
        sink.rows_or(order, spill_err(out), |push| {
            let mut last: Option<[Id; 4]> = None;
            let mut n = 0u64;
            while let Some(Reverse((k, r))) = heap.pop() {
                if last != Some(k) {
                    stats.row(order, last, k, &mut graphs, rows);
                    push([k[1], k[2], k[3]]).map_err(spill_err(out))?;
                    rows += 1;
                    last = Some(k);
                }
                if let Some(k) = sorted[r].next()? {
                    heap.push(Reverse((k, r)));
                }
                n += 1;
                if n % 65536 == 0 {
                    stage.done.store(n, Ordering::Relaxed);
                    cancelled()?;
                }
            }
            Ok::<_, LoadError>(())
        })?;
        for s in sorted {
            s.rd.end().map_err(spill_err(&s.path))?;
            tmp.remove(&s.path);
        }
    }
    Ok((graphs, stats.finish()))
}
