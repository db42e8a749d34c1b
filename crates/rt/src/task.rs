//! Tasks, and the per-worker recycling of their memory.
//!
//! ## A task
//!
//! A task is one allocation: a [`Header`] (its request, its home, the worker its memory goes back
//! to, and a table of two functions: run it, drop it) followed by the closure. [`Task`] is a thin
//! pointer to it, eight bytes, so a deque slot or an `Option<Task>` is one word, and the runtime
//! reads a task's request and home with two loads, not through a virtual call.
//!
//! ## Recycling (our extension; not in the papers)
//!
//! A task boxed on its own would be a malloc on the spawning worker and a free on the worker
//! that runs it. When one worker spawns and another runs, which is the normal case for deferred
//! tasks, glibc takes the free on the runner's side and the malloc on the spawner's side through
//! its arena: with boxed tasks, malloc and free were 22 % of the samples of `bench queues` 512
//! under LAS, and 25–30 % under every policy (`perf`).
//!
//! So each worker keeps the blocks of its tasks:
//!
//! - A task whose closure fits a [`BLOCK`] (64 bytes, 16-aligned) gets one from the spawning
//!   worker's [`TaskCache`], and remembers that worker as its *owner*.
//! - The worker that runs it moves the closure out and gives the block back before calling it:
//!   - its own block goes on its free list;
//!   - another worker's goes on a batch kept for that owner, and a full batch ([`BATCH`] blocks)
//!     is pushed onto the owner's [`Returns`] stack with one compare-and-swap;
//!   - the owner takes its whole stack with one swap when its free list runs dry.
//! - A worker keeps at most [`CAP`] blocks on its free list and lets at most about `CAP` wait on
//!   its stack; beyond that blocks go back to the global allocator, so a burst of queued tasks
//!   does not stay resident. With the batches not yet full (under `BATCH` blocks per other
//!   worker), a worker holds at most 128 KiB plus 2 KiB per worker of the runtime.
//! - Blocks are ordinary allocations of the global allocator, one by one, so any block can go
//!   back to it from any thread: a task dropped without running (its request failed, the runtime
//!   shut down) does exactly that, as does a worker's cache when the worker ends.
//! - A task that does not fit, or one spawned by a thread that is no worker (a request's root),
//!   is allocated and freed as before; a root's block that fits enters the cache of the worker
//!   that runs it.
//!
//! The stack is the one lock-free protocol here. loom checks below that no block is lost or taken
//! twice and that the count returns to zero; Miri's race detector checks the hand-over of the
//! blocks' memory (`scripts/miri.sh`, `task::tests`; with the push's Release or the take's
//! Acquire weakened to Relaxed it reports a data race on a block, tried).

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::cell::RefCell;
use std::mem::{align_of, size_of};
use std::ptr::{self, NonNull};

use crossbeam_utils::CachePadded;

use crate::request::RequestRef;
use crate::sync::{AtomicPtr, AtomicUsize, Ordering};
use crate::worker::TaskCx;

/// The size and alignment of a recycled block: the 24-byte header and a closure of up to 40
/// bytes. (16-aligned, as glibc's blocks are; a block may straddle two cache lines.)
pub(crate) const BLOCK: Layout = match Layout::from_size_align(64, 16) {
    Ok(l) => l,
    Err(_) => panic!("64 is a valid size for an alignment of 16"),
};

/// Blocks a worker keeps on its free list, and about as many on its stack (64 KiB each).
pub(crate) const CAP: usize = 1024;

/// Blocks sent to an owner at once.
pub(crate) const BATCH: usize = 32;

/// `Header::owner` of a block no worker owns: whoever frees it may keep it.
const NO_OWNER: u32 = u32::MAX;

/// `Header::owner` of a [`StackTask`]'s header (no block to give back).
const STACK_OWNER: u32 = u32::MAX - 1;

/// A unit of work of a request: a thin pointer to its header and closure (see the module docs).
pub(crate) struct Task(NonNull<Header>);

// SAFETY: a task owns its block, and its closure is `Send` (`Task::new`'s bound); the header
// holds a `RequestRef` (Send) and plain data.
unsafe impl Send for Task {}

/// What the runtime reads of a task.
#[derive(Clone, Copy)]
pub(crate) struct Head {
    pub(crate) req: RequestRef,
    /// The NUMA node of its data ([`Home`](nearflow_policy::Home)), or [`NO_HOME`].
    pub(crate) home: u32,
    /// Whether it is a [`StackTask`] (a `join`'s second side).
    pub(crate) stack: bool,
}

