//! Which local allocator the calling thread uses, and its teardown.
//!
//! A thread gets a local allocator of an [`Allocator`] on its first allocation in the
//! sub-allocators' range (adopting an abandoned one of its node if there is one). The pointer is
//! kept in a `const` thread-local without a destructor (no allocation, no registration), and a
//! pthread key with a destructor is set on the thread: when the thread exits, the destructor
//! abandons every local allocator the thread held (`Heap::abandon`). After that, the thread
//! (still running other destructors) uses the system allocator, and its frees of our blocks go
//! through the recollection bins like any foreign free.
//!
//! A thread keeps one slot for [`crate::GLOBAL`] and seven for other allocators.

use core::cell::Cell;
use core::ptr::{self, NonNull};
use std::sync::Once;

use crate::heap::Heap;
use crate::Allocator;
use crate::AllocatorKind;

const SLOTS: usize = 8;

struct Local {
    slots: [Cell<(*const Allocator, *mut Heap)>; SLOTS],
    /// The thread's key destructor has run.
    dead: Cell<bool>,
    /// The key is set on this thread.
    keyed: Cell<bool>,
    /// 0: the process default; else an [`AllocatorKind`].
    choice: Cell<u8>,
}

thread_local! {
    static LOCAL: Local = const {
        Local {
            slots: [const { Cell::new((ptr::null(), ptr::null_mut())) }; SLOTS],
            dead: Cell::new(false),
            keyed: Cell::new(false),
            choice: Cell::new(0),
        }
    };
}

static KEY_ONCE: Once = Once::new();
static mut KEY: libc::pthread_key_t = 0;

extern "C" fn on_thread_exit(_: *mut libc::c_void) {
    let _ = LOCAL.try_with(|l| {
        l.dead.set(true);
        for s in &l.slots {
            let (a, h) = s.replace((ptr::null(), ptr::null_mut()));
            if !h.is_null() {
                // SAFETY: the allocator is 'static; this thread owned `h` and gives it up.
                unsafe { (*h).abandon(&*a) };
            }
        }
    });
}

fn ensure_key(l: &Local) {
    if l.keyed.get() {
        return;
    }
    KEY_ONCE.call_once(|| {
        // SAFETY: creates a key with our destructor; `KEY` is written once, here, before any
        // read (reads happen after `call_once` returns).
        unsafe {
            let r = libc::pthread_key_create(ptr::addr_of_mut!(KEY), Some(on_thread_exit));
            assert!(r == 0, "pthread_key_create failed");
        }
    });
    // SAFETY: `KEY` was initialised by the `call_once` above; any non-null value makes the
    // destructor run at thread exit.
    unsafe { libc::pthread_setspecific(KEY, ptr::dangling::<libc::c_void>()) };
    l.keyed.set(true);
}

/// For a thread just bound to another NUMA node's PUs: gives up its local allocators of any
/// other node, as at thread exit (`Heap::abandon`; their blocks stay valid and come back
/// through the recollection bins), so that its next allocation binds or adopts one of the node
/// it runs on now. A thread's first allocation fixes its local allocator's node, and a thread
/// may allocate (thread start-up, a name) before it binds itself; without this, a build thread
/// bound to node 1 that first ran on node 0 kept taking node 0's superblocks.
pub fn rehome_current_thread() {
    let node = crate::os::current_node() % crate::MAX_NODES;
    let _ = LOCAL.try_with(|l| {
        if l.dead.get() {
            return;
        }
        for s in &l.slots {
            let (a, h) = s.get();
            if h.is_null() {
                continue;
            }
            // SAFETY: heaps are never unmapped; `node` is atomic.
            let held = unsafe { (*h).node.load(core::sync::atomic::Ordering::Relaxed) } as usize;
            if held != node {
                s.set((ptr::null(), ptr::null_mut()));
                // SAFETY: the allocator is 'static; this thread owned `h` and gives it up, its
                // slot cleared first so that nothing below allocates from it.
                unsafe { (*h).abandon(&*a) };
            }
        }
    });
}

#[inline]
fn slot_of(l: &Local, a: &Allocator) -> Option<usize> {
    let ap: *const Allocator = a;
    if ptr::eq(ap, &crate::GLOBAL) {
        return Some(0);
    }
    (1..SLOTS).find(|&i| l.slots[i].get().0 == ap)
}

/// The calling thread's local allocator of `a`, creating or adopting one if needed.
#[inline]
pub(crate) fn heap(a: &Allocator) -> Option<NonNull<Heap>> {
    LOCAL
        .try_with(|l| {
            if let Some(i) = slot_of(l, a) {
                if let Some(h) = NonNull::new(l.slots[i].get().1) {
                    return Some(h);
                }
            }
            bind(l, a)
        })
        .ok()
        .flatten()
}

#[cold]
fn bind(l: &Local, a: &Allocator) -> Option<NonNull<Heap>> {
    if l.dead.get() {
        return None;
    }
    let ap: *const Allocator = a;
    let i = if ptr::eq(ap, &crate::GLOBAL) {
        0
    } else {
        (1..SLOTS).find(|&i| l.slots[i].get().0.is_null())?
    };
    let h = a.bind_heap(crate::os::current_node())?;
    ensure_key(l);
    l.slots[i].set((ap, h.as_ptr()));
    Some(h)
}

/// The calling thread's local allocator of `a`, if it has one (never creates one).
#[inline]
pub(crate) fn current_heap(a: &Allocator) -> Option<NonNull<Heap>> {
    LOCAL
        .try_with(|l| slot_of(l, a).and_then(|i| NonNull::new(l.slots[i].get().1)))
        .ok()
        .flatten()
}

/// The calling thread's choice, if it made one.
#[inline]
pub(crate) fn choice() -> u8 {
    LOCAL
        .try_with(|l| l.choice.get())
        .unwrap_or(AllocatorKind::System as u8)
}

/// Sets the calling thread's choice (see [`crate::Nearflow`]).
pub fn set_thread_choice(c: AllocatorKind) {
    let _ = LOCAL.try_with(|l| l.choice.set(c as u8));
}
