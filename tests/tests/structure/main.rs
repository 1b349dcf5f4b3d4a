//! The workspace's structure, checked from its sources:
//! - no module imports another that imports it back, directly or through others (in each
//!   library crate, every `use` and every `crate::`/`super::`/`self::` path counts, a
//!   parent's `pub use` of its child included);
//! - production code never reaches the `testing` modules;
//! - outside the driver crates, no file of a published crate names a driver but jobs-core's
//!   `drivers.rs` and manifest; the workspace's diesel dependencies turn on no backend, and
//!   jobs-core on SQLite alone builds no other database's client;
//! - `worker/mod.rs` and every file of every driver crate stay under 350 lines;
//! - every published crate fills the fields crates.io shows, has a readme, and lists its
//!   features on its crate page.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use sources::{Graph, expand_use, find_cycle, graph, name, resolve, rust_files};

mod backends;
mod publishing;
mod sources;

/// The workspace's members, from its `Cargo.toml`.
pub(crate) fn members() -> Vec<String> {
    let manifest = std::fs::read_to_string(workspace().join("Cargo.toml")).expect("read Cargo.toml");
    let line = manifest.lines().find(|l| l.trim_start().starts_with("members")).expect("a members line");
    let list = &line[line.find('[').expect("[") + 1..line.rfind(']').expect("]")];
    let members: Vec<String> =
        list.split(',').map(|m| m.trim().trim_matches('"').to_owned()).filter(|m| !m.is_empty()).collect();
    assert!(!members.iter().any(|m| m.contains('*')), "list the members one by one: {members:?}");
    members
}

/// The library crates, by source directory: every member with a `src/lib.rs`. Their module
/// graphs must be acyclic.
pub(crate) fn crates() -> Vec<String> {
    members()
        .into_iter()
        .filter(|m| workspace().join(m).join("src/lib.rs").is_file())
        .map(|m| format!("{m}/src"))
        .collect()
}

/// The driver crates, by source directory: each implements `ConnectionDriver` and owns a
/// backend's SQL.
pub(crate) fn drivers() -> Vec<String> {
    crates()
        .into_iter()
        .filter(|dir| {
            let mut files = Vec::new();
            rust_files(&workspace().join(dir), &mut files);
            files
                .iter()
                .any(|f| std::fs::read_to_string(f).expect("read").contains("impl ConnectionDriver for "))
        })
        .collect()
}

/// The name a driver crate has in Rust code (`jobs-postgres/src` → `jobs_postgres`).
pub(crate) fn rust_name(dir: &str) -> String {
    dir.trim_end_matches("/src").replace('-', "_")
}

pub(crate) fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn no_module_imports_a_module_that_imports_it_back() {
    let mut cycles = Vec::new();
    for crate_dir in &crates() {
        let (edges, _) = graph(crate_dir);
        if let Some(cycle) = find_cycle(&edges) {
            let steps: Vec<String> = cycle
                .windows(2)
                .map(|w| format!("{} → {} (`{}`)", name(&w[0]), name(&w[1]), edges[&w[0]][&w[1]]))
                .collect();
            cycles.push(format!("{crate_dir}: {}", steps.join(", ")));
        }
    }
    assert!(cycles.is_empty(), "import circles:\n{}", cycles.join("\n"));
}

#[test]
fn the_checker_sees_a_circle() {
    let a = vec!["a".to_owned()];
    let b = vec!["b".to_owned()];
    let edge = |to: &Vec<String>| BTreeMap::from([(to.clone(), "path".to_owned())]);
    let edges: Graph = BTreeMap::from([(a.clone(), edge(&b)), (b.clone(), edge(&a))]);
    assert!(find_cycle(&edges).is_some());
    assert_eq!(
        expand_use("crate::x::{y, z::{w, v as u}}"),
        ["crate::x::y", "crate::x::z::w", "crate::x::z::v"]
    );
    let modules = BTreeSet::from([vec![], a.clone(), vec!["a".to_owned(), "c".to_owned()]]);
    assert_eq!(resolve(&["a".to_owned(), "c".to_owned()], "super::Thing", &modules), Some(a));
}

