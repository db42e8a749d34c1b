//! Parsing a query's text: its nesting checked first, then `spargebra`; a syntax error as a
//! user reads it (line and column, what was expected in plain words, the line with a caret).

use crate::bound::{bound, unescaped, Bound};
use crate::error::QueryError;

/// How deep brackets (`(`, `{`, `[`) may nest in a query's text, and how many unary operators
/// (`!`, `-`, `+`) may follow each other: the parser recurses once per level, and about 3,500
/// levels overflowed the stack. No hand-written query comes near.
pub const MAX_NESTING: usize = 256;

/// The stack `spargebra`'s parser is given per level ([`Bound::levels`]): an unoptimised
/// build used up to 57 KB per level (a function call as the argument of a function call), an
/// optimised one a tenth of that.
const STACK_PER_LEVEL: usize = if cfg!(debug_assertions) {
    64 << 10
} else {
    16 << 10
};

/// The stack it is given per bracket and per operator ([`Bound::brackets`],
/// [`Bound::operators`]): each OPTIONAL, MINUS, BIND, group or GRAPH block in a row nests its
/// group's algebra one level deeper, and each binary operator of a chain its expression's or
/// path's tree, which are walked, cloned and dropped recursively. An unoptimised build used
/// 440 bytes a level to walk such a tree and more than 1.6 KB to clone it (an update's `WHERE`
/// is cloned into its query: 1 KB a level overflowed a fuzzed update of about 1,700 levels in a
/// debug build, which `cargo test` without `--release` runs). The room is reserved, not
/// touched.
const STACK_PER_ELEMENT: usize = if cfg!(debug_assertions) {
    4 << 10
} else {
    1 << 10
};

/// How many levels (brackets open, and unary operators read) a text may open under any
/// reading of it, counting brackets and unary operators in its strings, IRIs and comments
/// wherever a reading could take them for code: the stack room is reserved from this count,
/// so it is bounded.
pub const MAX_LEVELS: usize = 4096;

/// How many brackets and operators a text may hold under any reading of it (the slashes of
/// its IRIs among them): the room reserved per element is bounded by this count.
pub const MAX_ELEMENTS: usize = 1 << 18;

/// How many binary operators (`/`, `|`, `^`, `+`, `-`, `*`, `&&`, `||`, counted by character)
/// a query's text may hold outside its strings, IRIs and comments. `spargebra` folds a chain of
/// them into a tree one level deeper per operator (a path of 5,000 steps is a tree 5,000 deep),
/// which is then walked, cloned and dropped recursively. The algebra refuses a chain deeper than
/// [`crate::algebra::MAX_DEPTH`] anyway.
pub const MAX_OPERATORS: usize = 1 << 16;

/// How a query's text nests: how many binary operators it holds as its tokens read (refused
/// past [`MAX_OPERATORS`]), and the bound no reading of it exceeds, from which its stack room
/// is reserved.
#[derive(Clone)]
struct Nesting {
    operators: usize,
    bound: Bound,
    /// Where `TRUE`, `False` and the like start (char offsets): keywords are matched without
    /// regard to case (SPARQL 1.1 §19.1), and `spargebra` takes the booleans in lower case
    /// only, so they are lowered before it parses.
    booleans: Vec<usize>,
}

/// Checks a query's syntax: its nesting first ([`MAX_NESTING`]), then `spargebra`'s parser; a
/// syntax error is one line with its position.
pub fn parse(text: &str) -> Result<(), QueryError> {
    parse_with_base(text, None)
}

/// [`parse`], with relative IRIs resolved against `base`.
pub fn parse_with_base(text: &str, base: Option<&str>) -> Result<(), QueryError> {
    with_parsed(text, base, |_| ())
}

