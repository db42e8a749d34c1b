//! A bound on how deep `spargebra`'s parser can recurse on a text, that no text can make too
//! small: the stack room the parse is given comes from it.
//!
//! A tokenizer that decides, at each character, whether it stands in a string, an IRI, a
//! comment or an escape can be fooled: the parser may read the same characters otherwise
//! (`ex:p\#` is a local name to the parser, a comment to a tokenizer that missed the escape).
//! So this bound does not decide. It follows every way of reading the text at once, as a
//! nondeterministic automaton over the lexical states of SPARQL (§19.8: code, a comment,
//! strings of each quote and length, an IRI, an escaped character), and keeps, per state, the
//! largest count any way of reading could have reached there. Where the grammar itself is
//! ambiguous to a lexer, both readings are followed:
//!
//! - after an operand, `<` starts an IRI or is the operator (`?a <:f((((…>` is both);
//! - in code, `\` escapes the next character (a local name's `\#`, `\(`, `\'`) or stands alone.
//!
//! Every other transition is the one the grammar allows, and a state where the parser would
//! fail (a newline in a short string) goes on as code, which can only count more. The counts
//! grow monotonically along each transition, so the maximum kept per state bounds every
//! reading's count, the parser's among them.
//!
//! The text is read both as written and with its `\u`/`\U` codepoint escapes replaced (SPARQL
//! 1.1 §19.2; `spargebra` does so when built with its `standard-unicode-escaping` feature), and
//! the larger bound is taken.

/// What a text can cost the parser's stack, at most, under any reading.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Bound {
    /// The most levels open at once: brackets (`(`, `{`, `[`) open, plus every unary operator
    /// (`!`, `-`, `+` where no operand precedes them) read so far, none of which is taken to
    /// end before the text does (its operand may be a bracket still open).
    pub(crate) levels: usize,
    /// Brackets opened, in all.
    pub(crate) brackets: usize,
    /// Binary operators and path modifiers (`/`, `|`, `^`, `*`, `&`, and `+`, `-`, `!`, `<`
    /// after an operand): each may deepen an expression's or a path's tree by one.
    pub(crate) operators: usize,
}

impl Bound {
    fn max(self, o: Bound) -> Bound {
        Bound {
            levels: self.levels.max(o.levels),
            brackets: self.brackets.max(o.brackets),
            operators: self.operators.max(o.operators),
        }
    }
}

// The lexical states of the automaton, each an index into the per-state counts.

/// Code where no operand precedes (the start, after an operator or an opening bracket).
const CODE: usize = 0;
/// Code right after an operand (a name, a variable, a literal, an IRI, a closing bracket).
const AFTER_OPERAND: usize = 1;
/// The character after a `\` in code, read as escaped.
const ESCAPED: usize = 2;
/// A comment, after code where no operand precedes.
const COMMENT: usize = 3;
/// A comment, after an operand.
const COMMENT_AFTER_OPERAND: usize = 4;
/// `'…'`.
const SINGLE: usize = 5;
/// `"…"`.
const DOUBLE: usize = 6;
/// `'''…'''`.
const LONG_SINGLE: usize = 7;
/// `"""…"""`.
const LONG_DOUBLE: usize = 8;
/// The character after a `\` in each kind of string.
const SINGLE_ESCAPED: usize = 9;
const DOUBLE_ESCAPED: usize = 10;
const LONG_SINGLE_ESCAPED: usize = 11;
const LONG_DOUBLE_ESCAPED: usize = 12;
/// `<…>`, up to the first `>` (the parser's IRIREF rule takes any other character, and
/// checks the IRI after).
const IRI: usize = 13;
/// The second and third quotes of `'''` and `"""`.
const OPENING_SINGLE: usize = 14;
const OPENING_SINGLE2: usize = 15;
const OPENING_DOUBLE: usize = 16;
const OPENING_DOUBLE2: usize = 17;

/// How many states there are.
const STATES: usize = 18;

