//! FILTER, BIND and aggregate expressions over solution rows (§17): the logical operators with
//! the three-valued tables of §17.2 (`||`, `&&`), comparisons and arithmetic over
//! [values](crate::value), and calls of [functions](crate::functions).
//!
//! Terms from the store are borrowed, never copied.

use std::cmp::Ordering;
use std::sync::Arc;

use super::functions::{Args, Function};
use super::minted::Minted;
use super::value::{compare, equal, EvalError, Num, Temporal, Val};
use nearflow_store::index::Dict;
use nearflow_store::index::Store;
use nearflow_store::term::{Id, Term, TermCow, TermRef, UNBOUND};

type R<T> = Result<T, EvalError>;

/// A compiled expression over solution rows (columns are query variables).
#[derive(Clone, Debug)]
pub enum Expr {
    /// A variable's column.
    Var(usize),
    /// A constant term.
    Const(Term),
    /// `||`.
    Or(Box<Expr>, Box<Expr>),
    /// `&&`.
    And(Box<Expr>, Box<Expr>),
    /// `!`.
    Not(Box<Expr>),
    /// `=`.
    Eq(Box<Expr>, Box<Expr>),
    /// `sameTerm`.
    SameTerm(Box<Expr>, Box<Expr>),
    /// `<`, `<=`, `>`, `>=`: the operator's ordering outcomes that make it true.
    Cmp(Box<Expr>, Box<Expr>, CmpOp),
    /// `IN`.
    In(Box<Expr>, Vec<Expr>),
    /// `+ - * /`.
    Arith(Box<Expr>, Box<Expr>, ArithOp),
    /// Unary `-`.
    Neg(Box<Expr>),
    /// Unary `+`.
    Plus(Box<Expr>),
    /// `bound`.
    Bound(usize),
    /// `IF`.
    If(Box<Expr>, Box<Expr>, Box<Expr>),
    /// `COALESCE`.
    Coalesce(Vec<Expr>),
    /// A function call: a built-in or a registered one ([`functions`](crate::functions)).
    Call(Arc<Function>, Vec<Expr>),
    /// `REGEX` with a constant pattern and flags, compiled once.
    Regex(Box<Expr>, Box<regex::Regex>),
    /// `EXISTS { pattern }`: only in the logical algebra. The rewrite passes make every one a
    /// semi-, anti- or mark join (`rewrite/`), so a plan never evaluates it.
    Exists(Box<super::algebra::Node>),
}

/// Comparison operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmpOp {
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

/// Arithmetic operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArithOp {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Div,
}

/// The context an expression is evaluated in: where the terms of ids are — the store's
/// dictionary, and the terms the query made ([`Minted`]).
#[derive(Clone, Copy)]
pub struct EvalCx<'s> {
    /// The store's dictionary.
    pub dict: &'s Dict,
    /// The query's own terms.
    pub minted: &'s Minted,
}

impl<'s> EvalCx<'s> {
    /// The context of a run over `store`.
    pub fn new(store: &'s Store, minted: &'s Minted) -> Self {
        EvalCx {
            dict: store.dict(),
            minted,
        }
    }

    /// The id `e` evaluates to when it is a variable bound to a simple literal of the store
    /// whose id is in key order ([`Dict::ordered_strings`]).
    #[inline]
    fn ordered_strings(&self, e: &Expr, row: &[Id]) -> Option<Id> {
        let Expr::Var(c) = e else {
            return None;
        };
        let id = row[*c];
        (self.dict.ordered_strings().contains(&id) && !self.minted.holds(id)).then_some(id)
    }

    /// `a = b` (and so `!=`) as the equality of two variables' ids, where term equality is
    /// what `=` tests: both bound to terms of the store (not minted), and either one an IRI or
    /// a blank node with its id in key order (RDFterm-equal, §17.4.1.7: a node equals only
    /// itself), or both simple literals with ids in key order (equal strings are one term).
    /// `None` where the values must be read.
    #[inline]
    fn equal_by_id(&self, a: &Expr, b: &Expr, row: &[Id]) -> Option<bool> {
        let (Expr::Var(x), Expr::Var(y)) = (a, b) else {
            return None;
        };
        let (x, y) = (row[*x], row[*y]);
        if x == UNBOUND || y == UNBOUND || self.minted.holds(x) || self.minted.holds(y) {
            return None;
        }
        let (iris, blanks) = (self.dict.ordered_iris(), self.dict.ordered_blanks());
        let node = |id: Id| iris.contains(&id) || blanks.contains(&id);
        let strings = || {
            let s = self.dict.ordered_strings();
            s.contains(&x) && s.contains(&y)
        };
        (node(x) || node(y) || strings()).then_some(x == y)
    }

