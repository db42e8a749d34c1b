//! The functions of SPARQL 1.1 §17.4 beyond the string and numeric ones of [`expr`](super::expr):
//! the date-time parts (§17.4.5), the hash functions (§17.4.6), the term constructors `IRI`,
//! `BNODE`, `UUID`, `STRUUID` (§17.4.2), `RAND` and `NOW` (§17.4.4–5), `REPLACE` and
//! `ENCODE_FOR_URI` (§17.4.3), and the XPath constructor casts of §17.5.
//!
//! `NOW` is one instant per run of a query (§17.4.5.1: "the same value in every call within
//! one query execution"), kept with the run's own terms ([`Minted::now`]).

use std::borrow::Cow;
use std::str::FromStr;

use md5::Md5;
use oxsdatatypes::{Boolean, Date, DateTime, Decimal, Double, Float, Integer, Time};
use sha1::Sha1;
use sha2::{Digest, Sha256, Sha384, Sha512};

use super::expr::{compile_regex, EvalError, Num, Val};
use super::minted::Minted;
use nearflow_rdf::term::{Id, XSD_STRING};

const XSD: &str = "http://www.w3.org/2001/XMLSchema#";

type R<T> = Result<T, EvalError>;

/// The target of an XPath constructor cast (§17.5): `xsd:T(x)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cast {
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
    /// The cast named by a function IRI, if it is one of §17.5's.
    pub fn of_iri(iri: &str) -> Option<Cast> {
        Some(match iri.strip_prefix(XSD)? {
            "string" => Cast::String,
            "boolean" => Cast::Boolean,
            "integer" => Cast::Integer,
            "decimal" => Cast::Decimal,
            "float" => Cast::Float,
            "double" => Cast::Double,
            "dateTime" => Cast::DateTime,
            _ => return None,
        })
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

/// A literal of an XSD datatype.
fn typed(value: String, dt: &str) -> Val<'static> {
    Val::Lit {
        value: Cow::Owned(value),
        datatype: Cow::Owned(format!("{XSD}{dt}")),
        lang: None,
    }
}

fn simple(value: String) -> Val<'static> {
    Val::Lit {
        value: Cow::Owned(value),
        datatype: Cow::Borrowed(XSD_STRING),
        lang: None,
    }
}

fn integer(i: i64) -> Val<'static> {
    typed(i.to_string(), "integer")
}

