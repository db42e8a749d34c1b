//! Documents of SP²Bench's shape (Schmidt et al., ICDE 2009; LAS §6.1.1), generated from the
//! distributions in `../shared/data/sp2bench/README.md`: `nearflow gen sp2bench`.
//!
//! This is our own generator, not a port of the original: it produces a DBLP-like bibliography
//! with the same classes, predicates, IRI patterns and growth curves, so that the benchmark's 17
//! queries have answers of the same order of magnitude at the same size, deterministically per
//! seed. It is not byte-identical to the original (that is not the aim). What it models:
//!
//! - **Years.** Documents are generated year by year from 1936 until the requested number of
//!   triples is reached (the last document is completed, so the count is exceeded by at most one
//!   document's triples). Documents per year follow the README's logistic curves
//!   `a/(1+b·e^(−c(yr−off)))` for journals, articles, proceedings, inproceedings, incollections
//!   and books. The README gives no curve for theses and web documents; they appear from 1980 at
//!   about 12 PhD theses, 6 master's theses and 4 web documents a year (estimated from the
//!   original's 1M document).
//! - **Attributes.** Each class's attributes are present with fixed probabilities: the README's
//!   DBLP figures where it gives them (article: author .9895, pages .9261, ee .6781, month .0065;
//!   inproceedings: ee .6519, crossref .8003, pages .9489, abstract .01), the original's 1M
//!   document's frequencies otherwise ([`ATTRIBUTES`]).
//! - **People.** Authors per document are Gaussian with the README's year-dependent mean and
//!   standard deviation (at least one), editors Gaussian (2.15, 1.18). An author is a new person
//!   with probability [`NEW_PERSON`], else a person first seen in the last [`ACTIVE_YEARS`] years,
//!   uniformly; never twice on one document. Names are unique per person (blank node
//!   `_:First_Last`, as the original). "Paul Erdoes" (an IRI) writes 10 articles or
//!   inproceedings and edits 2 journals or proceedings a year until 1996.
//! - **Citations.** A document cites with its class's probability; its bag (`rdf:Bag`) holds a
//!   Gaussian (16.82, 10.07) number of members, a third `UnknownDocument`, the rest earlier
//!   documents drawn uniformly.
//! - **Text.** Titles, notes and abstracts are pseudo-words built from syllables (no word list
//!   of the original is used); URLs, ISBNs and page numbers are drawn in the original's formats.
//!
//! [`queries`] holds the benchmark's 17 queries in our own wording, for machines without the
//! original files.

use std::fmt::{self, Display};
use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::rng::Rng;

pub mod queries;

/// The first year of the bibliography (the README).
pub const FIRST_YEAR: u16 = 1936;
/// Probability that an author slot is filled by a new person (the original's 1M document has
/// 82,685 persons for 155,159 author and editor slots).
pub const NEW_PERSON: f64 = 0.53;
/// An author who is not new is one of the persons first seen in this many recent years.
pub const ACTIVE_YEARS: u16 = 4;

/// A document class of the benchmark's vocabulary (`bench:` namespace).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Class {
    Journal,
    Article,
    Proceedings,
    Inproceedings,
    Incollection,
    Book,
    PhdThesis,
    MastersThesis,
    Www,
}

