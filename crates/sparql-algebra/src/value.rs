//! Values of SPARQL 1.1 expressions (§17): RDF terms, borrowed from the store or the query or
//! made by an operator, with the operators' type dispatch (§17.3), numeric promotion
//! (integer → decimal → float → double, §17.1.2), the error value (§17.2), the effective boolean
//! value (§17.2.2) and the orders of `<` and of ORDER BY (§15.1).
//!
//! A number is parsed from its lexical form when an operator needs its value. A literal of a
//! numeric, boolean or dateTime datatype whose lexical form is not valid for it is ill-typed: it
//! stays a term (it compares only by `sameTerm`, its EBV is false).

use std::borrow::Cow;
use std::cmp::Ordering;
use std::str::FromStr;

use oxsdatatypes::{Boolean, Date, DateTime, Decimal, Double, Float, Integer, Time};

use crate::expr::ArithOp;
use nearflow_store::term::{TermCow, TermRef, RDF_LANG_STRING, XSD_STRING};

pub(crate) const XSD: &str = "http://www.w3.org/2001/XMLSchema#";

/// A value: an RDF term, borrowed from the store or the query, or made by an operator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Val<'a> {
    /// An IRI.
    Iri(Cow<'a, str>),
    /// A blank node.
    Blank(Cow<'a, str>),
    /// A literal.
    Lit {
        /// Lexical form.
        value: Cow<'a, str>,
        /// Datatype IRI.
        datatype: Cow<'a, str>,
        /// Language tag (lower case).
        lang: Option<Cow<'a, str>>,
    },
}

/// The error value of §17.2 (a type error, an unbound variable, …).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EvalError;

type R<T> = Result<T, EvalError>;

/// Datatypes a decoded literal borrows instead of copying.
const KNOWN_DATATYPES: [&str; 7] = [
    XSD_STRING,
    RDF_LANG_STRING,
    "http://www.w3.org/2001/XMLSchema#integer",
    "http://www.w3.org/2001/XMLSchema#decimal",
    "http://www.w3.org/2001/XMLSchema#double",
    "http://www.w3.org/2001/XMLSchema#boolean",
    "http://www.w3.org/2001/XMLSchema#dateTime",
];

impl<'a> Val<'a> {
    /// From a borrowed term.
    pub fn from_term(t: TermRef<'a>) -> Self {
        match t {
            TermRef::Iri(s) => Val::Iri(Cow::Borrowed(s)),
            TermRef::Blank(s) => Val::Blank(Cow::Borrowed(s)),
            TermRef::Literal {
                value,
                datatype,
                lang,
            } => Val::Lit {
                value: Cow::Borrowed(value),
                datatype: Cow::Borrowed(datatype),
                lang: lang.map(Cow::Borrowed),
            },
        }
    }

    /// From a term read from the store: borrowed where it is, owned where it was decoded.
    pub fn from_cow(t: TermCow<'a>) -> Self {
        match t {
            TermCow::Ref(t) => Val::from_term(t),
            TermCow::Key(k) => Val::of_key(k),
        }
    }

    /// The value of a decoded dictionary key: the key's own buffer becomes the IRI, label or
    /// lexical form (its text moved to the front), so a decoded term costs no second copy.
    fn of_key(key: String) -> Val<'static> {
        enum Kind {
            Iri,
            Blank,
            Lit(Cow<'static, str>, Option<Cow<'static, str>>),
        }
        let k = TermCow::Key(key);
        // Where the main text starts (it runs to the key's end), and what it is.
        let (start, kind) = {
            let TermCow::Key(key) = &k else {
                unreachable!("made a key above")
            };
            let at = |s: &str| s.as_ptr() as usize - key.as_ptr() as usize;
            match k.as_ref() {
                TermRef::Iri(s) => (at(s), Kind::Iri),
                TermRef::Blank(s) => (at(s), Kind::Blank),
                TermRef::Literal {
                    value,
                    datatype,
                    lang,
                } => {
                    let datatype = match KNOWN_DATATYPES.iter().find(|&&d| d == datatype) {
                        Some(d) => Cow::Borrowed(*d),
                        None => Cow::Owned(datatype.to_owned()),
                    };
                    let lang = lang.map(|l| Cow::Owned(l.to_owned()));
                    (at(value), Kind::Lit(datatype, lang))
                }
            }
        };
        let TermCow::Key(mut key) = k else {
            unreachable!("made a key above")
        };
        key.drain(..start);
        let text = Cow::Owned(key);
        match kind {
            Kind::Iri => Val::Iri(text),
            Kind::Blank => Val::Blank(text),
            Kind::Lit(datatype, lang) => Val::Lit {
                value: text,
                datatype,
                lang,
            },
        }
    }

    pub(crate) fn boolean(b: bool) -> Val<'static> {
        Val::Lit {
            value: Cow::Borrowed(if b { "true" } else { "false" }),
            datatype: Cow::Borrowed("http://www.w3.org/2001/XMLSchema#boolean"),
            lang: None,
        }
    }

    pub(crate) fn string(s: String) -> Val<'static> {
        Val::Lit {
            value: Cow::Owned(s),
            datatype: Cow::Borrowed(XSD_STRING),
            lang: None,
        }
    }

    /// A string literal: language-tagged with `tag`, else `xsd:string`.
    pub(crate) fn text(s: String, tag: Option<&str>) -> Val<'static> {
        match tag {
            Some(t) => Val::Lit {
                value: Cow::Owned(s),
                datatype: Cow::Borrowed(RDF_LANG_STRING),
                lang: Some(Cow::Owned(t.to_owned())),
            },
            None => Val::string(s),
        }
    }

    pub(crate) fn integer(i: i64) -> Val<'static> {
        Num::I(Integer::from(i)).to_val()
    }

    /// The value with every part owned.
    pub fn into_owned(self) -> Val<'static> {
        let own = |c: Cow<'_, str>| Cow::Owned(c.into_owned());
        match self {
            Val::Iri(s) => Val::Iri(own(s)),
            Val::Blank(s) => Val::Blank(own(s)),
            Val::Lit {
                value,
                datatype,
                lang,
            } => Val::Lit {
                value: own(value),
                datatype: own(datatype),
                lang: lang.map(own),
            },
        }
    }

    /// As a borrowed term.
    pub fn as_term(&self) -> TermRef<'_> {
        match self {
            Val::Iri(s) => TermRef::Iri(s),
            Val::Blank(s) => TermRef::Blank(s),
            Val::Lit {
                value,
                datatype,
                lang,
            } => TermRef::Literal {
                value,
                datatype,
                lang: lang.as_deref(),
            },
        }
    }

    pub(crate) fn xsd_type(&self) -> Option<&str> {
        match self {
            Val::Lit {
                datatype,
                lang: None,
                ..
            } => datatype.strip_prefix(XSD),
            _ => None,
        }
    }

    /// A simple literal or `xsd:string`.
    pub(crate) fn plain_str(&self) -> Option<&str> {
        match self {
            Val::Lit {
                value,
                datatype,
                lang: None,
            } if datatype == XSD_STRING => Some(value),
            _ => None,
        }
    }

    /// A string literal (simple, `xsd:string` or language-tagged): value and tag.
    pub(crate) fn string_lit(&self) -> Option<(&str, Option<&str>)> {
        match self {
            Val::Lit {
                value,
                datatype,
                lang,
            } if lang.is_some() || datatype == XSD_STRING => Some((value, lang.as_deref())),
            _ => None,
        }
    }

    /// The numeric value, for a valid literal of a numeric datatype.
    pub fn numeric(&self) -> Option<Num> {
        let Val::Lit { value, .. } = self else {
            return None;
        };
        let v = value.as_ref();
        match self.xsd_type()? {
            "integer" | "long" | "int" | "short" | "byte" | "nonNegativeInteger"
            | "nonPositiveInteger" | "negativeInteger" | "positiveInteger" | "unsignedLong"
            | "unsignedInt" | "unsignedShort" | "unsignedByte" => match Integer::from_str(v) {
                Ok(i) => Some(Num::I(i)),
                // A valid integer beyond 64 bits (it was taken as ill-typed, so
                // `!?v` kept it and ORDER BY put it after NaN): exact as a decimal up to about
                // 1.7e20, else its double approximation. Arithmetic on it then gives a decimal
                // or a double, not an integer: the engine has no integers beyond 64 bits.
                Err(_) if is_integer_lexical(v) => Decimal::from_str(v)
                    .ok()
                    .map(Num::D)
                    .or_else(|| Double::from_str(v).ok().map(Num::Db)),
                Err(_) => None,
            },
            "decimal" => Decimal::from_str(v).ok().map(Num::D),
            "float" => Float::from_str(v).ok().map(Num::F),
            "double" => Double::from_str(v).ok().map(Num::Db),
            _ => None,
        }
    }

    pub(crate) fn bool_value(&self) -> Option<bool> {
        match self.xsd_type()? {
            "boolean" => match self {
                Val::Lit { value, .. } => Boolean::from_str(value).ok().map(bool::from),
                _ => None,
            },
            _ => None,
        }
    }

    /// The effective boolean value (§17.2.2).
    pub fn ebv(&self) -> R<bool> {
        match self {
            Val::Lit { value, lang, .. } => {
                if lang.is_some() {
                    return Ok(!value.is_empty());
                }
                if let Some(s) = self.plain_str() {
                    return Ok(!s.is_empty());
                }
                match self.xsd_type() {
                    Some("boolean") => Ok(self.bool_value().unwrap_or(false)),
                    _ => match self.numeric() {
                        Some(n) => Ok(!n.is_zero_or_nan()),
                        None if self.is_numeric_type() => Ok(false),
                        None => Err(EvalError),
                    },
                }
            }
            _ => Err(EvalError),
        }
    }

    pub(crate) fn is_numeric_type(&self) -> bool {
        matches!(
            self.xsd_type(),
            Some(
                "integer"
                    | "decimal"
                    | "float"
                    | "double"
                    | "long"
                    | "int"
                    | "short"
                    | "byte"
                    | "nonNegativeInteger"
                    | "nonPositiveInteger"
                    | "negativeInteger"
                    | "positiveInteger"
                    | "unsignedLong"
                    | "unsignedInt"
                    | "unsignedShort"
                    | "unsignedByte"
            )
        )
    }
}