/// `Head::home` of a task without a data home.
pub(crate) const NO_HOME: u32 = u32::MAX;

#[repr(C)]
struct Header {
    req: RequestRef,
    home: u32,
    /// The worker whose cache the block goes back to, or [`NO_OWNER`].
    owner: u32,
    vtable: &'static VTable,
}

struct VTable {
    /// Moves the closure out, frees the block (into the cache given), then calls the closure.
    run: unsafe fn(NonNull<Header>, &TaskCx<'_>, &TaskCache<'_>),
    /// Drops the closure and frees the block to the global allocator.
    drop: unsafe fn(NonNull<Header>),
}

#[repr(C)]
struct Block<F> {
    header: Header,
    f: F,
}

impl<F: FnOnce(&TaskCx<'_>) + Send> Block<F> {
    const VTABLE: VTable = VTable {
        run: run::<F>,
        drop: drop_block::<F>,
    };
    /// Whether the block is a [`BLOCK`] (recycled) rather than of its own layout.
    const FITS: bool = size_of::<Self>() <= BLOCK.size() && align_of::<Self>() <= BLOCK.align();
    const LAYOUT: Layout = if Self::FITS {
        BLOCK
    } else {
        Layout::new::<Self>()
    };
}

/// # Safety
/// `p` is a live `Block<F>`, given up by its `Task`.
unsafe fn run<F: FnOnce(&TaskCx<'_>) + Send>(
    p: NonNull<Header>,
    cx: &TaskCx<'_>,
    cache: &TaskCache<'_>,
) {
    let b = p.cast::<Block<F>>().as_ptr();
    // SAFETY: `b` is live and its closure is read once: the block is freed right after.
    let (f, owner) = unsafe { (ptr::read(ptr::addr_of!((*b).f)), (*b).header.owner) };
    if Block::<F>::FITS {
        // SAFETY: a fitting block is a `BLOCK`, no longer used.
        unsafe { cache.free(p.cast(), owner) };
    } else {
        // SAFETY: allocated with this layout in `Task::new`, no longer used.
        unsafe { dealloc(p.as_ptr().cast(), Block::<F>::LAYOUT) };
    }
    f(cx)
}

/// # Safety
/// `p` is a live `Block<F>`, given up by its `Task`.
unsafe fn drop_block<F: FnOnce(&TaskCx<'_>) + Send>(p: NonNull<Header>) {
    let b = p.cast::<Block<F>>().as_ptr();
    // SAFETY: `b` is live; the closure is dropped once, then the block freed with the layout
    // it was allocated with (a `BLOCK` comes from the global allocator too).
    unsafe {
        ptr::drop_in_place(ptr::addr_of_mut!((*b).f));
        dealloc(b.cast(), Block::<F>::LAYOUT);
    }
}