impl Class {
    pub const ALL: [Class; 9] = [
        Class::Journal,
        Class::Proceedings,
        Class::Inproceedings,
        Class::Article,
        Class::Www,
        Class::MastersThesis,
        Class::PhdThesis,
        Class::Incollection,
        Class::Book,
    ];
    /// The class's local name in the `bench:` namespace.
    pub fn name(self) -> &'static str {
        match self {
            Class::Journal => "Journal",
            Class::Article => "Article",
            Class::Proceedings => "Proceedings",
            Class::Inproceedings => "Inproceedings",
            Class::Incollection => "Incollection",
            Class::Book => "Book",
            Class::PhdThesis => "PhDThesis",
            Class::MastersThesis => "MastersThesis",
            Class::Www => "Www",
        }
    }
    fn index(self) -> usize {
        self as usize
    }
    /// Documents of this class in year `yr` (the README's logistic curves; see the module doc
    /// for theses and web documents).
    pub fn per_year(self, yr: u16, rng: &mut Rng) -> u32 {
        let logistic = |a: f64, b: f64, c: f64, off: f64| {
            let v = a / (1.0 + b * (-c * (yr as f64 - off)).exp());
            v.round() as u32
        };
        let occasional = |mean: f64, rng: &mut Rng| {
            if yr < 1980 {
                0
            } else {
                rng.gaussian(mean, mean / 2.0).round().max(0.0) as u32
            }
        };
        match self {
            Class::Inproceedings => logistic(337132.34, 1901.05, 0.15, 1965.0),
            Class::Proceedings => logistic(5502.31, 1250.26, 0.14, 1965.0),
            Class::Article => logistic(58519.12, 876.80, 0.12, 1950.0),
            Class::Journal => logistic(740.43, 426.28, 0.12, 1950.0),
            Class::Book => logistic(52.97, 40739.38, 0.32, 1950.0),
            Class::Incollection => logistic(3577.31, 196.49, 0.091, 1980.0),
            Class::PhdThesis => occasional(12.0, rng),
            Class::MastersThesis => occasional(6.0, rng),
            Class::Www => occasional(4.0, rng),
        }
    }
}

/// What an attribute's object looks like.
#[derive(Clone, Copy, Debug)]
pub enum Value {
    /// `n` pseudo-words, an `xsd:string`.
    Words(u32),
    /// About `n` pseudo-words (Gaussian, sd n/8).
    Text(u32),
    /// `http://www.w.tld/w/w.html`, an `xsd:string` (the original's URLs).
    Url,
    /// An `xsd:integer` in `lo..=hi`.
    Int(u32, u32),
    /// An ISBN-10-shaped `xsd:string`.
    Isbn,
    /// A publisher's name.
    Publisher,
}

