//! The report of a run: how each case ended and why, as a table a person reads, and as JUnit XML
//! for CI systems.

use super::options::Role;
use crate::scheme::version::SchemeVersion;
use std::fmt::Write;

/// How a case ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Pass,
    Fail,
    /// Not run: what it needs was not given.
    Skipped,
    /// Not run: a case it depends on failed, and that case counts the failure.
    NotTried,
}

/// One case: what the scheme expects, what the target answered, and why that passes or not.
#[derive(Clone, Debug)]
pub struct CaseResult {
    /// The endpoint: capabilities, token, delegation, parties …
    pub group: &'static str,
    pub name: String,
    pub expected: String,
    pub got: String,
    pub outcome: Outcome,
    pub reason: String,
}

/// A whole run.
#[derive(Clone, Debug)]
pub struct Report {
    pub role: Role,
    /// The version of the scheme the target was held to.
    pub version: SchemeVersion,
    pub target: String,
    pub target_id: String,
    pub warnings: Vec<String>,
    pub cases: Vec<CaseResult>,
}

impl Report {
    pub fn failures(&self) -> usize {
        self.count(Outcome::Fail)
    }

    pub fn count(&self, outcome: Outcome) -> usize {
        self.cases.iter().filter(|c| c.outcome == outcome).count()
    }
}

fn outcome_word(o: Outcome) -> &'static str {
    match o {
        Outcome::Pass => "pass",
        Outcome::Fail => "FAIL",
        Outcome::Skipped => "skipped",
        Outcome::NotTried => "not tried",
    }
}

/// The table: one line per case, then the totals.
pub fn table(report: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "conformance of {} ({}) as {}, scheme version {}",
        report.target,
        report.target_id,
        report.role.as_str(),
        report.version
    );
    for w in &report.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    let rows: Vec<[String; 5]> = report
        .cases
        .iter()
        .map(|c| {
            [
                format!("{}: {}", c.group, c.name),
                c.expected.clone(),
                c.got.clone(),
                outcome_word(c.outcome).to_string(),
                c.reason.clone(),
            ]
        })
        .collect();
    let header = [
        "case".to_string(),
        "expected".into(),
        "got".into(),
        "result".into(),
        "reason".into(),
    ];
    let mut widths = [0usize; 4];
    for row in std::iter::once(&header).chain(&rows) {
        for (w, cell) in widths.iter_mut().zip(row.iter()) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in std::iter::once(&header).chain(&rows) {
        let _ = writeln!(
            out,
            "{:w0$}  {:w1$}  {:w2$}  {:w3$}  {}",
            row[0],
            row[1],
            row[2],
            row[3],
            row[4],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2],
            w3 = widths[3],
        );
    }
    let _ = writeln!(
        out,
        "{} cases: {} passed, {} failed, {} skipped, {} not tried",
        report.cases.len(),
        report.count(Outcome::Pass),
        report.count(Outcome::Fail),
        report.count(Outcome::Skipped),
        report.count(Outcome::NotTried)
    );
    out
}

/// Text for XML: the markup escapes of pages, and control characters (which XML 1.0 cannot
/// carry) as spaces.
fn xml_escape(text: &str) -> String {
    let text: String = text
        .chars()
        .map(|c| {
            if c.is_control() && c != '\n' && c != '\t' {
                ' '
            } else {
                c
            }
        })
        .collect();
    crate::html::escape(&text)
}