impl Task {
    /// A task of `req` running `f`, in a block of `cache` if there is one and `f` fits.
    #[cfg(test)]
    pub(crate) fn new<F>(req: RequestRef, home: u32, f: F, cache: Option<&TaskCache<'_>>) -> Task
    where
        F: FnOnce(&TaskCx<'_>) + Send + 'static,
    {
        // SAFETY: `f` is `'static`: it borrows nothing that could end before it runs.
        unsafe { Task::new_unchecked(req, home, f, cache) }
    }

    /// As [`new`](Self::new), for a closure that may borrow from a caller's stack (a `scope`'s
    /// spawn, `join.rs`).
    ///
    /// # Safety
    /// Whatever `f` borrows outlives the task: the caller waits until the task has run or been
    /// dropped before anything `f` borrows ends.
    #[inline]
    pub(crate) unsafe fn new_unchecked<F>(
        req: RequestRef,
        home: u32,
        f: F,
        cache: Option<&TaskCache<'_>>,
    ) -> Task
    where
        F: FnOnce(&TaskCx<'_>) + Send,
    {
        let (p, owner) = match cache {
            Some(c) if Block::<F>::FITS => (c.alloc(), c.owner),
            _ => {
                // SAFETY: `Block<F>` has a header, so the layout is not zero-sized.
                let p = unsafe { alloc(Block::<F>::LAYOUT) };
                match NonNull::new(p) {
                    Some(p) => (p, NO_OWNER),
                    None => handle_alloc_error(Block::<F>::LAYOUT),
                }
            }
        };
        let b = p.cast::<Block<F>>();
        // SAFETY: `p` is a fresh block of `Block::<F>::LAYOUT`, which holds a `Block<F>`.
        unsafe {
            b.as_ptr().write(Block {
                header: Header {
                    req,
                    home,
                    owner,
                    vtable: &Block::<F>::VTABLE,
                },
                f,
            })
        };
        Task(b.cast())
    }

    /// Its request and home.
    #[inline]
    pub(crate) fn head(&self) -> Head {
        // SAFETY: the block is live while its `Task` is.
        let h = unsafe { self.0.as_ref() };
        Head {
            req: h.req,
            home: h.home,
            stack: h.owner == STACK_OWNER,
        }
    }

    /// Runs it on the worker that owns `cache`, its block going back through `cache`.
    #[inline]
    pub(crate) fn run(self, cx: &TaskCx<'_>, cache: &TaskCache<'_>) {
        let p = self.0;
        std::mem::forget(self);
        // SAFETY: `p` is live, and given up: `self` was forgotten.
        unsafe { (p.as_ref().vtable.run)(p, cx, cache) }
    }
}

impl Drop for Task {
    fn drop(&mut self) {
        // SAFETY: the block is live, and this is its last use.
        unsafe { (self.0.as_ref().vtable.drop)(self.0) }
    }
}

/// A task whose block lives on its spawner's stack (`join.rs`): the second side of a `join`.
/// The spawner does not return before the task has run or been dropped, and recognises it by
/// its address when it pops it back from its own queue, which lets it run the job inline
/// (rayon's fast path) with no allocation and no latch.
#[repr(C)]
pub(crate) struct StackTask<J> {
    header: Header,
    /// The job the task runs.
    pub(crate) job: J,
}

/// What a [`StackTask`] runs.
pub(crate) trait StackRun {
    /// Runs the job (the task runs).
    ///
    /// # Safety
    /// `job` is live and its task has not run or been dropped before.
    unsafe fn run(job: *const Self);
    /// The task is dropped unrun.
    ///
    /// # Safety
    /// As [`run`](Self::run).
    unsafe fn abandon(job: *const Self);
}

impl<J: StackRun> StackTask<J> {
    const VTABLE: VTable = VTable {
        run: stack_run::<J>,
        drop: stack_drop::<J>,
    };

    pub(crate) fn new(req: RequestRef, job: J) -> Self {
        StackTask {
            header: Header {
                req,
                home: NO_HOME,
                owner: STACK_OWNER,
                vtable: &Self::VTABLE,
            },
            job,
        }
    }

    /// The task, to queue.
    ///
    /// # Safety
    /// `self` stays where it is, alive, until the task has run or been dropped, and the task
    /// is made once.
    pub(crate) unsafe fn task(&self) -> Task {
        // From the whole `StackTask` (not its header alone), so that the pointer may reach the
        // job: its closure and result sit in `UnsafeCell`s, which a shared borrow lets the
        // task write (Miri's Tree Borrows checks it).
        Task(NonNull::from(self).cast())
    }

    /// Whether `t` is this one's task.
    pub(crate) fn is(&self, t: &Task) -> bool {
        t.0 == NonNull::from(self).cast()
    }
}

/// # Safety
/// `p` is the header of a live `StackTask<J>` whose task has not run.
unsafe fn stack_run<J: StackRun>(p: NonNull<Header>, _: &TaskCx<'_>, _: &TaskCache<'_>) {
    // SAFETY: the header is the first field of the `repr(C)` `StackTask<J>`.
    unsafe { J::run(std::ptr::addr_of!((*p.cast::<StackTask<J>>().as_ptr()).job)) }
}

/// # Safety
/// As [`stack_run`].
unsafe fn stack_drop<J: StackRun>(p: NonNull<Header>) {
    // SAFETY: as in `stack_run`.
    unsafe { J::abandon(std::ptr::addr_of!((*p.cast::<StackTask<J>>().as_ptr()).job)) }
}

/// A worker's stack of blocks given back by other workers (see the module docs). Blocks are
/// linked through their first word.
pub(crate) struct Returns {
    top: AtomicPtr<u8>,
    /// Blocks pushed and not yet taken, or more (added before a push, subtracted after a take).
    count: AtomicUsize,
}

impl Returns {
    pub(crate) fn new() -> Self {
        Returns {
            top: AtomicPtr::new(ptr::null_mut()),
            count: AtomicUsize::new(0),
        }
    }

    /// Pushes the linked blocks `head..=tail` (`n` of them), or frees them if the stack is full.
    ///
    /// # Safety
    /// `head` starts a list of `n` `BLOCK`s linked through their first word and ending at
    /// `tail`, owned by the caller.
    unsafe fn push(&self, head: NonNull<u8>, tail: NonNull<u8>, n: usize) {
        if self.count.load(Ordering::Relaxed) >= CAP {
            // SAFETY: the caller's list.
            unsafe { free_list(head.as_ptr()) };
            return;
        }
        // Relaxed: the count is a bound, not a synchronisation; it is raised before the push
        // (which is Release), so the take that finds these blocks (Acquire) subtracts after it.
        self.count.fetch_add(n, Ordering::Relaxed);
        let mut top = self.top.load(Ordering::Relaxed);
        loop {
            // SAFETY: `tail` is the caller's, not yet published.
            unsafe { tail.as_ptr().cast::<*mut u8>().write(top) };
            // Release: publishes the links written above (and every earlier use of the blocks)
            // to the owner's Acquire swap.
            match self.top.compare_exchange_weak(
                top,
                head.as_ptr(),
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(t) => top = t,
            }
        }
    }

    /// Takes every block pushed so far, handing each to `f`; returns how many.
    fn take_all(&self, mut f: impl FnMut(NonNull<u8>)) -> usize {
        if self.count.load(Ordering::Relaxed) == 0 {
            return 0;
        }
        // Acquire: pairs with the pushers' Release, so their links and their last writes to the
        // blocks happened before this thread reads or reuses them.
        let mut at = self.top.swap(ptr::null_mut(), Ordering::Acquire);
        let mut n = 0;
        while let Some(p) = NonNull::new(at) {
            // SAFETY: a pushed block, now this thread's; its first word links to the next.
            at = unsafe { p.as_ptr().cast::<*mut u8>().read() };
            f(p);
            n += 1;
        }
        self.count.fetch_sub(n, Ordering::Relaxed);
        n
    }
}

impl Drop for Returns {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: every block on the stack is this stack's.
        unsafe { free_list(self.top.swap(ptr::null_mut(), Ordering::Relaxed)) };
    }
}

/// Frees a list of `BLOCK`s linked through their first word.
///
/// # Safety
/// The caller owns the list.
unsafe fn free_list(mut at: *mut u8) {
    while !at.is_null() {
        // SAFETY: a block of the list; its link is read before it is freed.
        unsafe {
            let next = at.cast::<*mut u8>().read();
            dealloc(at, BLOCK);
            at = next;
        }
    }
}

/// A worker's recycled blocks (see the module docs): used by that worker only.
pub(crate) struct TaskCache<'a> {
    owner: u32,
    /// Every worker's stack, by worker.
    returns: &'a [CachePadded<Returns>],
    local: RefCell<Local>,
}

struct Local {
    free: Vec<NonNull<u8>>,
    /// Per owner: the batch being gathered for it (linked through the blocks' first words).
    out: Box<[Batch]>,
}

#[derive(Clone, Copy)]
struct Batch {
    head: *mut u8,
    tail: *mut u8,
    len: usize,
}

const EMPTY: Batch = Batch {
    head: ptr::null_mut(),
    tail: ptr::null_mut(),
    len: 0,
};

impl<'a> TaskCache<'a> {
    /// The cache of worker `owner`, whose stack is `returns[owner]`.
    pub(crate) fn new(owner: usize, returns: &'a [CachePadded<Returns>]) -> Self {
        assert!(owner < returns.len(), "a cache's owner has a stack");
        TaskCache {
            owner: u32::try_from(owner).expect("fewer than 2^32 workers"),
            returns,
            local: RefCell::new(Local {
                free: Vec::new(),
                out: vec![EMPTY; returns.len()].into_boxed_slice(),
            }),
        }
    }

