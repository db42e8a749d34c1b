//! The functions on strings (§17.4.3): lengths, parts and case (`STRLEN`, `SUBSTR`, `UCASE`,
//! `LCASE`), tests and searches (`STRSTARTS`, `STRENDS`, `CONTAINS`, `STRBEFORE`, `STRAFTER`),
//! `CONCAT`, the regular expressions of XPath (`REGEX`, `REPLACE`) and `ENCODE_FOR_URI`.
//!
//! A function that builds a longer string than its arguments asks the run's account first
//! ([`Minted::may_build`]), so a query's memory limit bounds what its expressions make.

use std::borrow::Cow;
use std::str::FromStr;

use nearflow_store::term::XSD_STRING;

use super::{Args, Function, Registry, R};
use crate::minted::Minted;
use crate::value::{EvalError, Num, Val};

pub(super) fn register(r: &mut Registry) {
    r.register(Function::new("STRLEN", 1..=1, |a| {
        let v = a.get(0)?;
        let (s, _) = v.string_lit().ok_or(EvalError)?;
        Ok(Val::integer(s.chars().count() as i64))
    }));
    r.register(Function::new("SUBSTR", 2..=3, substr));
    r.register(Function::new("UCASE", 1..=1, |a| {
        case(a, str::to_uppercase)
    }));
    r.register(Function::new("LCASE", 1..=1, |a| {
        case(a, str::to_lowercase)
    }));
    r.register(Function::new("CONTAINS", 2..=2, |a| {
        test(a, |x, y| x.contains(y))
    }));
    r.register(Function::new("STRSTARTS", 2..=2, |a| {
        test(a, |x, y| x.starts_with(y))
    }));
    r.register(Function::new("STRENDS", 2..=2, |a| {
        test(a, |x, y| x.ends_with(y))
    }));
    r.register(Function::new("STRBEFORE", 2..=2, |a| {
        part(a, |x, i, _| &x[..i])
    }));
    r.register(Function::new("STRAFTER", 2..=2, |a| {
        part(a, |x, i, n| &x[i + n..])
    }));
    r.register(Function::new("CONCAT", 0..=usize::MAX, concat));
    r.register(Function::new("REGEX", 2..=3, regex));
    r.register(Function::new("REPLACE", 3..=4, |a| {
        let flags = a.opt(3)?;
        replace(
            &a.get(0)?,
            &a.get(1)?,
            &a.get(2)?,
            flags.as_ref(),
            a.minted(),
        )
    }));
    r.register(Function::new("ENCODE_FOR_URI", 1..=1, |a| {
        // Each byte becomes at most three.
        let v = a.get(0)?;
        let len = v.string_lit().map_or(0, |(s, _)| s.len());
        if !a.minted().may_build(len.saturating_mul(3)) {
            return Err(EvalError);
        }
        encode_for_uri(&v)
    }));
}

/// `UCASE`, `LCASE`: `map` applied to a string literal, its tag or datatype kept.
fn case<'s>(a: &Args<'_, 's>, map: fn(&str) -> String) -> R<Val<'s>> {
    match a.get(0)? {
        Val::Lit {
            value,
            datatype,
            lang,
        } if lang.is_some() || datatype == XSD_STRING => {
            // A character's case mapping is at most three times its UTF-8 length.
            if !a.minted().may_build(value.len().saturating_mul(3)) {
                return Err(EvalError);
            }
            Ok(Val::Lit {
                value: Cow::Owned(map(&value)),
                datatype,
                lang,
            })
        }
        _ => Err(EvalError),
    }
}