/// JUnit XML: one test suite for the run, one test case per case, with its failure or skip. JUnit
/// knows no case that was not tried: such a case is skipped, and its message says so.
pub fn junit(report: &Report) -> String {
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let suite = format!(
        "conformance {} {} {}",
        report.role.as_str(),
        report.version,
        report.target_id
    );
    let _ = writeln!(
        out,
        "<testsuites><testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" skipped=\"{}\">",
        xml_escape(&suite),
        report.cases.len(),
        report.count(Outcome::Fail),
        report.count(Outcome::Skipped) + report.count(Outcome::NotTried)
    );
    if !report.warnings.is_empty() {
        let _ = writeln!(
            out,
            "<system-out>{}</system-out>",
            xml_escape(&report.warnings.join("\n"))
        );
    }
    for c in &report.cases {
        let _ = write!(
            out,
            "<testcase classname=\"{}\" name=\"{}\">",
            xml_escape(c.group),
            xml_escape(&c.name)
        );
        match c.outcome {
            Outcome::Pass => {}
            Outcome::Fail => {
                let detail = format!("expected {}, got {}: {}", c.expected, c.got, c.reason);
                let _ = write!(out, "<failure message=\"{}\"/>", xml_escape(&detail));
            }
            Outcome::Skipped => {
                let _ = write!(out, "<skipped message=\"{}\"/>", xml_escape(&c.reason));
            }
            Outcome::NotTried => {
                let detail = format!("not tried: {}", c.reason);
                let _ = write!(out, "<skipped message=\"{}\"/>", xml_escape(&detail));
            }
        }
        let _ = writeln!(out, "</testcase>");
    }
    out.push_str("</testsuite></testsuites>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> Report {
        let case = |name: &str, outcome, reason: &str| CaseResult {
            group: "token",
            name: name.into(),
            expected: "400".into(),
            got: "200".into(),
            outcome,
            reason: reason.into(),
        };
        Report {
            role: Role::ServiceProvider,
            version: SchemeVersion::V3_0,
            target: "http://127.0.0.1:1".into(),
            target_id: "EU.EORI.NL000000003".into(),
            warnings: vec!["plain <HTTP>".into()],
            cases: vec![
                case("ASSERTION EXPIRED", Outcome::Fail, "accepted & more"),
                case("VALID ASSERTION", Outcome::Pass, ""),
                case("UNKNOWN CLIENT ID", Outcome::Skipped, "give --unknown-as"),
                case(
                    "ASSERTION REPLAYED",
                    Outcome::NotTried,
                    "depends on VALID ASSERTION",
                ),
            ],
        }
    }

    #[test]
    fn the_table_names_each_case_and_counts_the_outcomes() {
        let text = table(&report());
        assert!(text.contains("warning: plain <HTTP>"), "{text}");
        assert!(
            text.starts_with("conformance of http://127.0.0.1:1 (EU.EORI.NL000000003) as service-provider, scheme version 3.0\n"),
            "{text}"
        );
        let failed = text
            .lines()
            .find(|l| l.contains("ASSERTION EXPIRED"))
            .unwrap_or_default();
        assert!(
            failed.contains("FAIL") && failed.contains(" 200 "),
            "{failed}"
        );
        let not_tried = text
            .lines()
            .find(|l| l.contains("ASSERTION REPLAYED"))
            .unwrap_or_default();
        assert!(
            not_tried.contains("not tried  depends on VALID ASSERTION"),
            "{not_tried}"
        );
        assert!(
            text.ends_with("4 cases: 1 passed, 1 failed, 1 skipped, 1 not tried\n"),
            "{text}"
        );
    }

    #[test]
    fn junit_escapes_text_and_marks_failures_skips_and_cases_not_tried() {
        let xml = junit(&report());
        assert!(
            xml.contains("tests=\"4\" failures=\"1\" skipped=\"2\""),
            "{xml}"
        );
        assert!(
            xml.contains("<testcase classname=\"token\" name=\"ASSERTION EXPIRED\"><failure message=\"expected 400, got 200: accepted &amp; more\"/></testcase>"),
            "{xml}"
        );
        assert!(
            xml.contains("name=\"ASSERTION REPLAYED\"><skipped message=\"not tried: depends on VALID ASSERTION\"/>"),
            "{xml}"
        );
        assert!(
            xml.contains("<skipped message=\"give --unknown-as\"/>"),
            "{xml}"
        );
        assert!(xml.contains("plain &lt;HTTP&gt;"), "{xml}");
        assert!(!xml.contains("& more"), "{xml}");
    }
}
