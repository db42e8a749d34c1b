//! Writing results: SPARQL 1.1 JSON, XML, CSV and TSV through `sparesults`, a readable table
//! for the terminal, N-Triples or Turtle for CONSTRUCT, TriG for a dataset.

use std::io::{self, Write};

use oxrdf::{BlankNodeRef, LiteralRef, NamedNodeRef, VariableRef};
use sparesults::{QueryResultsFormat, QueryResultsSerializer};

use super::expr::EvalCx;
use super::lower::Rows;
use nearflow_rdf::term::{Term, TermRef, UNBOUND};

/// An output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// An aligned text table (buffers the rows to size the columns).
    Table,
    /// SPARQL 1.1 Query Results JSON.
    Json,
    /// SPARQL Query Results XML.
    Xml,
    /// SPARQL 1.1 Query Results CSV.
    Csv,
    /// SPARQL 1.1 Query Results TSV.
    Tsv,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "table" => Format::Table,
            "json" => Format::Json,
            "xml" => Format::Xml,
            "csv" => Format::Csv,
            "tsv" => Format::Tsv,
            _ => return Err(format!("unknown format '{s}' (table, json, xml, csv, tsv)")),
        })
    }
}

fn ox(t: TermRef<'_>) -> oxrdf::TermRef<'_> {
    match t {
        TermRef::Iri(s) => NamedNodeRef::new_unchecked(s).into(),
        TermRef::Blank(s) => BlankNodeRef::new_unchecked(s).into(),
        TermRef::Literal {
            value,
            lang: Some(l),
            ..
        } => LiteralRef::new_language_tagged_literal_unchecked(value, l).into(),
        TermRef::Literal {
            value, datatype, ..
        } => LiteralRef::new_typed_literal(value, NamedNodeRef::new_unchecked(datatype)).into(),
    }
}

fn sparesults_format(f: Format) -> QueryResultsFormat {
    match f {
        Format::Json => QueryResultsFormat::Json,
        Format::Xml => QueryResultsFormat::Xml,
        Format::Csv => QueryResultsFormat::Csv,
        _ => QueryResultsFormat::Tsv,
    }
}

/// Writes solutions as they come (`batches`), projected on `vars` (name, column); returns the
/// number of rows.
pub fn write_solutions(
    out: &mut dyn Write,
    format: Format,
    cx: EvalCx<'_>,
    vars: &[(String, usize)],
    batches: impl Iterator<Item = Rows>,
) -> io::Result<u64> {
    let mut n = 0u64;
    if format == Format::Table {
        let mut cells: Vec<Vec<String>> = Vec::new();
        for batch in batches {
            for row in batch.iter() {
                cells.push(
                    vars.iter()
                        .map(|(_, c)| match row[*c] {
                            UNBOUND => String::new(),
                            id => short(cx.term(id).as_ref()),
                        })
                        .collect(),
                );
            }
        }
        n = cells.len() as u64;
        write_table(out, vars, &cells)?;
        writeln!(out, "{n} row{}", if n == 1 { "" } else { "s" })?;
        return Ok(n);
    }
    let variables: Vec<oxrdf::Variable> = vars
        .iter()
        .map(|(v, _)| oxrdf::Variable::new_unchecked(v.clone()))
        .collect();
    let mut w = QueryResultsSerializer::from_format(sparesults_format(format))
        .serialize_solutions_to_writer(out, variables.clone())?;
    let mut bufs = vec![String::new(); vars.len()];
    for batch in batches {
        for row in batch.iter() {
            if format == Format::Xml {
                for (name, c) in vars {
                    if row[*c] == UNBOUND {
                        continue;
                    }
                    if let Some(ch) = xml_unrepresentable(cx.term(row[*c]).as_ref()) {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            format!(
                                "solution {}, ?{name}: the term holds U+{:04X}, which XML 1.0 \
                                 cannot represent; use --format json, csv or tsv",
                                n + 1,
                                ch as u32
                            ),
                        ));
                    }
                }
            }
            let terms: Vec<_> = vars
                .iter()
                .zip(&variables)
                .zip(bufs.iter_mut())
                .filter(|(((_, c), _), _)| row[*c] != UNBOUND)
                .map(|(((_, c), v), buf)| (VariableRef::from(v), ox(cx.term_into(row[*c], buf))))
                .collect();
            w.serialize(terms)?;
            n += 1;
        }
    }
    w.finish()?;
    Ok(n)
}

