//! Terms a query makes: `BIND` and `SELECT (expr AS ?v)` compute values that the store may not
//! hold (`?price * 2`, `STR(?x)`, `"a"@en`), while a row holds ids. A term the store holds keeps
//! its store id; any other gets an id above the dictionary's, interned per query, so that one
//! term has one id throughout the query and joins, DISTINCT and the hash tables — which compare
//! ids — stay term equality (RDF 1.1 §3: term equality is equality of the parts).
//!
//! The terms live in an append-only vector whose elements never move (`boxcar`), so a term can
//! be borrowed while other rows still add to it; its pushes take no lock. The index of encoded
//! keys is split into [`SHARDS`] maps by the key's hash, each behind its own mutex taken only to
//! mint: two workers minting different terms rarely wait for each other, and one term is still
//! minted once (its key always goes to the same shard).
//!
//! The terms are charged to the query's memory account (the one its plan's operators charge):
//! a term that would pass the limit is not minted, and a value whose building alone could pass
//! it is not built ([`Minted::may_build`]). Either refusal is kept in the account: the plan
//! stops at its next operator step, and the query fails with it ([`Minted::refused`]) before
//! any row made after it reaches the caller.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use nearflow_flow::{Account, FlowError};

use nearflow_store::index::Store;
use nearflow_store::term::{Id, Term, TermRef};

/// Runs started in this process (each run's blank nodes carry its number).
static RUNS: AtomicU64 = AtomicU64::new(0);

/// Shards of the minted terms' index.
pub const SHARDS: usize = 64;

/// The terms one query made, with ids after the store's.
pub struct Minted {
    /// The store's last id: minted ids start above it.
    base: Id,
    terms: boxcar::Vec<Term>,
    index: Box<[Mutex<HashMap<String, Id>>]>,
    hasher: hashbrown::DefaultHashBuilder,
    full: AtomicBool,
    /// `NOW()`'s value for this run (one instant per query execution, §17.4.5.1).
    now: String,
    /// Distinguishes this run's fresh blank nodes from another run's.
    run: u64,
    /// The next fresh blank node's number (`BNODE()`).
    fresh: AtomicU64,
    /// The query's memory account, when it has one (a refusal is kept there: the plan
    /// stops at its next step).
    account: Option<Arc<Account>>,
}

/// Bytes a minted term of `text` bytes (its encoded key) holds: the key in the index and the
/// term's own strings (each about the text), the term and the map's entry.
fn minted_bytes(text: usize) -> usize {
    text.saturating_mul(2)
        .saturating_add(std::mem::size_of::<Term>() + 64)
}

impl std::fmt::Debug for Minted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Minted")
            .field("base", &self.base)
            .field("terms", &self.terms.count())
            .finish()
    }
}

impl Minted {
    /// An empty table for a query over `store`.
    pub fn new(store: &Store) -> Minted {
        Minted::above(store.dict().len() as Id)
    }

    /// The table, its terms charged to `account` from now on.
    pub fn charged_to(mut self, account: Arc<Account>) -> Minted {
        self.account = Some(account);
        self
    }

    /// An empty table whose ids start above `base` (the dictionary's last id).
    pub fn above(base: Id) -> Minted {
        Minted {
            base,
            terms: boxcar::Vec::new(),
            index: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            hasher: hashbrown::DefaultHashBuilder::default(),
            full: AtomicBool::new(false),
            now: oxsdatatypes::DateTime::now().to_string(),
            run: RUNS.fetch_add(1, Ordering::Relaxed),
            fresh: AtomicU64::new(0),
            account: None,
        }
    }

    /// Whether a value of about `bytes` would be allowed by [`may_build`](Self::may_build)
    /// (nothing is kept either way): a cheap bound checked before an exact one.
    pub fn fits(&self, bytes: usize) -> bool {
        self.account
            .as_ref()
            .is_none_or(|a| bytes.saturating_mul(3) <= a.room())
    }

    /// Whether a value of about `bytes` may be built: it, and the two copies minting it
    /// makes, fit in what the memory account has left. When not, the refusal is kept (the
    /// query fails with it) and the caller builds nothing.
    pub fn may_build(&self, bytes: usize) -> bool {
        let Some(account) = &self.account else {
            return true;
        };
        let needs = bytes.saturating_mul(3);
        if needs <= account.room() {
            return true;
        }
        self.refuse(account, needs);
        false
    }

    fn refuse(&self, account: &Account, bytes: usize) {
        account.refuse("the values the query's expressions built".into(), bytes);
    }

