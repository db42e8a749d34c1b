//! Terms as the dictionary stores them: a kind byte and the term's text, borrowed.
//!
//! RDF 1.1 (§3.3): a literal is a lexical form with a datatype IRI, and a language-tagged
//! string when it has a tag. `"x"` and `"x"^^xsd:string` are the same term, stored as
//! [`TermRef::Literal`] with `datatype: XSD_STRING`. Lexical forms are kept as written:
//! `"01"^^xsd:integer` stays `01` (SPARQL's simple entailment does not allow rewriting it).
//! Language tags are case-insensitive (BCP 47) and kept in lower case, as the parser gives them.

use std::fmt;

/// `xsd:string`.
pub const XSD_STRING: &str = "http://www.w3.org/2001/XMLSchema#string";
/// `rdf:langString`, the datatype of a language-tagged string.
pub const RDF_LANG_STRING: &str = "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString";
/// `rdf:dirLangString`, the datatype of a language-tagged string with a base direction
/// (RDF 1.2).
pub const RDF_DIR_LANG_STRING: &str = "http://www.w3.org/1999/02/22-rdf-syntax-ns#dirLangString";

/// A term id: 1-based index into the dictionary; 0 means "unbound" in a solution row.
pub type Id = u32;

/// The unbound value of a solution column.
pub const UNBOUND: Id = 0;

pub(crate) const TAG_IRI: u8 = 0;
pub(crate) const TAG_BLANK: u8 = 1;
pub(crate) const TAG_STRING: u8 = 2;
pub(crate) const TAG_LANG: u8 = 3;
pub const TAG_TYPED: u8 = 4;