/// Parses `text` (relative IRIs against `base`) and hands `spargebra`'s tree to `f`. The tree
/// lives and is dropped inside the stack room its nesting needs: a long row of OPTIONALs is a
/// tree as deep as the row, and both walking it and dropping it recurse once per level.
pub fn with_parsed<R>(
    text: &str,
    base: Option<&str>,
    f: impl FnOnce(&spargebra::Query) -> R,
) -> Result<R, QueryError> {
    in_room(text, base, |p, t| p.parse_query(t), syntax_message, f)
}

/// [`with_parsed`] for an update request.
pub fn with_parsed_update<R>(
    text: &str,
    base: Option<&str>,
    f: impl FnOnce(&spargebra::Update) -> R,
) -> Result<R, QueryError> {
    in_room(
        text,
        base,
        |p, t| p.parse_update(t),
        update_syntax_message,
        f,
    )
}

/// Checks `text`'s nesting, then runs `parse` with the parser (`base` set) inside the stack
/// room the nesting needs, hands the tree to `f` and drops it there; a syntax error is said
/// by `message`.
fn in_room<T, R>(
    text: &str,
    base: Option<&str>,
    parse: impl FnOnce(spargebra::SparqlParser, &str) -> Result<T, spargebra::SparqlSyntaxError>,
    message: fn(&str, &str) -> String,
    f: impl FnOnce(&T) -> R,
) -> Result<R, QueryError> {
    let nesting = check_nesting(text)?;
    let lowered = lower_booleans(text, &nesting.booleans);
    let text = lowered.as_deref().unwrap_or(text);
    let mut parser = spargebra::SparqlParser::new();
    if let Some(b) = base {
        parser = parser.with_base_iri(b).map_err(|e| {
            QueryError::Invalid(format!("the base IRI {b:?} is not an absolute IRI: {e}"))
        })?;
    }
    with_room(nesting, || {
        let tree =
            parse(parser, text).map_err(|e| QueryError::Syntax(message(text, &e.to_string())))?;
        let out = f(&tree);
        drop(tree);
        Ok(out)
    })
}

/// Runs `spargebra`'s parser on text that nests as `n` says, with the room it needs made first
/// (on a new stack segment only where the stack has too little left).
fn with_room<R>(n: Nesting, parse: impl FnOnce() -> R) -> R {
    let room = room(n.bound);
    stacker::maybe_grow(room, room, parse)
}

/// The stack room `spargebra`'s parser is given for `text` (its tree built, walked and
/// dropped in it), or why the text is refused before it parses. The differential fuzz test
/// checks that no text makes the parser use more.
pub fn stack_room(text: &str) -> Result<usize, QueryError> {
    check_nesting(text).map(|n| room(n.bound))
}

/// The stack room for a text whose readings stay within `b`.
pub(crate) fn room(b: Bound) -> usize {
    (b.levels + 4) * STACK_PER_LEVEL + (b.brackets + b.operators) * STACK_PER_ELEMENT
}

/// `text` with the booleans starting at `at` (char offsets) in lower case; `None` when there
/// are none. Each keeps its length, so positions in errors stay those of the text.
fn lower_booleans(text: &str, at: &[usize]) -> Option<String> {
    if at.is_empty() {
        return None;
    }
    let mut chars: Vec<char> = text.chars().collect();
    for &i in at {
        let len = if chars[i].eq_ignore_ascii_case(&'t') {
            4
        } else {
            5
        };
        for c in &mut chars[i..i + len] {
            c.make_ascii_lowercase();
        }
    }
    Some(chars.into_iter().collect())
}