/// Two string literals with compatible arguments (§17.4.3.1.2: a tagged second argument needs
/// the same tag): their texts and the first one's tag.
fn compatible<'s>(
    a: &Args<'_, 's>,
    f: impl FnOnce(&str, &str, Option<&str>) -> R<Val<'static>>,
) -> R<Val<'s>> {
    let (x, y) = (a.get(0)?, a.get(1)?);
    let (x, lx) = x.string_lit().ok_or(EvalError)?;
    let (y, ly) = y.string_lit().ok_or(EvalError)?;
    if ly.is_some() && lx != ly {
        return Err(EvalError);
    }
    f(x, y, lx)
}

/// `CONTAINS`, `STRSTARTS`, `STRENDS`.
fn test<'s>(a: &Args<'_, 's>, t: fn(&str, &str) -> bool) -> R<Val<'s>> {
    compatible(a, |x, y, _| Ok(Val::boolean(t(x, y))))
}

/// `STRBEFORE`, `STRAFTER` (§17.4.3.7–8): found, the part keeps the first argument's tag; not
/// found, "". `cut` gets the text, where the second argument starts in it and its length.
fn part<'s>(a: &Args<'_, 's>, cut: for<'x> fn(&'x str, usize, usize) -> &'x str) -> R<Val<'s>> {
    compatible(a, |x, y, lx| {
        Ok(match x.find(y) {
            Some(i) => Val::text(cut(x, i, y.len()).to_owned(), lx),
            None => Val::string(String::new()),
        })
    })
}

/// `SUBSTR` (§17.4.3.3, fn:substring on integers): the characters at 1-based positions p with
/// start <= p < start + length.
fn substr<'s>(a: &Args<'_, 's>) -> R<Val<'s>> {
    let v = a.get(0)?;
    let (s, tag) = v.string_lit().ok_or(EvalError)?;
    let int = |e: R<Val<'_>>| -> R<i128> {
        match e?.numeric() {
            Some(Num::I(i)) => i128::from_str(&i.to_string()).map_err(|_| EvalError),
            _ => Err(EvalError),
        }
    };
    let start = int(a.get(1))?;
    let end = if a.len() > 2 {
        start.saturating_add(int(a.get(2))?)
    } else {
        i128::MAX
    };
    let part: String = s
        .chars()
        .enumerate()
        .filter(|&(i, _)| {
            let p = i as i128 + 1;
            start <= p && p < end
        })
        .map(|(_, c)| c)
        .collect();
    Ok(Val::text(part, tag))
}

/// `CONCAT` (§17.4.3.12): the common tag when every argument has the same one, else untagged.
fn concat<'s>(a: &Args<'_, 's>) -> R<Val<'s>> {
    let mut out = String::new();
    let mut tag: Option<Option<String>> = None;
    for i in 0..a.len() {
        let v = a.get(i)?;
        let (s, t) = v.string_lit().ok_or(EvalError)?;
        if !a.minted().may_build(out.len().saturating_add(s.len())) {
            return Err(EvalError);
        }
        out.push_str(s);
        let t = t.map(str::to_owned);
        tag = match tag {
            None => Some(t),
            Some(prev) if prev == t => Some(prev),
            Some(_) => Some(None),
        };
    }
    Ok(Val::text(out, tag.flatten().as_deref()))
}

/// `REGEX` with a pattern computed per row (a constant one is compiled once, by the
/// translator, into [`Expr::Regex`](crate::expr::Expr::Regex)).
fn regex<'s>(a: &Args<'_, 's>) -> R<Val<'s>> {
    let text = a.get(0)?;
    let pattern = a.get(1)?;
    let flags = a.opt(2)?;
    let (s, _) = text.string_lit().ok_or(EvalError)?;
    let p = pattern.plain_str().ok_or(EvalError)?;
    let fl = match &flags {
        Some(v) => v.plain_str().ok_or(EvalError)?,
        None => "",
    };
    let re = compile_regex(p, fl).map_err(|_| EvalError)?;
    Ok(Val::boolean(re.is_match(s)))
}