    /// A `BLOCK`: recycled if there is one, else from the global allocator.
    #[inline]
    fn alloc(&self) -> NonNull<u8> {
        let mut l = self.local.borrow_mut();
        if let Some(p) = l.free.pop() {
            return p;
        }
        self.returns[self.owner as usize].take_all(|p| l.free.push(p));
        if let Some(p) = l.free.pop() {
            return p;
        }
        // SAFETY: `BLOCK` is not zero-sized.
        match NonNull::new(unsafe { alloc(BLOCK) }) {
            Some(p) => p,
            None => handle_alloc_error(BLOCK),
        }
    }

    /// Takes back a `BLOCK` owned by worker `owner` (or by none).
    ///
    /// # Safety
    /// `p` is a `BLOCK` no longer in use, from this runtime's caches or the global allocator.
    #[inline]
    unsafe fn free(&self, p: NonNull<u8>, owner: u32) {
        let mut l = self.local.borrow_mut();
        if owner == self.owner || owner == NO_OWNER {
            if l.free.len() < CAP {
                l.free.push(p);
            } else {
                // SAFETY: the caller's block, a `BLOCK`.
                unsafe { dealloc(p.as_ptr(), BLOCK) };
            }
            return;
        }
        let b = &mut l.out[owner as usize];
        // SAFETY: the caller's block, now this cache's: its first word links the batch.
        unsafe { p.as_ptr().cast::<*mut u8>().write(b.head) };
        if b.len == 0 {
            b.tail = p.as_ptr();
        }
        b.head = p.as_ptr();
        b.len += 1;
        if b.len == BATCH {
            let full = std::mem::replace(b, EMPTY);
            // SAFETY: the batch's blocks are linked `head..=tail` and this cache's.
            unsafe {
                self.returns[owner as usize].push(
                    NonNull::new_unchecked(full.head),
                    NonNull::new_unchecked(full.tail),
                    full.len,
                )
            };
        }
    }
}

impl Drop for TaskCache<'_> {
    fn drop(&mut self) {
        let l = self.local.get_mut();
        for p in l.free.drain(..) {
            // SAFETY: the cache's own blocks.
            unsafe { dealloc(p.as_ptr(), BLOCK) };
        }
        for b in l.out.iter_mut() {
            // SAFETY: the batch's blocks are linked and the cache's; the last one's link is null
            // (the first block of a batch links to the empty batch's null head).
            unsafe { free_list(std::mem::replace(b, EMPTY).head) };
        }
    }
}

