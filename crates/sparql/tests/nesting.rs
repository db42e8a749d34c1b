//! The nesting bound against the parser it protects: for texts drawn to hide depth from a
//! tokenizer (escaped characters in local names, strings and comments full of brackets,
//! `<…>` between operands, brackets written as codepoint escapes, deep blank-node lists in
//! data), `spargebra` parses (as a query and as an update), clones, prints and drops the text
//! on a stack of our own, painted beforehand; the stack it touched must lie within the room
//! [`stack_room`] reserves for that text, or the text must be refused before it parses.
//!
//! The oracle is the parser's real stack use, so a bound that undercounts fails here whatever
//! trick makes it do so. `./test.sh` runs a brief pass (64 cases a target, a fixed seed); run
//! longer with `NEARFLOW_FUZZ_CASES=20000 cargo test --release -p nearflow-sparql --test
//! nesting`.

use std::cell::RefCell;

use nearflow_sparql::{stack_room, MAX_NESTING};
use proptest::prelude::*;
use proptest::test_runner::Config;

fn config() -> Config {
    Config {
        cases: std::env::var("NEARFLOW_FUZZ_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(64),
        failure_persistence: None,
        ..Config::default()
    }
}

/// What a stack is painted with before a run.
const PAINT: u128 = 0xA5A5_A5A5_A5A5_A5A5_A5A5_A5A5_A5A5_A5A5;

thread_local! {
    /// The painted stack, kept between runs (only what a run touched is painted again).
    static STACK: RefCell<Vec<u128>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` on a painted stack of at least `size` bytes; the bytes of it that `f` touched.
fn stack_used(size: usize, f: impl FnOnce()) -> usize {
    STACK.with(|s| {
        let mut s = s.borrow_mut();
        let words = size.div_ceil(16);
        if s.len() < words {
            *s = vec![PAINT; words];
        }
        let bytes = s.len() * 16;
        // SAFETY: the stack is ours for the call, 16-byte aligned, and large enough for
        // what the parser can take on the texts drawn here (the room asserted is much less).
        unsafe { psm::on_stack(s.as_mut_ptr().cast::<u8>(), bytes, f) };
        let untouched = s.iter().position(|&w| w != PAINT).unwrap_or(s.len());
        for w in &mut s[untouched..] {
            *w = PAINT;
        }
        bytes - untouched * 16
    })
}

/// Parses `text` as a query and as an update, and clones, prints and drops what parsed.
fn parse_all(text: &str) {
    if let Ok(q) = spargebra::SparqlParser::new().parse_query(text) {
        let copy = q.clone();
        let _ = q.to_string();
        drop(copy);
        drop(q);
    }
    if let Ok(u) = spargebra::SparqlParser::new().parse_update(text) {
        let copy = u.clone();
        let _ = u.to_string();
        drop(copy);
        drop(u);
    }
}

/// The property: a text is refused, or the parser's stack stays inside the room reserved.
fn within_room(text: &str) -> Result<(), TestCaseError> {
    let Ok(room) = stack_room(text) else {
        return Ok(());
    };
    // Far more than the room, so that a bound that undercounts shows here as a failed
    // comparison rather than as a run off the end of the stack.
    let used = stack_used(4 * room + (64 << 20), || parse_all(text));
    prop_assert!(
        used <= room,
        "the parser used {used} bytes of stack where {room} were reserved for {} characters: {}",
        text.len(),
        text.chars().take(300).collect::<String>()
    );
    Ok(())
}

/// One level of a deep expression, with what stands beside it to hide it from a tokenizer.
fn layer() -> impl Strategy<Value = (u8, u8)> {
    (0u8..12, 0u8..10)
}

/// Something a tokenizer may misread, put before a layer: each is valid SPARQL where it stands.
fn decoration(d: u8) -> &'static str {
    [
        "",
        " # ))))]]]}}} a comment of closing brackets\n",
        " ex:q\\#x + ",
        " ex:q\\) + ",
        " ex:q\\' + ",
        " \")))}}}\" + ",
        " ')))\\')' + ",
        " \"\"\"))\"\")\"\"\" + ",
        " <http://e/)))#x> + ",
        " ?v + ",
    ][d as usize % 10]
}

/// Builds an expression nested by `layers`, inside out.
fn expression(layers: &[(u8, u8)]) -> String {
    let mut e = "1".to_owned();
    for &(kind, d) in layers {
        let deco = decoration(d);
        e = match kind {
            0 => format!("({deco}{e})"),
            1 => format!("!({deco}{e})"),
            2 => format!("-{deco}({e})"),
            3 => format!("STR({deco}{e})"),
            4 => format!("CONCAT(\")))\",{deco}{e})"),
            5 => format!("ex:f\\#g({deco}{e})"),
            6 => format!("EXISTS {{ ?s ex:p\\# ?o FILTER({deco}{e}) }}"),
            7 => format!("STR\\u0028{deco}{e}\\u0029"),
            8 => format!("(# )))\n{deco}{e})"),
            9 => format!("?a <:f({deco}{e})> ?b"),
            10 => format!("?a + ({deco}{e})"),
            _ => format!("!!{deco}({e})"),
        };
    }
    e
}

/// Tokens a text of no grammar is drawn from: brackets, escapes, quotes, IRI delimiters,
/// comment starts, operators and names.
fn token() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "(", "(", "(", "(", "{", "[", ")", "}", "]", "\\", "\\#", "\\'", "\\(", "#", "'", "\"",
        "'''", "\"\"\"", "<", ">", "<:", "\n", " ", "ex:p", "?x", "!", "-", "+", "/", "|", "^",
        "*", "&&", "1", "FILTER", "EXISTS", "OPTIONAL", "\\u0028", "\\u0022", "\\u005C",
    ])
}

proptest! {
    #![proptest_config(config())]

    /// Deep expressions in a query and in an update's WHERE, decorated to hide their depth.
    #[test]
    fn deep_expressions_stay_within_their_room(layers in prop::collection::vec(layer(), 1..400)) {
        let e = expression(&layers);
        let query = format!(
            "PREFIX ex: <http://e/>\nSELECT * WHERE {{ ?s ex:p\\# ?o FILTER({e}) }}"
        );
        within_room(&query)?;
        let update = format!(
            "PREFIX ex: <http://e/>\nINSERT {{ ?s ?p ?o }} WHERE {{ ?s ex:p\\# ?o FILTER({e}) }}"
        );
        within_room(&update)?;
    }

    /// Deep blank-node property lists and collections in data.
    #[test]
    fn deep_data_stays_within_its_room(depth in 1usize..600, list in any::<bool>(), d in 0u8..10) {
        let (open, close) = if list { ("(", ")") } else { ("[ ex:p ", "]") };
        let deco = if d % 2 == 0 { "ex:q\\# " } else { "" };
        let data = format!(
            "PREFIX ex: <http://e/>\nINSERT DATA {{ ex:s ex:p {deco}{}ex:o{} }}",
            open.repeat(depth),
            close.repeat(depth)
        );
        within_room(&data)?;
    }

    /// Texts of no grammar: a valid beginning, then tokens that open far more than they close.
    #[test]
    fn token_soup_stays_within_its_room(tokens in prop::collection::vec(token(), 1..3000)) {
        let text = format!(
            "PREFIX ex: <http://e/> SELECT * WHERE {{ ?s ex:p ?o FILTER({}",
            tokens.concat()
        );
        within_room(&text)?;
    }
}

/// The requests that ended the server before the bound, and others of their kind: each parses
/// within its room, and is refused with a short error that says why.
#[test]
fn the_texts_that_fooled_the_tokenizer_are_refused() {
    let deep = |before: &str| {
        format!(
            "PREFIX ex: <http://e/>\nSELECT * WHERE {{ {before} FILTER({}1{}) }}",
            "(".repeat(1000),
            ")".repeat(1000)
        )
    };
    let brackets = |open: &str, close: &str, n: usize| (open.repeat(n), close.repeat(n));
    let (o, c) = brackets("(", ")", 1000);
    let (eo, ec) = brackets("\\u0028", "\\u0029", 1000);
    let (bo, bc) = brackets("[ ex:p ", "]", 5000);
    for text in [
        deep("?s ex:p\\# ?o"),
        deep("?s ex:p\\' ?o"),
        deep("?s ex:p\\( ?o"),
        format!("SELECT * WHERE {{ ?s ?p ?o FILTER(1<2||{o}1{c}>0) }}"),
        format!("SELECT * WHERE {{ ?s ?p ?o FILTER(1<2&&!{o}1{c}>0) }}"),
        format!("SELECT * WHERE {{ FILTER({eo}1{ec}) }}"),
        format!("PREFIX ex: <http://e/>\nINSERT DATA {{ ex:s ex:p\\# {bo}ex:o{bc} }}"),
        format!("PREFIX ex: <http://e/>\nINSERT {{ ?s ?p ?o }} WHERE {{ ?s ex:p\\# ?o FILTER({o}1{c}) }}"),
        format!("PREFIX ex: <http://e/>\nDELETE WHERE {{ ?s ex:p\\# [ ex:q {bo}1{bc} ] }}"),
    ] {
        within_room(&text).unwrap();
        let e = nearflow_sparql::parse(&text)
            .err()
            .or_else(|| nearflow_sparql::update::Update::parse(&text, None).err())
            .expect("refused")
            .to_string();
        assert!(
            e.contains("nested more than") || e.contains("cannot follow an operand"),
            "{e}"
        );
        assert!(e.len() < 400, "{e}");
    }
    // A query at the limit of the tokens' check parses within its room.
    let at = format!(
        "SELECT * WHERE {{ FILTER({}1{}) }}",
        "(".repeat(MAX_NESTING - 2),
        ")".repeat(MAX_NESTING - 2)
    );
    within_room(&at).unwrap();
}

/// The oracle can fail: a deep query's parse takes a measurable share of its room, so a room
/// reserved from a count that missed its brackets would be exceeded.
#[test]
fn the_parser_uses_stack_in_proportion_to_depth() {
    let q = |n: usize| format!("ASK {{ FILTER({}1{}) }}", "STR(".repeat(n), ")".repeat(n));
    let used = |n: usize| stack_used(64 << 20, || parse_all(&q(n)));
    let (shallow, deep) = (used(8), used(200));
    let room_of_8 = stack_room(&q(8)).unwrap();
    assert!(
        deep > room_of_8 && deep > 4 * shallow,
        "200 levels used {deep} bytes, 8 levels {shallow}, the room of 8 levels is {room_of_8}"
    );
    eprintln!(
        "stack per level: {} bytes; room per level: {} bytes",
        (deep - shallow) / 192,
        (stack_room(&q(200)).unwrap() - room_of_8) / 192
    );
}
