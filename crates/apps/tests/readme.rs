//! The documentation's Rust snippets compile and run: each ```rust block of `README.md` and of
//! the pages under `docs/` must appear in `examples/readme.rs` (which `./test.sh` builds and
//! runs), as the lines between `// README begin: NAME` and `// README end` (several regions of
//! one name joined in order), compared line by line after removing each region's common
//! indentation.

use std::collections::BTreeMap;

fn dedent(lines: &[&str]) -> Vec<String> {
    let indent = lines
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    lines
        .iter()
        .map(|l| l.get(indent..).unwrap_or("").trim_end().to_string())
        .collect()
}

#[test]
fn every_rust_snippet_of_the_readme_is_in_the_readme_example() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let mut pages = vec![format!("{root}/README.md")];
    let mut docs: Vec<String> = std::fs::read_dir(format!("{root}/docs"))
        .unwrap()
        .map(|e| e.unwrap().path().display().to_string())
        .filter(|p| p.ends_with(".md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    let example =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/readme.rs"))
            .unwrap();
    let mut regions: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut current: Option<(String, Vec<&str>)> = None;
    for line in example.lines() {
        let t = line.trim();
        if let Some(name) = t.strip_prefix("// README begin: ") {
            current = Some((name.to_string(), Vec::new()));
        } else if t == "// README end" {
            let (name, lines) = current.take().expect("an end after a begin");
            regions.entry(name).or_default().extend(dedent(&lines));
        } else if let Some((_, lines)) = &mut current {
            lines.push(line);
        }
    }
    assert!(current.is_none(), "a region is not closed");
    let mut blocks = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        let mut block: Option<Vec<&str>> = None;
        for line in text.lines() {
            match (&mut block, line.trim_start()) {
                (None, "```rust") => block = Some(Vec::new()),
                (Some(_), "```") => blocks.push((page, dedent(&block.take().unwrap()))),
                (Some(b), _) => b.push(line),
                _ => {}
            }
        }
        assert!(block.is_none(), "{page}: a ```rust block is not closed");
    }
    let in_readme = blocks
        .iter()
        .filter(|(p, _)| p.ends_with("/README.md"))
        .count();
    assert!(in_readme >= 1, "the README's Rust snippets: {in_readme}");
    assert!(blocks.len() >= 4, "the Rust snippets: {}", blocks.len());
    for (page, b) in &blocks {
        assert!(
            regions.values().any(|r| r == b),
            "this snippet of {page} is not in examples/readme.rs (as written):\n{}",
            b.join("\n")
        );
    }
}
