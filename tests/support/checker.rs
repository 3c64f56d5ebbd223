//! The conformance checker run as the real binary (`ishare-gateway conformance …`), its report
//! read back from the table it prints: each case's expected and got, how it ended and why.

use std::path::Path;
use std::time::Duration;

/// How long one run of the checker may take.
const RUN_TIME: Duration = Duration::from_secs(300);

/// One row of the report's table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// `group: NAME`
    pub case: String,
    pub expected: String,
    pub got: String,
    /// pass, FAIL, skipped or not tried
    pub result: String,
    pub reason: String,
}

/// What a run printed and how it exited.
pub struct Checked {
    pub success: bool,
    /// Standard output and error, for the messages of failing tests.
    pub output: String,
    /// The table's first line: the target, its role and the version it is held to.
    pub title: String,
    pub rows: Vec<Row>,
}

impl Checked {
    /// The row of `case` (`group: NAME`); panics with the output where there is none.
    pub fn row(&self, case: &str) -> &Row {
        self.rows
            .iter()
            .find(|r| r.case == case)
            .unwrap_or_else(|| panic!("no case {case}:\n{}", self.output))
    }

    /// The cases that ended as `result`.
    pub fn ended(&self, result: &str) -> Vec<&str> {
        self.rows
            .iter()
            .filter(|r| r.result == result)
            .map(|r| r.case.as_str())
            .collect()
    }

    /// Assert that `case` ended as `result` with a reason that contains `reason`.
    pub fn assert_case(&self, case: &str, result: &str, reason: &str) {
        let row = self.row(case);
        assert!(
            row.result == result && row.reason.contains(reason),
            "{case}: {row:?}, not {result} with {reason:?}\n{}",
            self.output
        );
    }
}

/// A Permit mask (container C1) and a Deny mask (SECRET-1) of `issuer` for `subject`, as 3.0
/// writes a delegation request (no service provider named), in files of `dir`: their paths.
pub fn masks_3_0(dir: &Path, issuer: &str, subject: &str) -> [String; 2] {
    ["C1", "SECRET-1"].map(|container| {
        let mask = serde_json::json!({"delegationRequest": {
            "policyIssuer": issuer,
            "target": {"accessSubject": subject},
            "policySets": [{"policies": [{
                "target": {
                    "resource": {"type": "CONTAINER", "identifiers": [container], "attributes": ["*"]},
                    "actions": ["iSHARE.READ"]
                },
                "rules": [{"effect": "Permit"}]
            }]}],
            "previousSteps": []
        }});
        let file = dir.join(format!("{container}.json"));
        std::fs::write(&file, mask.to_string()).unwrap();
        file.display().to_string()
    })
}

/// The table's rows: cells are separated by two spaces or more (the columns are padded), the
/// reason is the rest of the line.
fn rows(table: &str) -> Vec<Row> {
    let lines = table.lines().skip_while(|l| !l.starts_with("case  "));
    lines
        .skip(1)
        .take_while(|l| !l.contains(" cases: "))
        .map(|line| {
            let cells: Vec<&str> = line
                .split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .collect();
            let cell = |i: usize| cells.get(i).copied().unwrap_or_default().to_string();
            Row {
                case: cell(0),
                expected: cell(1),
                got: cell(2),
                result: cell(3),
                reason: cells.get(4..).unwrap_or_default().join("  "),
            }
        })
        .collect()
}

/// Run `ishare-gateway conformance ARGS` (bounded; the process is killed if it overruns).
pub async fn run_checker(args: &[&str]) -> Checked {
    let run = tokio::process::Command::new(env!("CARGO_BIN_EXE_ishare-gateway"))
        .arg("conformance")
        .args(args)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(RUN_TIME, run)
        .await
        .unwrap_or_else(|_| panic!("the checker still runs after {RUN_TIME:?}: {args:?}"))
        .expect("the checker starts");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let output = format!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    Checked {
        success: out.status.success(),
        title: stdout.lines().next().unwrap_or_default().to_string(),
        rows: rows(&stdout),
        output,
    }
}