/// A numeric value, by its promoted type.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Num {
    /// xsd:integer (and its derived types).
    I(Integer),
    /// xsd:decimal.
    D(Decimal),
    /// xsd:float.
    F(Float),
    /// xsd:double.
    Db(Double),
}

impl Num {
    fn rank(self) -> u8 {
        match self {
            Num::I(_) => 0,
            Num::D(_) => 1,
            Num::F(_) => 2,
            Num::Db(_) => 3,
        }
    }

    fn promote(self, rank: u8) -> Num {
        match (self, rank) {
            (n, r) if n.rank() == r => n,
            (Num::I(i), 1) => Num::D(Decimal::from(i)),
            (Num::I(i), 2) => Num::F(Float::from(Decimal::from(i))),
            (Num::I(i), _) => Num::Db(Double::from(Decimal::from(i))),
            (Num::D(d), 2) => Num::F(Float::from(d)),
            (Num::D(d), _) => Num::Db(Double::from(d)),
            (Num::F(f), _) => Num::Db(Double::from(f)),
            (n, _) => n,
        }
    }

    fn pair(a: Num, b: Num) -> (Num, Num) {
        let r = a.rank().max(b.rank());
        (a.promote(r), b.promote(r))
    }

    fn is_zero_or_nan(self) -> bool {
        match self {
            Num::I(i) => i == Integer::from(0),
            Num::D(d) => d == Decimal::from(0),
            Num::F(f) => {
                let f = f32::from(f);
                f == 0.0 || f.is_nan()
            }
            Num::Db(d) => {
                let d = f64::from(d);
                d == 0.0 || d.is_nan()
            }
        }
    }

