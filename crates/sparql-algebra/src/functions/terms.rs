//! The functions on RDF terms (§17.4.2): their parts (`STR`, `LANG`, `DATATYPE`), their kind
//! (`isIRI`, `isBLANK`, `isLITERAL`, `isNUMERIC`), language ranges (`LANGMATCHES`), and the
//! constructors `STRLANG`, `STRDT`, `IRI`/`URI`, `BNODE`, `UUID`, `STRUUID`.

use std::borrow::Cow;

use nearflow_store::term::{RDF_LANG_STRING, UNBOUND};

use super::{random_bytes, Args, Function, Registry, R};
use crate::value::{EvalError, Val};

pub(super) fn register(r: &mut Registry) {
    r.register(Function::new("STR", 1..=1, str));
    r.register(Function::new("LANG", 1..=1, lang));
    r.register(Function::new("DATATYPE", 1..=1, datatype));
    r.register(Function::new("LANGMATCHES", 2..=2, lang_matches_fn));
    r.register(Function::new("isIRI", 1..=1, |a| {
        Ok(Val::boolean(matches!(a.get(0)?, Val::Iri(_))))
    }));
    r.register(Function::new("isBLANK", 1..=1, |a| {
        Ok(Val::boolean(matches!(a.get(0)?, Val::Blank(_))))
    }));
    r.register(Function::new("isLITERAL", 1..=1, |a| {
        Ok(Val::boolean(matches!(a.get(0)?, Val::Lit { .. })))
    }));
    r.register(Function::new("isNUMERIC", 1..=1, |a| {
        Ok(Val::boolean(a.get(0)?.numeric().is_some()))
    }));
    r.register(Function::new("STRLANG", 2..=2, strlang));
    r.register(Function::new("STRDT", 2..=2, strdt));
    // A second argument, when present, is the query's base IRI (added by the translator).
    r.register(Function::new("IRI", 1..=2, iri));
    r.register(Function::new("BNODE", 0..=1, bnode).volatile());
    r.register(Function::new("UUID", 0..=0, |_| Ok(uuid())).volatile());
    r.register(Function::new("STRUUID", 0..=0, |_| Ok(Val::string(uuid_string()))).volatile());
}

fn str<'s>(a: &Args<'_, 's>) -> R<Val<'s>> {
    Ok(match a.get(0)? {
        Val::Iri(s) => Val::string(s.into_owned()),
        Val::Lit { value, .. } => Val::string(value.into_owned()),
        Val::Blank(_) => return Err(EvalError),
    })
}

fn lang<'s>(a: &Args<'_, 's>) -> R<Val<'s>> {
    match a.get(0)? {
        Val::Lit { lang, .. } => Ok(Val::string(lang.map(Cow::into_owned).unwrap_or_default())),
        _ => Err(EvalError),
    }
}

fn datatype<'s>(a: &Args<'_, 's>) -> R<Val<'s>> {
    match a.get(0)? {
        Val::Lit { datatype, lang, .. } => Ok(if lang.is_some() {
            Val::Iri(Cow::Borrowed(RDF_LANG_STRING))
        } else {
            Val::Iri(Cow::Owned(datatype.into_owned()))
        }),
        _ => Err(EvalError),
    }
}

fn lang_matches_fn<'s>(a: &Args<'_, 's>) -> R<Val<'s>> {
    let (tag, range) = (a.get(0)?, a.get(1)?);
    let (tag, range) = (
        tag.plain_str().ok_or(EvalError)?,
        range.plain_str().ok_or(EvalError)?,
    );
    Ok(Val::boolean(lang_matches(tag, range)))
}

/// `langMatches` with the basic filtering of RFC 4647 §3.3.1.
fn lang_matches(tag: &str, range: &str) -> bool {
    if range == "*" {
        return !tag.is_empty();
    }
    let (t, r) = (tag.to_ascii_lowercase(), range.to_ascii_lowercase());
    t == r || (t.starts_with(&r) && t.as_bytes().get(r.len()) == Some(&b'-'))
}

fn strlang<'s>(a: &Args<'_, 's>) -> R<Val<'s>> {
    let (v, t) = (a.get(0)?, a.get(1)?);
    let s = v.plain_str().ok_or(EvalError)?;
    let t = t.plain_str().ok_or(EvalError)?;
    if !valid_lang_tag(t) {
        return Err(EvalError);
    }
    Ok(Val::text(s.to_owned(), Some(&t.to_ascii_lowercase())))
}

/// A language tag as BCP 47's syntax allows in RDF: letters, then `-`-separated alphanumerics.
fn valid_lang_tag(t: &str) -> bool {
    let mut parts = t.split('-');
    let first = parts.next().unwrap_or("");
    (1..=8).contains(&first.len())
        && first.bytes().all(|b| b.is_ascii_alphabetic())
        && parts.all(|p| (1..=8).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_alphanumeric()))
}