/// A term, borrowed from the dictionary (or from a query).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TermRef<'a> {
    /// An IRI.
    Iri(&'a str),
    /// A blank node, by its label.
    Blank(&'a str),
    /// A literal. `lang` is `Some` exactly when the datatype is `rdf:langString`.
    Literal {
        /// The lexical form, as written.
        value: &'a str,
        /// The datatype IRI.
        datatype: &'a str,
        /// The language tag, lower case.
        lang: Option<&'a str>,
    },
}

impl<'a> TermRef<'a> {
    /// A simple literal (`xsd:string`).
    pub fn string(value: &'a str) -> Self {
        TermRef::Literal {
            value,
            datatype: XSD_STRING,
            lang: None,
        }
    }

    /// Whether this is a literal.
    pub fn is_literal(&self) -> bool {
        matches!(self, TermRef::Literal { .. })
    }

    /// The dictionary key of this term: a kind byte, then the text (for a language-tagged
    /// string `lang \0 value`, for another typed literal `datatype \0 value`; neither a tag nor
    /// an IRI can hold a NUL).
    pub fn encode(&self, out: &mut String) {
        let tag = |t: u8| char::from(t);
        match *self {
            TermRef::Iri(s) => {
                out.push(tag(TAG_IRI));
                out.push_str(s);
            }
            TermRef::Blank(s) => {
                out.push(tag(TAG_BLANK));
                out.push_str(s);
            }
            TermRef::Literal {
                value,
                lang: Some(lang),
                ..
            } => {
                out.push(tag(TAG_LANG));
                out.push_str(lang);
                out.push('\0');
                out.push_str(value);
            }
            TermRef::Literal {
                value, datatype, ..
            } if datatype == XSD_STRING => {
                out.push(tag(TAG_STRING));
                out.push_str(value);
            }
            TermRef::Literal {
                value, datatype, ..
            } => {
                out.push(tag(TAG_TYPED));
                out.push_str(datatype);
                out.push('\0');
                out.push_str(value);
            }
        }
    }

    /// Decodes a dictionary key made by `encode` (the dictionary checks the tag when it loads
    /// a snapshot). Keys are `str`, so decoding validates nothing: it was 13 % of Q6's time.
    pub fn decode(key: &'a str) -> TermRef<'a> {
        // The tags and NUL are ASCII, so every split below is on a character boundary.
        let (tag, rest) = (key.as_bytes()[0], &key[1..]);
        let split = |rest: &'a str| rest.split_once('\0').unwrap_or((rest, ""));
        match tag {
            TAG_IRI => TermRef::Iri(rest),
            TAG_BLANK => TermRef::Blank(rest),
            TAG_STRING => TermRef::string(rest),
            TAG_LANG => {
                let (lang, value) = split(rest);
                TermRef::Literal {
                    value,
                    datatype: RDF_LANG_STRING,
                    lang: Some(lang),
                }
            }
            _ => {
                let (datatype, value) = split(rest);
                TermRef::Literal {
                    value,
                    datatype,
                    lang: None,
                }
            }
        }
    }

    /// This term as an `oxrdf` term (for the result serialisers).
    pub fn to_oxrdf(&self) -> oxrdf::Term {
        match *self {
            TermRef::Iri(s) => oxrdf::NamedNode::new_unchecked(s).into(),
            TermRef::Blank(s) => oxrdf::BlankNode::new_unchecked(s).into(),
            TermRef::Literal {
                value,
                lang: Some(lang),
                ..
            } => oxrdf::Literal::new_language_tagged_literal_unchecked(value, lang).into(),
            TermRef::Literal {
                value, datatype, ..
            } => {
                oxrdf::Literal::new_typed_literal(value, oxrdf::NamedNode::new_unchecked(datatype))
                    .into()
            }
        }
    }
}

/// N-Triples syntax (simple literals without `^^xsd:string`).
impl fmt::Display for TermRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            TermRef::Iri(s) => write!(f, "<{s}>"),
            TermRef::Blank(s) => write!(f, "_:{s}"),
            TermRef::Literal {
                value,
                datatype,
                lang,
            } => {
                // Canonical N-Triples (RDF 1.2 N-Triples, "Canonical N-Triples"): the short escapes
                // where one exists, `\uXXXX` for the other control characters and the two
                // non-characters, every other character as itself.
                f.write_str("\"")?;
                for c in value.chars() {
                    match c {
                        '\u{8}' => f.write_str("\\b")?,
                        '\t' => f.write_str("\\t")?,
                        '\n' => f.write_str("\\n")?,
                        '\u{C}' => f.write_str("\\f")?,
                        '\r' => f.write_str("\\r")?,
                        '"' => f.write_str("\\\"")?,
                        '\\' => f.write_str("\\\\")?,
                        '\0'..='\u{1F}' | '\u{7F}' | '\u{FFFE}' | '\u{FFFF}' => {
                            write!(f, "\\u{:04X}", u32::from(c))?
                        }
                        c => fmt::Write::write_char(f, c)?,
                    }
                }
                f.write_str("\"")?;
                match lang {
                    Some(l) => write!(f, "@{l}"),
                    None if datatype == XSD_STRING => Ok(()),
                    None => write!(f, "^^<{datatype}>"),
                }
            }
        }
    }
}

/// A term read from the dictionary: borrowed where its key lies whole in memory or in the
/// mapped file, else decoded (a key of a front-coded block, `coded.rs`) into a key of its own.
/// [`as_ref`](Self::as_ref) borrows it as a [`TermRef`].
#[derive(Clone, Debug)]
pub enum TermCow<'a> {
    /// Borrowed from the dictionary.
    Ref(TermRef<'a>),
    /// Decoded: the dictionary key (`TermRef::encode`).
    Key(String),
}

impl<'a> TermCow<'a> {
    /// The term of a dictionary key.
    pub(crate) fn of_key(key: std::borrow::Cow<'a, str>) -> Self {
        match key {
            std::borrow::Cow::Borrowed(k) => TermCow::Ref(TermRef::decode(k)),
            std::borrow::Cow::Owned(k) => TermCow::Key(k),
        }
    }