    /// Whether a term or a value was refused for the memory limit (the query fails).
    #[inline]
    pub fn stopped(&self) -> bool {
        self.account.as_ref().is_some_and(|a| a.is_refused())
    }

    /// Why the query must fail, when a term or a value was refused for the memory limit.
    pub fn refused(&self) -> Option<FlowError> {
        self.account.as_ref().and_then(|a| a.refusal())
    }

    /// `NOW()` for this run: an `xsd:dateTime` lexical form, the same in every call.
    pub fn now(&self) -> &str {
        &self.now
    }

    /// A number no other run in this process has (for fresh blank node labels).
    pub fn run_tag(&self) -> u64 {
        self.run
    }

    /// A number not handed out before in this run.
    pub fn fresh(&self) -> u64 {
        self.fresh.fetch_add(1, Ordering::Relaxed)
    }

    /// Whether `id` is one of these (not the store's).
    #[inline]
    pub fn holds(&self, id: Id) -> bool {
        id > self.base
    }

    /// The term of a minted id (an id neither minted here nor the store's — a damaged column
    /// of a mapped snapshot — reads as a term that says so).
    pub fn term(&self, id: Id) -> TermRef<'_> {
        match self.terms.get((id - self.base - 1) as usize) {
            Some(t) => t.as_ref(),
            None => TermRef::Iri(&nearflow_store::index::DAMAGED[1..]),
        }
    }

    /// The id of a term not in the store, minted when new; `None` when the 32-bit ids are
    /// exhausted (then [`overflowed`](Self::overflowed) is true and the query must fail) or
    /// the term would pass the memory limit (then [`refused`](Self::refused) says so).
    pub fn mint(&self, t: TermRef<'_>) -> Option<Id> {
        use std::hash::BuildHasher;
        let mut key = String::new();
        t.encode(&mut key);
        let shard = (self.hasher.hash_one(&key) % SHARDS as u64) as usize;
        let mut index = self.index[shard].lock().unwrap_or_else(|p| p.into_inner());
        if let Some(&id) = index.get(&key) {
            return Some(id);
        }
        if let Some(account) = &self.account {
            let bytes = minted_bytes(key.len());
            if account.charge(String::new, bytes).is_err() {
                self.refuse(account, bytes);
                return None;
            }
        }
        if u64::from(self.base) + 1 + self.terms.count() as u64 >= u64::from(Id::MAX) {
            // Relaxed (both stores): read by `overflowed` after the run's plan has ended, which
            // the end of the plan orders after every operator's step.
            self.full.store(true, Ordering::Relaxed);
            return None;
        }
        // Other shards push at the same time: the index this push got is the term's.
        let i = self.terms.push(Term::from(t));
        let id = u64::from(self.base) + 1 + i as u64;
        if id >= u64::from(Id::MAX) {
            self.full.store(true, Ordering::Relaxed);
            return None;
        }
        index.insert(key, id as Id);
        Some(id as Id)
    }

    /// Number of terms minted.
    pub fn len(&self) -> usize {
        self.terms.count()
    }

    /// Whether none was.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether a term could not get an id (the query's answer would be wrong: it fails).
    pub fn overflowed(&self) -> bool {
        self.full.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_term_is_minted_once_and_reads_back() {
        let m = Minted::above(10);
        let a = m.mint(TermRef::string("a")).unwrap();
        let b = m.mint(TermRef::Iri("http://b")).unwrap();
        assert_eq!((a, b), (11, 12));
        assert_eq!(m.mint(TermRef::string("a")), Some(11));
        assert_eq!(m.term(12), TermRef::Iri("http://b"));
        assert!(m.holds(11) && !m.holds(10));
        assert_eq!(m.len(), 2);
    }

    #[test]
    fn exhausted_ids_are_reported_not_reused() {
        let m = Minted::above(Id::MAX - 2);
        assert_eq!(m.mint(TermRef::string("a")), Some(Id::MAX - 1));
        assert!(!m.overflowed());
        assert_eq!(m.mint(TermRef::string("b")), None);
        assert!(m.overflowed());
        assert_eq!(m.mint(TermRef::string("a")), Some(Id::MAX - 1));
    }

    #[test]
    fn terms_minted_from_many_threads_get_one_id_each() {
        let m = Minted::above(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for i in 0..200 {
                        let v = i.to_string();
                        let id = m.mint(TermRef::string(&v)).unwrap();
                        assert_eq!(m.term(id), TermRef::string(&v));
                    }
                });
            }
        });
        assert_eq!(m.len(), 200);
    }
}