/// What one reading has counted: the counts of [`Bound`] and the depth it is at.
#[derive(Clone, Copy, Default)]
struct Path {
    /// Brackets open.
    depth: usize,
    /// Unary operators read.
    unary: usize,
    brackets: usize,
    operators: usize,
}

impl Path {
    fn max(self, o: Path) -> Path {
        Path {
            depth: self.depth.max(o.depth),
            unary: self.unary.max(o.unary),
            brackets: self.brackets.max(o.brackets),
            operators: self.operators.max(o.operators),
        }
    }
}

/// The bound of `text`, read as written and with its codepoint escapes replaced.
pub(crate) fn bound(text: &str) -> Bound {
    let raw = bound_of(text.chars());
    if text.contains("\\u") || text.contains("\\U") {
        raw.max(bound_of(Unescaped::new(text)))
    } else {
        raw
    }
}

/// `text` with its codepoint escapes replaced (see [`Unescaped`]).
pub(crate) fn unescaped(text: &str) -> String {
    Unescaped::new(text).collect()
}

/// The bound of one sequence of characters.
fn bound_of(chars: impl Iterator<Item = char>) -> Bound {
    let mut now: [Option<Path>; STATES] = [None; STATES];
    now[CODE] = Some(Path::default());
    let mut out = Bound::default();
    // The last three characters, for `'''` and `"""`.
    let mut before = [' '; 2];
    let mut chars = chars.peekable();
    while let Some(c) = chars.next() {
        let next = chars.peek().copied();
        let mut then: [Option<Path>; STATES] = [None; STATES];
        let mut go = |s: usize, p: Path| {
            let slot = &mut then[s];
            *slot = Some(slot.map_or(p, |q| q.max(p)));
        };
        for (i, p) in now.iter().enumerate() {
            let Some(p) = *p else { continue };
            step(i, c, next, before, p, &mut go);
        }
        for p in then.iter().flatten() {
            out = out.max(Bound {
                levels: p.depth + p.unary,
                brackets: p.brackets,
                operators: p.operators,
            });
        }
        now = then;
        before = [before[1], c];
    }
    out
}

