//! What each published crate tells crates.io and docs.rs: its manifest's fields, a readme
//! that exists, and every feature it has named on its crate page (its `lib.rs` docs).

use super::{members, workspace};

/// The fields crates.io shows, each given in the manifest or inherited from the workspace.
const FIELDS: [&str; 7] =
    ["description", "license", "repository", "readme", "keywords", "categories", "rust-version"];

/// The published members: those without `publish = false`.
fn published() -> Vec<(String, String)> {
    members()
        .into_iter()
        .map(|m| {
            let manifest =
                std::fs::read_to_string(workspace().join(&m).join("Cargo.toml")).expect("read manifest");
            (m, manifest)
        })
        .filter(|(_, manifest)| !manifest.contains("publish = false"))
        .collect()
}

/// The `[features]` table's names, `default` left out.
fn features(manifest: &str) -> Vec<String> {
    let Some(start) = manifest.find("\n[features]\n") else { return Vec::new() };
    manifest[start + 12..]
        .lines()
        .take_while(|l| !l.starts_with('['))
        .filter(|l| !l.starts_with('#') && l.contains('='))
        .filter_map(|l| l.split('=').next().map(|name| name.trim().to_owned()))
        .filter(|name| name != "default")
        .collect()
}

#[test]
fn every_published_crate_fills_what_crates_io_shows_and_names_its_features() {
    let published = published();
    assert!(
        published.len() >= 8,
        "the published crates: {:?}",
        published.iter().map(|p| &p.0).collect::<Vec<_>>()
    );
    let mut missing = Vec::new();
    for (member, manifest) in &published {
        for field in FIELDS {
            let given = manifest.lines().any(|l| {
                l.starts_with(&format!("{field} =")) || l.starts_with(&format!("{field}.workspace"))
            });
            if !given {
                missing.push(format!("{member}/Cargo.toml: no `{field}`"));
            }
        }
        if !workspace().join(member).join("README.md").is_file() {
            missing.push(format!("{member}: no README.md"));
        }
        let lib = std::fs::read_to_string(workspace().join(member).join("src/lib.rs")).expect("read lib.rs");
        let page: String = lib.lines().filter(|l| l.starts_with("//!")).collect::<Vec<_>>().join("\n");
        for feature in features(manifest) {
            if !page.contains(&format!("//! - `{feature}`")) {
                missing.push(format!(
                    "{member}: feature `{feature}` not listed in its crate docs (\"- `{feature}`\")"
                ));
            }
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

#[test]
fn the_feature_reader_reads_a_features_table() {
    let manifest = "[package]\nname = \"x\"\n\n[features]\ndefault = [\"a\"]\n## A.\na = []\nb = [\"dep:c\"]\n\n[dependencies]\nc = \"1\"\n";
    assert_eq!(features(manifest), ["a", "b"]);
}