#[cfg(test)]
mod tests {
    //! The cache on one thread and the stack between threads (also run under Miri,
    //! `scripts/miri.sh`): the global allocator's own checks, and Miri's, catch a block freed
    //! twice or used after it was freed.
    use super::*;
    use std::collections::HashSet;

    fn stacks(n: usize) -> Vec<CachePadded<Returns>> {
        (0..n).map(|_| CachePadded::new(Returns::new())).collect()
    }

    #[test]
    fn own_blocks_come_back_to_their_owner() {
        let r = stacks(1);
        let c = TaskCache::new(0, &r);
        let a = c.alloc();
        // SAFETY: `a` is a block of `c`, unused.
        unsafe { c.free(a, 0) };
        assert_eq!(c.alloc(), a, "the block just freed is reused first");
        // SAFETY: as above.
        unsafe { c.free(a, 0) };
    }

    #[test]
    fn a_full_batch_goes_to_its_owner_and_is_reused_there() {
        let r = stacks(2);
        let owner = TaskCache::new(0, &r);
        let runner = TaskCache::new(1, &r);
        let blocks: Vec<_> = (0..BATCH + 3).map(|_| owner.alloc()).collect();
        for &p in &blocks {
            // SAFETY: blocks of `owner`, unused, each freed once.
            unsafe { runner.free(p, 0) };
        }
        assert_eq!(
            r[0].count.load(Ordering::Relaxed),
            BATCH,
            "one full batch was sent"
        );
        let mut back = HashSet::new();
        for _ in 0..BATCH {
            back.insert(owner.alloc());
        }
        let sent: HashSet<_> = blocks[..BATCH].iter().copied().collect();
        assert_eq!(back, sent, "the owner reuses exactly the blocks sent to it");
        assert_eq!(r[0].count.load(Ordering::Relaxed), 0);
        for p in back {
            // SAFETY: `owner`'s blocks, unused.
            unsafe { owner.free(p, 0) };
        }
        // The three blocks still in `runner`'s batch are freed with it.
    }

