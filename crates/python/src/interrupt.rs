//! Ctrl-C seen by a run that holds Python's main thread.
//!
//! Python's own SIGINT handler only notes the signal: the interpreter raises
//! `KeyboardInterrupt` when its main thread next runs Python code. A query run on the main
//! thread with the GIL released would see it only at its end. So while such a run lasts a
//! handler of ours is installed in front of Python's: it sets the run's stop flag, which the
//! engine checks within a step, then calls the handler that was there (Python's, or one the
//! program installed through `signal.signal`, which Python's C handler calls in turn). When
//! the run ends the handler that was there is put back, and the caller asks Python for the
//! pending signals.
//!
//! The run then costs no hand-off to another thread and back: a query of a tenth of a
//! millisecond notices those two wake-ups. Where this is not possible (another thread than
//! the main one, SIGINT ignored or left to its default action, a run inside a run) the caller
//! hands the run to a helper thread and checks for signals while it waits.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// The stop flag of the run on the main thread (one at a time: the thread is busy with it).
static STOP: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// The handler that was installed before ours, and whether it takes `siginfo_t`: written
/// before ours is installed, read by ours.
static PREVIOUS: AtomicUsize = AtomicUsize::new(libc::SIG_DFL);
static PREVIOUS_SIGINFO: AtomicBool = AtomicBool::new(false);

/// Ours: the run's stop flag set, then the previous handler called as it expects.
extern "C" fn on_interrupt(sig: libc::c_int, info: *mut libc::siginfo_t, cx: *mut libc::c_void) {
    if let Some(stop) = STOP.get() {
        stop.store(true, Ordering::Release);
    }
    let previous = PREVIOUS.load(Ordering::Acquire);
    if previous == libc::SIG_DFL || previous == libc::SIG_IGN {
        return;
    }
    if PREVIOUS_SIGINFO.load(Ordering::Acquire) {
        // SAFETY: the address was installed as an `sa_sigaction` with SA_SIGINFO, so it is a
        // function of this signature; it is called as the kernel would have called it.
        let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { std::mem::transmute(previous) };
        f(sig, info, cx);
    } else {
        // SAFETY: the address was installed as an `sa_handler`, a function of one int.
        let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(previous) };
        f(sig);
    }
}

/// Ours installed for as long as this lives; the previous handler put back when dropped.
pub(crate) struct Watch {
    previous: libc::sigaction,
}

impl Drop for Watch {
    fn drop(&mut self) {
        // SAFETY: `previous` is the action the system gave back when ours was installed.
        unsafe { libc::sigaction(libc::SIGINT, &self.previous, std::ptr::null_mut()) };
    }
}

/// Ours installed in front of the handler there, with the stop flag it sets (cleared): on
/// the process's main thread, where Python runs its signal handlers, when SIGINT has a
/// handler (not ignored, not the default action) and ours is not already there.
pub(crate) fn watch() -> Option<(Watch, Arc<AtomicBool>)> {
    // SAFETY: both only read the caller's ids.
    if unsafe { libc::gettid() != libc::getpid() } {
        return None;
    }
    // SAFETY: an all-zero `sigaction` is a valid value for the system to fill in.
    let mut current: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: reads the action into `current`, changing nothing.
    if unsafe { libc::sigaction(libc::SIGINT, std::ptr::null(), &mut current) } != 0 {
        return None;
    }
    let handler = current.sa_sigaction;
    if handler == libc::SIG_DFL
        || handler == libc::SIG_IGN
        || handler == on_interrupt as *const () as usize
    {
        return None;
    }
    PREVIOUS.store(handler, Ordering::Release);
    PREVIOUS_SIGINFO.store(current.sa_flags & libc::SA_SIGINFO != 0, Ordering::Release);
    let stop = STOP.get_or_init(Default::default).clone();
    stop.store(false, Ordering::Release);
    // SAFETY: as above.
    let mut ours: libc::sigaction = unsafe { std::mem::zeroed() };
    ours.sa_sigaction = on_interrupt as *const () as usize;
    ours.sa_flags = current.sa_flags | libc::SA_SIGINFO;
    ours.sa_mask = current.sa_mask;
    // SAFETY: `ours` is a complete action whose handler is async-signal-safe (atomic stores
    // and loads, then the previous handler, which was installed to run in a signal handler).
    if unsafe { libc::sigaction(libc::SIGINT, &ours, std::ptr::null_mut()) } != 0 {
        return None;
    }
    Some((Watch { previous: current }, stop))
}
