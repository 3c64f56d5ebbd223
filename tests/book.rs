//! The book (`docs/`) holds to what it says. Every relative link of its pages and of the README
//! leads to a file that exists, every `#anchor` to a heading of that file with the id mdBook gives
//! it, and no page links out of the book's sources, which mdBook would not copy; every page is in
//! SUMMARY.md. The examples of its pages run, or pass `check`, as they are written, with only their
//! addresses, key material and secret files changed: every configuration example, the quick start
//! from the first command to the consumer served, `explain` with its output,
//! `routes-from-openapi` with the `check` after it, the client's commands and curl's against the
//! testbed and the shipped gateway, the conformance checker's against the testbeds of 1.9 and 3.0,
//! the AuthZEN evaluation against the decision service the guide configures, and the graceful
//! upgrade of the operations guide from one daemon to the next.

use crate::support;

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;
use support::process::{self, GatewayProcess};
use support::shipped::{shipped_gateway, shipped_offline, Urls};
use support::*;

const BIN: &str = "book";

/// The book's sources.
fn book_src() -> PathBuf {
    repo().join("docs/src")
}

/// Every Markdown file of the book, by its path from the repository's root.
fn book_pages() -> Vec<PathBuf> {
    let mut pages = Vec::new();
    let mut dirs = vec![book_src()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                pages.push(path.strip_prefix(repo()).unwrap().to_path_buf());
            }
        }
    }
    pages.sort();
    pages
}

/// A file's text with mdBook's `{{#include FILE}}` and `{{#include FILE:ANCHOR}}` put in, as the
/// book shows it (the README's own text for the README).
fn as_shown(path: &Path) -> String {
    let text = std::fs::read_to_string(repo().join(path))
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut shown = String::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find("{{#include ") {
        shown.push_str(&rest[..at]);
        let (directive, after) = rest[at + 11..]
            .split_once("}}")
            .unwrap_or_else(|| panic!("{}: an unclosed include", path.display()));
        let (file, anchor) = match directive.trim().split_once(':') {
            Some((file, anchor)) => (file, Some(anchor)),
            None => (directive.trim(), None),
        };
        let included = std::fs::read_to_string(repo().join(path).parent().unwrap().join(file))
            .unwrap_or_else(|e| panic!("{}: includes {file}: {e}", path.display()));
        match anchor {
            None => shown.push_str(&included),
            Some(anchor) => {
                let start = format!("ANCHOR: {anchor}");
                let end = format!("ANCHOR_END: {anchor}");
                let inside: Vec<&str> = included
                    .lines()
                    .skip_while(|l| !l.contains(&start))
                    .skip(1)
                    .take_while(|l| !l.contains(&end))
                    .collect();
                assert!(
                    !inside.is_empty(),
                    "{}: no anchor {anchor} in {file}",
                    path.display()
                );
                shown.push_str(&inside.join("\n"));
            }
        }
        rest = after;
    }
    shown.push_str(rest);
    shown
}

/// A page's lines outside its fenced code blocks.
fn prose(text: &str) -> Vec<&str> {
    let mut in_code = false;
    text.lines()
        .filter(|line| {
            if line.trim_start().starts_with("```") {
                in_code = !in_code;
                return false;
            }
            !in_code
        })
        .collect()
}

/// A line without its inline code spans.
fn without_code(line: &str) -> String {
    line.split('`').step_by(2).collect::<Vec<_>>().join("")
}

/// The ids mdBook gives a page's headings: the heading's text (inline code kept, a link's text
/// kept, emphasis marks dropped), lower-cased, letters, digits, `_` and `-` kept, whitespace made
/// `-`, anything else dropped; an id used before on the page gets `-1`, `-2` …
fn heading_ids(text: &str) -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    for line in prose(text) {
        let hashes = line.len() - line.trim_start_matches('#').len();
        if hashes == 0 || hashes > 6 || !line[hashes..].starts_with(' ') {
            continue;
        }
        let mut heading = line[hashes..].trim().to_string();
        while let Some(open) = heading.find("](") {
            let close = heading[open..]
                .find(')')
                .map_or(heading.len(), |c| open + c + 1);
            heading.replace_range(open..close, "");
        }
        let id: String = heading
            .trim()
            .to_lowercase()
            .chars()
            .filter_map(|c| match c {
                c if c.is_alphanumeric() || c == '_' || c == '-' => Some(c),
                c if c.is_whitespace() => Some('-'),
                _ => None,
            })
            .collect();
        let mut unique = id.clone();
        let mut n = 0;
        while !ids.insert(unique.clone()) {
            n += 1;
            unique = format!("{id}-{n}");
        }
    }
    ids
}

/// The targets of a page's Markdown links (`[text](target)`), outside code.
fn link_targets(text: &str) -> Vec<String> {
    let mut targets = Vec::new();
    for line in prose(text) {
        let line = without_code(line);
        for part in line.split("](").skip(1) {
            if let Some(target) = part.split(')').next() {
                targets.push(target.trim().to_string());
            }
        }
    }
    targets
}

