//! The README and the book hold to what they describe: the README is a landing page that starts
//! with the two commands and links every page of the book; the book's map (Contributing: What is
//! where) names every source file and directory, test, bench and example by its whole path, and only
//! paths that exist; the commands page has a row for every command, naming its options; and what
//! the book says of the commands and the roles of the testbed and the conformance checker, the
//! binary's `--help` says too.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A file of the repository: the README, or a page of the book (`docs/src/…`).
fn page(path: &str) -> String {
    std::fs::read_to_string(repo().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn readme() -> String {
    page("README.md")
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

/// The commands `--help` lists, but `help`.
fn commands() -> Vec<String> {
    help(&[])
        .split_once("Commands:\n")
        .unwrap()
        .1
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

/// The first paragraph of a text.
fn first_paragraph(text: &str) -> &str {
    text.trim_start().split("\n\n").next().unwrap()
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
/// tests of a module (`tests.rs`, or `x_tests.rs` beside `x.rs`); and every test file, test
/// support file, bench and example: from the repository's root.
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
    for dir in ["tests", "tests/support", "benches", "examples"] {
        for entry in std::fs::read_dir(repo().join(dir)).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            if name.ends_with(".rs") {
                found.insert(format!("{dir}/{name}"));
            }
        }
    }
    found
}

/// The book's map: the block of its page "What is where".
fn map() -> String {
    let page = page("docs/src/contributing/architecture.md");
    let block = page.split_once("```\n").expect("the map's block").1;
    block
        .split_once("```")
        .expect("the map's end")
        .0
        .to_string()
}

#[test]
fn the_map_names_every_source_file_by_its_whole_path_and_only_paths_that_exist() {
    let named = map_paths(&map());
    let missing: Vec<String> = source_paths()
        .into_iter()
        .filter(|p| !named.contains(p))
        .collect();
    assert!(missing.is_empty(), "not in the map: {missing:?}");
    let absent: Vec<&String> = named.iter().filter(|p| !repo().join(p).exists()).collect();
    assert!(absent.is_empty(), "in the map, not in the tree: {absent:?}");
}

/// "Where to add a test" names every test file, and only files that exist.
#[test]
fn the_test_guide_names_every_test_file_and_only_files_that_exist() {
    let guide = page("docs/src/contributing/tests.md");
    let files: Vec<String> = std::fs::read_dir(repo().join("tests"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".rs"))
        .collect();
    let unnamed: Vec<&String> = files
        .iter()
        .filter(|f| !guide.contains(&format!("`tests/{f}`")))
        .collect();
    assert!(unnamed.is_empty(), "not in the test guide: {unnamed:?}");
    let absent: Vec<&str> = guide
        .split('`')
        .filter(|s| s.ends_with(".rs") && (s.starts_with("tests/") || s.starts_with("src/")))
        .filter(|p| !p.contains('*') && !repo().join(p).exists())
        .collect();
    assert!(
        absent.is_empty(),
        "in the test guide, not in the tree: {absent:?}"
    );
}

#[test]
fn the_readme_starts_with_the_two_commands_and_fits_on_two_screens() {
    let readme = readme();
    let first_block = readme
        .split("```sh\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("a first block of commands");
    let commands: Vec<&str> = first_block
        .lines()
        .map(|l| l.split('#').next().unwrap().trim())
        .collect();
    assert_eq!(commands, ["make demo", "make test"], "{first_block}");
    let lines = readme.lines().count();
    assert!(
        lines <= 200,
        "the README has {lines} lines: the manual is the book"
    );
}

#[test]
fn the_readme_links_every_page_of_the_book() {
    let summary = page("docs/src/SUMMARY.md");
    let pages: Vec<&str> = summary
        .split("](")
        .skip(1)
        .map(|rest| rest.split(')').next().unwrap())
        .collect();
    assert!(pages.contains(&"reference/configuration.md"), "{summary}");
    let readme = readme();
    let unlinked: Vec<&&str> = pages
        .iter()
        .filter(|p| !readme.contains(&format!("](docs/src/{p})")))
        .collect();
    assert!(
        unlinked.is_empty(),
        "the README's contents lack {unlinked:?}"
    );
}

#[test]
fn the_maps_main_rs_names_every_command() {
    let commands = commands();
    assert!(commands.iter().any(|c| c == "conformance"), "{commands:?}");
    let map = map();
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
    let unnamed: Vec<&String> = commands
        .iter()
        .filter(|c| !words.contains(c.as_str()))
        .collect();
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
    let commands = page("docs/src/reference/commands.md");
    let row = commands
        .lines()
        .find(|l| l.starts_with("| `ishare-gateway conformance"))
        .expect("the Commands row");
    let checking = page("docs/src/guides/conformance.md");
    let opening = first_paragraph(checking.split_once('\n').unwrap().1);
    let limitations = page("docs/src/security/limitations.md").replace('\n', " ");
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
fn the_testbeds_help_names_every_participant_the_book_says_it_runs() {
    let help = help(&["testbed"]);
    let about = help.lines().next().unwrap().to_lowercase();
    let table = page("docs/src/guides/testbed.md");
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

#[test]
fn the_commands_page_has_a_row_for_every_command_naming_its_options() {
    let page = page("docs/src/reference/commands.md");
    let mut missing = Vec::new();
    for command in &commands() {
        let Some(row) = page
            .lines()
            .find(|l| l.starts_with(&format!("| `ishare-gateway {command} ")))
        else {
            missing.push(format!("{command}: no row"));
            continue;
        };
        // The client and the conformance checker have guides of their own for their options.
        if ["client", "conformance"].contains(&command.as_str()) {
            continue;
        }
        let options = help_options(&help(&[command]));
        for option in options.iter().filter(|o| !row.contains(o.as_str())) {
            missing.push(format!("{command}: {option}"));
        }
    }
    assert!(missing.is_empty(), "not on the commands page: {missing:?}");
}

/// The long options a `--help` lists, but `--help` itself.
fn help_options(help: &str) -> Vec<String> {
    help.lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let l = l
                .split_once(", ")
                .filter(|(s, _)| s.len() == 2)
                .map_or(l, |(_, long)| long);
            l.starts_with("--")
                .then(|| l.split([' ', '=']).next().unwrap().to_string())
        })
        .filter(|o| o != "--help")
        .collect()
}
