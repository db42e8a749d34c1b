//! The XPath constructor casts of §17.5: `xsd:string(x)`, `xsd:boolean`, `xsd:integer`,
//! `xsd:decimal`, `xsd:float`, `xsd:double`, `xsd:dateTime`, each a function named by its IRI.

use std::str::FromStr;

use oxsdatatypes::{Boolean, DateTime, Decimal, Double, Float, Integer};

use super::{typed, Function, Registry, R};
use crate::value::{EvalError, Num, Temporal, Val, XSD};

pub(super) fn register(r: &mut Registry) {
    for to in Cast::ALL {
        r.register(Function::new(
            format!("{XSD}{}", to.name()),
            1..=1,
            move |a| cast(to, &a.get(0)?),
        ));
    }
}

/// The target of an XPath constructor cast (§17.5): `xsd:T(x)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cast {
    /// `xsd:string`
    String,
    /// `xsd:boolean`
    Boolean,
    /// `xsd:integer`
    Integer,
    /// `xsd:decimal`
    Decimal,
    /// `xsd:float`
    Float,
    /// `xsd:double`
    Double,
    /// `xsd:dateTime`
    DateTime,
}

impl Cast {
    const ALL: [Cast; 7] = [
        Cast::String,
        Cast::Boolean,
        Cast::Integer,
        Cast::Decimal,
        Cast::Float,
        Cast::Double,
        Cast::DateTime,
    ];

    /// The local name of the target type.
    fn name(self) -> &'static str {
        match self {
            Cast::String => "string",
            Cast::Boolean => "boolean",
            Cast::Integer => "integer",
            Cast::Decimal => "decimal",
            Cast::Float => "float",
            Cast::Double => "double",
            Cast::DateTime => "dateTime",
        }
    }
}