    /// Whether `id` is an IRI, a blank node or a simple literal of the store, known by the runs
    /// of ids in key order (`false` where it is not known so).
    #[inline]
    pub fn is_node_or_string(&self, id: Id) -> bool {
        self.dict.ordered_iris().contains(&id)
            || self.dict.ordered_strings().contains(&id)
            || self.dict.ordered_blanks().contains(&id)
    }

    /// The context over a dictionary (constant folding uses an empty one).
    pub fn over(dict: &'s Dict, minted: &'s Minted) -> Self {
        EvalCx { dict, minted }
    }

    /// The term of a bound id: borrowed, or decoded from a front-coded block of the store.
    #[inline]
    pub fn term(&self, id: Id) -> TermCow<'s> {
        if self.minted.holds(id) {
            TermCow::Ref(self.minted.term(id))
        } else {
            self.dict.term(id)
        }
    }

    /// The term of a bound id, decoded into `buf` when it is not borrowed (a loop over many
    /// terms reuses one buffer).
    #[inline]
    pub fn term_into<'b>(&self, id: Id, buf: &'b mut String) -> TermRef<'b>
    where
        's: 'b,
    {
        if self.minted.holds(id) {
            self.minted.term(id)
        } else {
            self.dict.term_into(id, buf)
        }
    }

    /// The value of a row's column, `None` when unbound.
    #[inline]
    pub fn val(&self, id: Id) -> Option<Val<'s>> {
        (id != UNBOUND).then(|| Val::from_cow(self.term(id)))
    }

    /// The id of a computed value: the store's when it holds the term, else minted; `None`
    /// only when the ids are exhausted (see [`Minted::overflowed`]).
    pub fn id_of(&self, v: &Val<'_>) -> Option<Id> {
        self.id_of_term(v.as_term())
    }

    /// [`id_of`](Self::id_of) for a term (a VALUES cell, a path's constant end).
    pub fn id_of_term(&self, t: TermRef<'_>) -> Option<Id> {
        self.dict.lookup(t).or_else(|| self.minted.mint(t))
    }
}

impl Expr {
    /// Evaluates as a FILTER does: true keeps the row; false and errors drop it.
    pub fn holds(&self, cx: EvalCx<'_>, row: &[Id]) -> bool {
        self.eval(cx, row).and_then(|v| v.ebv()).unwrap_or(false)
    }

    fn bool_of(&self, cx: EvalCx<'_>, row: &[Id]) -> R<bool> {
        self.eval(cx, row)?.ebv()
    }

    /// Evaluates to a value or the error value.
    pub fn eval<'s>(&'s self, cx: EvalCx<'s>, row: &[Id]) -> R<Val<'s>> {
        match self {
            // The leaves, without the stack check.
            Expr::Var(c) => cx.val(row[*c]).ok_or(EvalError),
            Expr::Const(t) => Ok(Val::from_term(t.as_ref())),
            _ => crate::deeper(|| self.eval_inner(cx, row)),
        }
    }

