//! The README holds to what it describes: its map names every source file and directory by its
//! whole path, and only paths that exist; its Contents links every section; and what it says of
//! the commands and the roles of the testbed and the conformance checker, the binary's `--help`
//! says too.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn readme() -> String {
    std::fs::read_to_string(repo().join("README.md")).expect("README.md")
}

/// `ishare-gateway ARGS --help`: what it prints.
fn help(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_ishare-gateway"))
        .args(args)
        .arg("--help")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The README's lines outside its code blocks, with whether each is a heading: its level.
fn prose_lines(readme: &str) -> Vec<(Option<usize>, &str)> {
    let mut in_code = false;
    let mut lines = Vec::new();
    for line in readme.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if !in_code {
            let hashes = line.len() - line.trim_start_matches('#').len();
            let level = (hashes > 0 && line[hashes..].starts_with(' ')).then_some(hashes);
            lines.push((level, line));
        }
    }
    lines
}

/// The text under `heading` up to the next heading of its level or above, code blocks included.
fn section<'a>(readme: &'a str, heading: &str) -> &'a str {
    let level = heading.len() - heading.trim_start_matches('#').len();
    let start = readme
        .find(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("the README has {heading:?}"))
        + heading.len()
        + 2;
    let next = prose_lines(&readme[start..])
        .into_iter()
        .find(|(l, _)| l.is_some_and(|l| l <= level))
        .map(|(_, line)| line.as_ptr() as usize - readme.as_ptr() as usize);
    &readme[start..next.unwrap_or(readme.len())]
}

/// The first paragraph of a text.
fn first_paragraph(text: &str) -> &str {
    text.trim_start().split("\n\n").next().unwrap()
}

/// A heading's anchor, as GitHub writes it.
fn anchor(title: &str) -> String {
    title
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// A word of the map's text that names a file or directory (not a URL path).
fn names_a_path(word: &str) -> bool {
    const KINDS: [&str; 8] = [
        ".rs", ".toml", ".json", ".md", ".sh", ".py", ".pem", ".service",
    ];
    !word.starts_with('/')
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./".contains(c))
        && (word.ends_with('/') || KINDS.iter().any(|k| word.ends_with(k)))
}

/// The directory a path is in, with its slash.
fn parent(path: &str) -> String {
    path.rsplit_once('/')
        .map_or(String::new(), |(dir, _)| format!("{dir}/"))
}

/// The whole paths the map names. An entry at the margin names a path from the repository's
/// root; one indented by two, a path in the directory of the entry at the margin above. A file or
/// directory named in an entry's text is in the entry's directory or, inside the parentheses that
/// follow a directory's name, in that directory.
fn map_paths(map: &str) -> BTreeSet<String> {
    let mut paths = BTreeSet::new();
    let mut top = String::new();
    let mut scopes = vec![String::new()];
    for line in map.lines().filter(|l| !l.trim().is_empty()) {
        let indent = line.len() - line.trim_start().len();
        let mut words = line.split_whitespace();
        if indent <= 2 {
            let entry = words.next().unwrap();
            let path = match indent {
                0 => entry.to_string(),
                _ => format!("{top}{entry}"),
            };
            let dir = match path.ends_with('/') {
                true => path.clone(),
                false => parent(&path),
            };
            if indent == 0 {
                top = dir.clone();
            }
            paths.insert(path);
            scopes = vec![dir];
        }
        // A directory named last, whose parentheses would be about it.
        let mut just_named: Option<String> = None;
        for word in words {
            for _ in 0..word.matches('(').count() {
                let scope = just_named
                    .take()
                    .unwrap_or_else(|| scopes.last().unwrap().clone());
                scopes.push(scope);
            }
            just_named = None;
            let name = word
                .trim_start_matches('(')
                .trim_end_matches([',', ';', ':', '.', ')']);
            if names_a_path(name) {
                let path = format!("{}{name}", scopes.last().unwrap());
                if name.ends_with('/') && name == word {
                    just_named = Some(path.clone());
                }
                paths.insert(path);
            }
            for _ in 0..word.matches(')').count() {
                if scopes.len() > 1 {
                    scopes.pop();
                }
            }
        }
    }
    paths
}

/// Every directory under src and every source file but the module list (lib.rs) and the unit
/// tests of a module (`tests.rs`, or `x_tests.rs` beside `x.rs`), from the repository's root.
fn source_paths() -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut dirs = vec![repo().join("src")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let relative = path.strip_prefix(repo()).unwrap().display().to_string();
            let name = path.file_name().unwrap().to_str().unwrap();
            let unit_tests = name == "tests.rs"
                || name
                    .strip_suffix("_tests.rs")
                    .is_some_and(|stem| dir.join(format!("{stem}.rs")).is_file());
            if path.is_dir() {
                found.insert(format!("{relative}/"));
                dirs.push(path);
            } else if name.ends_with(".rs") && name != "lib.rs" && !unit_tests {
                found.insert(relative);
            }
        }
    }
    found
}

