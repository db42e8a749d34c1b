//! The functions a query calls (SPARQL 1.1 §17.4 and the casts of §17.5), one file per family,
//! and the [`Registry`] a call is resolved in when a query is translated.
//!
//! A built-in and a function of the user's are registered the same way: a [`Function`] is a
//! name (the keyword, `STRLEN`, or an IRI), how many arguments it takes, and a body that reads
//! the arguments it needs ([`Args`]) and returns a value or the error value (§17.2: a FILTER
//! over an error is false, a BIND leaves its variable unbound). Adding a built-in is one entry
//! in its family's `register` and a test beside it; a user's function is
//! [`Registry::register`] on a copy of [`Registry::builtins`], given to a query in
//! [`Options::functions`](crate::Options::functions).
//!
//! The families, each listing its functions: [`terms`] (the parts, kinds and constructors of
//! RDF terms), [`strings`], [`numerics`], [`dates`], [`hashes`] and [`casts`] (XPath's
//! constructor casts). `Registry::builtins().names()` lists them all.
//!
//! The forms that do not evaluate all their arguments (`IF`, `COALESCE`, `BOUND`, `EXISTS`, `&&`,
//! `||`) and the operators are not functions: they are [`Expr`]'s own.

pub mod casts;
pub mod dates;
pub mod hashes;
pub mod numerics;
pub mod strings;
pub mod terms;

use std::collections::HashMap;
use std::fmt;
use std::ops::RangeInclusive;
use std::sync::{Arc, OnceLock};

use nearflow_store::term::{Id, Term};

use crate::expr::{EvalCx, Expr};
use crate::minted::Minted;
use crate::value::{EvalError, Val};

type R<T> = Result<T, EvalError>;

/// What a function computes: from its call's arguments, a value or the error value.
pub type Body = dyn for<'a, 's> Fn(&Args<'a, 's>) -> R<Val<'s>> + Send + Sync;

/// A function a query can call by its name.
pub struct Function {
    name: String,
    arity: RangeInclusive<usize>,
    volatile: bool,
    body: Box<Body>,
}

impl Function {
    /// The function `name` (a keyword in upper case as SPARQL writes it, or an IRI), taking a
    /// number of arguments in `arity` (`0..=usize::MAX`: any).
    pub fn new(
        name: impl Into<String>,
        arity: RangeInclusive<usize>,
        body: impl for<'a, 's> Fn(&Args<'a, 's>) -> R<Val<'s>> + Send + Sync + 'static,
    ) -> Function {
        Function {
            name: name.into(),
            arity,
            volatile: false,
            body: Box::new(body),
        }
    }

    /// A function over whole terms, as a user writes one: `f` gets the arguments' terms (an
    /// unbound or erroneous argument makes the call an error before `f` runs) and returns the
    /// value, or `None` for the error value.
    pub fn on_terms(
        name: impl Into<String>,
        arity: RangeInclusive<usize>,
        f: impl Fn(&[Term]) -> Option<Term> + Send + Sync + 'static,
    ) -> Function {
        Function::new(name, arity, move |args| {
            let terms = (0..args.len())
                .map(|i| args.get(i).map(|v| Term::from(v.as_term())))
                .collect::<R<Vec<Term>>>()?;
            let out = f(&terms).ok_or(EvalError)?;
            let v = Val::from_term(out.as_ref());
            Ok(v.into_owned())
        })
    }

    /// This function's value may change from one call to the next with the same arguments
    /// (`RAND`, `UUID`, `BNODE`, `NOW` within a run): a call of it is never folded into a
    /// constant nor read as a function of its arguments' values.
    pub fn volatile(mut self) -> Function {
        self.volatile = true;
        self
    }