/// Follows character `c` (followed by `next`, after `before`) from state `from` on path `p`,
/// into every state a reading can go to (`go`).
fn step(
    from: usize,
    c: char,
    next: Option<char>,
    before: [char; 2],
    mut p: Path,
    go: &mut impl FnMut(usize, Path),
) {
    let after_operand = from == AFTER_OPERAND;
    let code = from == CODE || after_operand;
    if code {
        // Where the code goes after `c`, keeping operand-ness over white space.
        let same = if after_operand { AFTER_OPERAND } else { CODE };
        match c {
            '(' | '{' | '[' => {
                p.depth += 1;
                p.brackets += 1;
                go(CODE, p);
            }
            ')' | '}' | ']' => {
                p.depth = p.depth.saturating_sub(1);
                go(AFTER_OPERAND, p);
            }
            '#' => go(
                if after_operand {
                    COMMENT_AFTER_OPERAND
                } else {
                    COMMENT
                },
                p,
            ),
            '\'' | '"' => {
                // A short string, and where a second quote follows, the opening of a long one
                // too (`''` is an empty short string unless a third quote follows).
                go(if c == '\'' { SINGLE } else { DOUBLE }, p);
                if next == Some(c) {
                    go(
                        if c == '\'' {
                            OPENING_SINGLE
                        } else {
                            OPENING_DOUBLE
                        },
                        p,
                    );
                }
            }
            '\\' => {
                go(ESCAPED, p);
                go(same, p);
            }
            '<' => {
                go(IRI, p);
                if after_operand {
                    // The comparison operator.
                    p.operators += 1;
                    go(CODE, p);
                }
            }
            '!' | '-' | '+' => {
                if after_operand {
                    p.operators += 1;
                } else {
                    p.unary += 1;
                }
                go(CODE, p);
            }
            '/' | '|' | '^' | '*' | '&' => {
                p.operators += 1;
                go(CODE, p);
            }
            c if c.is_whitespace() => go(same, p),
            c if c.is_alphanumeric() || "_?$:".contains(c) => go(AFTER_OPERAND, p),
            _ => go(CODE, p),
        }
        return;
    }
    let state = from;
    match state {
        ESCAPED => go(AFTER_OPERAND, p),
        COMMENT | COMMENT_AFTER_OPERAND => match c {
            '\n' | '\r' => go(
                if state == COMMENT {
                    CODE
                } else {
                    AFTER_OPERAND
                },
                p,
            ),
            _ => go(state, p),
        },
        SINGLE | DOUBLE => {
            let quote = if state == SINGLE { '\'' } else { '"' };
            match c {
                '\\' => go(
                    if state == SINGLE {
                        SINGLE_ESCAPED
                    } else {
                        DOUBLE_ESCAPED
                    },
                    p,
                ),
                c if c == quote => go(AFTER_OPERAND, p),
                // A short string cannot hold a line break: the parser fails there; read on as
                // code, which counts no less.
                '\n' | '\r' => go(CODE, p),
                _ => go(state, p),
            }
        }
        LONG_SINGLE | LONG_DOUBLE => {
            let quote = if state == LONG_SINGLE { '\'' } else { '"' };
            match c {
                '\\' => go(
                    if state == LONG_SINGLE {
                        LONG_SINGLE_ESCAPED
                    } else {
                        LONG_DOUBLE_ESCAPED
                    },
                    p,
                ),
                // The third quote in a row closes it (the two before were read inside).
                c if c == quote && before == [quote, quote] => {
                    go(AFTER_OPERAND, p);
                    go(state, p);
                }
                _ => go(state, p),
            }
        }
        SINGLE_ESCAPED => go(SINGLE, p),
        DOUBLE_ESCAPED => go(DOUBLE, p),
        LONG_SINGLE_ESCAPED => go(LONG_SINGLE, p),
        LONG_DOUBLE_ESCAPED => go(LONG_DOUBLE, p),
        IRI => match c {
            '>' => go(AFTER_OPERAND, p),
            _ => go(IRI, p),
        },
        // The second quote (the state was entered only where one follows).
        OPENING_SINGLE => go(OPENING_SINGLE2, p),
        OPENING_DOUBLE => go(OPENING_DOUBLE2, p),
        // A third quote opens the long string; anything else was an empty short string, which
        // its own state reads.
        OPENING_SINGLE2 if c == '\'' => go(LONG_SINGLE, p),
        OPENING_DOUBLE2 if c == '"' => go(LONG_DOUBLE, p),
        OPENING_SINGLE2 | OPENING_DOUBLE2 => {}
        _ => unreachable!("code is handled above; no other state"),
    }
}

/// The characters of a text with its `\uXXXX` and `\UXXXXXXXX` escapes replaced by the
/// characters they name, as SPARQL 1.1 §19.2 asks before parsing: a `\` and the character
/// after it pass on together unreplaced when they are not such an escape (`\\u0041` is a
/// backslash, a backslash and `u0041`), and an escape whose digits name no character passes on
/// as written.
struct Unescaped<'a> {
    rest: &'a str,
    /// Characters to give out before reading on, in reverse order.
    pending: Vec<char>,
}

impl<'a> Unescaped<'a> {
    fn new(text: &'a str) -> Self {
        Unescaped {
            rest: text,
            pending: Vec::new(),
        }
    }
}