/// The first character of `t` that XML 1.0 cannot hold, escaped or not (C0 control
/// characters were written raw, so the document was not well-formed): U+0000–U+001F except tab,
/// newline and carriage return, and U+FFFE, U+FFFF.
fn xml_unrepresentable(t: TermRef<'_>) -> Option<char> {
    let bad = |c: &char| {
        (*c < ' ' && !matches!(c, '\t' | '\n' | '\r')) || matches!(c, '\u{FFFE}' | '\u{FFFF}')
    };
    match t {
        TermRef::Iri(s) | TermRef::Blank(s) => s.chars().find(bad),
        TermRef::Literal {
            value, datatype, ..
        } => value.chars().chain(datatype.chars()).find(bad),
    }
}

/// Writes an ASK answer.
pub fn write_boolean(out: &mut dyn Write, format: Format, value: bool) -> io::Result<()> {
    if format == Format::Table {
        return writeln!(out, "{}", if value { "yes" } else { "no" });
    }
    QueryResultsSerializer::from_format(sparesults_format(format))
        .serialize_boolean_to_writer(out, value)?;
    Ok(())
}

/// A syntax for a graph (CONSTRUCT, DESCRIBE).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GraphFormat {
    /// N-Triples.
    NTriples,
    /// Turtle.
    Turtle,
    /// N-Quads (every triple in the default graph: the same lines as N-Triples).
    NQuads,
    /// RDF/XML.
    RdfXml,
}

impl GraphFormat {
    /// Its media type.
    pub fn media_type(self) -> &'static str {
        match self {
            GraphFormat::NTriples => "application/n-triples",
            GraphFormat::Turtle => "text/turtle",
            GraphFormat::NQuads => "application/n-quads",
            GraphFormat::RdfXml => "application/rdf+xml",
        }
    }
}

/// Writes CONSTRUCT output: N-Triples, or Turtle when `turtle`.
pub fn write_graph(out: &mut dyn Write, triples: &[[Term; 3]], turtle: bool) -> io::Result<()> {
    let format = if turtle {
        GraphFormat::Turtle
    } else {
        GraphFormat::NTriples
    };
    write_graph_as(out, triples, format)
}

/// The RDF triple of `[s, p, o]`; `None` for one RDF cannot hold (a literal subject or a
/// non-IRI predicate, which a CONSTRUCT template can make).
fn rdf_triple([s, p, o]: &[Term; 3]) -> Option<oxrdf::TripleRef<'_>> {
    let subject: oxrdf::NamedOrBlankNodeRef<'_> = match s {
        Term::Iri(x) => NamedNodeRef::new_unchecked(x).into(),
        Term::Blank(x) => BlankNodeRef::new_unchecked(x).into(),
        Term::Literal { .. } => return None,
    };
    let Term::Iri(p) = p else { return None };
    Some(oxrdf::TripleRef::new(
        subject,
        NamedNodeRef::new_unchecked(p),
        ox(o.as_ref()),
    ))
}

/// Writes a dataset as TriG: each graph's triples in turn, `None` the default graph's (at the
/// top level), a named graph (an IRI or a blank node) in a block of its own. A triple or graph
/// name that RDF cannot hold is left out.
pub fn write_dataset_trig(
    out: &mut dyn Write,
    graphs: &[(Option<Term>, Vec<[Term; 3]>)],
) -> io::Result<()> {
    let mut w = oxttl::TriGSerializer::new().for_writer(out);
    for (name, triples) in graphs {
        let graph: oxrdf::GraphNameRef<'_> = match name {
            None => oxrdf::GraphNameRef::DefaultGraph,
            Some(Term::Iri(x)) => NamedNodeRef::new_unchecked(x).into(),
            Some(Term::Blank(x)) => BlankNodeRef::new_unchecked(x).into(),
            Some(Term::Literal { .. }) => continue,
        };
        for t in triples.iter().filter_map(rdf_triple) {
            w.serialize_quad(t.in_graph(graph))?;
        }
    }
    w.finish()?;
    Ok(())
}