    /// The value as an f64 (for join keys; may round).
    pub fn approx(self) -> f64 {
        match self.promote(3) {
            Num::Db(d) => f64::from(d),
            _ => f64::NAN,
        }
    }

    fn cmp(a: Num, b: Num) -> Option<Ordering> {
        match Num::pair(a, b) {
            (Num::I(x), Num::I(y)) => x.partial_cmp(&y),
            (Num::D(x), Num::D(y)) => x.partial_cmp(&y),
            (Num::F(x), Num::F(y)) => x.partial_cmp(&y),
            (Num::Db(x), Num::Db(y)) => x.partial_cmp(&y),
            _ => None,
        }
    }

    /// `a op b` with promotion (§17.1.2); `None` on overflow or division by zero.
    pub fn arith(a: Num, b: Num, op: ArithOp) -> Option<Num> {
        // Integer division gives a decimal (§17.4.2.3 via op:numeric-divide).
        let (a, b) = match (op, Num::pair(a, b)) {
            (ArithOp::Div, (Num::I(x), Num::I(y))) => (Num::D(x.into()), Num::D(y.into())),
            (_, p) => p,
        };
        Some(match (a, b) {
            (Num::I(x), Num::I(y)) => Num::I(match op {
                ArithOp::Add => x.checked_add(y)?,
                ArithOp::Sub => x.checked_sub(y)?,
                ArithOp::Mul => x.checked_mul(y)?,
                ArithOp::Div => x.checked_div(y)?,
            }),
            (Num::D(x), Num::D(y)) => Num::D(match op {
                ArithOp::Add => x.checked_add(y)?,
                ArithOp::Sub => x.checked_sub(y)?,
                ArithOp::Mul => x.checked_mul(y)?,
                ArithOp::Div => x.checked_div(y)?,
            }),
            (Num::F(x), Num::F(y)) => Num::F(match op {
                ArithOp::Add => x + y,
                ArithOp::Sub => x - y,
                ArithOp::Mul => x * y,
                ArithOp::Div => x / y,
            }),
            (Num::Db(x), Num::Db(y)) => Num::Db(match op {
                ArithOp::Add => x + y,
                ArithOp::Sub => x - y,
                ArithOp::Mul => x * y,
                ArithOp::Div => x / y,
            }),
            _ => return None,
        })
    }