    fn eval_inner<'s>(&'s self, cx: EvalCx<'s>, row: &[Id]) -> R<Val<'s>> {
        Ok(match self {
            Expr::Var(c) => cx.val(row[*c]).ok_or(EvalError)?,
            Expr::Const(t) => Val::from_term(t.as_ref()),
            Expr::Or(a, b) => {
                // §17.2: T || E = T, E || T = T, F || E = E.
                match (a.bool_of(cx, row), b.bool_of(cx, row)) {
                    (Ok(true), _) | (_, Ok(true)) => Val::boolean(true),
                    (Ok(false), Ok(false)) => Val::boolean(false),
                    _ => return Err(EvalError),
                }
            }
            Expr::And(a, b) => match (a.bool_of(cx, row), b.bool_of(cx, row)) {
                (Ok(false), _) | (_, Ok(false)) => Val::boolean(false),
                (Ok(true), Ok(true)) => Val::boolean(true),
                _ => return Err(EvalError),
            },
            Expr::Not(a) => Val::boolean(!a.bool_of(cx, row)?),
            Expr::Eq(a, b) => Val::boolean(match cx.equal_by_id(a, b, row) {
                Some(e) => e,
                None => equal(&a.eval(cx, row)?, &b.eval(cx, row)?)?,
            }),
            Expr::SameTerm(a, b) => Val::boolean(a.eval(cx, row)? == b.eval(cx, row)?),
            Expr::Cmp(a, b, op) => {
                let o = match (cx.ordered_strings(a, row), cx.ordered_strings(b, row)) {
                    // Two simple literals of the store with ids in key order: their ids
                    // compare as their strings do.
                    (Some(x), Some(y)) => x.cmp(&y),
                    _ => compare(&a.eval(cx, row)?, &b.eval(cx, row)?)?,
                };
                Val::boolean(match op {
                    CmpOp::Lt => o == Ordering::Less,
                    CmpOp::Le => o != Ordering::Greater,
                    CmpOp::Gt => o == Ordering::Greater,
                    CmpOp::Ge => o != Ordering::Less,
                })
            }
            Expr::In(a, list) => {
                let x = a.eval(cx, row)?;
                let mut err = false;
                for e in list {
                    match e.eval(cx, row).and_then(|y| equal(&x, &y)) {
                        Ok(true) => return Ok(Val::boolean(true)),
                        Ok(false) => {}
                        Err(_) => err = true,
                    }
                }
                if err {
                    return Err(EvalError);
                }
                Val::boolean(false)
            }
            Expr::Arith(a, b, op) => {
                let x = a.eval(cx, row)?.numeric().ok_or(EvalError)?;
                let y = b.eval(cx, row)?.numeric().ok_or(EvalError)?;
                Num::arith(x, y, *op).ok_or(EvalError)?.to_val()
            }
            Expr::Neg(a) => match a.eval(cx, row)?.numeric().ok_or(EvalError)? {
                Num::I(x) => Num::I(x.checked_neg().ok_or(EvalError)?),
                Num::D(x) => Num::D(x.checked_neg().ok_or(EvalError)?),
                Num::F(x) => Num::F(-x),
                Num::Db(x) => Num::Db(-x),
            }
            .to_val(),
            Expr::Plus(a) => a.eval(cx, row)?.numeric().ok_or(EvalError)?.to_val(),
            Expr::Bound(c) => Val::boolean(row[*c] != UNBOUND),
            Expr::If(c, t, e) => {
                if c.bool_of(cx, row)? {
                    t.eval(cx, row)?
                } else {
                    e.eval(cx, row)?
                }
            }
            Expr::Coalesce(list) => {
                return list
                    .iter()
                    .find_map(|e| e.eval(cx, row).ok())
                    .ok_or(EvalError)
            }
            Expr::Regex(a, re) => {
                let v = a.eval(cx, row)?;
                let (s, _) = v.string_lit().ok_or(EvalError)?;
                Val::boolean(re.is_match(s))
            }
            Expr::Call(f, args) => {
                // Once a value was refused for the memory limit the query fails: the rest of
                // its step computes nothing more.
                if cx.minted.stopped() {
                    return Err(EvalError);
                }
                f.call(&Args::new(args, cx, row))?
            }
            // Rewritten into joins before planning (`rewrite::extract_exists`).
            Expr::Exists(_) => return Err(EvalError),
        })
    }
}

/// A join key for `?a = ?b` written as a hash join: terms that can be `=` get the same key
/// (the join keeps the `=` as a residual check, so a shared key only has to be necessary):
/// - IRIs, blank nodes, string literals, ill-typed and unknown-datatype literals are `=` only to
///   themselves (or error): their id;
/// - numbers are `=` across types by value: the value as f64 (rounding only merges keys);
/// - booleans by value; all dateTimes share one key (time zones make value equality subtle).
pub fn value_key(cx: EvalCx<'_>, id: Id) -> u64 {
    if id == UNBOUND {
        return 0;
    }
    if cx.is_node_or_string(id) {
        // Known by its id's run, without reading the term.
        return u64::from(id);
    }
    let v = Val::from_cow(cx.term(id));
    if let Some(n) = v.numeric() {
        let f = n.approx();
        let f = if f == 0.0 { 0.0 } else { f };
        if !f.is_nan() {
            return (1 << 62) ^ f.to_bits().rotate_left(7);
        }
    }
    if let Some(b) = v.bool_value() {
        return (2 << 60) | u64::from(b);
    }
    if Temporal::of(&v).is_some() {
        return 3 << 60;
    }
    u64::from(id)
}

/// `items` combined by `join` as a balanced binary tree (depth log₂ n), in their order; `None`
/// when empty. For associative operators only (`&&`, `||`): a chain of thousands of operands
/// would otherwise be thousands of levels deep for every recursive pass over it.
pub fn balanced<T>(mut items: Vec<T>, join: impl Fn(T, T) -> T + Copy) -> Option<T> {
    while items.len() > 1 {
        let mut next = Vec::with_capacity(items.len().div_ceil(2));
        let mut it = items.into_iter();
        while let Some(a) = it.next() {
            next.push(match it.next() {
                Some(b) => join(a, b),
                None => a,
            });
        }
        items = next;
    }
    items.pop()
}