/// Writes a graph in `format`. A triple that RDF cannot hold (a literal subject or a
/// non-IRI predicate, which a CONSTRUCT template can make) is left out, as §16.2 says.
pub fn write_graph_as(
    out: &mut dyn Write,
    triples: &[[Term; 3]],
    format: GraphFormat,
) -> io::Result<()> {
    let rdf = triples.iter().filter_map(rdf_triple);
    match format {
        GraphFormat::Turtle => {
            let mut w = oxttl::TurtleSerializer::new().for_writer(out);
            for t in rdf {
                w.serialize_triple(t)?;
            }
            w.finish()?;
        }
        GraphFormat::RdfXml => {
            for (i, t) in triples.iter().enumerate() {
                if let Some(ch) = t.iter().find_map(|x| xml_unrepresentable(x.as_ref())) {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!(
                            "triple {}: a term holds U+{:04X}, which XML 1.0 cannot represent; \
                             ask for Turtle, N-Triples or N-Quads",
                            i + 1,
                            ch as u32
                        ),
                    ));
                }
            }
            let mut w = oxrdfxml::RdfXmlSerializer::new().for_writer(out);
            for t in rdf {
                w.serialize_triple(t)?;
            }
            w.finish()?;
        }
        GraphFormat::NTriples | GraphFormat::NQuads => {
            for t in rdf {
                writeln!(out, "{t} .")?;
            }
        }
    }
    Ok(())
}

const MAX_CELL: usize = 60;

/// A term as the table shows it: N-Triples, but numbers and booleans bare when their lexical
/// form is Turtle's (as in Turtle), and other XSD datatypes as `xsd:…`.
fn short(t: TermRef<'_>) -> String {
    const XSD: &str = "http://www.w3.org/2001/XMLSchema#";
    if let TermRef::Literal {
        value,
        datatype,
        lang: None,
    } = t
    {
        if let Some(local) = datatype.strip_prefix(XSD) {
            let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
            let signed = value.strip_prefix(['-', '+']).unwrap_or(value);
            let bare = match local {
                "integer" => digits(signed),
                "decimal" => signed
                    .split_once('.')
                    .is_some_and(|(a, b)| digits(a) && digits(b)),
                "boolean" => value == "true" || value == "false",
                _ => false,
            };
            if bare {
                return value.to_owned();
            }
            if local != "string" {
                let quoted = TermRef::string(value).to_string();
                return format!("{quoted}^^xsd:{local}");
            }
        }
    }
    t.to_string()
}

fn write_table(
    out: &mut dyn Write,
    vars: &[(String, usize)],
    cells: &[Vec<String>],
) -> io::Result<()> {
    let clip = |s: &str| -> String {
        if s.chars().count() > MAX_CELL {
            let mut c: String = s.chars().take(MAX_CELL - 1).collect();
            c.push('…');
            c
        } else {
            s.to_owned()
        }
    };
    let heads: Vec<String> = vars.iter().map(|(v, _)| format!("?{v}")).collect();
    let mut widths: Vec<usize> = heads.iter().map(|h| h.chars().count()).collect();
    for row in cells {
        for (i, c) in row.iter().enumerate() {
            widths[i] = widths[i].max(clip(c).chars().count());
        }
    }
    let line = |out: &mut dyn Write, row: &[String]| -> io::Result<()> {
        let parts: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(c, w)| {
                let c = clip(c);
                let pad = w - c.chars().count();
                format!("{c}{}", " ".repeat(pad))
            })
            .collect();
        writeln!(out, "| {} |", parts.join(" | "))
    };
    line(out, &heads)?;
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    writeln!(out, "|-{}-|", rule.join("-|-"))?;
    for row in cells {
        line(out, row)?;
    }
    Ok(())
}