    /// The function that every call is an error of (§17.6): what a call of an unknown IRI
    /// compiles to, so a FILTER over it is false rather than the whole query refused.
    pub(crate) fn unknown(name: &str) -> Function {
        Function::new(name, 0..=usize::MAX, |_| Err(EvalError))
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How many arguments it takes.
    pub fn arity(&self) -> RangeInclusive<usize> {
        self.arity.clone()
    }

    /// Whether its value may change between calls with the same arguments.
    pub fn is_volatile(&self) -> bool {
        self.volatile
    }

    /// Calls it.
    #[inline]
    pub fn call<'s>(&self, args: &Args<'_, 's>) -> R<Val<'s>> {
        (self.body)(args)
    }
}

impl fmt::Debug for Function {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

/// The arguments of one call: evaluated when the body asks for them, so a body that fails on
/// its first argument evaluates no other.
pub struct Args<'a, 's> {
    exprs: &'s [Expr],
    cx: EvalCx<'s>,
    row: &'a [Id],
}

impl<'a, 's> Args<'a, 's> {
    /// The arguments `exprs` over `row`.
    pub fn new(exprs: &'s [Expr], cx: EvalCx<'s>, row: &'a [Id]) -> Self {
        Args { exprs, cx, row }
    }

    /// How many there are.
    pub fn len(&self) -> usize {
        self.exprs.len()
    }

    /// Whether the call has none.
    pub fn is_empty(&self) -> bool {
        self.exprs.is_empty()
    }

    /// The value of argument `i` (an error when it is one, or unbound).
    #[inline]
    pub fn get(&self, i: usize) -> R<Val<'s>> {
        self.exprs[i].eval(self.cx, self.row)
    }

    /// The value of argument `i` when the call has one.
    pub fn opt(&self, i: usize) -> R<Option<Val<'s>>> {
        (i < self.len()).then(|| self.get(i)).transpose()
    }

    /// The terms the run made so far and its account: a body that builds a long value asks
    /// [`Minted::may_build`] first.
    pub fn minted(&self) -> &'s Minted {
        self.cx.minted
    }

    /// The solution the call is evaluated in (its columns' ids).
    pub fn row(&self) -> &'a [Id] {
        self.row
    }
}

/// The functions a query's calls are resolved in, by name.
#[derive(Clone, Default)]
pub struct Registry {
    by_name: HashMap<String, Arc<Function>>,
}

impl Registry {
    /// A registry without a function.
    pub fn empty() -> Registry {
        Registry::default()
    }

    /// The built-in functions (shared: copy it to add functions of your own).
    pub fn builtins() -> &'static Arc<Registry> {
        static BUILTINS: OnceLock<Arc<Registry>> = OnceLock::new();
        BUILTINS.get_or_init(|| {
            let mut r = Registry::empty();
            terms::register(&mut r);
            strings::register(&mut r);
            numerics::register(&mut r);
            dates::register(&mut r);
            hashes::register(&mut r);
            casts::register(&mut r);
            Arc::new(r)
        })
    }

    /// Adds `f`, in place of a function of its name.
    pub fn register(&mut self, f: Function) -> &mut Registry {
        self.by_name.insert(f.name.clone(), Arc::new(f));
        self
    }

    /// The function called `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<Function>> {
        self.by_name.get(name)
    }

    /// The names of its functions, in no order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.by_name.keys().map(String::as_str)
    }
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Registry({} functions)", self.by_name.len())
    }
}

/// The built-in function `name`, for the engine's own expressions and tests.
///
/// # Panics
/// When no built-in has that name.
pub fn builtin(name: &str) -> Arc<Function> {
    Registry::builtins()
        .get(name)
        .unwrap_or_else(|| panic!("{name} is not a built-in function"))
        .clone()
}