/// `path` with `.` and `..` resolved.
fn normalised(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

/// What is wrong with the links of a file: each broken one, named.
fn broken_links(path: &Path) -> Vec<String> {
    broken_links_in(path, &as_shown(path))
}

/// What is wrong with the links of `text`, the text of the file at `path`.
fn broken_links_in(path: &Path, text: &str) -> Vec<String> {
    let in_book = path.starts_with("docs/src");
    let mut broken = Vec::new();
    for target in link_targets(text) {
        if target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (file, anchor) = match target.split_once('#') {
            Some((file, anchor)) => (file, Some(anchor)),
            None => (target.as_str(), None),
        };
        let said = format!("{}: ({target})", path.display());
        if file.is_empty() {
            if anchor.is_some_and(|a| !heading_ids(text).contains(a)) {
                broken.push(format!("{said}: no such heading"));
            }
            continue;
        }
        let linked = normalised(&path.parent().unwrap().join(file));
        if in_book && !linked.starts_with("docs/src") {
            broken.push(format!("{said} leaves the book's sources"));
        } else if !repo().join(&linked).exists() {
            broken.push(format!("{said}: no such file"));
        } else if let Some(anchor) = anchor {
            if linked.extension().is_none_or(|e| e != "md") {
                broken.push(format!("{said}: an anchor into a file that is not a page"));
            } else if !heading_ids(&as_shown(&linked)).contains(anchor) {
                broken.push(format!("{said}: no heading #{anchor} there"));
            }
        }
    }
    broken
}

#[test]
fn heading_ids_are_mdbooks() {
    let ids = heading_ids(
        "# Scheme versions\n## nginx `auth_request`\n## Identifiers and aliases (3.0)\n\
         ```sh\n# not a heading\n```\n## `[[listener]]`\n## Über [links](x.md)\n## Scheme versions\n",
    );
    let expected = [
        "scheme-versions",
        "nginx-auth_request",
        "identifiers-and-aliases-30",
        "listener",
        "über-links",
        "scheme-versions-1",
    ];
    assert_eq!(ids, expected.iter().map(|s| s.to_string()).collect());
}

#[test]
fn every_link_and_anchor_of_the_book_and_the_readme_leads_somewhere() {
    let mut files = book_pages();
    files.push(PathBuf::from("README.md"));
    let broken: Vec<String> = files.iter().flat_map(|f| broken_links(f)).collect();
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn a_broken_link_or_anchor_is_named() {
    let probe =
        "# Probe\n[a](guides/rules.md#no-such-heading) [b](no-such-page.md) [c](../../README.md)\n\
                 [d](#probe) [e](guides/rules.md#one-canonical-form) `[f](not-a-link.md)`\n";
    let broken = broken_links_in(Path::new("docs/src/probe.md"), probe);
    assert_eq!(broken.len(), 3, "{broken:?}");
    assert!(
        broken[0].contains("no heading #no-such-heading"),
        "{broken:?}"
    );
    assert!(broken[1].contains("no such file"), "{broken:?}");
    assert!(
        broken[2].contains("leaves the book's sources"),
        "{broken:?}"
    );
}

#[test]
fn every_page_is_in_the_summary_and_every_entry_is_a_page() {
    let summary = std::fs::read_to_string(book_src().join("SUMMARY.md")).unwrap();
    let listed: BTreeSet<PathBuf> = link_targets(&summary)
        .iter()
        .map(|t| PathBuf::from("docs/src").join(t))
        .collect();
    let pages: BTreeSet<PathBuf> = book_pages()
        .into_iter()
        .filter(|p| !p.ends_with("SUMMARY.md"))
        .collect();
    let unlisted: Vec<_> = pages.difference(&listed).collect();
    assert!(unlisted.is_empty(), "not in SUMMARY.md: {unlisted:?}");
    let missing: Vec<_> = listed.difference(&pages).collect();
    assert!(missing.is_empty(), "in SUMMARY.md, not a page: {missing:?}");
}

/// The fenced blocks of a page whose info string is `kind`.
fn blocks<'a>(text: &'a str, kind: &str) -> Vec<&'a str> {
    text.split(&format!("```{kind}\n"))
        .skip(1)
        .map(|rest| rest.split("\n```").next().unwrap())
        .collect()
}

/// The shipped configuration with this test binary's key material, asking no one.
fn offline_shipped() -> (toml::Table, PathBuf) {
    let (text, data) = shipped_offline(BIN);
    (text.parse().unwrap(), data)
}

/// `fragment` over `base`: its tables merged into the base's, its arrays of tables added to the
/// base's, its other values in place of the base's.
fn merge(base: &mut toml::Table, fragment: toml::Table) {
    for (key, value) in fragment {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(b)), toml::Value::Table(f)) => merge(b, f),
            (Some(toml::Value::Array(b)), toml::Value::Array(f))
                if f.iter().all(toml::Value::is_table) =>
            {
                b.extend(f)
            }
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