/// The date-time parts (§17.4.5): `YEAR` … `SECONDS`, `TIMEZONE`, `TZ`. `what` is the
/// function's name in upper case. `YEAR`, `MONTH` and `DAY` take an `xsd:date` too, the hour,
/// minutes and seconds an `xsd:time`.
pub fn date_part(what: &str, v: &Val<'_>) -> R<Val<'static>> {
    let t = Temporal::of(v).ok_or(EvalError)?;
    let dt = match t {
        Temporal::DateTime(d) => Some(d),
        _ => None,
    };
    Ok(match (what, t) {
        ("YEAR", Temporal::Date(d)) => integer(d.year()),
        ("MONTH", Temporal::Date(d)) => integer(d.month().into()),
        ("DAY", Temporal::Date(d)) => integer(d.day().into()),
        ("HOURS", Temporal::Time(d)) => integer(d.hour().into()),
        ("MINUTES", Temporal::Time(d)) => integer(d.minute().into()),
        ("SECONDS", Temporal::Time(d)) => Num::D(d.second()).to_val(),
        ("YEAR", _) => integer(dt.ok_or(EvalError)?.year()),
        ("MONTH", _) => integer(dt.ok_or(EvalError)?.month().into()),
        ("DAY", _) => integer(dt.ok_or(EvalError)?.day().into()),
        ("HOURS", _) => integer(dt.ok_or(EvalError)?.hour().into()),
        ("MINUTES", _) => integer(dt.ok_or(EvalError)?.minute().into()),
        ("SECONDS", _) => Num::D(dt.ok_or(EvalError)?.second()).to_val(),
        ("TIMEZONE", _) => {
            let tz = match t {
                Temporal::DateTime(d) => d.timezone(),
                Temporal::Date(d) => d.timezone(),
                Temporal::Time(d) => d.timezone(),
            };
            typed(tz.ok_or(EvalError)?.to_string(), "dayTimeDuration")
        }
        ("TZ", _) => {
            // The time zone as written: "Z", "+hh:mm" / "-hh:mm", or "" without one.
            let Val::Lit { value, .. } = v else {
                return Err(EvalError);
            };
            let s = value.trim();
            let tz = if s.ends_with('Z') {
                "Z"
            } else if s.len() >= 6
                && s.is_char_boundary(s.len() - 6)
                && matches!(s.as_bytes()[s.len() - 6], b'+' | b'-')
                && s.as_bytes()[s.len() - 3] == b':'
            {
                &s[s.len() - 6..]
            } else {
                ""
            };
            simple(tz.to_owned())
        }
        _ => return Err(EvalError),
    })
}

/// `MD5`, `SHA1`, `SHA256`, `SHA384`, `SHA512` (§17.4.6) of a simple literal or `xsd:string`:
/// the digest of its UTF-8 bytes, in lower-case hexadecimal.
pub fn hash(what: &str, v: &Val<'_>) -> R<Val<'static>> {
    let s = v.plain_str().ok_or(EvalError)?.as_bytes();
    let digest: Vec<u8> = match what {
        "MD5" => Md5::digest(s).to_vec(),
        "SHA1" => Sha1::digest(s).to_vec(),
        "SHA256" => Sha256::digest(s).to_vec(),
        "SHA384" => Sha384::digest(s).to_vec(),
        _ => Sha512::digest(s).to_vec(),
    };
    let mut hex = String::with_capacity(digest.len() * 2);
    for b in digest {
        hex.push_str(&format!("{b:02x}"));
    }
    Ok(simple(hex))
}

/// `ENCODE_FOR_URI` (§17.4.3.11): every byte of the UTF-8 form but the unreserved characters
/// of RFC 3986 percent-encoded; the result is a simple literal.
pub fn encode_for_uri(v: &Val<'_>) -> R<Val<'static>> {
    let (s, _) = v.string_lit().ok_or(EvalError)?;
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    Ok(simple(out))
}

/// `REPLACE(text, pattern, replacement[, flags])` (§17.4.3.15, XPath `fn:replace`): the
/// text's language tag is kept; `$N` in the replacement is group N, `\$` and `\\` are the
/// characters themselves; a pattern that matches the empty string is an error (XPath
/// FORX0003). The result is built only when `minted` allows its length
/// ([`Minted::may_build`]).
pub fn replace(
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
            datatype: Cow::Borrowed(nearflow_rdf::term::RDF_LANG_STRING),
            lang: Some(Cow::Owned(t.to_owned())),
        },
        None => simple(out),
    })
}

