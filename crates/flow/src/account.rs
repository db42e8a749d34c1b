//! One memory account for everything a request holds: the state its plan's operators charge
//! ([`Io::charge`](crate::Io::charge)), the output its consumer holds
//! ([`PlanHandle::charge_held`](crate::PlanHandle::charge_held)), and whatever else the request
//! makes beside the plan and charges here (the values its expressions build). One limit bounds
//! them together, so no part of a request can pass it by holding what another part left free.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use crate::FlowError;

/// Bytes charged against an optional limit, shared by the parts of one request
/// ([`PlanBuilder::account`](crate::PlanBuilder::account)).
#[derive(Debug, Default)]
pub struct Account {
    limit: Option<usize>,
    charged: AtomicUsize,
    /// The first refusal of a part beside the plan: who, and what it would have held.
    refused: OnceLock<(String, usize)>,
}

impl Account {
    /// An empty account with `limit` bytes (`None`: only counted).
    pub fn new(limit: Option<usize>) -> Self {
        Account {
            limit,
            charged: AtomicUsize::new(0),
            refused: OnceLock::new(),
        }
    }

    /// The limit.
    pub fn limit(&self) -> Option<usize> {
        self.limit
    }

    /// The bytes charged now.
    pub fn charged(&self) -> usize {
        // Relaxed: a counter; each charge is added whole or not at all.
        self.charged.load(Ordering::Relaxed)
    }

    /// The bytes that can still be charged (`usize::MAX` without a limit).
    pub fn room(&self) -> usize {
        self.limit
            .map_or(usize::MAX, |l| l.saturating_sub(self.charged()))
    }

    /// Adds `bytes`, charged for `who`, unless that would pass the limit: then nothing is
    /// added (so a part that answers the error by holding less — an operator that writes its
    /// rows to disk — leaves the others their room), and the error says what the request would
    /// have held.
    pub fn charge(&self, who: impl FnOnce() -> String, bytes: usize) -> Result<(), FlowError> {
        // Relaxed: as in `charged`.
        let Some(limit) = self.limit else {
            self.charged.fetch_add(bytes, Ordering::Relaxed);
            return Ok(());
        };
        self.charged
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| {
                c.checked_add(bytes).filter(|&now| now <= limit)
            })
            .map(|_| ())
            .map_err(|c| FlowError::MemoryLimit {
                operator: who(),
                limit,
                wanted: c.saturating_add(bytes),
            })
    }

    /// Records that `who`, a part of the request beside its plan, was refused `bytes` more:
    /// the plan fails with it at its next operator step ([`refusal`](Self::refusal)), as it
    /// would for an operator's own charge. The first refusal is kept.
    pub fn refuse(&self, who: String, bytes: usize) {
        let _ = self
            .refused
            .set((who, self.charged().saturating_add(bytes)));
    }

    /// Whether a part was refused ([`refuse`](Self::refuse)).
    #[inline]
    pub fn is_refused(&self) -> bool {
        self.refused.get().is_some()
    }

    /// The error of the first [`refuse`](Self::refuse), if any.
    pub fn refusal(&self) -> Option<FlowError> {
        self.refused
            .get()
            .map(|(who, wanted)| FlowError::MemoryLimit {
                operator: who.clone(),
                limit: self.limit.unwrap_or(usize::MAX),
                wanted: *wanted,
            })
    }

    /// Gives back `bytes` charged before and no longer held.
    pub fn uncharge(&self, bytes: usize) {
        // Relaxed: as in `charged`.
        let _ = self
            .charged
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| {
                Some(c.saturating_sub(bytes))
            });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_charge_past_the_limit_adds_nothing_and_says_what_it_would_hold() {
        let a = Account::new(Some(100));
        a.charge(|| "x".into(), 60).unwrap();
        let e = a.charge(|| "y".into(), 50).unwrap_err();
        assert!(matches!(
            e,
            FlowError::MemoryLimit { ref operator, limit: 100, wanted: 110 } if operator == "y"
        ));
        assert_eq!(a.charged(), 60);
        assert_eq!(a.room(), 40);
        a.uncharge(70);
        assert_eq!(a.charged(), 0);
        let free = Account::new(None);
        free.charge(|| "z".into(), usize::MAX / 2).unwrap();
        assert_eq!(free.room(), usize::MAX);
        assert!(a.refusal().is_none());
        a.refuse("z".into(), 500);
        a.refuse("later".into(), 1);
        assert!(matches!(
            a.refusal(),
            Some(FlowError::MemoryLimit { ref operator, limit: 100, wanted: 500 }) if operator == "z"
        ));
    }
}
