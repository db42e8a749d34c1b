//! The background merge: the delta folded into new indexes outside the writer's lock, the
//! checkpoints (a snapshot, or a large store's segment) and the thread that runs them.

use super::*;

impl Db {
    /// Folds the current delta into new sorted indexes, and writes a snapshot when the log
    /// has grown past [`Tuning::checkpoint_bytes`] (or when `checkpoint`). Returns whether it
    /// merged. Queries and updates go on meanwhile.
    ///
    /// A large store's version keeps its delta instead: the checkpoint, when due, writes the
    /// delta as a segment beside the snapshot, or — once the delta is large — the snapshot
    /// again with the delta merged in (see the module's text).
    pub fn merge(&self, checkpoint: bool) -> Result<bool, DbError> {
        let _one = self.merging.lock().expect("not poisoned");
        let (from, seq, cut) = {
            let w = self.writer.lock().expect("not poisoned");
            (self.current(), w.seq, w.log.as_ref().map(|l| l.len))
        };
        let due = checkpoint || cut.is_some_and(|c| c >= self.tuning.checkpoint_bytes);
        if let (Some(path), Some(cut)) = (&self.snapshot, cut) {
            if self.keeps_delta(&from) {
                // An empty delta (updates that cancelled out) is written too: the segment
                // then says the snapshot is the store, and the log is cut all the same.
                if due {
                    self.write_segment(path, &from, seq, cut)?;
                }
                return Ok(false);
            }
            if self.is_large(&from) && !from.is_flat() {
                self.rewrite_large(path, &from, seq, cut)?;
                return Ok(true);
            }
        }
        let started = Instant::now();
        let merged_any = !from.is_flat();
        let merged = Arc::new(from.merged().map_err(SnapshotError::from)?);
        // The merge read every row and term of `from`: a damaged one read as a stand-in.
        if let Some(d) = from.settled_damage() {
            return Err(DbError::SnapshotDamaged {
                path: self.snapshot.clone().unwrap_or_default(),
                why: d.to_owned(),
            });
        }
        {
            let _w = self.writer.lock().expect("not poisoned");
            let latest = self.current();
            let next = if Arc::ptr_eq(&latest, &from) {
                merged.clone()
            } else {
                Arc::new(latest.rebased_onto(&from, &merged)?)
            };
            *self.current.write().expect("not poisoned") = next;
        }
        if merged_any {
            let mut st = self.stats.lock().expect("not poisoned");
            st.merges += 1;
            st.last_merge = started.elapsed();
        }
        let (Some(path), Some(cut)) = (&self.snapshot, cut) else {
            return Ok(merged_any);
        };
        if due {
            // The snapshot holds every record up to `seq` (the log's first `cut` bytes).
            self.save_snapshot(&merged, path)?;
            self.cut_log(seq, cut)?;
            // The snapshot just written, mapped: the versions go on over its indexes, read in
            // place, and the copies in memory are freed once no query holds them.
            let mapped = self.map_written(path, &merged)?;
            let _w = self.writer.lock().expect("not poisoned");
            let latest = self.current();
            let next = latest.rebased_onto(&merged, &mapped)?;
            *self.current.write().expect("not poisoned") = Arc::new(next);
        }
        Ok(merged_any)
    }

    /// Whether `store` lies over a snapshot large enough to keep its delta beside it.
    pub(super) fn is_large(&self, store: &Store) -> bool {
        store.shared().0.len() as u64 >= self.tuning.segment_min_quads
            && self
                .disk
                .lock()
                .expect("not poisoned")
                .as_ref()
                .is_some_and(|d| d.under(store))
    }

    /// Whether `store` keeps its delta: it lies over a large snapshot, and its delta is below
    /// the size at which the snapshot is written again.
    pub(super) fn keeps_delta(&self, store: &Store) -> bool {
        let (a, r) = store.delta().counts();
        let room = self
            .tuning
            .delta_max_quads
            .min(store.shared().0.len() as u64 / self.tuning.rewrite_fraction.max(1));
        ((a + r) as u64) < room && self.is_large(store)
    }

