//! What each published crate tells crates.io and docs.rs: its manifest's fields, a readme
//! that exists, docs.rs's settings, and every feature it has named on its crate page (its
//! `lib.rs` docs). Manifests are read as TOML.

use toml::{Table, Value};

use super::{members, workspace};

/// The fields crates.io shows, each given in the manifest or inherited from the workspace.
const FIELDS: [&str; 7] =
    ["description", "license", "repository", "readme", "keywords", "categories", "rust-version"];

fn manifest(dir: &str) -> Table {
    let text = std::fs::read_to_string(workspace().join(dir).join("Cargo.toml")).expect("read manifest");
    text.parse().unwrap_or_else(|e| panic!("{dir}/Cargo.toml: {e}"))
}

/// The published members (not `publish = false`) and their manifests.
fn published() -> Vec<(String, Table)> {
    members()
        .into_iter()
        .map(|m| {
            let manifest = manifest(&m);
            (m, manifest)
        })
        .filter(|(_, manifest)| manifest["package"].get("publish") != Some(&Value::Boolean(false)))
        .collect()
}

/// What is wrong with one published crate's manifest and crate page.
fn problems(member: &str, manifest: &Table, workspace_package: &Table, lib_docs: &str) -> Vec<String> {
    let mut found = Vec::new();
    let package = manifest["package"].as_table().expect("a [package] table");
    for field in FIELDS {
        let value = match package.get(field) {
            Some(Value::Table(t)) if t.get("workspace") == Some(&Value::Boolean(true)) => {
                workspace_package.get(field)
            }
            other => other,
        };
        let filled = match value {
            Some(Value::String(s)) => !s.is_empty(),
            Some(Value::Array(a)) => !a.is_empty(),
            _ => false,
        };
        if !filled {
            found.push(format!("{member}/Cargo.toml: no `{field}`"));
        }
    }
    if let Some(Value::String(readme)) = package.get("readme")
        && !workspace().join(member).join(readme).is_file()
    {
        found.push(format!("{member}: its readme `{readme}` is not there"));
    }
    let docs_rs = package.get("metadata").and_then(|m| m.get("docs").and_then(|d| d.get("rs")));
    if docs_rs.and_then(|d| d.get("all-features")) != Some(&Value::Boolean(true)) {
        found.push(format!("{member}: no [package.metadata.docs.rs] all-features = true"));
    }
    let features = manifest.get("features").and_then(Value::as_table).cloned().unwrap_or_default();
    for feature in features.keys().filter(|f| *f != "default") {
        if !lib_docs.contains(&format!("//! - `{feature}`")) {
            found.push(format!(
                "{member}: feature `{feature}` not listed in its crate docs (\"- `{feature}`\")"
            ));
        }
    }
    found
}

#[test]
fn every_published_crate_fills_what_crates_io_shows_and_names_its_features() {
    let root = manifest(".");
    let workspace_package = root["workspace"]["package"].as_table().expect("[workspace.package]").clone();
    let published = published();
    assert!(
        published.len() >= 8,
        "the published crates: {:?}",
        published.iter().map(|p| &p.0).collect::<Vec<_>>()
    );
    let mut all = Vec::new();
    for (member, manifest) in &published {
        let lib = std::fs::read_to_string(workspace().join(member).join("src/lib.rs")).expect("read lib.rs");
        let docs: String = lib.lines().filter(|l| l.starts_with("//!")).collect::<Vec<_>>().join("\n");
        all.extend(problems(member, manifest, &workspace_package, &docs));
    }
    assert!(all.is_empty(), "{}", all.join("\n"));
}

#[test]
fn the_checker_finds_what_a_bad_manifest_lacks() {
    let workspace_package: Table = "license = \"MIT\"\nrust-version = \"1.95\"".parse().expect("toml");
    let manifest: Table =
        "[package]\nname = \"x\"\ndescription = \"x\"\nlicense.workspace = true\nkeywords = []\n\
         readme = \"NOPE.md\"\n[features]\ndefault = [\"a\"]\na = []\n"
            .parse()
            .expect("toml");
    let found = problems("jobs-core", &manifest, &workspace_package, "//! - `b`: not a");
    for expected in [
        "no `repository`",
        "no `keywords`",
        "no `categories`",
        "no `rust-version`",
        "`NOPE.md` is not there",
        "all-features",
        "feature `a`",
    ] {
        assert!(found.iter().any(|p| p.contains(expected)), "{expected} in {found:?}");
    }
    assert!(!found.iter().any(|p| p.contains("`license`") || p.contains("`description`")), "{found:?}");
}