/// Refuses text whose brackets nest, or whose unary operators chain, past [`MAX_NESTING`],
/// naming the line and column, and text that some reading of it could make nest past
/// [`MAX_LEVELS`] or hold more than [`MAX_ELEMENTS`] brackets and operators; else how it
/// nests. The first check reads tokens (strings, IRIs and comments skipped) to say where the
/// nesting goes too deep; the second ([`bound`]) cannot be fooled by a text its tokens misread,
/// and the stack room comes from it.
fn check_nesting(text: &str) -> Result<Nesting, QueryError> {
    let mut n = check_tokens(text)?;
    if text.contains("\\u") || text.contains("\\U") {
        // The parser may read the text with its codepoint escapes replaced.
        check_tokens(&unescaped(text))?;
    }
    n.bound = bound(text);
    if n.bound.levels > MAX_LEVELS {
        return Err(QueryError::Syntax(format!(
            "brackets and unary operators (!, -, +) could nest {} deep in this text, counting \
             those in its strings, IRIs and comments where it could be read otherwise (a local \
             name's \\ escapes, `<` after an operand); nearflow refuses text past {MAX_LEVELS}",
            n.bound.levels
        )));
    }
    if n.bound.brackets + n.bound.operators > MAX_ELEMENTS {
        return Err(QueryError::Unsupported(format!(
            "the text holds {} brackets and operators (/, |, ^, *, &, +, -, !, <), counting \
             those in its strings, IRIs and comments where it could be read otherwise; nearflow \
             refuses more than {MAX_ELEMENTS} (load large data with `nearflow load`)",
            n.bound.brackets + n.bound.operators
        )));
    }
    Ok(n)
}