/// The secret files a fragment names (`*_file` but CA files) that are not here, each replaced by
/// a file of the test's with 48 bytes of secret text.
fn secrets_given(table: &mut toml::Table, dir: &Path) {
    for (key, value) in table.iter_mut() {
        match value {
            toml::Value::Table(t) => secrets_given(t, dir),
            toml::Value::String(path)
                if key.ends_with("_file") && key != "ca_file" && !dir.join(&*path).exists() =>
            {
                let file = dir.join(format!("{key}.secret"));
                std::fs::write(&file, "a-secret-of-the-book-test-0123456789abcdefghijkl\n")
                    .unwrap();
                *path = file.display().to_string();
            }
            _ => {}
        }
    }
}

/// Runs a page's rule fixtures (`[[case]]`) with `test` against the shipped rules and the
/// evidence of their fixtures.
fn run_fixture(page: &Path, block: &str) -> Result<(), String> {
    let dir = scratch_dir(BIN);
    let cases = dir.join("cases");
    std::fs::create_dir_all(&cases).unwrap();
    std::fs::write(cases.join("example.toml"), block).unwrap();
    std::os::unix::fs::symlink(
        repo().join("policies/tests/evidence"),
        cases.join("evidence"),
    )
    .unwrap();
    let path = dir.join("gateway.toml");
    std::fs::write(&path, toml::to_string(&offline_shipped().0).unwrap()).unwrap();
    let out = binary_output(&[
        "test",
        "--config",
        path.to_str().unwrap(),
        cases.to_str().unwrap(),
    ]);
    match out.status.success() {
        true => Ok(()),
        false => Err(format!(
            "{}: `test` fails:\n{}",
            page.display(),
            printed(&out)
        )),
    }
}

/// `check` of a configuration example: `gateway` (a whole `gateway.toml`, or a part of one put into
/// the shipped configuration, whose `[login]` stays only where the part has one) with `rules` as
/// its rules (the shipped ones where there are none).
fn check_example(page: &Path, gateway: &str, rules: &[&str]) -> Result<(), String> {
    let dir = scratch_dir(BIN);
    let (mut config, data) = offline_shipped();
    // The key material of the 3.0 testbed where the example is of a 3.0 scheme.
    let gateway = match gateway.contains("../data/testbed-3.0") {
        true => {
            let keys = prepare_keys(&testbed_config_of(
                "book-check-3.0",
                "conf/testbed-3.0.toml",
            ));
            gateway.replace("../data/testbed-3.0", &keys.data_dir.display().to_string())
        }
        false => gateway.to_string(),
    };
    let gateway = gateway.replace("../data/testbed", &data.display().to_string());
    let mut fragment: toml::Table = gateway
        .parse()
        .map_err(|e| format!("{}: not TOML: {e}\n{gateway}", page.display()))?;
    secrets_given(&mut fragment, &dir);
    if !fragment.contains_key("login") {
        config.remove("login");
    }
    if fragment.contains_key("identity") {
        config = toml::Table::new();
    }
    merge(&mut config, fragment);
    let directory = dir.join("policies");
    for (i, text) in rules.iter().enumerate() {
        std::fs::write(directory.join(format!("example-{i}.toml")), text).unwrap();
    }
    if rules.is_empty() {
        std::fs::copy(
            repo().join("policies/containers.toml"),
            directory.join("containers.toml"),
        )
        .unwrap();
    }
    let mut table = toml::Table::new();
    table.insert("directory".into(), directory.display().to_string().into());
    config.insert("rules".into(), table.into());
    let path = dir.join("gateway.toml");
    std::fs::write(&path, toml::to_string(&config).unwrap()).unwrap();
    let out = binary_output(&["check", "--config", path.to_str().unwrap()]);
    match out.status.success() {
        true => Ok(()),
        false => Err(format!(
            "{}: `check` refuses\n{gateway}\n{}\n{}",
            page.display(),
            rules.join("\n"),
            printed(&out)
        )),
    }
}

/// `check` of an example of the consumer's side: put into the shipped `conf/egress.toml` (its
/// providers beside the shipped ones, its outgoing routes in place of them), or whole where it
/// gives an `[identity]`.
fn check_egress_example(page: &Path, example: &str) -> Result<(), String> {
    let dir = scratch_dir(BIN);
    let (_, data) = offline_shipped();
    let data = data.display().to_string();
    let shipped = std::fs::read_to_string(repo().join("conf/egress.toml"))
        .unwrap()
        .replace("../data/testbed", &data);
    let mut config: toml::Table = shipped.parse().unwrap();
    let fragment: toml::Table = example
        .replace("../data/testbed", &data)
        .parse()
        .map_err(|e| format!("{}: not TOML: {e}\n{example}", page.display()))?;
    if fragment.contains_key("identity") {
        config = toml::Table::new();
    }
    if fragment.contains_key("egress") {
        config.remove("egress");
    }
    merge(&mut config, fragment);
    let path = dir.join("egress.toml");
    std::fs::write(&path, toml::to_string(&config).unwrap()).unwrap();
    let out = binary_output(&["check", "--config", path.to_str().unwrap()]);
    match out.status.success() {
        true => Ok(()),
        false => Err(format!(
            "{}: `check` refuses\n{example}\n{}",
            page.display(),
            printed(&out)
        )),
    }
}

