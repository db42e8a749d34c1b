//! The 17 SP²Bench queries in our own wording, for machines without the original files
//! (`../shared/data/sp2bench/queries`, which `nearflow bench sp2bench` reads first when present).
//!
//! Each asks what the benchmark's query of the same name asks (the SP²Bench paper, §5 and its
//! appendix): the same patterns, filters and solution modifiers, so the same answers on the same
//! data; the text, layout and variable names are ours. The tests run both versions side by side
//! on the original 10k document when it is present and require equal answers.

/// The prefixes every query below uses.
pub const PREFIXES: &str = "\
PREFIX rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#>
PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>
PREFIX xsd: <http://www.w3.org/2001/XMLSchema#>
PREFIX foaf: <http://xmlns.com/foaf/0.1/>
PREFIX dc: <http://purl.org/dc/elements/1.1/>
PREFIX dcterms: <http://purl.org/dc/terms/>
PREFIX swrc: <http://swrc.ontoware.org/ontology#>
PREFIX bench: <http://localhost/vocabulary/bench/>
PREFIX person: <http://localhost/persons/>
";

/// Q5a's pattern, shared with Q12a: an article's and an inproceedings' authors of equal name.
macro_rules! same_name {
    () => {
        r#"{
  ?x rdf:type bench:Article ; dc:creator ?p .
  ?y rdf:type bench:Inproceedings ; dc:creator ?q .
  ?p foaf:name ?n . ?q foaf:name ?m
  FILTER (?n = ?m)
}"#
    };
}

/// Q8's pattern, shared with Q12b: Erdoes's co-authors and their co-authors.
macro_rules! erdoes_circle {
    () => {
        r#"{
  ?e rdf:type foaf:Person ; foaf:name "Paul Erdoes"^^xsd:string .
  {
    ?d dc:creator ?e , ?a . ?d2 dc:creator ?a , ?a2 . ?a2 foaf:name ?n
    FILTER (?a != ?e && ?d2 != ?d && ?a2 != ?e && ?a2 != ?a)
  } UNION {
    ?d dc:creator ?e , ?a . ?a foaf:name ?n
    FILTER (?a != ?e)
  }
}"#
    };
}

/// (name, body without prefixes), in the benchmark's order.
pub const QUERIES: [(&str, &str); 17] = [
    // The year of the first journal.
    (
        "q1",
        r#"SELECT ?year WHERE {
  ?j rdf:type bench:Journal ; dc:title "Journal 1 (1940)"^^xsd:string ; dcterms:issued ?year }"#,
    ),
    // Inproceedings with all their attributes, the abstract optional, by year.
    (
        "q2",
        r#"SELECT ?paper ?who ?booktitle ?title ?proceedings ?seealso ?pages ?page ?year ?abstract
WHERE {
  ?paper rdf:type bench:Inproceedings ; dc:creator ?who ; bench:booktitle ?booktitle ;
         dc:title ?title ; dcterms:partOf ?proceedings ; rdfs:seeAlso ?seealso ;
         swrc:pages ?pages ; foaf:homepage ?page ; dcterms:issued ?year .
  OPTIONAL { ?paper bench:abstract ?abstract }
} ORDER BY ?year"#,
    ),
    // Articles with a property chosen by a filter (pages, month, isbn).
    (
        "q3a",
        "SELECT ?a WHERE { ?a rdf:type bench:Article . ?a ?p ?v FILTER (?p = swrc:pages) }",
    ),
    (
        "q3b",
        "SELECT ?a WHERE { ?a rdf:type bench:Article . ?a ?p ?v FILTER (?p = swrc:month) }",
    ),
    (
        "q3c",
        "SELECT ?a WHERE { ?a rdf:type bench:Article . ?a ?p ?v FILTER (?p = swrc:isbn) }",
    ),
    // Pairs of names of authors who published in the same journal.
    (
        "q4",
        r#"SELECT DISTINCT ?n1 ?n2 WHERE {
  ?x1 rdf:type bench:Article ; dc:creator ?p1 ; swrc:journal ?j .
  ?x2 rdf:type bench:Article ; dc:creator ?p2 ; swrc:journal ?j .
  ?p1 foaf:name ?n1 . ?p2 foaf:name ?n2
  FILTER (?n1 < ?n2)
}"#,
    ),
    // Persons with an article and an inproceedings: a join hidden in a filter, then explicit.
    ("q5a", concat!("SELECT DISTINCT ?p ?n WHERE ", same_name!())),
    (
        "q5b",
        r#"SELECT DISTINCT ?p ?n WHERE {
  ?x rdf:type bench:Article ; dc:creator ?p .
  ?y rdf:type bench:Inproceedings ; dc:creator ?p .
  ?p foaf:name ?n
}"#,
    ),
    // Per year, the documents of authors who had published nothing in an earlier year.
    (
        "q6",
        r#"SELECT ?year ?n ?d WHERE {
  ?c rdfs:subClassOf foaf:Document . ?d rdf:type ?c ; dcterms:issued ?year ; dc:creator ?p .
  ?p foaf:name ?n
  OPTIONAL {
    ?c2 rdfs:subClassOf foaf:Document . ?d2 rdf:type ?c2 ; dcterms:issued ?year2 ;
        dc:creator ?p2
    FILTER (?p = ?p2 && ?year2 < ?year)
  }
  FILTER (!bound(?p2))
}"#,
    ),
    // Titles of cited documents all of whose citers are cited themselves (double negation).
    (
        "q7",
        r#"SELECT DISTINCT ?t WHERE {
  ?c rdfs:subClassOf foaf:Document . ?d rdf:type ?c ; dc:title ?t .
  ?b ?m ?d . ?citer dcterms:references ?b
  OPTIONAL {
    ?c3 rdfs:subClassOf foaf:Document . ?d3 rdf:type ?c3 ; dcterms:references ?b3 .
    ?b3 ?m3 ?d
    OPTIONAL {
      ?c4 rdfs:subClassOf foaf:Document . ?d4 rdf:type ?c4 ; dcterms:references ?b4 .
      ?b4 ?m4 ?d3
    }
    FILTER (!bound(?d4))
  }
  FILTER (!bound(?d3))
}"#,
    ),
    // Names of Erdoes's co-authors and of their co-authors.
    ("q8", concat!("SELECT DISTINCT ?n WHERE ", erdoes_circle!())),
    // The predicates that touch a person, in either direction.
    (
        "q9",
        r#"SELECT DISTINCT ?p WHERE {
  { ?x rdf:type foaf:Person . ?s ?p ?x } UNION { ?x rdf:type foaf:Person . ?x ?p ?o }
}"#,
    ),
    // Everything that points at Erdoes.
    ("q10", "SELECT ?s ?p WHERE { ?s ?p person:Paul_Erdoes }"),
    // A window of the sorted seeAlso values.
    (
        "q11",
        "SELECT ?ee WHERE { ?x rdfs:seeAlso ?ee } ORDER BY ?ee LIMIT 10 OFFSET 50",
    ),
    // q5a, q8 and a missing person as yes/no questions.
    ("q12a", concat!("ASK ", same_name!())),
    ("q12b", concat!("ASK ", erdoes_circle!())),
    ("q12c", "ASK { person:John_Q_Public rdf:type foaf:Person }"),
];

/// The query named `name` with its prefixes, if it is one of the 17.
pub fn text(name: &str) -> Option<String> {
    QUERIES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, body)| format!("{PREFIXES}\n{body}\n"))
}