/// The nesting of `text` as its tokens read (strings, IRIs and comments skipped), refused past
/// [`MAX_NESTING`] with the line and column.
fn check_tokens(text: &str) -> Result<Nesting, QueryError> {
    let chars: Vec<char> = text.chars().collect();
    let (mut depth, mut unary) = (0usize, 0usize);
    let mut n = Nesting {
        operators: 0,
        bound: Bound::default(),
        booleans: Vec::new(),
    };
    let (mut line, mut col) = (1usize, 0usize);
    let mut i = 0;
    // Per open group, how many OPTIONAL, MINUS and BIND elements it has had so far.
    let mut elements = vec![0usize; MAX_NESTING + 2];
    // Whether the last token could end an operand (then `-`/`+` is binary).
    let mut after_operand = false;
    // Per open bracket, whether it holds an expression; whether the last token was FILTER,
    // BIND or HAVING.
    let mut expression: Vec<bool> = Vec::new();
    let mut after_keyword = false;
    let refuse = |line: usize, col: usize, what: &str| {
        Err(QueryError::Syntax(format!(
            "at {line}:{col}: {what} more than {MAX_NESTING} deep; nearflow refuses such a query"
        )))
    };
    while i < chars.len() {
        let c = chars[i];
        col += 1;
        let skip_to = |i: &mut usize, line: &mut usize, col: &mut usize, end: &[char]| {
            // Advance past the closing `end` (or to the end of the text).
            *i += 1;
            while *i < chars.len() {
                if chars[*i..].starts_with(end) {
                    *i += end.len();
                    *col += end.len();
                    return;
                }
                if chars[*i] == '\\' {
                    *i += 1;
                    *col += 1;
                }
                if chars.get(*i) == Some(&'\n') {
                    *line += 1;
                    *col = 0;
                } else {
                    *col += 1;
                }
                *i += 1;
            }
        };
        match c {
            '\n' => {
                line += 1;
                col = 0;
                i += 1;
                continue;
            }
            '\\' => {
                // An escaped character of a local name (`ex:a\#b`, `ex:a\(`).
                i += 2;
                col += 1;
                after_operand = true;
                unary = 0;
                continue;
            }
            '#' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
                continue;
            }
            '"' | '\'' => {
                let long = chars[i..].starts_with(&[c, c, c]);
                if long {
                    i += 2;
                    skip_to(&mut i, &mut line, &mut col, &[c, c, c]);
                } else {
                    skip_to(&mut i, &mut line, &mut col, &[c]);
                }
                after_operand = true;
                unary = 0;
                continue;
            }
            '<' if after_operand
                && expression.last() == Some(&true)
                && iriref_len(&chars[i..]).is_some() =>
            {
                // By the longest-token rule (§19.8) `<…>` is an IRI here, and an IRI cannot
                // follow an operand inside an expression (`?x<?a&&?b>?y`).
                return Err(QueryError::Syntax(format!(
                    "at {line}:{col}: `{}` is an IRI (the longest token), which cannot follow \
                     an operand here; for a comparison put a space after `<`",
                    abbreviated(&chars[i..i + iriref_len(&chars[i..]).unwrap_or(1)])
                )));
            }
            '<' => {
                // An IRI if the IRIREF token is there; otherwise the operator.
                if let Some(len) = iriref_len(&chars[i..]) {
                    i += len;
                    col += len - 1;
                    after_operand = true;
                    unary = 0;
                    continue;
                }
                after_operand = false;
            }
            '(' | '{' | '[' => {
                // Inside FILTER( … ), BIND( … ) and HAVING( … ), brackets hold expressions;
                // braces and square brackets hold patterns again.
                expression.push(c == '(' && (after_keyword || expression.last() == Some(&true)));
                depth += 1;
                if depth > MAX_NESTING {
                    return refuse(line, col, "brackets nested");
                }
                elements[depth] = 0;
                after_operand = false;
                unary = 0;
            }
            ')' | '}' | ']' => {
                expression.pop();
                depth = depth.saturating_sub(1);
                after_operand = true;
                unary = 0;
            }
            '!' | '-' | '+' if !after_operand => {
                unary += 1;
                if unary > MAX_NESTING {
                    return refuse(line, col, "unary operators chained");
                }
            }
            '/' | '|' | '^' | '+' | '-' | '*' | '&' => {
                // Binary (or a path's postfix `+`, `*`): one more level of the tree.
                n.operators += 1;
                if n.operators > MAX_OPERATORS {
                    return Err(QueryError::Unsupported(format!(
                        "at {line}:{col}: more than {MAX_OPERATORS} operators (/, |, ^, +, -, *, &&, ||); \
                         nearflow refuses such a query"
                    )));
                }
                after_operand = false;
                unary = 0;
                if (c == '&' || c == '|') && chars.get(i + 1) == Some(&c) {
                    // `&&` and `||` are one operator each.
                    i += 1;
                    col += 1;
                }
            }
            c if c.is_whitespace() => {}
            c if c.is_alphabetic() && !is_word(prev(&chars, i)) => {
                // A word: a keyword unless it is a prefix (`optional:x`).
                let len = chars[i..]
                    .iter()
                    .position(|x| !(x.is_alphanumeric() || *x == '_'))
                    .unwrap_or(chars.len() - i);
                let word: String = chars[i..i + len].iter().collect();
                let boolean = ["true", "false"]
                    .iter()
                    .any(|k| word.eq_ignore_ascii_case(k) && word != *k);
                if boolean && chars.get(i + len) != Some(&':') {
                    n.booleans.push(i);
                }
                after_keyword = ["FILTER", "BIND", "HAVING"]
                    .iter()
                    .any(|k| word.eq_ignore_ascii_case(k))
                    && chars.get(i + len) != Some(&':');
                let nests = ["OPTIONAL", "MINUS", "BIND"]
                    .iter()
                    .any(|k| word.eq_ignore_ascii_case(k));
                if nests && chars.get(i + len) != Some(&':') {
                    elements[depth] += 1;
                    if elements[depth] > crate::algebra::MAX_DEPTH {
                        return Err(QueryError::Unsupported(format!(
                            "at {line}:{col}: a group of more than {} OPTIONAL, MINUS and BIND \
                             elements (each nests the group's algebra one level deeper)",
                            crate::algebra::MAX_DEPTH
                        )));
                    }
                }
                i += len;
                col += len - 1;
                after_operand = true;
                unary = 0;
                continue;
            }
            c => {
                after_operand = c.is_alphanumeric() || "?$_:.".contains(c);
                unary = 0;
            }
        }
        if !c.is_whitespace() {
            after_keyword = false;
        }
        i += 1;
    }
    Ok(n)
}