/// The XPath constructor cast `xsd:T(v)` (§17.5's table): IRIs cast only to `xsd:string`;
/// strings by their lexical form for the target type; numbers and booleans across each
/// other; the result in the target's canonical form. Anything else is an error.
fn cast(to: Cast, v: &Val<'_>) -> R<Val<'static>> {
    let (lex, num, b) = match v {
        Val::Iri(s) if to == Cast::String => return Ok(Val::string(s.to_string())),
        Val::Lit {
            value, lang: None, ..
        } => (value.as_ref(), v.numeric(), v.bool_value()),
        _ => return Err(EvalError),
    };
    let from_string = v.plain_str().is_some();
    let dt = Temporal::of(v);
    if !from_string && num.is_none() && b.is_none() && dt.is_none() {
        // A literal of another datatype (or an ill-typed one): only to string, as written.
        return match to {
            Cast::String => Ok(Val::string(lex.to_owned())),
            _ => Err(EvalError),
        };
    }
    let trimmed = lex.trim();
    Ok(match to {
        Cast::String => Val::string(xpath_string(v, num, b)),
        Cast::Boolean => {
            let x = if from_string {
                bool::from(Boolean::from_str(trimmed).map_err(|_| EvalError)?)
            } else if let Some(b) = b {
                b
            } else {
                match num.ok_or(EvalError)? {
                    Num::I(i) => bool::from(Boolean::from(i)),
                    Num::D(d) => bool::from(Boolean::from(d)),
                    Num::F(f) => bool::from(Boolean::from(f)),
                    Num::Db(d) => bool::from(Boolean::from(d)),
                }
            };
            typed(x.to_string(), "boolean")
        }
        Cast::Integer => {
            let x = if from_string {
                Integer::from_str(trimmed).map_err(|_| EvalError)?
            } else if let Some(b) = b {
                Integer::from(b)
            } else {
                match num.ok_or(EvalError)? {
                    Num::I(i) => i,
                    Num::D(d) => Integer::try_from(d).map_err(|_| EvalError)?,
                    Num::F(f) => Integer::try_from(f).map_err(|_| EvalError)?,
                    Num::Db(d) => Integer::try_from(d).map_err(|_| EvalError)?,
                }
            };
            typed(x.to_string(), "integer")
        }
        Cast::Decimal => {
            let x = if from_string {
                Decimal::from_str(trimmed).map_err(|_| EvalError)?
            } else if let Some(b) = b {
                Decimal::from(b)
            } else {
                match num.ok_or(EvalError)? {
                    Num::I(i) => Decimal::from(i),
                    Num::D(d) => d,
                    Num::F(f) => Decimal::try_from(f).map_err(|_| EvalError)?,
                    Num::Db(d) => Decimal::try_from(d).map_err(|_| EvalError)?,
                }
            };
            Num::D(x).to_val()
        }
        Cast::Float => {
            let x = if from_string {
                Float::from_str(trimmed).map_err(|_| EvalError)?
            } else if let Some(b) = b {
                Float::from(Boolean::from(b))
            } else {
                match num.ok_or(EvalError)? {
                    Num::I(i) => Float::from(i),
                    Num::D(d) => Float::from(d),
                    Num::F(f) => f,
                    Num::Db(d) => Float::from(d),
                }
            };
            Num::F(x).to_val()
        }
        Cast::Double => {
            let x = if from_string {
                Double::from_str(trimmed).map_err(|_| EvalError)?
            } else if let Some(b) = b {
                Double::from(Boolean::from(b))
            } else {
                match num.ok_or(EvalError)? {
                    Num::I(i) => Double::from(i),
                    Num::D(d) => Double::from(d),
                    Num::F(f) => Double::from(f),
                    Num::Db(d) => d,
                }
            };
            Num::Db(x).to_val()
        }
        Cast::DateTime => {
            let x = if from_string {
                DateTime::from_str(trimmed).map_err(|_| EvalError)?
            } else {
                match dt {
                    Some(Temporal::DateTime(d)) => d,
                    Some(Temporal::Date(d)) => DateTime::try_from(d).map_err(|_| EvalError)?,
                    _ => return Err(EvalError),
                }
            };
            typed(x.to_string(), "dateTime")
        }
    })
}

/// A literal as XPath's cast to `xs:string` writes it (XPath 2.0 §17.1.2): numbers and
/// booleans by their value in canonical form — a decimal without a trailing `.0`, a float or
/// double in `[1e-6, 1e6)` as a decimal (`1E0` → `1`), otherwise in exponent form — and other
/// literals as written.
fn xpath_string(v: &Val<'_>, num: Option<Num>, b: Option<bool>) -> String {
    if let Some(b) = b {
        return b.to_string();
    }
    let lex = match v {
        Val::Lit { value, .. } => value.to_string(),
        Val::Iri(s) | Val::Blank(s) => s.to_string(),
    };
    match num {
        Some(Num::I(i)) => i.to_string(),
        Some(Num::D(d)) => d.to_string(),
        Some(n @ (Num::F(_) | Num::Db(_))) => {
            let x = n.approx();
            if x == 0.0 {
                if x.is_sign_negative() { "-0" } else { "0" }.to_owned()
            } else if x.is_finite() && (1e-6..1e6).contains(&x.abs()) {
                // The shortest decimal that reads back as the value, in its own precision.
                match n {
                    Num::F(f) => f32::from(f).to_string(),
                    _ => x.to_string(),
                }
            } else if x.is_nan() {
                "NaN".to_owned()
            } else if x.is_infinite() {
                if x > 0.0 { "INF" } else { "-INF" }.to_owned()
            } else {
                match n {
                    Num::F(f) => format!("{:E}", f32::from(f)),
                    _ => format!("{x:E}"),
                }
            }
        }
        None => lex,
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{lit, text};
    use super::*;
    use std::borrow::Cow;

    #[test]
    fn casts_follow_the_xpath_table() {
        let c = |to, v: Val<'_>| cast(to, &v).map(|x| text(&x));
        assert_eq!(
            c(Cast::Integer, Val::string(" 12 ".into())),
            Ok("12".into())
        );
        assert_eq!(c(Cast::Integer, lit("2.9", "decimal")), Ok("2".into()));
        assert_eq!(c(Cast::Boolean, lit("0", "integer")), Ok("false".into()));
        assert_eq!(c(Cast::Boolean, Val::string("1".into())), Ok("true".into()));
        assert_eq!(c(Cast::Decimal, lit("true", "boolean")), Ok("1".into()));
        assert_eq!(
            c(Cast::Double, Val::string("1e3".into())),
            Ok("1000".into())
        );
        assert_eq!(
            c(Cast::Float, Val::string("-10.2E3".into())),
            Ok("-10200".into())
        );
        assert!(c(Cast::Decimal, Val::string("1e3".into())).is_err());
        assert!(c(Cast::Integer, Val::string("abc".into())).is_err());
        assert!(c(Cast::Integer, lit("NaN", "double")).is_err());
        assert_eq!(
            c(Cast::String, Val::Iri(Cow::Borrowed("http://a"))),
            Ok("http://a".into())
        );
        assert_eq!(c(Cast::String, lit("0", "boolean")), Ok("false".into()));
        assert_eq!(c(Cast::String, lit("1.0", "decimal")), Ok("1".into()));
        assert_eq!(c(Cast::String, lit("1E0", "double")), Ok("1".into()));
        assert_eq!(c(Cast::String, lit("1.5E7", "double")), Ok("1.5E7".into()));
        assert_eq!(c(Cast::String, lit("01", "integer")), Ok("1".into()));
        assert!(c(Cast::Integer, Val::Iri(Cow::Borrowed("http://a"))).is_err());
    }
}