    /// Borrows it.
    #[inline]
    pub fn as_ref(&self) -> TermRef<'_> {
        match self {
            TermCow::Ref(t) => *t,
            TermCow::Key(k) => TermRef::decode(k),
        }
    }

    /// The borrowed term, when it is one (`None` for a decoded key).
    #[inline]
    pub fn borrowed(&self) -> Option<TermRef<'a>> {
        match self {
            TermCow::Ref(t) => Some(*t),
            TermCow::Key(_) => None,
        }
    }
}

impl PartialEq for TermCow<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.as_ref() == other.as_ref()
    }
}

impl Eq for TermCow<'_> {}

impl PartialEq<TermRef<'_>> for TermCow<'_> {
    fn eq(&self, other: &TermRef<'_>) -> bool {
        self.as_ref() == *other
    }
}

impl std::fmt::Display for TermCow<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.as_ref().fmt(f)
    }
}

/// A term of RDF 1.2 the store does not hold yet (refused where it is read, never changed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotHeld {
    /// A language-tagged string with a base direction.
    #[error("literals with a base direction (RDF 1.2)")]
    BaseDirection,
}

/// An owned term (query constants, computed values).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Term {
    /// An IRI.
    Iri(String),
    /// A blank node.
    Blank(String),
    /// A literal.
    Literal {
        /// Lexical form.
        value: String,
        /// Datatype IRI.
        datatype: String,
        /// Language tag, lower case.
        lang: Option<String>,
    },
}

impl Term {
    /// Borrows it.
    pub fn as_ref(&self) -> TermRef<'_> {
        match self {
            Term::Iri(s) => TermRef::Iri(s),
            Term::Blank(s) => TermRef::Blank(s),
            Term::Literal {
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

    /// From an `oxrdf` literal.
    ///
    /// # Errors
    /// A literal with a base direction (RDF 1.2's `"x"@en--ltr`, datatype
    /// `rdf:dirLangString`): the store does not hold one yet, and dropping the direction would
    /// make it another term.
    pub fn from_oxrdf_literal(l: &oxrdf::Literal) -> Result<Self, NotHeld> {
        if l.datatype().as_str() == RDF_DIR_LANG_STRING {
            return Err(NotHeld::BaseDirection);
        }
        Ok(Term::Literal {
            value: l.value().to_owned(),
            datatype: l.datatype().as_str().to_owned(),
            lang: l.language().map(str::to_ascii_lowercase),
        })
    }
}

impl From<TermCow<'_>> for Term {
    fn from(t: TermCow<'_>) -> Self {
        t.as_ref().into()
    }
}

impl<'a> From<TermRef<'a>> for Term {
    fn from(t: TermRef<'a>) -> Self {
        match t {
            TermRef::Iri(s) => Term::Iri(s.to_owned()),
            TermRef::Blank(s) => Term::Blank(s.to_owned()),
            TermRef::Literal {
                value,
                datatype,
                lang,
            } => Term::Literal {
                value: value.to_owned(),
                datatype: datatype.to_owned(),
                lang: lang.map(str::to_owned),
            },
        }
    }
}

impl fmt::Display for Term {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_ref().fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_round_trips_through_its_key() {
        let terms = [
            TermRef::Iri("http://a/b"),
            TermRef::Blank("b0"),
            TermRef::string("plain"),
            TermRef::string(""),
            TermRef::Literal {
                value: "chat",
                datatype: RDF_LANG_STRING,
                lang: Some("fr"),
            },
            TermRef::Literal {
                value: "01",
                datatype: "http://www.w3.org/2001/XMLSchema#integer",
                lang: None,
            },
        ];
        for t in terms {
            let mut k = String::new();
            t.encode(&mut k);
            assert_eq!(TermRef::decode(&k), t);
        }
    }

    #[test]
    fn display_is_ntriples() {
        assert_eq!(TermRef::string("a\"b").to_string(), "\"a\\\"b\"");
        let int = TermRef::Literal {
            value: "01",
            datatype: "http://www.w3.org/2001/XMLSchema#integer",
            lang: None,
        };
        assert_eq!(
            int.to_string(),
            "\"01\"^^<http://www.w3.org/2001/XMLSchema#integer>"
        );
    }
}