/// `chars` as a string, cut to its first 60 characters and `…` when longer.
fn abbreviated(chars: &[char]) -> String {
    let mut s: String = chars.iter().take(60).collect();
    if chars.len() > 60 {
        s.push('…');
    }
    s
}

/// The length of the IRIREF token (§19.8: `<`, then no `<>"{}|^`\` or character up to space,
/// then `>`) at the start of `chars`, when there is one.
fn iriref_len(chars: &[char]) -> Option<usize> {
    let k = chars[1..]
        .iter()
        .position(|&c| c <= ' ' || "<>\"{}|^`\\".contains(c))?;
    (chars[1 + k] == '>').then_some(k + 2)
}

/// Whether `c` can be part of a word, a variable or a prefixed name.
fn is_word(c: char) -> bool {
    c.is_alphanumeric() || "?$:_".contains(c)
}

/// The character before `chars[i]` (a space at the start).
fn prev(chars: &[char], i: usize) -> char {
    i.checked_sub(1).map_or(' ', |k| chars[k])
}

/// [`syntax_message`] for an update request: a query given as an update, or a first word
/// that begins no update operation, said in words.
fn update_syntax_message(text: &str, message: &str) -> String {
    let is_query = check_nesting(text).is_ok_and(|nesting| {
        with_room(nesting, || {
            spargebra::SparqlParser::new().parse_query(text).is_ok()
        })
    });
    if is_query {
        return "this is a query (SELECT, CONSTRUCT, ASK, DESCRIBE), not an update request: run \
                it with `nearflow sparql`, or send it to a server's /query"
            .to_owned();
    }
    if let Some((at, word)) = query_form_word(text) {
        const OPS: [&str; 10] = [
            "INSERT", "DELETE", "LOAD", "CLEAR", "CREATE", "DROP", "ADD", "MOVE", "COPY", "WITH",
        ];
        if !OPS.contains(&word.to_ascii_uppercase().as_str()) {
            let (l, c) = line_col(text, at);
            let line: String = text
                .lines()
                .nth(l - 1)
                .unwrap_or("")
                .chars()
                .take(160)
                .collect();
            return format!(
                "at {l}:{c}: expected an update operation (INSERT, DELETE, LOAD, CLEAR, CREATE, \
                 DROP, ADD, MOVE, COPY or WITH, after any PREFIX and BASE declarations), found \
                 '{word}'\n  {line}\n  {}^",
                " ".repeat(c.saturating_sub(1))
            );
        }
    }
    // The rest as for a query, without the query-form hints.
    describe(text, message, true)
}

/// A syntax error as a user reads it: where (line and column), what was expected in plain
/// words where `spargebra` lists grammar tokens (the query form, an undeclared prefix, a SPARQL
/// Update request given as a query), and the line with a caret under the position.
pub fn syntax_message(text: &str, message: &str) -> String {
    describe(text, message, false)
}