    /// As a literal of its type, written as `oxsdatatypes` writes the value (as Oxigraph
    /// does: `2`, `2.5`, `3.21E4` is `32100`). The W3C suite's expected results write computed
    /// numbers both that way and in XML Schema 1.0's canonical form (`2.0`, `3.21E4`), so no
    /// single choice matches every file; this one matches Oxigraph's output, which the
    /// differential tests compare term by term.
    pub fn to_val(self) -> Val<'static> {
        let (value, dt) = match self {
            Num::I(x) => (x.to_string(), "integer"),
            Num::D(x) => (x.to_string(), "decimal"),
            Num::F(x) => (x.to_string(), "float"),
            Num::Db(x) => (x.to_string(), "double"),
        };
        Val::Lit {
            value: Cow::Owned(value),
            datatype: Cow::Owned(format!("{XSD}{dt}")),
            lang: None,
        }
    }
}

/// `=` (§17.3 operator table, then RDFterm-equal, §17.4.1.7).
pub fn equal(a: &Val<'_>, b: &Val<'_>) -> R<bool> {
    if let (Some(x), Some(y)) = (a.numeric(), b.numeric()) {
        return Ok(Num::cmp(x, y) == Some(Ordering::Equal));
    }
    if let (Some(x), Some(y)) = (a.plain_str(), b.plain_str()) {
        return Ok(x == y);
    }
    if let (Some(x), Some(y)) = (a.bool_value(), b.bool_value()) {
        return Ok(x == y);
    }
    if let (Some(x), Some(y)) = (Temporal::of(a), Temporal::of(b)) {
        return match x.partial_cmp(y) {
            Some(o) => Ok(o == Ordering::Equal),
            None => Err(EvalError),
        };
    }
    // RDFterm-equal.
    if a == b {
        return Ok(true);
    }
    // Strings and language-tagged strings are known datatypes: two of them that are not the
    // same term are known to differ (§17.4.1.7 lets an implementation say false for literals
    // it knows to be different), as a simple literal and one with a tag, or two tags, do.
    let stringish =
        |v: &Val<'_>| v.plain_str().is_some() || matches!(v, Val::Lit { lang: Some(_), .. });
    match (a, b) {
        (Val::Lit { .. }, Val::Lit { .. }) if stringish(a) && stringish(b) => Ok(false),
        (Val::Lit { .. }, Val::Lit { .. }) => Err(EvalError),
        _ => Ok(false),
    }
}

/// The ordering `<` and friends use (§17.3): numbers, strings (simple and `xsd:string`, by code
/// point), booleans, dateTimes; anything else is an error.
pub fn compare(a: &Val<'_>, b: &Val<'_>) -> R<Ordering> {
    if let (Some(x), Some(y)) = (a.numeric(), b.numeric()) {
        return Num::cmp(x, y).ok_or(EvalError);
    }
    if let (Some(x), Some(y)) = (a.plain_str(), b.plain_str()) {
        return Ok(x.cmp(y));
    }
    if let (Some(x), Some(y)) = (a.bool_value(), b.bool_value()) {
        return Ok(x.cmp(&y));
    }
    if let (Some(x), Some(y)) = (Temporal::of(a), Temporal::of(b)) {
        return x.partial_cmp(y).ok_or(EvalError);
    }
    Err(EvalError)
}