/// One optional attribute of a class: predicate, probability, value.
type Attribute = (&'static str, f64, Value);

/// The attributes of each class beyond its type, title, issue year, container and people.
/// Probabilities: the README's DBLP figures where given, else the frequencies in the original's
/// 1M document.
pub const ATTRIBUTES: [&[Attribute]; 9] = [
    // Journal
    &[
        ("swrc:number", 0.9343, Value::Int(1, 12)),
        ("swrc:volume", 0.9993, Value::Int(1, 60)),
    ],
    // Article
    &[
        ("bench:abstract", 0.0098, Value::Text(150)),
        ("bench:cdrom", 0.0118, Value::Url),
        ("rdfs:seeAlso", 0.6781, Value::Url),
        ("swrc:month", 0.0065, Value::Int(1, 12)),
        ("swrc:note", 0.0307, Value::Words(8)),
        ("swrc:pages", 0.9261, Value::Int(1, 200)),
        ("foaf:homepage", 0.9988, Value::Url),
        ("dc:publisher", 0.0006, Value::Publisher),
        ("bench:booktitle", 0.0006, Value::Words(3)),
    ],
    // Proceedings
    &[
        ("bench:booktitle", 0.9579, Value::Words(3)),
        ("swrc:isbn", 0.8583, Value::Isbn),
        ("dc:publisher", 0.9801, Value::Publisher),
        ("swrc:series", 0.5914, Value::Int(1, 300)),
        ("swrc:volume", 0.567, Value::Int(1, 500)),
        ("foaf:homepage", 0.9878, Value::Url),
    ],
    // Inproceedings
    &[
        ("bench:abstract", 0.01, Value::Text(150)),
        ("bench:booktitle", 1.0, Value::Words(3)),
        ("bench:cdrom", 0.0164, Value::Url),
        ("rdfs:seeAlso", 0.6519, Value::Url),
        ("swrc:pages", 0.9489, Value::Int(1, 200)),
        ("foaf:homepage", 1.0, Value::Url),
    ],
    // Incollection
    &[
        ("bench:booktitle", 1.0, Value::Words(3)),
        ("bench:cdrom", 0.0113, Value::Url),
        ("rdfs:seeAlso", 0.3937, Value::Url),
        ("swrc:pages", 0.6946, Value::Int(1, 200)),
        ("foaf:homepage", 0.9977, Value::Url),
        ("dc:publisher", 0.0271, Value::Publisher),
    ],
    // Book
    &[
        ("dc:publisher", 1.0, Value::Publisher),
        ("swrc:isbn", 0.9101, Value::Isbn),
        ("swrc:series", 0.5393, Value::Int(1, 300)),
        ("swrc:volume", 0.4691, Value::Int(1, 500)),
        ("foaf:homepage", 0.236, Value::Url),
    ],
    // PhD thesis
    &[
        ("dc:publisher", 1.0, Value::Publisher),
        ("rdfs:seeAlso", 0.1287, Value::Url),
        ("swrc:month", 0.0297, Value::Int(1, 12)),
        ("foaf:homepage", 0.0297, Value::Url),
    ],
    // Master's thesis
    &[
        ("dc:publisher", 1.0, Value::Publisher),
        ("foaf:homepage", 0.46, Value::Url),
    ],
    // Web document
    &[
        ("foaf:homepage", 1.0, Value::Url),
        ("swrc:note", 0.0571, Value::Words(8)),
    ],
];

/// Per class: probability of authors, of editors, of a citation bag.
const PEOPLE: [(f64, f64, f64); 9] = [
    (0.0, 0.72, 0.0),      // Journal
    (0.9895, 0.0, 0.0047), // Article
    (0.0, 0.84, 0.0),      // Proceedings
    (1.0, 0.0, 0.0103),    // Inproceedings
    (0.98, 0.0, 0.0045),   // Incollection
    (0.95, 0.094, 0.0084), // Book
    (1.0, 0.0, 0.0),       // PhD thesis
    (1.0, 0.0, 0.0),       // Master's thesis
    (1.0, 0.0, 0.0),       // Web document
];

const PUBLISHERS: [&str; 16] = [
    "Northbridge Academic Press",
    "Halvorsen & Tate",
    "Meridian Scientific",
    "Caldera Books",
    "Lindqvist Verlag",
    "Oakmere University Press",
    "Brightwater Publishing",
    "Arden Technical",
    "Corvid House",
    "Pellham and Sons",
    "Quarry Hill Press",
    "Saltmarsh Editions",
    "Tessaract Media",
    "Vantage Point Books",
    "Wrenfield Press",
    "Yarrow Scholarly",
];

/// What a run produced.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    pub triples: u64,
    /// The last year with documents (the README: 1955 at 10k … 1989 at 1M for the original).
    pub last_year: u16,
    /// Documents per class, in [`Class`] order.
    pub documents: [u64; 9],
    pub persons: u64,
}

/// A generated document, kept so later documents can cite it.
#[derive(Clone, Copy, Debug)]
struct DocRef {
    class: Class,
    yr: u16,
    /// The journal or proceedings number, for articles and inproceedings.
    group: u32,
    n: u32,
}

impl Display for DocRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (yr, g, n) = (self.yr, self.group, self.n);
        f.write_str("<http://localhost/publications/")?;
        match self.class {
            Class::Journal => write!(f, "journals/Journal{n}/{yr}>"),
            Class::Article => write!(f, "articles/Journal{g}/{yr}/Article{n}>"),
            Class::Proceedings => write!(f, "procs/Proceeding{n}/{yr}>"),
            Class::Inproceedings => write!(f, "inprocs/Proceeding{g}/{yr}/Inproceeding{n}>"),
            Class::Incollection => write!(f, "incolls/{yr}/Incollection{n}>"),
            Class::Book => write!(f, "books/{yr}/Book{n}>"),
            Class::PhdThesis => write!(f, "phds/{yr}/PhDThesis{n}>"),
            Class::MastersThesis => write!(f, "masters/{yr}/MastersThesis{n}>"),
            Class::Www => write!(f, "wwws/{yr}/WebDoc{n}>"),
        }
    }
}

const ONSETS: [&str; 20] = [
    "b", "c", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "br", "st",
    "tr", "ch",
];
const VOWELS: [&str; 6] = ["a", "e", "i", "o", "u", "ay"];