/// [`syntax_message`]; for an update request (`update`), without the hints about queries.
fn describe(text: &str, message: &str, update: bool) -> String {
    let flat = message.split_whitespace().collect::<Vec<_>>().join(" ");
    // "error at L:C: …"
    let mut pos = flat.strip_prefix("error at ").and_then(|r| {
        let (l, rest) = r.split_once(':')?;
        let (c, _) = rest.split_once(':')?;
        Some((l.parse::<usize>().ok()?, c.trim().parse::<usize>().ok()?))
    });
    let reason = flat
        .split_once(": ")
        .and_then(|(_, r)| r.split_once(": ").map(|(_, x)| x).or(Some(r)))
        .unwrap_or(&flat)
        .to_owned();
    let line_of = |l: usize| -> Vec<char> {
        text.lines()
            .nth(l.saturating_sub(1))
            .unwrap_or("")
            .chars()
            .collect()
    };
    let mut what = None;
    // Text nested too deep for a query is too deep for an update as well.
    let is_update = !update
        && check_nesting(text).is_ok_and(|nesting| {
            with_room(nesting, || {
                spargebra::SparqlParser::new().parse_update(text).is_ok()
            })
        });
    if is_update {
        if let Some((at, _)) = query_form_word(text) {
            pos = Some(line_col(text, at));
        }
        what = Some(
            "this is a SPARQL Update request (INSERT, DELETE, LOAD, CLEAR, …); `nearflow sparql` \
             evaluates queries (SELECT, CONSTRUCT, ASK, DESCRIBE): run updates with `nearflow \
             update`, or POST them to a server's /update"
                .to_owned(),
        );
    } else if let Some((at, prefix)) = undeclared_prefix(text) {
        // Wherever `spargebra` stopped (an undeclared prefix in a datatype or an ORDER BY
        // may read as something else to it), the prefix is what is wrong.
        pos = Some(line_col(text, at));
        what = Some(format!(
            "undeclared prefix '{prefix}:' (no PREFIX declares it)"
        ));
    } else if flat.contains("Prefix not found") {
        if let Some((l, c)) = pos {
            // The prefixed name ends just before column C of line L.
            let line = line_of(l);
            let end = c.saturating_sub(1).min(line.len());
            let start = line[..end]
                .iter()
                .rposition(|ch| ch.is_whitespace() || "{(.;,".contains(*ch))
                .map_or(0, |i| i + 1);
            let token: String = line[start..end].iter().collect();
            if let Some((prefix, _)) = token.split_once(':') {
                what = Some(format!(
                    "undeclared prefix '{prefix}:' (no PREFIX declares it)"
                ));
            }
        }
        what.get_or_insert_with(|| "undeclared prefix".to_owned());
    } else if let Some((at, word)) = query_form_word(text).filter(|_| !update) {
        // The first word after the prologue is not a query form: say so there (`spargebra`
        // reports the furthest point its grammar reached, e.g. "expected CONSTRUCT" inside
        // the pattern for `SELEC * WHERE …`).
        let upper = word.to_ascii_uppercase();
        if !["SELECT", "CONSTRUCT", "ASK", "DESCRIBE"].contains(&upper.as_str()) {
            pos = Some(line_col(text, at));
            what = Some(format!(
                "expected SELECT, CONSTRUCT, ASK or DESCRIBE (after any PREFIX and BASE \
                 declarations), found '{word}'"
            ));
        }
    }
    if what.is_none() && reason.starts_with("expected one of") && reason.contains("ABS") {
        // Every function name and operator that may start an expression.
        what = Some(
            "expected an expression (a variable, a term, a function call or a bracket)".into(),
        );
    }
    let what = what.unwrap_or_else(|| match reason.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &reason[..i]),
        None => reason.clone(),
    });
    match pos {
        Some((l, c)) => {
            let line: String = line_of(l).into_iter().take(160).collect();
            let caret = " ".repeat(c.saturating_sub(1).min(line.chars().count()));
            format!("at {l}:{c}: {what}\n  {line}\n  {caret}^")
        }
        None => what,
    }
}