/// Every `toml` example of a page, checked as what it is, section by section (`## `): rule
/// fixtures run with `test`; a whole `gateway.toml` checked with its section's rules files; a part
/// of one checked in the shipped configuration, with the rules that follow it in its block
/// (`# policies/NAME.toml` says where they start); a rules file of a section without a whole
/// configuration checked in the shipped one.
fn check_page(page: &Path) -> (usize, Vec<String>) {
    let text = std::fs::read_to_string(repo().join(page)).unwrap();
    let mut checked = 0;
    let mut failed = Vec::new();
    for section in text.split("\n## ") {
        let (examples, failures) = check_section(page, section);
        checked += examples;
        failed.extend(failures);
    }
    (checked, failed)
}

fn check_section(page: &Path, text: &str) -> (usize, Vec<String>) {
    let examples = blocks(text, "toml");
    let whole: Vec<&str> = examples
        .iter()
        .copied()
        .filter(|b| b.contains("[identity]"))
        .collect();
    let rules_files: Vec<&str> = examples
        .iter()
        .copied()
        .filter(|b| b.trim_start().starts_with("[[route]]"))
        .collect();
    let mut failed = Vec::new();
    for block in &examples {
        let checked = if block.contains("[[case]]") {
            run_fixture(page, block)
        } else if block.contains("[[egress]]") || block.contains("[[provider]]") {
            check_egress_example(page, block)
        } else if whole.contains(block) {
            check_example(page, block, &rules_files)
        } else if rules_files.contains(block) {
            match whole.is_empty() {
                true => check_example(page, "", &[block]),
                false => Ok(()),
            }
        } else {
            match block.split_once("\n# policies/") {
                Some((gateway, rules)) => {
                    check_example(page, gateway, &[rules.split_once('\n').unwrap().1])
                }
                None => check_example(page, block, &[]),
            }
        };
        if let Err(e) = checked {
            failed.push(e);
        }
    }
    (examples.len(), failed)
}

#[test]
fn every_configuration_example_of_the_book_passes_check() {
    let mut checked = 0;
    let mut failed = Vec::new();
    for page in book_pages() {
        let (examples, failures) = check_page(&page);
        checked += examples;
        failed.extend(failures);
    }
    assert!(checked >= 8, "only {checked} examples found");
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}

#[test]
fn explain_prints_what_the_guide_shows() {
    let guide = std::fs::read_to_string(book_src().join("guides/decisions.md")).unwrap();
    let example = page_block(&guide, "## `explain`", "```sh\n", "\n```");
    let (command, shown) = example.split_once(".json\n").unwrap();
    let (config, _) = offline_shipped();
    let path = scratch_dir(BIN).join("gateway.toml");
    std::fs::write(&path, toml::to_string(&config).unwrap()).unwrap();
    let command = format!("{command}.json").replace("\\\n", " ");
    let mut args: Vec<&str> = command.split_whitespace().skip(1).collect();
    let at = args.iter().position(|a| *a == "conf/gateway.toml").unwrap();
    args[at] = path.to_str().unwrap();
    let out = binary_output(&args);
    assert!(out.status.success(), "{}", printed(&out));
    let printed = String::from_utf8(out.stdout).unwrap();
    let policies = repo().join("policies").display().to_string();
    let expected = shown.replace("conf/../policies", &policies);
    assert_eq!(printed.trim_end(), expected.trim_end());
}

/// Runs `script` with bash in `dir`, the binary on its PATH, stopping at the first command that
/// fails.
fn bash(dir: &Path, script: &str) -> Output {
    bash_with(dir, &["-euo", "pipefail", "-c", script])
}

/// Runs `script` with bash in `dir`, the binary on its PATH, to its end.
fn bash_without_stopping(dir: &Path, script: &str) -> Output {
    bash_with(dir, &["-c", script])
}

/// Runs `script` with bash in `dir`, the binary on its PATH, stopping at the first command that
/// fails, for commands that leave daemons behind: what they print goes to `commands.log` there,
/// which no daemon keeps the test waiting on.
fn bash_detached(dir: &Path, script: &str) -> (bool, String) {
    let log = dir.join("commands.log");
    let file = || {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .unwrap()
    };
    let status = bash_command(dir, &["-euo", "pipefail", "-c", script])
        .stdin(std::process::Stdio::null())
        .stdout(file())
        .stderr(file())
        .status()
        .unwrap();
    (
        status.success(),
        std::fs::read_to_string(&log).unwrap_or_default(),
    )
}

fn bash_with(dir: &Path, args: &[&str]) -> Output {
    bash_command(dir, args).output().unwrap()
}

fn bash_command(dir: &Path, args: &[&str]) -> Command {
    let bin = Path::new(env!("CARGO_BIN_EXE_ishare-gateway"))
        .parent()
        .unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut command = Command::new("bash");
    command.args(args).current_dir(dir).env("PATH", path);
    command
}