/// ORDER BY's order (§15.1): unbound < blank nodes < IRIs < literals; literals by [`compare`]
/// where it is defined (values it finds equal tie, and the next key decides), otherwise by
/// datatype, lexical form and tag, so that the order is total.
pub fn order_by_cmp(a: Option<&Val<'_>>, b: Option<&Val<'_>>) -> Ordering {
    let rank = |v: Option<&Val<'_>>| match v {
        None => 0,
        Some(Val::Blank(_)) => 1,
        Some(Val::Iri(_)) => 2,
        Some(Val::Lit { .. }) => 3,
    };
    match (a, b) {
        (Some(Val::Blank(x)), Some(Val::Blank(y))) | (Some(Val::Iri(x)), Some(Val::Iri(y))) => {
            x.cmp(y)
        }
        (Some(x @ Val::Lit { .. }), Some(y @ Val::Lit { .. })) => {
            if let (Some(n), Some(m)) = (x.numeric(), y.numeric()) {
                // NaN is unordered; it goes after every number, so the order stays total.
                return Num::cmp(n, m)
                    .unwrap_or_else(|| n.approx().is_nan().cmp(&m.approx().is_nan()));
            }
            match compare(x, y) {
                // Equal values (`1` and `1.0e0`) tie: the next ORDER BY key decides.
                Ok(o) => o,
                Err(_) => lit_key(x).cmp(&lit_key(y)),
            }
        }
        _ => rank(a).cmp(&rank(b)),
    }
}

/// Breaks [`order_by_cmp`]'s ties between distinct terms of equal value (`1`, `1.0e0`): literals by
/// datatype, lexical form and tag. Only for terms `order` finds equal.
pub fn term_order(a: Option<&Val<'_>>, b: Option<&Val<'_>>) -> Ordering {
    match (a, b) {
        (Some(x @ Val::Lit { .. }), Some(y @ Val::Lit { .. })) => lit_key(x).cmp(&lit_key(y)),
        _ => Ordering::Equal,
    }
}

fn lit_key<'v>(v: &'v Val<'_>) -> (u8, &'v str, &'v str, &'v str) {
    match v {
        Val::Lit {
            value,
            datatype,
            lang,
        } => {
            // Numbers first, so that numbers of several types sort together; then strings,
            // simple and language-tagged together by their text (the tag breaks ties, a simple
            // literal first); then other literals by datatype and lexical form.
            if v.numeric().is_some() {
                (0, datatype, value, "")
            } else if lang.is_some() || datatype == XSD_STRING {
                (1, "", value, lang.as_deref().unwrap_or(""))
            } else {
                (2, datatype, value, "")
            }
        }
        _ => (3, "", "", ""),
    }
}

/// A date, a time or a date-time: the values `<`, `=` and the date functions read.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Temporal {
    /// `xsd:dateTime`
    DateTime(DateTime),
    /// `xsd:date`
    Date(Date),
    /// `xsd:time`
    Time(Time),
}

impl Temporal {
    /// The value of a valid `xsd:dateTime`, `xsd:date` or `xsd:time` literal.
    pub fn of(v: &Val<'_>) -> Option<Temporal> {
        let Val::Lit {
            value,
            datatype,
            lang: None,
        } = v
        else {
            return None;
        };
        Some(match datatype.strip_prefix(XSD)? {
            "dateTime" => Temporal::DateTime(DateTime::from_str(value).ok()?),
            "date" => Temporal::Date(Date::from_str(value).ok()?),
            "time" => Temporal::Time(Time::from_str(value).ok()?),
            _ => return None,
        })
    }

    /// Their order, when both are of one type and comparable (a value without a time zone
    /// against one with may be indeterminate: XML Schema §3.2.7.4).
    pub fn partial_cmp(self, other: Temporal) -> Option<std::cmp::Ordering> {
        match (self, other) {
            (Temporal::DateTime(a), Temporal::DateTime(b)) => a.partial_cmp(&b),
            (Temporal::Date(a), Temporal::Date(b)) => a.partial_cmp(&b),
            (Temporal::Time(a), Temporal::Time(b)) => a.partial_cmp(&b),
            _ => None,
        }
    }
}