/// Compiles an XPath regex with its flags (`s`, `m`, `i`, `x`; `q` quotes the pattern).
pub fn compile_regex(pattern: &str, flags: &str) -> Result<regex::Regex, String> {
    let mut b = String::new();
    let mut quoted = false;
    for f in flags.chars() {
        match f {
            's' | 'm' | 'i' | 'x' => b.push(f),
            'q' => quoted = true,
            _ => return Err(format!("unknown regex flag '{f}'")),
        }
    }
    let p = if quoted {
        regex::escape(pattern)
    } else {
        pattern.to_owned()
    };
    let full = if b.is_empty() {
        p
    } else {
        format!("(?{b}){p}")
    };
    regex::RegexBuilder::new(&full)
        .size_limit(1 << 20)
        .build()
        .map_err(|e| e.to_string())
}

/// `ENCODE_FOR_URI` (§17.4.3.11): every byte of the UTF-8 form but the unreserved characters
/// of RFC 3986 percent-encoded; the result is a simple literal.
fn encode_for_uri(v: &Val<'_>) -> R<Val<'static>> {
    let (s, _) = v.string_lit().ok_or(EvalError)?;
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    Ok(Val::string(out))
}

/// `REPLACE(text, pattern, replacement[, flags])` (§17.4.3.15, XPath `fn:replace`): the
/// text's language tag is kept; `$N` in the replacement is group N, `\$` and `\\` are the
/// characters themselves; a pattern that matches the empty string is an error (XPath
/// FORX0003). The result is built only when `minted` allows its length
/// ([`Minted::may_build`]).
fn replace(
    text: &Val<'_>,
    pattern: &Val<'_>,
    with: &Val<'_>,
    flags: Option<&Val<'_>>,
    minted: &Minted,
) -> R<Val<'static>> {
    let (s, tag) = text.string_lit().ok_or(EvalError)?;
    let p = pattern.plain_str().ok_or(EvalError)?;
    let w = with.plain_str().ok_or(EvalError)?;
    let f = match flags {
        Some(f) => f.plain_str().ok_or(EvalError)?,
        None => "",
    };
    let re = compile_regex(p, f).map_err(|_| EvalError)?;
    if re.is_match("") {
        return Err(EvalError);
    }
    // The regex crate's replacement syntax: `$name`/`${N}` groups, `$$` a dollar.
    // Beside it, what one replacement holds: its own characters and the groups it names.
    let mut rep = String::with_capacity(w.len());
    let (mut literal, mut groups) = (0usize, Vec::new());
    let mut chars = w.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('$') => {
                    rep.push_str("$$");
                    literal += 1;
                }
                Some('\\') => {
                    rep.push('\\');
                    literal += 1;
                }
                _ => return Err(EvalError),
            },
            '$' => {
                let mut digits = String::new();
                while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    digits.push(*d);
                    chars.next();
                }
                if digits.is_empty() {
                    return Err(EvalError);
                }
                rep.push_str(&format!("${{{digits}}}"));
                groups.push(digits.parse::<usize>().unwrap_or(usize::MAX));
            }
            c => {
                rep.push(c);
                literal += c.len_utf8();
            }
        }
    }
    // No match is empty, so there are at most as many as bytes, and the groups of each lie
    // inside its match: the result is at most the text once plus, per byte, the literal
    // characters and each named group over the whole text. Past the room, the exact length.
    let bound = s
        .len()
        .saturating_mul(1usize.saturating_add(literal).saturating_add(groups.len()));
    if !minted.fits(bound) {
        let mut len = 0usize;
        let mut last = 0;
        for c in re.captures_iter(s) {
            let m = c.get(0).expect("group 0 is the match");
            len = len.saturating_add(m.start() - last).saturating_add(literal);
            for &g in &groups {
                len = len.saturating_add(c.get(g).map_or(0, |x| x.len()));
            }
            last = m.end();
        }
        len = len.saturating_add(s.len() - last);
        if !minted.may_build(len) {
            return Err(EvalError);
        }
    }
    let out = re.replace_all(s, rep.as_str()).into_owned();
    Ok(match tag {
        Some(t) => Val::Lit {
            value: Cow::Owned(out),
            datatype: Cow::Borrowed(nearflow_store::term::RDF_LANG_STRING),
            lang: Some(Cow::Owned(t.to_owned())),
        },
        None => Val::string(out),
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::text;
    use super::*;

    #[test]
    fn replace_reads_xpath_groups_and_keeps_the_tag() {
        let t = Val::Lit {
            value: Cow::Borrowed("abcd"),
            datatype: Cow::Borrowed(nearflow_store::term::RDF_LANG_STRING),
            lang: Some(Cow::Borrowed("en")),
        };
        let m = Minted::above(0);
        let out = replace(
            &t,
            &Val::string("(b)(c)".into()),
            &Val::string("$2$1x".into()),
            None,
            &m,
        )
        .unwrap();
        assert_eq!(out.as_term().to_string(), "\"acbxd\"@en");
        // A pattern matching the empty string is an error.
        assert!(replace(
            &t,
            &Val::string("x*".into()),
            &Val::string("y".into()),
            None,
            &m
        )
        .is_err());
    }

    #[test]
    fn a_replace_is_built_only_when_its_exact_length_fits() {
        // 1,000 characters, each replaced by 40: 40,000 bytes, three times that with the
        // copies minting makes. The cheap bound (41,000) fits neither room: the exact length
        // decides.
        let text = Val::string("a".repeat(1000));
        let with = Val::string(format!("{}$0", "x".repeat(39)));
        let fits = Minted::above(0).charged_to(std::sync::Arc::new(nearflow_flow::Account::new(
            Some(121_000),
        )));
        let out = replace(&text, &Val::string(".".into()), &with, None, &fits).unwrap();
        assert_eq!(out.string_lit().unwrap().0.len(), 40_000);
        assert!(!fits.stopped());
        let short = Minted::above(0).charged_to(std::sync::Arc::new(nearflow_flow::Account::new(
            Some(119_000),
        )));
        assert!(replace(&text, &Val::string(".".into()), &with, None, &short).is_err());
        assert!(
            short.stopped(),
            "a refusal fails the query, it is never an unbound value"
        );
        assert!(matches!(
            short.refused(),
            Some(nearflow_flow::FlowError::MemoryLimit {
                limit: 119_000,
                wanted: 120_000,
                ..
            })
        ));
    }

    #[test]
    fn encode_for_uri_escapes_all_but_unreserved() {
        let v = Val::string("Los Angeles/ü".into());
        assert_eq!(text(&encode_for_uri(&v).unwrap()), "Los%20Angeles%2F%C3%BC");
    }

    #[test]
    fn searches_need_compatible_tags_and_keep_the_first() {
        use super::super::tests::call;
        let en = |s: &'static str| Val::Lit {
            value: Cow::Borrowed(s),
            datatype: Cow::Borrowed(nearflow_store::term::RDF_LANG_STRING),
            lang: Some(Cow::Borrowed("en")),
        };
        let s = |v: &str| Val::string(v.to_owned());
        assert_eq!(call("STRBEFORE", &[en("abc"), s("b")]), Ok("a".into()));
        assert_eq!(call("STRAFTER", &[en("abc"), en("b")]), Ok("c".into()));
        assert!(call("CONTAINS", &[s("abc"), en("b")]).is_err());
        assert_eq!(
            call("SUBSTR", &[s("héllo"), Val::integer(2), Val::integer(3)]),
            Ok("éll".into())
        );
        assert_eq!(call("CONCAT", &[en("a"), en("b")]), Ok("ab".into()));
        assert_eq!(call("UCASE", &[en("ab")]), Ok("AB".into()));
        assert_eq!(
            call("REGEX", &[s("Abc"), s("^a"), s("i")]),
            Ok("true".into())
        );
    }
}