/// Syllables from `k` in bijective base 120 (onset × vowel): distinct `k` give distinct strings
/// (every syllable ends in a vowel and starts with a consonant, so the split is unique).
fn syllables(mut k: u64, out: &mut String) {
    let base = (ONSETS.len() * VOWELS.len()) as u64;
    let start = out.len();
    loop {
        k -= 1;
        let d = (k % base) as usize;
        out.insert_str(start, VOWELS[d % VOWELS.len()]);
        out.insert_str(start, ONSETS[d / VOWELS.len()]);
        k /= base;
        if k == 0 {
            break;
        }
    }
}

/// The pseudo-word vocabulary: word `i` of `VOCABULARY`.
const VOCABULARY: u64 = 20_000;

/// Person `i`'s first and last name (unique per `i`).
fn person_name(i: u64, first: &mut String, last: &mut String) {
    const FIRST_NAMES: u64 = 480;
    first.clear();
    last.clear();
    syllables(1 + (i % FIRST_NAMES) + 120, first);
    syllables(1 + i / FIRST_NAMES + 120, last);
    capitalise(first);
    capitalise(last);
}

fn capitalise(s: &mut String) {
    if let Some(c) = s.get(..1) {
        let up = c.to_ascii_uppercase();
        s.replace_range(..1, &up);
    }
}

struct Gen<'p, W: Write> {
    out: W,
    progress: Option<&'p AtomicU64>,
    rng: Rng,
    summary: Summary,
    docs: Vec<DocRef>,
    /// Persons created so far; person `i` is `_:First_Last` of [`person_name`].
    persons: u64,
    /// `persons` at the start of each year since `FIRST_YEAR`.
    persons_at_year: Vec<u64>,
    bags: u64,
    scratch: String,
    first: String,
    last: String,
}

const ERDOES: &str = "<http://localhost/persons/Paul_Erdoes>";