#[test]
fn routes_from_openapi_writes_what_check_accepts_as_the_guide_says() {
    let guide = std::fs::read_to_string(book_src().join("guides/openapi.md")).unwrap();
    let commands = blocks(&guide, "sh")[0];
    let dir = scratch_dir(BIN);
    std::fs::copy(
        repo().join("tests/fixtures/openapi/petstore-expanded.yaml"),
        dir.join("backend-openapi.yaml"),
    )
    .unwrap();
    let (mut config, _) = offline_shipped();
    config.remove("rules");
    std::fs::write(dir.join("gateway.toml"), toml::to_string(&config).unwrap()).unwrap();
    let out = bash(&dir, commands);
    assert!(out.status.success(), "{commands}\n{}", printed(&out));
    let written = std::fs::read_to_string(dir.join("policies/api.toml")).unwrap();
    assert!(
        written.contains("policy_issuer = \"EU.EORI.NL000000005\""),
        "{written}"
    );
}

/// `ishare-gateway run --config CONFIG` once its `/ready` says 200.
async fn ready_gateway(name: &str, config: &Path, admin: u16) -> GatewayProcess {
    let gateway = GatewayProcess::start(name, config, admin);
    let ready = process::eventually(Duration::from_secs(30), || async {
        gateway
            .ready()
            .await
            .is_some_and(|(status, _)| status == 200)
    })
    .await;
    assert!(ready, "{}", gateway.process.tail());
    gateway
}

/// A directory to run a page's commands in, where `data/testbed` is the testbed's key material.
fn beside_the_testbed(bed: &Bed) -> PathBuf {
    beside_the_testbed_as(bed, "testbed")
}

/// The same, the key material at `data/NAME`.
fn beside_the_testbed_as(bed: &Bed, name: &str) -> PathBuf {
    let dir = scratch_dir(BIN);
    std::fs::create_dir_all(dir.join("data")).unwrap();
    std::os::unix::fs::symlink(&bed.keys.data_dir, dir.join("data").join(name)).unwrap();
    dir
}

