//! Every synchronisation primitive of the recollection-bin protocol comes through this module, so
//! that the same code is model-checked by loom (`RUSTFLAGS="--cfg loom" cargo test -p
//! nearflow-alloc --lib loom`) and runs on std otherwise (tokio's `loom` shim approach).

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};

/// One step of a spin-wait: loom must be told that the thread waits on another one.
#[inline]
pub(crate) fn spin(round: &mut u32) {
    #[cfg(loom)]
    {
        let _ = round;
        loom::thread::yield_now();
    }
    #[cfg(not(loom))]
    {
        *round += 1;
        if *round < 64 {
            std::hint::spin_loop();
        } else {
            // The holder was descheduled (oversubscribed machine): let it run.
            std::thread::yield_now();
        }
    }
}