/// `IRI(x)` / `URI(x)` (§17.4.2.8): an IRI as itself; a simple literal or `xsd:string` as an
/// IRI, resolved against the query's base when relative (an error without one).
pub fn iri(v: &Val<'_>, base: Option<&str>) -> R<Val<'static>> {
    let s = match v {
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
/// in another solution (`row` identifies the solution).
pub fn bnode(arg: Option<&Val<'_>>, row: &[Id], minted: &Minted) -> R<Val<'static>> {
    let label = match arg {
        None => format!("nf{}b{}", minted.run_tag(), minted.fresh()),
        Some(v) => {
            let s = v.plain_str().ok_or(EvalError)?;
            use std::hash::{Hash, Hasher};
            // The solution is its bound columns that hold store terms: unbound columns and
            // those holding this run's own terms (an earlier BNODE's, set by a SELECT
            // expression before this one) are left out, so `(BNODE(?x) AS ?a) (BNODE(?x) AS
            // ?b)` is one node.
            let mut h = std::collections::hash_map::DefaultHasher::new();
            for (col, &id) in row.iter().enumerate() {
                if id != nearflow_rdf::term::UNBOUND && !minted.holds(id) {
                    (col, id).hash(&mut h);
                }
            }
            s.hash(&mut h);
            format!("nf{}s{:016x}", minted.run_tag(), h.finish())
        }
    };
    Ok(Val::Blank(Cow::Owned(label)))
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
pub fn uuid() -> Val<'static> {
    Val::Iri(Cow::Owned(format!("urn:uuid:{}", uuid_string())))
}

/// `STRUUID()` (§17.4.2.13): a fresh UUID as a simple literal.
pub fn struuid() -> Val<'static> {
    simple(uuid_string())
}

/// `RAND()` (§17.4.4.5): an `xsd:double` in [0, 1).
pub fn rand() -> Val<'static> {
    let b = random_bytes();
    let bits = u64::from_le_bytes(b[..8].try_into().expect("8 bytes")) >> 11;
    let x = bits as f64 / (1u64 << 53) as f64;
    Num::Db(Double::from(x)).to_val()
}

/// `NOW()`: the run's instant.
pub fn now(minted: &Minted) -> Val<'static> {
    typed(minted.now().to_owned(), "dateTime")
}

/// The XPath constructor cast `xsd:T(v)` (§17.5's table): IRIs cast only to `xsd:string`;
/// strings by their lexical form for the target type; numbers and booleans across each
/// other; the result in the target's canonical form. Anything else is an error.
pub fn cast(to: Cast, v: &Val<'_>) -> R<Val<'static>> {
    let (lex, num, b) = match v {
        Val::Iri(s) if to == Cast::String => return Ok(simple(s.to_string())),
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
            Cast::String => Ok(simple(lex.to_owned())),
            _ => Err(EvalError),
        };
    }
    let trimmed = lex.trim();
    Ok(match to {
        Cast::String => simple(xpath_string(v, num, b)),
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
    use super::*;

    fn lit<'a>(v: &'a str, dt: &str) -> Val<'a> {
        Val::Lit {
            value: Cow::Borrowed(v),
            datatype: Cow::Owned(format!("{XSD}{dt}")),
            lang: None,
        }
    }

    fn text(v: &Val<'_>) -> String {
        match v {
            Val::Lit { value, .. } => value.to_string(),
            Val::Iri(s) | Val::Blank(s) => s.to_string(),
        }
    }

    #[test]
    fn date_parts_of_a_date_time() {
        let d = lit("2010-06-21T11:28:01.5-05:00", "dateTime");
        let z = lit("2010-06-21T11:28:01Z", "dateTime");
        assert_eq!(text(&date_part("YEAR", &d).unwrap()), "2010");
        assert_eq!(text(&date_part("MONTH", &d).unwrap()), "6");
        assert_eq!(text(&date_part("SECONDS", &d).unwrap()), "1.5");
        assert_eq!(text(&date_part("SECONDS", &z).unwrap()), "1");
        assert_eq!(text(&date_part("TIMEZONE", &d).unwrap()), "-PT5H");
        assert_eq!(text(&date_part("TZ", &d).unwrap()), "-05:00");
        assert_eq!(text(&date_part("TZ", &z).unwrap()), "Z");
        let none = lit("2010-06-21T11:28:01", "dateTime");
        assert_eq!(text(&date_part("TZ", &none).unwrap()), "");
        assert!(date_part("TIMEZONE", &none).is_err());
        assert!(date_part("YEAR", &lit("x", "string")).is_err());
    }

    #[test]
    fn hashes_are_lower_case_hex_of_the_utf8() {
        let abc = simple("abc".into());
        assert_eq!(
            text(&hash("MD5", &abc).unwrap()),
            "900150983cd24fb0d6963f7d28e17f72"
        );
        assert_eq!(
            text(&hash("SHA1", &abc).unwrap()),
            "a9993e364706816aba3e25717850c26c9cd0d89d"
        );
        assert!(hash("MD5", &lit("1", "integer")).is_err());
    }

    #[test]
    fn replace_reads_xpath_groups_and_keeps_the_tag() {
        let t = Val::Lit {
            value: Cow::Borrowed("abcd"),
            datatype: Cow::Borrowed(nearflow_rdf::term::RDF_LANG_STRING),
            lang: Some(Cow::Borrowed("en")),
        };
        let m = Minted::above(0);
        let out = replace(
            &t,
            &simple("(b)(c)".into()),
            &simple("$2$1x".into()),
            None,
            &m,
        )
        .unwrap();
        assert_eq!(out.as_term().to_string(), "\"acbxd\"@en");
        // A pattern matching the empty string is an error.
        assert!(replace(&t, &simple("x*".into()), &simple("y".into()), None, &m).is_err());
    }

    #[test]
    fn a_replace_is_built_only_when_its_exact_length_fits() {
        // 1,000 characters, each replaced by 40: 40,000 bytes, three times that with the
        // copies minting makes. The cheap bound (41,000) fits neither room: the exact length
        // decides.
        let text = simple("a".repeat(1000));
        let with = simple(format!("{}$0", "x".repeat(39)));
        let fits = Minted::above(0).charged_to(std::sync::Arc::new(nearflow_flow::Account::new(
            Some(121_000),
        )));
        let out = replace(&text, &simple(".".into()), &with, None, &fits).unwrap();
        assert_eq!(out.string_lit().unwrap().0.len(), 40_000);
        assert!(!fits.stopped());
        let short = Minted::above(0).charged_to(std::sync::Arc::new(nearflow_flow::Account::new(
            Some(119_000),
        )));
        assert!(replace(&text, &simple(".".into()), &with, None, &short).is_err());
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
    fn casts_follow_the_xpath_table() {
        let c = |to, v: Val<'_>| cast(to, &v).map(|x| text(&x));
        assert_eq!(c(Cast::Integer, simple(" 12 ".into())), Ok("12".into()));
        assert_eq!(c(Cast::Integer, lit("2.9", "decimal")), Ok("2".into()));
        assert_eq!(c(Cast::Boolean, lit("0", "integer")), Ok("false".into()));
        assert_eq!(c(Cast::Boolean, simple("1".into())), Ok("true".into()));
        assert_eq!(c(Cast::Decimal, lit("true", "boolean")), Ok("1".into()));
        assert_eq!(c(Cast::Double, simple("1e3".into())), Ok("1000".into()));
        assert_eq!(
            c(Cast::Float, simple("-10.2E3".into())),
            Ok("-10200".into())
        );
        assert!(c(Cast::Decimal, simple("1e3".into())).is_err());
        assert!(c(Cast::Integer, simple("abc".into())).is_err());
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

    #[test]
    fn uuids_are_version_4_and_distinct() {
        let (a, b) = (text(&struuid()), text(&struuid()));
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(a.as_bytes()[14], b'4');
        assert!(text(&uuid()).starts_with("urn:uuid:"));
    }

    #[test]
    fn encode_for_uri_escapes_all_but_unreserved() {
        let v = simple("Los Angeles/ü".into());
        assert_eq!(text(&encode_for_uri(&v).unwrap()), "Los%20Angeles%2F%C3%BC");
    }

    #[test]
    fn dates_compare_by_value() {
        let a = Temporal::of(&lit("1995-01-01", "date")).unwrap();
        let b = Temporal::of(&lit("1996-03-02", "date")).unwrap();
        assert_eq!(a.partial_cmp(b), Some(std::cmp::Ordering::Less));
        let t = Temporal::of(&lit("10:00:00", "time")).unwrap();
        assert_eq!(a.partial_cmp(t), None);
    }
}