/// The map's block in "What is where".
fn map(readme: &str) -> String {
    let section = section(readme, "## What is where");
    let block = section.split_once("```\n").expect("the map's block").1;
    block
        .split_once("```")
        .expect("the map's end")
        .0
        .to_string()
}

#[test]
fn the_map_names_every_source_file_by_its_whole_path_and_only_paths_that_exist() {
    let named = map_paths(&map(&readme()));
    let missing: Vec<String> = source_paths()
        .into_iter()
        .filter(|p| !named.contains(p))
        .collect();
    assert!(missing.is_empty(), "not in the map: {missing:?}");
    let absent: Vec<&String> = named.iter().filter(|p| !repo().join(p).exists()).collect();
    assert!(absent.is_empty(), "in the map, not in the tree: {absent:?}");
}

#[test]
fn the_contents_link_every_section() {
    let readme = readme();
    let headings = prose_lines(&readme);
    let anchors: BTreeSet<String> = headings
        .iter()
        .filter(|(level, _)| level.is_some_and(|l| l >= 2))
        .map(|(_, line)| anchor(line.trim_start_matches('#').trim()))
        .collect();
    let contents = first_paragraph(
        readme
            .split_once("\nContents: ")
            .expect("a Contents line")
            .1,
    );
    let linked: BTreeSet<String> = contents
        .split("](#")
        .skip(1)
        .map(|rest| rest.split(')').next().unwrap().to_string())
        .collect();
    let sections: Vec<String> = headings
        .iter()
        .filter(|(level, _)| *level == Some(2))
        .map(|(_, line)| anchor(&line[3..]))
        .filter(|a| !linked.contains(a))
        .collect();
    assert!(sections.is_empty(), "not in the Contents: {sections:?}");
    let dangling: Vec<&String> = linked.difference(&anchors).collect();
    assert!(dangling.is_empty(), "no such heading: {dangling:?}");
}

#[test]
fn the_maps_main_rs_names_every_command() {
    let help = help(&[]);
    let commands: Vec<&str> = help
        .split_once("Commands:\n")
        .unwrap()
        .1
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    assert!(commands.contains(&"conformance"), "{help}");
    let map = map(&readme());
    let main: String = map
        .lines()
        .skip_while(|l| !l.starts_with("src/main.rs"))
        .enumerate()
        .take_while(|(i, l)| *i == 0 || l.starts_with("   "))
        .map(|(_, l)| l)
        .collect::<Vec<_>>()
        .join(" ");
    let words: BTreeSet<&str> = main
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .collect();
    let unnamed: Vec<&&str> = commands.iter().filter(|c| !words.contains(**c)).collect();
    assert!(unnamed.is_empty(), "{main}: not named: {unnamed:?}");
}

#[test]
fn the_conformance_checker_is_described_with_every_role_it_takes() {
    let help = help(&["conformance"]);
    let about = help.lines().next().unwrap();
    let roles: Vec<String> = help
        .split_once("Possible values:\n")
        .expect("--role's values")
        .1
        .lines()
        .take_while(|l| l.trim_start().starts_with("- "))
        .map(|l| {
            let value = l.trim_start().trim_start_matches("- ");
            value.split(':').next().unwrap().replace('-', " ")
        })
        .collect();
    assert!(roles.contains(&"identity provider".to_string()), "{help}");
    let readme = readme();
    let row = readme
        .lines()
        .find(|l| l.starts_with("| `ishare-gateway conformance"))
        .expect("the Commands row");
    let checking = section(&readme, "### Checking a participant: conformance");
    let opening = first_paragraph(checking);
    let limitations = section(&readme, "## Known limitations").replace('\n', " ");
    for role in &roles {
        assert!(about.contains(role.as_str()), "--help: {about}: {role}");
        assert!(row.contains(role.as_str()), "Commands: {row}: {role}");
        let opening = opening.replace('\n', " ");
        assert!(opening.contains(role.as_str()), "{opening}: {role}");
        assert!(
            checking.contains(&format!("- **`{}`", role.replace(' ', "-"))),
            "the cases of {role}"
        );
        assert!(
            !limitations.contains(&format!("no cases for the {role}")),
            "Known limitations: {role}"
        );
    }
}

#[test]
fn the_testbeds_help_names_every_participant_the_readme_says_it_runs() {
    let help = help(&["testbed"]);
    let about = help.lines().next().unwrap().to_lowercase();
    let readme = readme();
    let table = section(&readme, "## The testbed");
    let serving: Vec<String> = table
        .lines()
        .skip_while(|l| !l.starts_with("| party"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let (party, role, port) = (cells[1], cells[2], cells[3]);
            let named = match party.starts_with("EU.") {
                true => role.split(" (").next().unwrap(),
                false => party,
            };
            (!port.is_empty()).then(|| named.to_lowercase())
        })
        .collect();
    assert!(
        serving.contains(&"identity provider".to_string()),
        "{table}"
    );
    let unnamed: Vec<&String> = serving.iter().filter(|r| !about.contains(*r)).collect();
    assert!(unnamed.is_empty(), "{about}: not named: {unnamed:?}");
}