/// 16 random bytes from the operating system.
fn random_bytes() -> [u8; 16] {
    let mut b = [0u8; 16];
    if getrandom::fill(&mut b).is_err() {
        // No entropy source: the clock and a counter still make distinct values.
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        b[..8].copy_from_slice(&t.to_le_bytes());
        b[8..].copy_from_slice(&N.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    }
    b
}

/// A literal of an XSD datatype.
fn typed(value: String, dt: &str) -> Val<'static> {
    Val::Lit {
        value: std::borrow::Cow::Owned(value),
        datatype: std::borrow::Cow::Owned(format!("{}{dt}", crate::value::XSD)),
        lang: None,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::value::XSD;
    use std::borrow::Cow;

    /// A typed literal.
    pub fn lit<'a>(v: &'a str, dt: &str) -> Val<'a> {
        Val::Lit {
            value: Cow::Borrowed(v),
            datatype: Cow::Owned(format!("{XSD}{dt}")),
            lang: None,
        }
    }

    /// A value's text: a literal's lexical form, an IRI, a blank node's label.
    pub fn text(v: &Val<'_>) -> String {
        match v {
            Val::Lit { value, .. } => value.to_string(),
            Val::Iri(s) | Val::Blank(s) => s.to_string(),
        }
    }

    /// Calls the built-in `name` on constant arguments.
    pub fn call(name: &str, args: &[Val<'_>]) -> R<String> {
        call_in(&Minted::above(0), name, args)
    }

    /// [`call`] with the run's terms and account `minted`.
    pub fn call_in(minted: &Minted, name: &str, args: &[Val<'_>]) -> R<String> {
        let exprs: Vec<Expr> = args
            .iter()
            .map(|v| Expr::Const(Term::from(v.as_term())))
            .collect();
        let dict = nearflow_store::index::Dict::new();
        let cx = EvalCx::over(&dict, minted);
        let f = builtin(name);
        f.call(&Args::new(&exprs, cx, &[])).map(|v| text(&v))
    }

    #[test]
    fn every_keyword_function_of_the_parser_is_registered() {
        use spargebra::algebra::Function as F;
        for f in [
            F::Str,
            F::Lang,
            F::LangMatches,
            F::Datatype,
            F::Iri,
            F::BNode,
            F::Rand,
            F::Abs,
            F::Ceil,
            F::Floor,
            F::Round,
            F::Concat,
            F::SubStr,
            F::StrLen,
            F::Replace,
            F::UCase,
            F::LCase,
            F::EncodeForUri,
            F::Contains,
            F::StrStarts,
            F::StrEnds,
            F::StrBefore,
            F::StrAfter,
            F::Year,
            F::Month,
            F::Day,
            F::Hours,
            F::Minutes,
            F::Seconds,
            F::Timezone,
            F::Tz,
            F::Now,
            F::Uuid,
            F::StrUuid,
            F::Md5,
            F::Sha1,
            F::Sha256,
            F::Sha384,
            F::Sha512,
            F::StrLang,
            F::StrDt,
            F::IsIri,
            F::IsBlank,
            F::IsLiteral,
            F::IsNumeric,
            F::Regex,
        ] {
            assert!(Registry::builtins().get(&f.to_string()).is_some(), "{f}");
        }
    }

    #[test]
    fn a_function_of_the_user_is_called_like_a_built_in() {
        let mut r = (**Registry::builtins()).clone();
        r.register(Function::on_terms("http://ex/twice", 1..=1, |t| {
            let Term::Literal { value, .. } = &t[0] else {
                return None;
            };
            Some(Term::from(nearflow_store::term::TermRef::string(
                &value.repeat(2),
            )))
        }));
        let f = r.get("http://ex/twice").unwrap();
        let exprs = [Expr::Const(Term::from(
            nearflow_store::term::TermRef::string("ab"),
        ))];
        let (dict, minted) = (nearflow_store::index::Dict::new(), Minted::above(0));
        let v = f.call(&Args::new(&exprs, EvalCx::over(&dict, &minted), &[]));
        assert_eq!(v.map(|v| text(&v)), Ok("abab".to_owned()));
        let iri = [Expr::Const(Term::Iri("http://ex/a".into()))];
        assert!(f
            .call(&Args::new(&iri, EvalCx::over(&dict, &minted), &[]))
            .is_err());
        assert!(Registry::builtins().get("http://ex/twice").is_none());
    }
}