/// Whether `v` is a valid lexical form of `xsd:integer`: an optional sign and digits.
fn is_integer_lexical(v: &str) -> bool {
    let digits = v.strip_prefix(['+', '-']).unwrap_or(v);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lit<'a>(v: &'a str, dt: &'a str) -> Val<'a> {
        Val::Lit {
            value: Cow::Borrowed(v),
            datatype: Cow::Owned(format!("{XSD}{dt}")),
            lang: None,
        }
    }

    #[test]
    fn numbers_compare_by_value_across_types_and_lexical_forms() {
        assert_eq!(equal(&lit("01", "integer"), &lit("1", "integer")), Ok(true));
        assert_eq!(
            equal(&lit("1", "integer"), &lit("1.0", "decimal")),
            Ok(true)
        );
        assert_eq!(
            equal(&lit("1", "integer"), &lit("1.0E0", "double")),
            Ok(true)
        );
        assert_eq!(
            compare(&lit("2", "integer"), &lit("10", "integer")),
            Ok(Ordering::Less)
        );
        // Strings compare by code point, not as numbers.
        assert_eq!(
            compare(&lit("2", "string"), &lit("10", "string")),
            Ok(Ordering::Greater)
        );
        // A number and a string: `=` is an error (both literals, not the same term).
        assert_eq!(
            equal(&lit("1", "integer"), &lit("1", "string")),
            Err(EvalError)
        );
        assert_eq!(
            compare(&lit("1", "integer"), &lit("1", "string")),
            Err(EvalError)
        );
        // An ill-typed literal equals only itself.
        assert_eq!(equal(&lit("x", "integer"), &lit("x", "integer")), Ok(true));
        assert_eq!(
            equal(&lit("x", "integer"), &lit("y", "integer")),
            Err(EvalError)
        );
        // IRIs vs literals: false, not an error.
        assert_eq!(equal(&Val::Iri("a".into()), &lit("a", "string")), Ok(false));
    }

    #[test]
    fn effective_boolean_values() {
        assert_eq!(lit("", "string").ebv(), Ok(false));
        assert_eq!(lit("a", "string").ebv(), Ok(true));
        assert_eq!(lit("0", "integer").ebv(), Ok(false));
        assert_eq!(lit("0.5", "decimal").ebv(), Ok(true));
        assert_eq!(lit("NaN", "double").ebv(), Ok(false));
        assert_eq!(lit("abc", "integer").ebv(), Ok(false), "ill-typed");
        assert_eq!(lit("1", "boolean").ebv(), Ok(true));
        assert_eq!(Val::Iri("a".into()).ebv(), Err(EvalError));
    }

    #[test]
    fn arithmetic_promotes_and_fails_cleanly() {
        let add = Num::arith(
            Num::I(1.into()),
            Num::D(Decimal::from_str("0.5").unwrap()),
            ArithOp::Add,
        );
        assert_eq!(add.unwrap().to_val(), lit("1.5", "decimal"));
        let div = Num::arith(Num::I(1.into()), Num::I(0.into()), ArithOp::Div);
        assert!(div.is_none(), "integer division by zero is an error");
        let div = Num::arith(Num::I(1.into()), Num::I(2.into()), ArithOp::Div).unwrap();
        assert_eq!(div.to_val(), lit("0.5", "decimal"));
    }

    #[test]
    fn order_is_total_and_puts_kinds_in_spec_order() {
        let vals = [
            None,
            Some(Val::Blank("b".into())),
            Some(Val::Iri("http://a".into())),
            Some(lit("2", "integer")),
            Some(lit("10", "integer")),
            Some(lit("a", "string")),
        ];
        for (i, a) in vals.iter().enumerate() {
            for (j, b) in vals.iter().enumerate() {
                assert_eq!(
                    order_by_cmp(a.as_ref(), b.as_ref()),
                    i.cmp(&j),
                    "{a:?} vs {b:?}"
                );
            }
        }
    }

    /// `1` and `1.0e0` are `=`: under ORDER BY they tie (the next key decides, as Oxigraph
    /// does). NaN is unordered: it sorts after every number, so the order stays a total
    /// preorder (a comparison that is not one may make a sort panic).
    #[test]
    fn equal_numbers_tie_and_nan_goes_last() {
        let one = lit("1", "integer");
        let one_d = lit("1.0e0", "double");
        assert_eq!(order_by_cmp(Some(&one), Some(&one_d)), Ordering::Equal);
        let nums = [
            lit("-INF", "double"),
            lit("0.5", "decimal"),
            lit("1", "integer"),
            lit("2.5", "float"),
            lit("NaN", "double"),
        ];
        for (i, a) in nums.iter().enumerate() {
            for (j, b) in nums.iter().enumerate() {
                assert_eq!(order_by_cmp(Some(a), Some(b)), i.cmp(&j), "{a:?} vs {b:?}");
            }
        }
    }
}