#[test]
fn production_code_never_reaches_the_testing_modules() {
    for crate_dir in std::iter::once("jobs-core/src".to_owned()).chain(drivers()) {
        let (edges, by_module) = graph(&crate_dir);
        for (from, targets) in &edges {
            if from.first().is_some_and(|m| m == "testing" || m == "plan_tests") {
                continue;
            }
            for to in targets.keys() {
                if to.first().is_some_and(|m| m == "testing") && !from.is_empty() {
                    panic!("{} ({}) reaches {}", name(from), by_module[from].display(), name(to));
                }
            }
        }
    }
}

#[test]
fn the_worker_module_and_every_driver_file_are_under_350_lines() {
    let mut files = vec![workspace().join("jobs-core/src/worker/mod.rs")];
    for driver in drivers() {
        rust_files(&workspace().join(driver), &mut files);
    }
    for file in files {
        let lines = std::fs::read_to_string(&file).expect("read").lines().count();
        assert!(lines < 350, "{} has {lines} lines", file.display());
    }
}

/// The drivers jobs-core's `drivers!` takes, as (feature, crate directory, driver type,
/// diesel backend): `"postgres" => postgres: jobs_postgres::PgDriver for diesel::pg::Pg;`.
pub(crate) fn listed_drivers() -> Vec<(String, String, String, String)> {
    let source = std::fs::read_to_string(workspace().join("jobs-core/src/drivers.rs")).expect("read");
    let block =
        source.split("\ndrivers! {").nth(1).and_then(|rest| rest.split("\n}").next()).expect("drivers!");
    block
        .lines()
        .filter_map(|line| {
            let (feature, rest) = line.trim().split_once(" => ")?;
            let (path, backend) = rest.split_once(": ")?.1.split_once(" for ")?;
            let (krate, driver) = path.trim().split_once("::")?;
            let feature = feature.trim_matches('"').to_owned();
            let backend = backend.trim().trim_end_matches(';').to_owned();
            Some((feature, format!("{}/src", krate.replace('_', "-")), driver.to_owned(), backend))
        })
        .collect()
}

#[test]
fn the_checker_finds_every_crate_and_driver() {
    let crates = crates();
    for expected in
        ["jobs-driver/src", "jobs-core/src", "jobs-dashboard/src", "jobs-macros/src", "jobs-conformance/src"]
    {
        assert!(crates.iter().any(|c| c == expected), "{expected} not in {crates:?}");
    }
    // The crates that implement the seam are the ones jobs-core lists, and there are some.
    let listed = listed_drivers();
    let mut found = drivers();
    let mut expected: Vec<String> = listed.iter().map(|(_, dir, _, _)| dir.clone()).collect();
    assert!(expected.contains(&"jobs-postgres/src".to_owned()), "{listed:?}");
    found.sort();
    expected.sort();
    assert_eq!(found, expected, "crates implementing ConnectionDriver vs. jobs-core's drivers!");
}

#[test]
fn every_driver_runs_the_conformance_suite() {
    for (feature, krate, driver, _) in listed_drivers() {
        let file = workspace().join(format!("tests/tests/conformance_{feature}.rs"));
        let source = std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("{driver} ({krate}) has no {}: {e}", file.display()));
        assert!(
            source.contains("jobs_conformance::suite!") && source.contains(&driver),
            "{} does not run the suite on {driver}",
            file.display()
        );
    }
}

/// The engine names a metric only through `jobs_core::metrics`' constants: a name written
/// inline where it is recorded would escape `metrics::ALL`, the guide and `describe`.
#[test]
fn the_engine_names_its_metrics_only_in_its_metrics_module() {
    let mut files = Vec::new();
    rust_files(&workspace().join("jobs-core/src"), &mut files);
    assert!(files.len() > 20, "{files:?}");
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read");
        for inline in ["counter!(\"", "histogram!(\"", "gauge!(\""] {
            assert!(!text.contains(inline), "{} records a metric named inline: {inline}", file.display());
        }
    }
}
