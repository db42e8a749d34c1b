//! The page at `/` in a real headless browser (Debian's Chromium): the endpoint serves it, the
//! browser runs a query from the page and pages the table forward, and the table read back
//! from the DOM is the query's answer as computed in this process; a screenshot is kept in
//! `results/serve-page.png`.
//!
//! `#[ignore]`d because it needs Chromium: `./test.sh` installs it and runs this test.

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use nearflow_rdf::load;
use nearflow_serve::{Config, Endpoint};
use nearflow_sparql::Options;

mod common;
use common::enc;

fn chromium() -> String {
    for c in ["chromium", "chromium-browser", "google-chrome"] {
        if Command::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
        {
            return c.to_owned();
        }
    }
    panic!("no Chromium found (scripts/apt-install.sh nearflow chromium installs it)");
}

/// The text of every `<td>` of the results table in `dom`, row by row.
fn table_cells(dom: &str) -> Vec<Vec<String>> {
    let start = dom
        .find("<table id=\"results\">")
        .expect("the results table");
    let end = start + dom[start..].find("</table>").unwrap();
    let table = &dom[start..end];
    let body = &table[table.find("<tbody>").expect("rows in the table")..];
    body.split("<tr>")
        .skip(1)
        .map(|tr| {
            tr.split("<td>")
                .skip(1)
                .map(|td| {
                    td[..td.find("</td>").unwrap()]
                        .replace("&lt;", "<")
                        .replace("&gt;", ">")
                        .replace("&quot;", "\"")
                        .replace("&amp;", "&")
                })
                .collect()
        })
        .collect()
}

#[test]
#[ignore = "needs Chromium; ./test.sh installs it and runs this test"]
fn the_page_runs_a_query_and_pages_its_table_in_a_real_browser() {
    let browser = chromium();
    let machine = nearflow_topo::presets::build("nehalem-2x4").unwrap();
    let data: String = (0..120)
        .map(|i| format!("<http://xmlns.com/foaf/0.1/p{i:03}> <http://xmlns.com/foaf/0.1/name> \"person {i:03}\" .\n"))
        .collect();
    let mut l = load::Loaded::default();
    load::load_reader(
        &mut l,
        "p.nt".as_ref(),
        load::Format::NTriples,
        data.as_bytes(),
        "",
    )
    .unwrap();
    let store = Arc::new(l.into_store(&machine).unwrap());
    let rt = Arc::new(
        nearflow_rt::Runtime::builder(machine.clone())
            .build()
            .unwrap(),
    );
    let query = "PREFIX foaf: <http://xmlns.com/foaf/0.1/>\nSELECT ?p ?n WHERE { ?p foaf:name ?n } ORDER BY DESC(?n)";
    // The answer as this process computes it: page 2 of 50 rows is rows 51..=100.
    let expected: Vec<Vec<String>> = {
        let p = nearflow_sparql::prepare(&store, query, &Options::default()).unwrap();
        let c = p.run_collect(&rt).unwrap();
        c.rows
            .iter()
            .skip(50)
            .take(50)
            .map(|row| {
                let foaf = |t: String| {
                    t.replace("<http://xmlns.com/foaf/0.1/", "foaf:")
                        .replace('>', "")
                };
                (0..2)
                    .map(|i| foaf(c.term(row, i).unwrap().to_string()))
                    .collect()
            })
            .collect()
    };
    assert_eq!(expected.len(), 50);
    let ep = Endpoint::new(
        Arc::new(nearflow_rdf::db::Db::read_only((*store).clone())),
        rt,
        Config::for_pus(machine.pu_count()),
    );
    let (addr, io) = common::start(ep.clone());
    let url = format!("http://{addr}/?run=1&page=2&query={}", enc(query));
    let headless = |extra: &[&str]| {
        let out = Command::new(&browser)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
            ])
            .args(["--virtual-time-budget=15000", "--window-size=1280,1000"])
            .args(extra)
            .arg(&url)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let dom = headless(&["--dump-dom"]);
    assert!(
        dom.contains("data-state=\"done\""),
        "the page did not finish its query:\n{dom}"
    );
    assert!(dom.contains("rows 51–100 of 120"), "{dom}");
    assert_eq!(table_cells(&dom), expected);
    // The page knows the store's prefixes: foaf is offered.
    assert!(
        dom.contains("foaf: &lt;http://xmlns.com/foaf/0.1/&gt;"),
        "{dom}"
    );
    // The live view names the machine (and says when it is a model, not this host) and shows
    // its core groups.
    assert!(
        dom.contains(&format!("machine: {}", machine.label())),
        "{dom}"
    );
    assert_eq!(
        dom.matches("<tr><td>").count() - 50,
        machine.groups().len(),
        "{dom}"
    );
    let shot =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../results/serve-page.png");
    std::fs::create_dir_all(shot.parent().unwrap()).unwrap();
    let _ = std::fs::remove_file(&shot);
    headless(&[&format!("--screenshot={}", shot.display())]);
    let png = std::fs::read(&shot).expect("the screenshot");
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "{} bytes",
        png.len()
    );
    io.shutdown_timeout(Duration::from_secs(5));
}