fn strdt<'s>(a: &Args<'_, 's>) -> R<Val<'s>> {
    let v = a.get(0)?;
    let s = v.plain_str().ok_or(EvalError)?.to_owned();
    match a.get(1)? {
        Val::Iri(dt) if dt != RDF_LANG_STRING => Ok(Val::Lit {
            value: Cow::Owned(s),
            datatype: Cow::Owned(dt.into_owned()),
            lang: None,
        }),
        _ => Err(EvalError),
    }
}

/// `IRI(x)` / `URI(x)` (§17.4.2.8): an IRI as itself; a simple literal or `xsd:string` as an
/// IRI, resolved against the query's base when relative (an error without one).
fn iri<'s>(a: &Args<'_, 's>) -> R<Val<'s>> {
    let base = a.opt(1)?;
    let base = match &base {
        Some(Val::Lit { value, .. }) => Some(value.as_ref()),
        _ => None,
    };
    let v = a.get(0)?;
    let s = match &v {
        Val::Iri(s) => return Ok(Val::Iri(Cow::Owned(s.to_string()))),
        _ => v.plain_str().ok_or(EvalError)?,
    };
    if let Ok(i) = oxiri::Iri::parse(s) {
        return Ok(Val::Iri(Cow::Owned(i.into_inner().to_owned())));
    }
    let base = oxiri::Iri::parse(base.ok_or(EvalError)?).map_err(|_| EvalError)?;
    let i = base.resolve(s).map_err(|_| EvalError)?;
    Ok(Val::Iri(Cow::Owned(i.into_inner())))
}

/// `BNODE()` and `BNODE(str)` (§17.4.2.9): a fresh blank node per call without an argument;
/// with one, the same blank node for the same string within one solution and a different one
/// in another solution (the call's row identifies the solution).
fn bnode<'s>(a: &Args<'_, 's>) -> R<Val<'s>> {
    let minted = a.minted();
    let label = match a.opt(0)? {
        None => format!("nf{}b{}", minted.run_tag(), minted.fresh()),
        Some(v) => {
            let s = v.plain_str().ok_or(EvalError)?;
            use std::hash::{Hash, Hasher};
            // The solution is its bound columns that hold store terms: unbound columns and
            // those holding this run's own terms (an earlier BNODE's, set by a SELECT
            // expression before this one) are left out, so `(BNODE(?x) AS ?a) (BNODE(?x) AS
            // ?b)` is one node.
            let mut h = std::collections::hash_map::DefaultHasher::new();
            for (col, &id) in a.row().iter().enumerate() {
                if id != UNBOUND && !minted.holds(id) {
                    (col, id).hash(&mut h);
                }
            }
            s.hash(&mut h);
            format!("nf{}s{:016x}", minted.run_tag(), h.finish())
        }
    };
    Ok(Val::Blank(Cow::Owned(label)))
}

/// A version-4 (random) UUID in its 36-character form.
fn uuid_string() -> String {
    let mut b = random_bytes();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// `UUID()` (§17.4.2.12): a fresh `urn:uuid:` IRI.
fn uuid() -> Val<'static> {
    Val::Iri(Cow::Owned(format!("urn:uuid:{}", uuid_string())))
}

#[cfg(test)]
mod tests {
    use super::super::tests::{call, lit};
    use super::*;

    #[test]
    fn lang_ranges() {
        assert!(lang_matches("en-us", "en"));
        assert!(lang_matches("EN", "en"));
        assert!(!lang_matches("eng", "en"));
        assert!(lang_matches("fr", "*"));
        assert!(!lang_matches("", "*"));
    }

    #[test]
    fn uuids_are_version_4_and_distinct() {
        let (a, b) = (call("STRUUID", &[]).unwrap(), call("STRUUID", &[]).unwrap());
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(a.as_bytes()[14], b'4');
        assert!(call("UUID", &[]).unwrap().starts_with("urn:uuid:"));
    }

    #[test]
    fn parts_and_constructors_of_terms() {
        let s = |v: &str| Val::string(v.to_owned());
        assert_eq!(call("STR", &[lit("01", "integer")]), Ok("01".into()));
        assert_eq!(
            call("DATATYPE", &[lit("1", "integer")]),
            Ok(format!("{}integer", crate::value::XSD))
        );
        assert_eq!(call("STRLANG", &[s("chat"), s("FR")]).map(|_| ()), Ok(()));
        assert!(call("STRLANG", &[s("chat"), s("not a tag")]).is_err());
        assert_eq!(
            call("IRI", &[s("b"), s("http://ex/a/")]),
            Ok("http://ex/a/b".into())
        );
        assert!(
            call("IRI", &[s("b")]).is_err(),
            "a relative IRI without a base"
        );
        assert!(call("STR", &[Val::Blank(Cow::Borrowed("b0"))]).is_err());
    }
}