/// The echo backend's `host:port`, for a page's backend address.
fn echo_address(bed: &Bed) -> String {
    bed.testbed
        .echo_url
        .trim_start_matches("http://")
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_quick_start_runs_as_written() {
    let whole = std::fs::read_to_string(book_src().join("quick-start.md")).unwrap();
    let (page, _) = whole.split_once(THE_SAME_IN_3_0).unwrap();
    let bed = Bed::start(BIN).await;
    let dir = beside_the_testbed(&bed);
    let (tls, admin) = (free_port(), free_port());
    let echo = echo_address(&bed);
    // Only the addresses change: the testbed's, the gateway's ports, and the backend (the echo).
    let ours = |text: &str| {
        text.replace("https://127.0.0.1:9100", &bed.url(SO))
            .replace("https://127.0.0.1:9104", &bed.url(AR))
            .replace("127.0.0.1:7443", &format!("127.0.0.1:{tls}"))
            .replace("127.0.0.1:7901", &format!("127.0.0.1:{admin}"))
            .replace("127.0.0.1:3000", &echo)
    };
    let files = [
        (
            "`my-gateway/gateway.toml`:",
            "toml",
            "my-gateway/gateway.toml",
        ),
        (
            "## 2. The gateway",
            "toml\n[[route]]",
            "my-gateway/policies/orders.toml",
        ),
        (
            "`my-gateway/order-policy.json`:",
            "json",
            "my-gateway/order-policy.json",
        ),
    ];
    for (section, start, file) in files {
        let (kind, first) = start.split_once('\n').unwrap_or((start, ""));
        let rest = page_block(page, section, &format!("```{kind}\n{first}"), "\n```");
        let text = match first {
            "" => rest.to_string(),
            first => format!("{first}{rest}"),
        };
        std::fs::create_dir_all(dir.join(file).parent().unwrap()).unwrap();
        std::fs::write(dir.join(file), ours(&text) + "\n").unwrap();
    }
    let commands: Vec<String> = blocks(page, "sh").into_iter().map(ours).collect();
    let [install, check_and_run, refused, grant, served] = commands.as_slice() else {
        panic!("the quick start's commands: {commands:?}")
    };
    assert!(install.contains("cargo install --path .") && install.contains("testbed --config"));

    let (check, run) = check_and_run.split_once('\n').unwrap();
    let out = bash(&dir, check);
    assert!(out.status.success(), "{check}\n{}", printed(&out));
    assert!(run.starts_with("ishare-gateway run --config my-gateway/gateway.toml"));
    let config = dir.join("my-gateway/gateway.toml");
    let gateway = ready_gateway("quick-start", &config, admin).await;

    let out = bash(&dir, refused);
    let text = printed(&out);
    assert!(
        text.contains("403") && text.contains("denied_by_rule"),
        "{refused}\n{text}"
    );
    let out = bash(&dir, grant);
    let text = printed(&out);
    assert!(
        out.status.success() && text.contains("201"),
        "{grant}\n{text}"
    );
    let out = bash(&dir, served);
    let text = printed(&out);
    assert!(text.contains("-> 200"), "{served}\n{text}");
    assert!(text.contains("licensepurpose: ISHARE.0001"), "{text}");
    assert!(
        text.contains("EU.EORI.NL000000001"),
        "the backend is told the caller: {text}"
    );

    // The next step the page names: explain, asking the registry.
    let next = page_block(&whole, "## Next", "`ishare-gateway explain", "`");
    let out = bash(
        &dir,
        &ours(&format!("ishare-gateway explain{next}").replace('\n', " ")),
    );
    let text = printed(&out);
    assert!(out.status.success() && text.contains("permitted"), "{text}");

    let (status, log) = gateway.terminate().await;
    assert!(status.success(), "{status}\n{log}");
    bed.stop().await;
}

/// The quick start's section that walks the same steps in a scheme of 3.0.
const THE_SAME_IN_3_0: &str = "## 6. The same in 3.0";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_quick_starts_3_0_section_runs_as_written() {
    let whole = std::fs::read_to_string(book_src().join("quick-start.md")).unwrap();
    let page = whole.split_once(THE_SAME_IN_3_0).unwrap().1;
    let page = page.split_once("## Next").unwrap().0;
    let bed = Bed::start_of(testbed_config_of("book-quick-3.0", "conf/testbed-3.0.toml")).await;
    let dir = beside_the_testbed_as(&bed, "testbed-3.0");
    let (tls, admin) = (free_port(), free_port());
    let echo = echo_address(&bed);
    let (so, ar) = (
        "did:ishare:EU.NL.NTRNL-10000000",
        "did:ishare:EU.NL.NTRNL-10000004",
    );
    let ours = |text: &str| {
        text.replace("https://127.0.0.1:9200", &bed.url(so))
            .replace("https://127.0.0.1:9204", &bed.url(ar))
            .replace("127.0.0.1:7444", &format!("127.0.0.1:{tls}"))
            .replace("127.0.0.1:7902", &format!("127.0.0.1:{admin}"))
            .replace("127.0.0.1:3000", &echo)
    };
    let tomls = blocks(page, "toml");
    let [config, route] = tomls.as_slice() else {
        panic!("the section's files: {tomls:?}")
    };
    let [policy] = blocks(page, "json")[..] else {
        panic!("the section's policy")
    };
    for (file, text) in [
        ("my-gateway-3.0/gateway.toml", *config),
        ("my-gateway-3.0/policies/orders.toml", *route),
        ("my-gateway-3.0/order-policy.json", policy),
    ] {
        std::fs::create_dir_all(dir.join(file).parent().unwrap()).unwrap();
        std::fs::write(dir.join(file), ours(text) + "\n").unwrap();
    }
    let commands: Vec<String> = blocks(page, "sh").into_iter().map(ours).collect();
    let [testbed, check_and_run, walk] = commands.as_slice() else {
        panic!("the section's commands: {commands:?}")
    };
    assert!(
        testbed.contains("testbed --config conf/testbed-3.0.toml"),
        "{testbed}"
    );
    let (check, run) = check_and_run.split_once('\n').unwrap();
    let out = bash(&dir, check);
    assert!(out.status.success(), "{check}\n{}", printed(&out));
    assert!(
        !printed(&out).contains("warning"),
        "a 3.0 configuration as the book gives it: {}",
        printed(&out)
    );
    assert!(run.starts_with("ishare-gateway run --config my-gateway-3.0/gateway.toml"));
    let config = dir.join("my-gateway-3.0/gateway.toml");
    let gateway = ready_gateway("quick-start-3.0", &config, admin).await;
    let (ended, said) = run_each_command(&dir, &each_command_said(walk));
    assert_eq!(ended.len(), 3, "{said}");
    let steps: Vec<&str> = said.split("<<exit ").collect();
    assert!(steps[0].contains("-> 403"), "refused: {said}");
    assert!(steps[1].contains("201"), "granted: {said}");
    assert!(
        steps[2].contains("-> 200")
            && steps[2]
                .contains("licensepurpose: https://licenses.ishare.eu/general-internal-use/1.0"),
        "served: {said}"
    );
    let (status, log) = gateway.terminate().await;
    assert!(status.success(), "{status}\n{log}");
    bed.stop().await;
}

/// A block of shell commands as a script that runs each command (its continuation lines, and the
/// lines of a quoted text, joined) and then says how it ended: `<<exit N>>` on a line of its own.
fn each_command_said(block: &str) -> String {
    let mut script = String::new();
    let mut command = String::new();
    // Quotes opened and not closed, outside the comments that end lines (` # …`).
    let mut open_quotes = 0;
    for line in block.lines() {
        command.push_str(line);
        command.push('\n');
        open_quotes += line.split(" # ").next().unwrap().matches('\'').count();
        let quoted = open_quotes % 2 == 1;
        if line.trim_end().ends_with('\\') || quoted || command.trim().is_empty() {
            continue;
        }
        if !command.trim_start().starts_with('#') {
            script.push_str(&command);
            script.push_str("printf '\\n<<exit %s>>\\n' $?\n");
        }
        command.clear();
        open_quotes = 0;
    }
    script
}

/// Runs `script` (made by `each_command_said`) in `dir`: how each command ended, and all that was
/// printed.
fn run_each_command(dir: &Path, script: &str) -> (Vec<String>, String) {
    let text = printed(&bash_without_stopping(dir, script));
    let ended = text
        .lines()
        .filter_map(|l| l.strip_prefix("<<exit ")?.strip_suffix(">>"))
        .map(str::to_string)
        .collect();
    (ended, text)
}

/// The conformance guide's block of commands that holds `text`.
fn conformance_example(text: &str) -> String {
    let guide = std::fs::read_to_string(book_src().join("guides/conformance.md")).unwrap();
    blocks(&guide, "sh")
        .into_iter()
        .find(|b| b.contains(text))
        .unwrap_or_else(|| panic!("the conformance guide's example with {text}"))
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_and_conformance_guides_run_against_the_testbed_and_the_shipped_gateway() {
    let bed = Bed::start(BIN).await;
    let ports = Ports::free();
    let dir = beside_the_testbed(&bed);
    std::os::unix::fs::symlink(repo().join("conf"), dir.join("conf")).unwrap();
    let config = dir.join("gateway.toml");
    let urls = Urls::of_bed(&bed);
    let shipped = shipped_gateway(&bed.keys.data_dir, &urls, &ports);
    std::fs::write(&config, shipped).unwrap();
    let gateway = ready_gateway("client-guide", &config, ports.admin).await;
    // Only the addresses change: the testbed's and the gateway's.
    let ours = |text: &str| {
        text.replace("https://127.0.0.1:9100", &bed.url(SO))
            .replace("https://127.0.0.1:9104", &bed.url(AR))
            .replace("127.0.0.1:8443", &format!("127.0.0.1:{}", ports.tls))
    };

    // The client's commands of a scheme of 1.9, then the same with curl, in one shell: the second
    // block uses what the first one set.
    let client = std::fs::read_to_string(book_src().join("guides/client.md")).unwrap();
    let client_blocks = blocks(&client, "sh");
    let script = ours(&format!(
        "{}{}",
        each_command_said(client_blocks[0]),
        each_command_said(client_blocks[2])
    ));
    let (ended, text) = run_each_command(&dir, &script);
    let failed: Vec<usize> = (0..ended.len()).filter(|i| ended[*i] != "0").collect();
    assert_eq!(ended.len(), 16, "{script}\n{text}");
    // The one the guide says is refused: a PUT with evidence that grants READ.
    assert_eq!(failed, [9], "{script}\n{text}");
    assert!(text.contains("action_not_granted"), "{text}");
    assert_eq!(text.matches("-> 200 OK").count(), 2, "{text}");
    assert!(text.contains("\"delegation_token\""), "{text}");

    // The conformance checker against the testbed's registry, as the guide runs it.
    let registry = conformance_example("--testbed data/testbed --role authorisation-registry");
    let out = bash(&dir, &ours(&registry));
    assert!(out.status.success(), "{registry}\n{}", printed(&out));

    let (status, log) = gateway.terminate().await;
    assert!(status.success(), "{status}\n{log}");
    bed.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_authzen_example_is_answered_as_the_guide_shows() {
    let guide = std::fs::read_to_string(book_src().join("guides/decision-service.md")).unwrap();
    let service = page_block(
        &guide,
        "[decision_api] address` turns it on",
        "```toml\n",
        "```",
    );
    let evaluation = page_block(&guide, "## AuthZEN 1.0", "```sh\n", "\n```");
    let (command, shown) = evaluation.rsplit_once('\n').unwrap();
    let bed = Bed::start(BIN).await;
    let ports = Ports::free();
    let (http, grpc) = (free_port(), free_port());
    let dir = beside_the_testbed(&bed);
    std::fs::write(
        dir.join("pep.secret"),
        "a-secret-of-the-book-test-0123456789abcdefghijkl",
    )
    .unwrap();
    let urls = Urls::of_bed(&bed);
    let shipped = shipped_gateway(&bed.keys.data_dir, &urls, &ports);
    let ours = |text: &str| {
        text.replace("127.0.0.1:9902", &format!("127.0.0.1:{http}"))
            .replace("127.0.0.1:9903", &format!("127.0.0.1:{grpc}"))
    };
    let config = dir.join("gateway.toml");
    std::fs::write(&config, format!("{shipped}\n{}", ours(service))).unwrap();
    let gateway = ready_gateway("authzen-guide", &config, ports.admin).await;

    let out = bash(&dir, &ours(command));
    assert!(out.status.success(), "{command}\n{}", printed(&out));
    let answered: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let shown: serde_json::Value = serde_json::from_str(&shown.replace("…", "")).unwrap();
    assert_eq!(answered["decision"], shown["decision"], "{answered}");
    assert_eq!(
        answered["context"]["reason"], shown["context"]["reason"],
        "{answered}"
    );

    let (status, log) = gateway.terminate().await;
    assert!(status.success(), "{status}\n{log}");
    bed.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_and_conformance_guides_run_against_the_testbed_of_3_0() {
    let (registry_3, owner_3) = (
        "did:ishare:EU.NL.NTRNL-10000000",
        "did:ishare:EU.NL.NTRNL-10000004",
    );
    let bed = Bed::start_of(testbed_config_of("book-3.0", "conf/testbed-3.0.toml")).await;
    let dir = scratch_dir(BIN);
    std::fs::create_dir_all(dir.join("data")).unwrap();
    std::os::unix::fs::symlink(&bed.keys.data_dir, dir.join("data/testbed-3.0")).unwrap();
    std::os::unix::fs::symlink(repo().join("conf"), dir.join("conf")).unwrap();
    // Only the addresses change: the participant registry's and the authorisation registry's.
    let ours = |text: &str| {
        text.replace("https://127.0.0.1:9200", &bed.url(registry_3))
            .replace("https://127.0.0.1:9204", &bed.url(owner_3))
    };
    let client = std::fs::read_to_string(book_src().join("guides/client.md")).unwrap();
    let script = ours(&each_command_said(blocks(&client, "sh")[1]));
    let (ended, text) = run_each_command(&dir, &script);
    assert_eq!(ended, ["0"; 5], "{script}\n{text}");

    let of_3_0 = conformance_example("--testbed data/testbed-3.0");
    let out = bash(&dir, &ours(&of_3_0));
    assert!(out.status.success(), "{of_3_0}\n{}", printed(&out));
    bed.stop().await;
}

/// The gateways a test started as daemons, stopped when it ends however it ends: the process ids
/// their pid file held.
struct Daemons {
    pid_file: PathBuf,
    seen: Vec<i32>,
}

impl Daemons {
    /// The process id the pid file holds now, remembered for the end.
    fn current(&mut self) -> Option<i32> {
        let pid = std::fs::read_to_string(&self.pid_file)
            .ok()?
            .trim()
            .parse()
            .ok()?;
        if !self.seen.contains(&pid) {
            self.seen.push(pid);
        }
        Some(pid)
    }
}

impl Drop for Daemons {
    fn drop(&mut self) {
        for pid in &self.seen {
            // SAFETY: a signal to a process id the test's own daemon wrote.
            unsafe { libc::kill(*pid, libc::SIGKILL) };
        }
    }
}

fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only asks whether the process exists.
    unsafe { libc::kill(pid, 0) == 0 }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_graceful_upgrade_hands_the_listeners_over_as_the_operations_guide_says() {
    let guide = std::fs::read_to_string(book_src().join("guides/operations.md")).unwrap();
    let commands = blocks(&guide, "sh");
    let (start, upgrade) = (commands[0], commands[1]);
    let bed = Bed::start(BIN).await;
    let ports = Ports::free();
    let dir = beside_the_testbed(&bed);
    let pid_file = dir.join("gateway.pid");
    let mut config: toml::Table = shipped_gateway(&bed.keys.data_dir, &Urls::of_bed(&bed), &ports)
        .parse()
        .unwrap();
    let server = config["server"].as_table_mut().unwrap();
    server.insert("pid_file".into(), pid_file.display().to_string().into());
    let socket = dir.join("upgrade.sock").display().to_string();
    server.insert("upgrade_sock".into(), socket.into());
    std::fs::write(dir.join("gateway.toml"), toml::to_string(&config).unwrap()).unwrap();
    let mut daemons = Daemons {
        pid_file: pid_file.clone(),
        seen: Vec::new(),
    };
    let admin = format!("http://127.0.0.1:{}", ports.admin);
    let live = || async {
        reqwest::get(format!("{admin}/live"))
            .await
            .is_ok_and(|r| r.status() == 200)
    };

    let (ok, said) = bash_detached(&dir, start);
    assert!(ok, "{start}\n{said}");
    let started = process::eventually(Duration::from_secs(30), || async {
        std::fs::read_to_string(&pid_file).is_ok() && live().await
    })
    .await;
    assert!(started, "the daemon did not start");
    let old = daemons.current().unwrap();

    let upgrade = upgrade.replace(
        "/run/ishare-gateway/gateway.pid",
        pid_file.to_str().unwrap(),
    );
    let (ok, said) = bash_detached(&dir, &upgrade);
    assert!(ok, "{upgrade}\n{said}");
    let handed_over = process::eventually(Duration::from_secs(30), || async {
        !alive(old) && std::fs::read_to_string(&pid_file).is_ok_and(|p| p.trim() != old.to_string())
    })
    .await;
    assert!(handed_over, "the old gateway {old} did not hand over");
    let new = daemons.current().unwrap();
    assert!(
        alive(new) && live().await,
        "the new gateway {new} does not serve"
    );
    let plain = format!("http://127.0.0.1:{}/capabilities", ports.plain);
    let status = reqwest::get(&plain).await.unwrap().status();
    assert_eq!(status, 200, "{plain}");
    bed.stop().await;
}