    /// Worker 0 allocates and worker 1 frees, on two threads, while worker 0 keeps allocating
    /// from what comes back: every block is written by each side, so Miri reports any race.
    #[test]
    fn blocks_travel_between_threads() {
        /// A block on its way to the runner.
        struct Sent(NonNull<u8>);
        // SAFETY: the block is handed over whole; the sender no longer uses it.
        unsafe impl Send for Sent {}
        let rounds = if cfg!(miri) { 4 } else { 200 };
        let r = stacks(2);
        let (to_runner, from_owner) = std::sync::mpsc::channel::<Vec<Sent>>();
        std::thread::scope(|s| {
            let r = &r;
            s.spawn(move || {
                let runner = TaskCache::new(1, r);
                for blocks in from_owner {
                    for Sent(p) in blocks {
                        // SAFETY: handed over by the owner, unused; written as a task would be.
                        unsafe {
                            p.as_ptr().write_bytes(0xA5, BLOCK.size());
                            runner.free(p, 0);
                        }
                    }
                }
            });
            let owner = TaskCache::new(0, r);
            for _ in 0..rounds {
                let blocks: Vec<Sent> = (0..BATCH + 1)
                    .map(|_| {
                        let p = owner.alloc();
                        // SAFETY: a block of `owner`, unused.
                        unsafe { p.as_ptr().write_bytes(0x5A, BLOCK.size()) };
                        Sent(p)
                    })
                    .collect();
                to_runner.send(blocks).unwrap();
            }
            drop(to_runner);
        });
    }

    #[test]
    fn caps_bound_what_is_kept() {
        let r = stacks(2);
        let owner = TaskCache::new(0, &r);
        let runner = TaskCache::new(1, &r);
        let n = 3 * CAP;
        let blocks: Vec<_> = (0..n).map(|_| owner.alloc()).collect();
        for &p in &blocks {
            // SAFETY: blocks of `owner`, unused, each freed once.
            unsafe { runner.free(p, 0) };
        }
        let waiting = r[0].count.load(Ordering::Relaxed);
        assert!(
            (CAP..CAP + BATCH).contains(&waiting),
            "{waiting} blocks wait for their owner"
        );
        let blocks: Vec<_> = (0..n).map(|_| owner.alloc()).collect();
        for &p in &blocks {
            // SAFETY: as above.
            unsafe { owner.free(p, 0) };
        }
        assert_eq!(owner.local.borrow().free.len(), CAP);
    }

    #[test]
    fn tasks_dropped_unrun_drop_their_closures_once() {
        use std::sync::atomic::AtomicUsize as Count;
        use std::sync::Arc;
        // A closure too large for a block, and one that fits, dropped without running.
        let dropped = Arc::new(Count::new(0));
        struct Tally(Arc<Count>);
        impl Drop for Tally {
            fn drop(&mut self) {
                self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
        let inner = crate::sync::Arc::new(crate::request::RequestInner::new(0));
        let req = RequestRef::leak(&inner);
        let r = stacks(1);
        let c = TaskCache::new(0, &r);
        let small = Tally(dropped.clone());
        let big = (Tally(dropped.clone()), [0u64; 16]);
        drop(Task::new(req, NO_HOME, move |_| drop(small), Some(&c)));
        drop(Task::new(req, NO_HOME, move |_| drop(big), Some(&c)));
        assert_eq!(dropped.load(std::sync::atomic::Ordering::Relaxed), 2);
        req.release();
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! Model check of the stack (run with `RUSTFLAGS="--cfg loom"`): two workers send batches to
    //! a third while it takes them; nothing is lost or taken twice.
    use super::*;
    use crate::sync::Arc;
    use loom::thread;

    fn batch(n: usize) -> (NonNull<u8>, NonNull<u8>) {
        let mut head: *mut u8 = ptr::null_mut();
        let mut tail: *mut u8 = ptr::null_mut();
        for _ in 0..n {
            // SAFETY: `BLOCK` is not zero-sized.
            let p = unsafe { alloc(BLOCK) };
            assert!(!p.is_null());
            // SAFETY: a fresh block.
            unsafe { p.cast::<*mut u8>().write(head) };
            if tail.is_null() {
                tail = p;
            }
            head = p;
        }
        (NonNull::new(head).unwrap(), NonNull::new(tail).unwrap())
    }

    #[test]
    fn loom_returns_lose_nothing() {
        loom::model(|| {
            let r = Arc::new(Returns::new());
            let senders: Vec<_> = (0..2)
                .map(|_| {
                    let r = r.clone();
                    thread::spawn(move || {
                        let (h, t) = batch(2);
                        // SAFETY: this thread's fresh list of two blocks.
                        unsafe { r.push(h, t, 2) };
                    })
                })
                .collect();
            let mut got = Vec::new();
            r.take_all(|p| got.push(p));
            for s in senders {
                s.join().unwrap();
            }
            r.take_all(|p| got.push(p));
            assert_eq!(got.len(), 4, "every block sent is taken once");
            assert_eq!(r.count.load(Ordering::Relaxed), 0);
            for p in got {
                // SAFETY: taken, so this thread's.
                unsafe { dealloc(p.as_ptr(), BLOCK) };
            }
        });
    }
}