    /// Writes `from`'s delta (every record up to `seq`, the log's first `cut` bytes) as the
    /// snapshot's segment, then cuts the log.
    pub(super) fn write_segment(
        &self,
        path: &Path,
        from: &Store,
        seq: u64,
        cut: u64,
    ) -> Result<(), DbError> {
        let print = {
            let disk = self.disk.lock().expect("not poisoned");
            disk.as_ref().expect("a large store's snapshot").print
        };
        let bytes = segment::write(path, print, seq, from)?;
        // Recorded before the log is cut: from here on, the store needs the segment.
        self.need_segment(seq)?;
        self.cut_log(seq, cut)?;
        let mut st = self.stats.lock().expect("not poisoned");
        st.segments += 1;
        st.last_checkpoint_bytes = bytes;
        Ok(())
    }

    /// Records, synced, that the store needs the segment holding the updates up to `upto`
    /// beside its snapshot (0: none).
    pub(super) fn need_segment(&self, upto: u64) -> Result<(), DbError> {
        let mut w = self.writer.lock().expect("not poisoned");
        w.segment = upto;
        self.record(&w)
    }

    /// Records `w`'s state in `STORE.acked`, synced (a durable store's).
    pub(super) fn record(&self, w: &Writer) -> Result<(), DbError> {
        match (&self.snapshot, w.acked.is_some()) {
            (Some(path), true) => record_acked(path, w.acked()),
            _ => Ok(()),
        }
    }

    /// Writes `store` as the snapshot at `path` (a checkpoint: every record up to the log's
    /// cut), recording it (synced) as the snapshot about to replace the one the log follows
    /// before it is renamed: a crash before the log follows it leaves a snapshot the record
    /// names beside the old log, which an open accepts (and nothing else).
    pub(super) fn save_snapshot(&self, store: &Store, path: &Path) -> Result<(), DbError> {
        let saved = snapshot::save_then(store, path, |tmp| {
            let print = segment::fingerprint(tmp)?;
            let mut w = self.writer.lock().expect("not poisoned");
            w.next = Some(print);
            self.record(&w)
        });
        if saved.is_err() {
            // Not renamed: the record names no file that will be the snapshot.
            let mut w = self.writer.lock().expect("not poisoned");
            if w.next.take().is_some() {
                let _ = self.record(&w);
            }
        }
        saved
    }

    /// Writes `from` (every record up to `seq`) as the snapshot, its delta merged in as the
    /// rows stream out; cuts the log, removes the segment, and rebases the versions onto the
    /// snapshot mapped.
    pub(super) fn rewrite_large(
        &self,
        path: &Path,
        from: &Store,
        seq: u64,
        cut: u64,
    ) -> Result<(), DbError> {
        let started = Instant::now();
        self.save_snapshot(from, path)?;
        self.cut_log(seq, cut)?;
        let mapped = self.map_written(path, from)?;
        {
            let _w = self.writer.lock().expect("not poisoned");
            let latest = self.current();
            let next = latest.rebased_onto(from, &mapped)?;
            *self.current.write().expect("not poisoned") = Arc::new(next);
        }
        let mut st = self.stats.lock().expect("not poisoned");
        st.merges += 1;
        st.last_merge = started.elapsed();
        Ok(())
    }

    /// The log cut to the records after its first `cut` bytes (the last of them `seq`), now
    /// that a snapshot or segment holds those.
    pub(super) fn cut_log(&self, seq: u64, cut: u64) -> Result<(), DbError> {
        let mut w = self.writer.lock().expect("not poisoned");
        // The log follows the snapshot a checkpoint just wrote, or the one it followed.
        let snap = w.next.unwrap_or(w.snap);
        let log = w.log.as_mut().expect("a durable store has its log");
        let rest = log.read_from(cut)?;
        write_log(&log.path, seq, snap, &rest)?;
        *log = open_append(&log.path)?;
        w.snap = snap;
        if w.next.take().is_some() {
            // The new snapshot holds every record up to `seq`, the segment's among them: the
            // store needs no segment from here on (its file goes once the snapshot is mapped).
            w.segment = 0;
            self.record(&w)?;
        }
        Ok(())
    }