/// The 1-based line and column (in characters) of byte offset `at`.
/// The first prefixed name of `text` whose prefix no `PREFIX` declares (outside strings,
/// IRIs and comments): its byte offset and the prefix.
fn undeclared_prefix(text: &str) -> Option<(usize, String)> {
    static DECLARED: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let declared = DECLARED.get_or_init(|| {
        regex::Regex::new(r"(?i)\bPREFIX\s+([A-Za-z][A-Za-z0-9_.-]*)?:").expect("a valid pattern")
    });
    let names: Vec<&str> = declared
        .captures_iter(text)
        .map(|c| c.get(1).map_or("", |m| m.as_str()))
        .collect();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'#' => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'"' | b'\'' => {
                let long = bytes[i..].starts_with(&[b, b, b]);
                let close: &[u8] = if long {
                    &bytes[i..i + 3]
                } else {
                    &bytes[i..i + 1]
                };
                i += close.len();
                while i < bytes.len() && !bytes[i..].starts_with(close) {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                i += close.len();
            }
            b'<' => {
                let end = bytes[i + 1..]
                    .iter()
                    .position(|&c| c == b'>' || c.is_ascii_whitespace() || c == b'<');
                match end {
                    Some(k) if bytes[i + 1 + k] == b'>' => i += k + 2,
                    _ => i += 1,
                }
            }
            b'?' | b'$' | b'_'
                if bytes
                    .get(i + 1)
                    .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b':' || *c == b'_') =>
            {
                // A variable or a blank node label.
                i += 1;
                while i < bytes.len()
                    && (bytes[i].is_ascii_alphanumeric() || b"_:.-".contains(&bytes[i]))
                {
                    i += 1;
                }
            }
            c if c.is_ascii_alphabetic() || c == b':' => {
                let start = i;
                while i < bytes.len()
                    && (bytes[i].is_ascii_alphanumeric() || b"_.-".contains(&bytes[i]))
                {
                    i += 1;
                }
                let word = &text[start..i];
                if bytes.get(i) == Some(&b':') {
                    let declaring = text[..start]
                        .trim_end()
                        .to_ascii_uppercase()
                        .ends_with("PREFIX");
                    if !declaring && !names.contains(&word) {
                        return Some((start, word.to_owned()));
                    }
                    i += 1;
                    // The local part.
                    while i < bytes.len()
                        && (bytes[i].is_ascii_alphanumeric() || b"_.-:%".contains(&bytes[i]))
                    {
                        i += 1;
                    }
                }
                if c == b':' && i == start {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    None
}

fn line_col(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..at];
    let line_start = before.rfind('\n').map_or(0, |nl| nl + 1);
    (
        before.matches('\n').count() + 1,
        before[line_start..].chars().count() + 1,
    )
}

/// The first word after the query's prologue (comments, PREFIX and BASE declarations) and its
/// byte offset, when the text goes on with letters there.
fn query_form_word(text: &str) -> Option<(usize, &str)> {
    static PROLOGUE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let re = PROLOGUE.get_or_init(|| {
        regex::Regex::new(
            r"(?is)^(?:\s|#[^\n]*(?:\n|$)|PREFIX\s*[^\s:]*:\s*<[^>]*>|BASE\s*<[^>]*>)*",
        )
        .expect("a valid pattern")
    });
    let at = re.find(text).map_or(0, |m| m.end());
    let rest = &text[at..];
    let len = rest
        .find(|ch: char| !ch.is_alphanumeric() && ch != '_')
        .unwrap_or(rest.len());
    (len > 0).then(|| (at, &rest[..len]))
}

/// Whether the query's own projection is `SELECT *` (after its prologue and comments).
pub fn select_star(text: &str) -> bool {
    let Some((at, word)) = query_form_word(text) else {
        return false;
    };
    if !word.eq_ignore_ascii_case("SELECT") {
        return false;
    }
    let mut rest = text[at + word.len()..].trim_start();
    for modifier in ["DISTINCT", "REDUCED"] {
        if rest
            .get(..modifier.len())
            .is_some_and(|m| m.eq_ignore_ascii_case(modifier))
        {
            rest = rest[modifier.len()..].trim_start();
        }
    }
    rest.starts_with('*')
}

#[cfg(test)]
mod tests {
    use super::parse;

    fn message(q: &str) -> String {
        parse(q).unwrap_err().to_string()
    }

    #[test]
    fn syntax_errors_say_what_was_expected_and_point_at_it() {
        let m = message("SELEC * WHERE { ?s ?p ?o }");
        assert!(
            m.contains("at 1:1: expected SELECT, CONSTRUCT, ASK or DESCRIBE"),
            "{m}"
        );
        assert!(m.contains("found 'SELEC'"), "{m}");
        assert!(m.ends_with("\n  SELEC * WHERE { ?s ?p ?o }\n  ^"), "{m}");
        let m = message("INSERT DATA { <http://a> <http://b> <http://c> }");
        assert!(m.contains("at 1:1: this is a SPARQL Update request"), "{m}");
        let m = message("SELECT * WHERE { ?s ?p ?o FILTER(?o > ) }");
        assert!(m.contains("expected an expression"), "{m}");
        let m = message("PREFIX a: <http://a/>\nSELECT * WHERE { ?s nope:p ?o }");
        assert!(
            m.contains("at 2:") && m.contains("undeclared prefix 'nope:'"),
            "{m}"
        );
        // In a datatype, where the parser stops elsewhere: the prefix, at its place.
        for q in [
            "SELECT * WHERE { ?s ?p \"1\"^^foo:int }",
            "SELECT * WHERE { ?s ?p ?o } ORDER BY (\"1\"^^foo:int)",
        ] {
            let m = message(q);
            let at = q.find("foo:").unwrap() + 1;
            assert!(
                m.contains(&format!("at 1:{at}: undeclared prefix 'foo:'")),
                "{m}"
            );
        }
        let m = message("SELECT * WHERE {\n  ?s ?p\n}");
        assert!(super::select_star(
            "PREFIX a: <x:>\n# c\nselect distinct * { ?s ?p ?o }"
        ));
        assert!(!super::select_star(
            "SELECT ?a { { SELECT * { ?a ?b ?c } } }"
        ));
        assert!(m.starts_with("SPARQL syntax error: at 3:"), "{m}");
        assert!(m.contains("\n  }\n  "), "{m}");
    }

    #[test]
    fn what_sparql_1_2_adds_is_parsed_and_refused_until_it_is_held() {
        let read = |q: &str| crate::Query::parse(q, &crate::Options::default());
        for (q, what) in [
            (
                "SELECT * { ?s ?p ?o BIND(TRIPLE(?s, ?p, ?o) AS ?t) }",
                "TRIPLE",
            ),
            ("SELECT * { ?s ?p ?o FILTER(isTRIPLE(?o)) }", "isTRIPLE"),
            ("SELECT * { ?s ?p ?o BIND(LANGDIR(?o) AS ?d) }", "LANGDIR"),
            ("SELECT * { ?s ?p <<( ?a ?b ?c )>> }", "triple terms"),
            ("SELECT * { ?s ?p \"x\"@en--ltr }", "base direction"),
        ] {
            let e = read(q).expect_err("refused");
            assert!(e.to_string().contains("not supported"), "{q}: {e}");
            assert!(e.to_string().contains(what), "{q}: {e}");
        }
        read("VERSION \"1.2\" SELECT * { ?s ?p ?o }").expect("the VERSION declaration is read");
    }

    #[test]
    fn aggregates_do_not_nest() {
        let read = |q: &str| crate::Query::parse(q, &crate::Options::default());
        let nested = read("SELECT (COUNT(COUNT(*)) AS ?c) WHERE {}").expect_err("refused");
        assert!(
            nested.to_string().contains("aggregates do not nest"),
            "{nested}"
        );
        let deeper = "SELECT (SUM(1 + MAX(?o)) AS ?s) WHERE { ?s0 ?p ?o }";
        assert!(read(deeper).is_err(), "an aggregate deeper in the argument");
        read("SELECT (COUNT(*) AS ?c) (SUM(?o) AS ?s) (MAX(?o) + 1 AS ?m) WHERE { ?x ?p ?o }")
            .expect("aggregates side by side, and in an expression, are fine");
    }
}