impl<W: Write> Gen<'_, W> {
    fn triple(&mut self, s: impl Display, p: &str, o: impl Display) -> io::Result<()> {
        self.summary.triples += 1;
        if self.summary.triples % 4096 == 0 {
            if let Some(p) = self.progress {
                p.store(self.summary.triples, Ordering::Relaxed);
            }
        }
        writeln!(self.out, "{s} {p} {o}.")
    }

    fn words(&mut self, n: u32) {
        self.scratch.clear();
        for w in 0..n {
            if w > 0 {
                self.scratch.push(' ');
            }
            let k = 1 + self.rng.below(VOCABULARY);
            syllables(k, &mut self.scratch);
        }
    }

    fn string(&self) -> String {
        format!("\"{}\"^^xsd:string", self.scratch)
    }

    fn value(&mut self, v: Value) -> String {
        match v {
            Value::Words(n) => {
                self.words(n);
                self.string()
            }
            Value::Text(n) => {
                let len = self.rng.gaussian(n as f64, n as f64 / 8.0).round().max(1.0) as u32;
                self.words(len);
                self.string()
            }
            Value::Url => {
                self.words(3);
                let w: Vec<&str> = self.scratch.split(' ').collect();
                format!(
                    "\"http://www.{}.tld/{}/{}.html\"^^xsd:string",
                    w[0], w[1], w[2]
                )
            }
            Value::Int(lo, hi) => {
                let v = lo as u64 + self.rng.below((hi - lo + 1) as u64);
                format!("\"{v}\"^^xsd:integer")
            }
            Value::Isbn => {
                let a = self.rng.below(10_000);
                let b = self.rng.below(10_000);
                format!("\"0-{a:04}-{b:04}-0\"^^xsd:string")
            }
            Value::Publisher => {
                let p = PUBLISHERS[self.rng.below(PUBLISHERS.len() as u64) as usize];
                format!("\"{p}\"^^xsd:string")
            }
        }
    }

    /// A person for a new slot: new with probability [`NEW_PERSON`], else one first seen in the
    /// last [`ACTIVE_YEARS`] years; not one of `taken`.
    fn pick_person(&mut self, yr: u16, taken: &[u64]) -> io::Result<u64> {
        let y = (yr - FIRST_YEAR) as usize;
        let from = self.persons_at_year[y.saturating_sub(ACTIVE_YEARS as usize - 1)];
        for _ in 0..8 {
            if self.persons == from || self.rng.chance(NEW_PERSON) {
                break;
            }
            let p = from + self.rng.below(self.persons - from);
            if !taken.contains(&p) {
                return Ok(p);
            }
        }
        let p = self.persons;
        self.persons += 1;
        self.summary.persons += 1;
        person_name(p, &mut self.first, &mut self.last);
        let node = format!("_:{}_{}", self.first, self.last);
        let name = format!("\"{} {}\"^^xsd:string", self.first, self.last);
        self.triple(&node, "rdf:type", "foaf:Person")?;
        self.triple(&node, "foaf:name", name)?;
        Ok(p)
    }

    fn people(&mut self, doc: DocRef, pred: &str, count: usize, erdoes: bool) -> io::Result<()> {
        let mut taken = Vec::with_capacity(count);
        for _ in 0..count {
            let p = self.pick_person(doc.yr, &taken)?;
            taken.push(p);
        }
        for p in taken {
            person_name(p, &mut self.first, &mut self.last);
            let node = format!("_:{}_{}", self.first, self.last);
            self.triple(doc, pred, node)?;
        }
        if erdoes {
            self.triple(doc, pred, ERDOES)?;
        }
        Ok(())
    }

    fn document(&mut self, doc: DocRef, erdoes_writes: bool, erdoes_edits: bool) -> io::Result<()> {
        let c = doc.class;
        self.summary.documents[c.index()] += 1;
        self.triple(doc, "rdf:type", format_args!("bench:{}", c.name()))?;
        let title = if c == Class::Journal {
            format!("\"Journal {} ({})\"^^xsd:string", doc.n, doc.yr)
        } else if c == Class::Proceedings {
            format!("\"Proceeding {} ({})\"^^xsd:string", doc.n, doc.yr)
        } else {
            self.value(Value::Words(3))
        };
        self.triple(doc, "dc:title", title)?;
        if c != Class::Article && c != Class::Www {
            self.triple(
                doc,
                "dcterms:issued",
                format_args!("\"{}\"^^xsd:integer", doc.yr),
            )?;
        }
        for &(pred, p, v) in ATTRIBUTES[c.index()] {
            if self.rng.chance(p) {
                let o = self.value(v);
                self.triple(doc, pred, o)?;
            }
        }
        match c {
            Class::Article => {
                let j = DocRef {
                    class: Class::Journal,
                    yr: doc.yr,
                    group: 0,
                    n: doc.group,
                };
                self.triple(doc, "swrc:journal", j)?;
            }
            Class::Inproceedings if self.rng.chance(0.8003) => {
                let p = DocRef {
                    class: Class::Proceedings,
                    yr: doc.yr,
                    group: 0,
                    n: doc.group,
                };
                self.triple(doc, "dcterms:partOf", p)?;
            }
            _ => {}
        }
        let (authors, editors, cites) = PEOPLE[c.index()];
        if self.rng.chance(authors) {
            let t = doc.yr as f64 - 1975.0;
            let mean = 2.05 / (1.0 + 17.59 * (-0.11 * t).exp()) + 1.05;
            let sd = 1.00 / (1.0 + 6.46 * (-0.10 * t).exp()) + 0.5;
            let n = self.rng.gaussian(mean, sd).round().max(1.0) as usize;
            self.people(doc, "dc:creator", n, erdoes_writes)?;
        } else if erdoes_writes {
            self.triple(doc, "dc:creator", ERDOES)?;
        }
        if self.rng.chance(editors) {
            let n = self.rng.gaussian(2.15, 1.18).round().max(1.0) as usize;
            self.people(doc, "swrc:editor", n, erdoes_edits)?;
        } else if erdoes_edits {
            self.triple(doc, "swrc:editor", ERDOES)?;
        }
        if self.rng.chance(cites) && !self.docs.is_empty() {
            self.bags += 1;
            let bag = format!("_:references{}", self.bags);
            self.triple(doc, "dcterms:references", &bag)?;
            self.triple(&bag, "rdf:type", "rdf:Bag")?;
            let n = self.rng.gaussian(16.82, 10.07).round().max(1.0) as u32;
            for i in 1..=n {
                let target = if self.rng.chance(1.0 / 3.0) {
                    "<http://localhost/misc/UnknownDocument>".to_string()
                } else {
                    self.docs[self.rng.below(self.docs.len() as u64) as usize].to_string()
                };
                self.triple(&bag, &format!("rdf:_{i}"), target)?;
            }
        }
        self.docs.push(doc);
        Ok(())
    }

    fn prelude(&mut self) -> io::Result<()> {
        for (p, iri) in [
            ("dc", "http://purl.org/dc/elements/1.1/"),
            ("dcterms", "http://purl.org/dc/terms/"),
            ("rdf", "http://www.w3.org/1999/02/22-rdf-syntax-ns#"),
            ("rdfs", "http://www.w3.org/2000/01/rdf-schema#"),
            ("swrc", "http://swrc.ontoware.org/ontology#"),
            ("foaf", "http://xmlns.com/foaf/0.1/"),
            ("bench", "http://localhost/vocabulary/bench/"),
            ("xsd", "http://www.w3.org/2001/XMLSchema#"),
            ("person", "http://localhost/persons/"),
        ] {
            writeln!(self.out, "@prefix {p}: <{iri}> .")?;
        }
        for c in Class::ALL {
            self.triple(
                format_args!("bench:{}", c.name()),
                "rdfs:subClassOf",
                "foaf:Document",
            )?;
        }
        self.triple(ERDOES, "rdf:type", "foaf:Person")?;
        self.triple(ERDOES, "foaf:name", "\"Paul Erdoes\"^^xsd:string")?;
        self.triple(
            "<http://localhost/misc/UnknownDocument>",
            "rdf:type",
            "foaf:Document",
        )
    }

    /// One year's documents; false once the triple budget is spent.
    fn year(&mut self, yr: u16, budget: u64) -> io::Result<bool> {
        self.persons_at_year.push(self.persons);
        let count = |c: Class, rng: &mut Rng| c.per_year(yr, rng);
        let journals = count(Class::Journal, &mut self.rng);
        let articles = count(Class::Article, &mut self.rng);
        let procs = count(Class::Proceedings, &mut self.rng);
        let inprocs = count(Class::Inproceedings, &mut self.rng);
        // Erdoes: 10 of this year's articles and inproceedings, 2 of its journals and
        // proceedings, until 1996.
        let active = yr <= 1996;
        let writes = pick(
            &mut self.rng,
            (articles + inprocs) as u64,
            if active { 10 } else { 0 },
        );
        let edits = pick(
            &mut self.rng,
            (journals + procs) as u64,
            if active { 2 } else { 0 },
        );
        let mut order = Vec::new();
        let doc = |class, group, n| DocRef {
            class,
            yr,
            group,
            n,
        };
        // Containers, then their members, each member in a container drawn uniformly.
        for (container, member, containers, members) in [
            (Class::Journal, Class::Article, journals, articles),
            (Class::Proceedings, Class::Inproceedings, procs, inprocs),
        ] {
            order.extend((1..=containers).map(|n| doc(container, 0, n)));
            for n in 1..=members {
                let g = if containers == 0 {
                    1
                } else {
                    1 + self.rng.below(containers as u64) as u32
                };
                order.push(doc(member, g, n));
            }
        }
        for c in [
            Class::Incollection,
            Class::Book,
            Class::PhdThesis,
            Class::MastersThesis,
            Class::Www,
        ] {
            for n in 1..=count(c, &mut self.rng) {
                order.push(doc(c, 0, n));
            }
        }
        // Articles are numbered within their journal.
        let mut per_group = vec![0u32; journals.max(1) as usize + 1];
        let (mut written, mut edited) = (0u64, 0u64);
        for mut doc in order {
            if doc.class == Class::Article {
                per_group[doc.group as usize] += 1;
                doc.n = per_group[doc.group as usize];
            }
            let (w, e) = match doc.class {
                Class::Article | Class::Inproceedings => {
                    written += 1;
                    (writes.contains(&(written - 1)), false)
                }
                Class::Journal | Class::Proceedings => {
                    edited += 1;
                    (false, edits.contains(&(edited - 1)))
                }
                _ => (false, false),
            };
            self.document(doc, w, e)?;
            if self.summary.triples >= budget {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// `k` distinct numbers in `0..n` (all of them when `n <= k`).
fn pick(rng: &mut Rng, n: u64, k: usize) -> Vec<u64> {
    if n as usize <= k {
        return (0..n).collect();
    }
    let mut out = Vec::with_capacity(k);
    while out.len() < k {
        let v = rng.below(n);
        if !out.contains(&v) {
            out.push(v);
        }
    }
    out
}

/// Writes a document of about `triples` triples (Turtle, the original's layout: prefixes, one
/// triple per line, `xsd:string` literals, blank nodes for persons and bags) to `out`. The same
/// `triples` and `seed` give the same bytes.
pub fn generate<W: Write>(triples: u64, seed: u64, out: W) -> io::Result<Summary> {
    generate_with_progress(triples, seed, out, None)
}

/// [`generate`], storing the number of triples written so far into `progress` now and then.
pub fn generate_with_progress<W: Write>(
    triples: u64,
    seed: u64,
    out: W,
    progress: Option<&AtomicU64>,
) -> io::Result<Summary> {
    let mut g = Gen {
        out,
        progress,
        rng: Rng::new(seed ^ 0x5350_3242_656e_6368),
        summary: Summary::default(),
        docs: Vec::new(),
        persons: 0,
        persons_at_year: Vec::new(),
        bags: 0,
        scratch: String::new(),
        first: String::new(),
        last: String::new(),
    };
    g.prelude()?;
    let mut yr = FIRST_YEAR;
    while g.summary.triples < triples && g.year(yr, triples)? {
        yr += 1;
    }
    g.summary.last_year = yr;
    g.out.flush()?;
    Ok(g.summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syllable_words_are_distinct_per_number() {
        let mut seen = std::collections::HashSet::new();
        for k in 1..50_000u64 {
            let mut s = String::new();
            syllables(k, &mut s);
            assert!(seen.insert(s.clone()), "{k} gives {s} twice");
        }
    }

    #[test]
    fn person_names_are_unique() {
        let (mut f, mut l) = (String::new(), String::new());
        let mut seen = std::collections::HashSet::new();
        for i in 0..100_000u64 {
            person_name(i, &mut f, &mut l);
            assert!(seen.insert(format!("{f} {l}")), "person {i}: {f} {l} twice");
            assert!(f.chars().chain(l.chars()).all(|c| c.is_ascii_alphabetic()));
        }
    }

    #[test]
    fn curves_match_the_readme_at_a_few_years() {
        let mut rng = Rng::new(1);
        // The original's 1M document has 5,495 inproceedings and 136 journals in 1988, and its
        // first journal in 1940.
        assert_eq!(Class::Inproceedings.per_year(1988, &mut rng), 5495);
        assert_eq!(Class::Journal.per_year(1988, &mut rng), 136);
        assert_eq!(Class::Journal.per_year(1940, &mut rng), 1);
        assert_eq!(Class::Journal.per_year(1936, &mut rng), 0);
        assert_eq!(Class::Book.per_year(1960, &mut rng), 0);
    }

    #[test]
    fn the_same_seed_gives_the_same_bytes_and_the_budget_is_met() {
        let run = |seed| {
            let mut out = Vec::new();
            let s = generate(20_000, seed, &mut out).unwrap();
            (s, out)
        };
        let (a, bytes_a) = run(7);
        let (b, bytes_b) = run(7);
        let (_, bytes_c) = run(8);
        assert_eq!(a, b);
        assert_eq!(bytes_a, bytes_b);
        assert_ne!(bytes_a, bytes_c);
        assert!(
            a.triples >= 20_000 && a.triples < 20_000 + 200,
            "{}",
            a.triples
        );
        let lines = bytes_a
            .split(|&b| b == b'\n')
            .filter(|l| l.ends_with(b"."))
            .count();
        assert_eq!(
            lines as u64,
            a.triples + 9,
            "9 prefix lines and one line per triple"
        );
    }
}