    /// The snapshot at `path` just written from `written`, mapped; the segment of the one it
    /// replaced removed, and the new one recorded as the store's file.
    pub(super) fn map_written(&self, path: &Path, written: &Store) -> Result<Store, DbError> {
        // The snapshot holds the segment's updates: recorded before the segment goes.
        self.need_segment(0)?;
        remove_segment(path)?;
        let mapped = snapshot::open(path, written.machine())?;
        let print = segment::fingerprint(path)?;
        *self.disk.lock().expect("not poisoned") = Some(OnDisk::of(&mapped, print));
        let mut st = self.stats.lock().expect("not poisoned");
        st.checkpoints += 1;
        st.last_checkpoint_bytes = print.file_len();
        Ok(mapped)
    }

    /// Runs `serve` (a server, until it stops) over this store as a long-lived writer does:
    /// for a durable store the background merge runs meanwhile ([`start_merger`]), and once
    /// `serve` returns the merge stops and, when updates were made or replayed, the log is
    /// folded into a new snapshot (a checkpoint), so the next open replays nothing. What
    /// `serve` returned, and whether a snapshot was written.
    ///
    /// [`start_merger`]: Self::start_merger
    ///
    /// # Errors
    /// When the checkpoint at the end fails (the updates stay in the log, replayed at the next
    /// open).
    pub fn serving<R>(self: &Arc<Self>, serve: impl FnOnce() -> R) -> Result<(R, bool), DbError> {
        let merger = self.is_durable().then(|| self.start_merger());
        let out = serve();
        let Some(m) = merger else {
            return Ok((out, false));
        };
        self.stop_merger();
        let _ = m.join();
        let st = self.stats();
        if st.commits + st.replayed == 0 {
            return Ok((out, false));
        }
        self.merge(true)?;
        Ok((out, true))
    }

    /// Starts the background merge: a thread that merges once the delta holds
    /// [`Tuning::merge_quads`] quads, or a delta has waited [`Tuning::merge_idle`] without an
    /// update. It ends when the `Db` is dropped… or at [`stop_merger`](Self::stop_merger).
    pub fn start_merger(self: &Arc<Self>) -> std::thread::JoinHandle<()> {
        let db = Arc::downgrade(self);
        std::thread::Builder::new()
            .name("nearflow-merge".into())
            .spawn(move || loop {
                let Some(db) = db.upgrade() else { return };
                if *db.stop.lock().expect("not poisoned") {
                    return;
                }
                let due = {
                    let w = db.writer.lock().expect("not poisoned");
                    let cur = db.current();
                    let (a, r) = cur.delta().counts();
                    let size = a + r;
                    let idle = w.last_update.elapsed();
                    let kept = db.keeps_delta(&cur);
                    let checkpoint = w
                        .log
                        .as_ref()
                        .is_some_and(|l| l.len >= db.tuning.checkpoint_bytes);
                    // A delta kept beside the snapshot waits for its checkpoint; another is
                    // merged once large, or once no update has come for a while.
                    if (kept && checkpoint)
                        || (!kept
                            && (size >= db.tuning.merge_quads
                                || (size > 0 && idle >= db.tuning.merge_idle)))
                    {
                        None
                    } else if kept {
                        let (_w, _) = db
                            .wake
                            .wait_timeout(w, Duration::from_secs(1))
                            .expect("not poisoned");
                        Some(())
                    } else {
                        let wait = if size > 0 {
                            db.tuning.merge_idle - idle
                        } else {
                            Duration::from_secs(1)
                        };
                        let (_w, _) = db.wake.wait_timeout(w, wait).expect("not poisoned");
                        Some(())
                    }
                };
                if due.is_none() {
                    let r = db.merge(false);
                    let mut failure = db.failure.lock().expect("not poisoned");
                    match r {
                        Ok(_) => *failure = None,
                        Err(e) => {
                            eprintln!("nearflow: the background merge failed: {e}");
                            *failure = Some(e.to_string());
                            drop(failure);
                            db.stats.lock().expect("not poisoned").failed += 1;
                            std::thread::sleep(Duration::from_secs(1));
                        }
                    }
                }
            })
            .expect("a thread can be started")
    }

    /// Why the last background merge or checkpoint failed, when none has succeeded since.
    pub fn last_failure(&self) -> Option<String> {
        self.failure.lock().expect("not poisoned").clone()
    }

    /// Stops the background merge thread (it ends at its next wake).
    pub fn stop_merger(&self) {
        *self.stop.lock().expect("not poisoned") = true;
        self.wake.notify_all();
    }
}
