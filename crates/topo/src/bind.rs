//! Binding the calling thread to a set of PUs of the host.
//!
//! Only meaningful for a [`Machine`] detected on this host ([`Source::Host`]); for synthetic,
//! XML and preset machines the caller skips binding (the threads run oversubscribed).
//!
//! [`Source::Host`]: crate::Source::Host

use nix::sched::{sched_setaffinity, CpuSet};
use nix::unistd::Pid;

use crate::model::{Machine, PuId};
use crate::TopoError;

/// Binds the calling thread to the given PUs of `machine` (by their OS indices).
pub fn bind_current_thread(machine: &Machine, pus: &[PuId]) -> Result<(), TopoError> {
    if !machine.source().is_host() {
        return Err(TopoError::NotHost);
    }
    let mut set = CpuSet::new();
    for &p in pus {
        let os = machine.pus()[p].os_index;
        set.set(os)
            .map_err(|e| TopoError::Bind(format!("cpu {os}: {e}")))?;
    }
    sched_setaffinity(Pid::from_raw(0), &set).map_err(|e| TopoError::Bind(e.to_string()))
}