impl Iterator for Unescaped<'_> {
    type Item = char;

    fn next(&mut self) -> Option<char> {
        if let Some(c) = self.pending.pop() {
            return Some(c);
        }
        let mut it = self.rest.chars();
        let c = it.next()?;
        if c != '\\' {
            self.rest = it.as_str();
            return Some(c);
        }
        let after = it.as_str();
        let digits = match after.chars().next() {
            Some('u') => 4,
            Some('U') => 8,
            Some(d) => {
                // A pair passed on as it is.
                self.rest = &after[d.len_utf8()..];
                self.pending.push(d);
                return Some('\\');
            }
            None => {
                self.rest = after;
                return Some('\\');
            }
        };
        let hex: String = after.chars().skip(1).take(digits).collect();
        let named = (hex.chars().count() == digits)
            .then(|| u32::from_str_radix(&hex, 16).ok())
            .flatten()
            .and_then(char::from_u32);
        let taken = 1 + hex.len();
        match named {
            Some(ch) if hex.len() == digits => {
                self.rest = &after[taken..];
                Some(ch)
            }
            _ => {
                // Passed on as written, none of it read as the start of an escape again.
                self.rest = &after[taken..];
                let written = after[..taken].chars().rev();
                self.pending.extend(written);
                Some('\\')
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{bound, Unescaped};

    fn levels(q: &str) -> usize {
        bound(q).levels
    }

    #[test]
    fn brackets_and_unary_operators_count_as_levels() {
        assert_eq!(levels("SELECT * { ?s ?p ?o }"), 1);
        assert_eq!(levels("SELECT * { FILTER((((1)))) }"), 5);
        // Unary operators stay counted: their operand may be a bracket still open.
        assert_eq!(levels("SELECT * { FILTER(!!!(1)) }"), 6);
        // A binary minus is an operator, not a level.
        let b = bound("ASK { FILTER(?a - ?b) }");
        assert_eq!((b.levels, b.operators), (2, 1));
    }

    #[test]
    fn strings_and_comments_are_read_as_the_parser_reads_them() {
        // Brackets in a string or a comment open nothing.
        assert_eq!(levels("SELECT * { FILTER(\"((((\" = ?x) }"), 2);
        assert_eq!(levels("SELECT * { # ((((\n ?s ?p ?o }"), 1);
        assert_eq!(levels("SELECT * { FILTER('''a''b((''' = ?x) }"), 2);
        // Closing brackets there close nothing either: no reading undercounts.
        assert_eq!(levels("SELECT * { FILTER(\")))\" || ((1))) }"), 4);
    }

    #[test]
    fn what_fooled_a_deciding_tokenizer_counts_here() {
        // A local name's escaped `#` is no comment to the parser.
        let deep = format!(
            "SELECT * WHERE {{ ?s ex:p\\# ?o FILTER({}1{}) }}",
            "(".repeat(1000),
            ")".repeat(1000)
        );
        assert!(levels(&deep) >= 1002, "{}", levels(&deep));
        // An escaped quote opens no string.
        let deep = format!(
            "SELECT * WHERE {{ ?s ex:p\\' ?o FILTER({}1{}) }} '",
            "(".repeat(1000),
            ")".repeat(1000)
        );
        assert!(levels(&deep) >= 1002);
        // `<…>` after an operand in an expression may be the operator.
        let deep = format!(
            "SELECT * WHERE {{ FILTER(?a <:f{}1{}> ?b) }}",
            "(".repeat(1000),
            ")".repeat(1000)
        );
        assert!(levels(&deep) >= 1002);
        // Brackets written as codepoint escapes.
        let deep = format!(
            "SELECT * WHERE {{ FILTER({}1{}) }}",
            "\\u0028".repeat(1000),
            "\\u0029".repeat(1000)
        );
        assert!(levels(&deep) >= 1001);
    }

    #[test]
    fn codepoint_escapes_are_replaced_as_sparql_says() {
        let un = |s: &str| Unescaped::new(s).collect::<String>();
        assert_eq!(un("a\\u0028b"), "a(b");
        assert_eq!(un("\\U0001F600"), "😀");
        assert_eq!(un("\\\\u0028"), "\\\\u0028");
        assert_eq!(un("\\u00zz("), "\\u00zz(");
        assert_eq!(un("\\uD800x"), "\\uD800x");
        assert_eq!(un("end\\u00"), "end\\u00");
        assert_eq!(un("end\\"), "end\\");
        assert_eq!(un("é\\u00e9"), "éé");
    }
}
