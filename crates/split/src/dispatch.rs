//! Locality-aware dispatch (Fig. 5's `dispatch`): one task per partition, spawned with the
//! partition's home, and the partial results merged in partition order once all have ended.
//!
//! Inside the runtime nothing may block on other tasks, so the merge is a continuation: the
//! partition task that ends last merges and calls `then` (Fig. 5's two loops become a countdown).
//! [`SplittableData::dispatch`] wraps that in a request and waits for it, for callers outside the
//! runtime.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use nearflow_rt::{Runtime, TaskCx};

use crate::{PartInfo, SplitError, SplittableData};

/// The countdown of one dispatch.
struct Join<R, M, C> {
    slots: Mutex<Vec<Option<R>>>,
    left: AtomicUsize,
    merge: M,
    then: Mutex<Option<C>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A partition task that panicked fails its request: nothing reads the slots after that.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn request_error(e: nearflow_rt::RequestError) -> SplitError {
    SplitError::Task(e.to_string())
}

impl<T: Send + Sync + 'static> SplittableData<T> {
    /// Runs `task(cx, data, info)` once per partition, each spawned with its partition's home, and merges the
    /// results in partition order with `merge` (a fold from the first partition's result). Blocks
    /// until done; from inside a task use [`dispatch_in`](Self::dispatch_in).
    pub fn dispatch<R, F, M>(&self, rt: &Runtime, task: F, merge: M) -> Result<R, SplitError>
    where
        R: Send + 'static,
        F: Fn(&TaskCx<'_>, &T, &PartInfo) -> R + Send + Sync + 'static,
        M: Fn(R, R) -> R + Send + Sync + 'static,
    {
        self.check_machine(rt.machine())?;
        let out = Arc::new(Mutex::new(None));
        let o = out.clone();
        let me = self.clone();
        rt.submit(move |cx| me.dispatch_in(cx, task, merge, move |_, r| *lock(&o) = Some(r)))
            .wait()
            .map_err(request_error)??;
        let r = lock(&out).take();
        r.ok_or_else(|| SplitError::Task("the dispatch ended without a result".into()))
    }

    /// As [`dispatch`](Self::dispatch), from inside a task of the runtime: spawns the partition
    /// tasks (deferred, homed) in the current request and returns at once; the partition task
    /// that ends last merges the results and calls `then` with them. A panic in a partition task
    /// fails the request, and `then` does not run.
    pub fn dispatch_in<R, F, M, C>(
        &self,
        cx: &TaskCx<'_>,
        task: F,
        merge: M,
        then: C,
    ) -> Result<(), SplitError>
    where
        R: Send + 'static,
        F: Fn(&TaskCx<'_>, &T, &PartInfo) -> R + Send + Sync + 'static,
        M: Fn(R, R) -> R + Send + Sync + 'static,
        C: FnOnce(&TaskCx<'_>, R) + Send + 'static,
    {
        self.check_machine(cx.machine())?;
        let n = self.len();
        let join = Arc::new(Join {
            slots: Mutex::new((0..n).map(|_| None).collect()),
            left: AtomicUsize::new(n),
            merge,
            then: Mutex::new(Some(then)),
        });
        let task = Arc::new(task);
        for i in 0..n {
            let (parts, join, task) = (self.parts.clone(), join.clone(), task.clone());
            cx.spawn_deferred_at(self.parts[i].info.home, move |cx| {
                let p = &parts[i];
                let r = task(cx, &p.data, &p.info);
                lock(&join.slots)[i] = Some(r);
                // AcqRel: the last one sees every slot written before the others' decrements
                // (the slots' mutex orders them too).
                if join.left.fetch_sub(1, Ordering::AcqRel) == 1 {
                    let results: Vec<R> = std::mem::take(&mut *lock(&join.slots))
                        .into_iter()
                        .map(|r| r.expect("every partition task stored its result"))
                        .collect();
                    let merged = results
                        .into_iter()
                        .reduce(|a, b| (join.merge)(a, b))
                        .expect("at least one partition");
                    if let Some(then) = lock(&join.then).take() {
                        then(cx, merged);
                    }
                }
            });
        }
        Ok(())
    }

    /// Runs `task` on partition `index` only (a query that needs one partition), as the root of
    /// a request homed there, and returns its result.
    pub fn dispatch_to<R, F>(&self, rt: &Runtime, index: usize, task: F) -> Result<R, SplitError>
    where
        R: Send + 'static,
        F: FnOnce(&TaskCx<'_>, &T, &PartInfo) -> R + Send + 'static,
    {
        self.check_machine(rt.machine())?;
        let home = self.part(index)?.info.home;
        let parts = self.parts.clone();
        rt.submit_at(home, move |cx| {
            let p = &parts[index];
            task(cx, &p.data, &p.info)
        })
        .wait()
        .map_err(request_error)
    }

    /// As [`dispatch_to`](Self::dispatch_to), from inside a task: spawns one deferred task homed
    /// at partition `index`, which runs `task` and then `then` with its result.
    pub fn dispatch_to_in<R, F, C>(
        &self,
        cx: &TaskCx<'_>,
        index: usize,
        task: F,
        then: C,
    ) -> Result<(), SplitError>
    where
        F: FnOnce(&TaskCx<'_>, &T, &PartInfo) -> R + Send + 'static,
        C: FnOnce(&TaskCx<'_>, R) + Send + 'static,
    {
        self.check_machine(cx.machine())?;
        let home = self.part(index)?.info.home;
        let parts = self.parts.clone();
        cx.spawn_deferred_at(home, move |cx| {
            let p = &parts[index];
            let r = task(cx, &p.data, &p.info);
            then(cx, r);
        });
        Ok(())
    }

    fn part(&self, index: usize) -> Result<&crate::Partition<T>, SplitError> {
        self.parts.get(index).ok_or(SplitError::NoSuchPartition {
            index,
            len: self.len(),
        })
    }
}
