//! ishare-gateway: a policy enforcement gateway for iSHARE-style data-sharing trust schemes.

pub mod access_token;
pub mod cli;
pub mod config;
pub mod conformance;
pub mod gateway;
pub mod html;
pub mod peers;
pub mod rate;
pub mod request;
pub mod scheme;
pub mod telemetry;
pub mod testbed;
pub mod tls;

#[cfg(test)]
mod tests {
    /// Every source file is named in the README's "What is where".
    #[test]
    fn the_readme_says_where_every_module_is() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
        let section = readme
            .split("## What is where")
            .nth(1)
            .and_then(|s| s.split("\n## ").next())
            .expect("a What is where section");
        let mut missing = Vec::new();
        let mut dirs = vec![root.join("src")];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).expect("src is readable") {
                let path = entry.expect("an entry").path();
                let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
                if path.is_dir() {
                    if !section.contains(&format!("{name}/")) {
                        missing.push(path.display().to_string());
                    }
                    dirs.push(path);
                } else if name.ends_with(".rs")
                    && !name.ends_with("tests.rs")
                    && name != "lib.rs"
                    && !section.contains(name)
                {
                    missing.push(path.display().to_string());
                }
            }
        }
        assert!(
            missing.is_empty(),
            "not in README's What is where: {missing:?}"
        );
    }
}
