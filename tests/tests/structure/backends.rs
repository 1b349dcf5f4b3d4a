//! Outside the driver crates, only jobs-core's `drivers.rs` and manifest name a driver.

use crate::sources::{code_only, contains_word, rust_files, without_comments, without_inline_modules};
use crate::{crates, drivers, listed_drivers, rust_name, workspace};

/// What names a backend in the code of a crate that is not its driver: the driver crates
/// (`jobs_postgres`), jobs-core's re-exports of them (`jobs_core::postgres`,
/// `crate::postgres`), the driver types (`PgDriver`), diesel's backends and connections.
pub(crate) fn backend_names() -> Vec<String> {
    let mut names = Vec::new();
    for dir in drivers() {
        let crate_name = rust_name(&dir);
        let short = crate_name.trim_start_matches("jobs_").to_owned();
        names.push(crate_name);
        names.push(format!("jobs_core::{short}"));
        names.push(format!("crate::{short}"));
        let mut files = Vec::new();
        rust_files(&workspace().join(&dir), &mut files);
        for file in files {
            let code = code_only(&std::fs::read_to_string(&file).expect("read"));
            for (at, _) in code.match_indices("ConnectionDriver for ") {
                let ty: String = code[at + "ConnectionDriver for ".len()..]
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                names.push(ty);
            }
        }
    }
    // Each driver's diesel backend, and its module (`diesel::pg::Pg`, `diesel::pg`).
    for (_, _, _, backend) in listed_drivers() {
        if let Some((module, _)) = backend.rsplit_once("::") {
            names.push(module.to_owned());
        }
        names.push(backend);
    }
    for connection in
        ["AsyncPgConnection", "AsyncMysqlConnection", "PgConnection", "MysqlConnection", "SqliteConnection"]
    {
        names.push(connection.to_owned());
    }
    names
}

/// The files of the published crates that may name a driver: jobs-core's `drivers.rs` (the
/// one module that takes the drivers) and its manifest (their features and optional
/// dependencies). `docs/ARCHITECTURE.md`, "Adding a database", lists them with the
/// workspace's manifest, the tests' and the machine's.
const MAY_NAME_A_DRIVER: [&str; 2] = ["jobs-core/src/drivers.rs", "jobs-core/Cargo.toml"];

/// diesel lets only the crate that defines `JobState` derive its Postgres SQL type
/// (`FromSqlRow` is generic over the backend, which the orphan rule forbids elsewhere):
/// jobs-driver's `postgres` feature, which jobs-postgres turns on, in these files.
const STATE_SQL_TYPE: [&str; 5] = [
    "jobs-driver/src/state.rs",
    "jobs-driver/src/lib.rs",
    "jobs-driver/src/state_sql.rs",
    "jobs-driver/src/sql_types.rs",
    "jobs-driver/Cargo.toml",
];

/// Every file under `dir`, but what a build writes.
fn all_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "target") {
                all_files(&path, out);
            }
        } else {
            out.push(path);
        }
    }
}

/// Outside the driver crates, no file of a published crate names a driver (its crate, its
/// type, jobs-core's re-export of it, its diesel backend) or a backend's feature — not its
/// code, its manifest, its build script, templates or assets — but [`MAY_NAME_A_DRIVER`]:
/// the engine, the dashboard, the macros and the suite reach the database through
/// `jobs_driver`'s traits alone, and build with jobs-core's `all-drivers`, so a new driver
/// changes none of them. A crate's own tests (`<crate>/tests/`) pick a database to run on.
#[test]
pub(crate) fn no_published_file_names_a_driver_but_jobs_cores_drivers_module() {
    let drivers = drivers();
    let names = backend_names();
    assert!(names.iter().any(|n| n == "PgDriver"), "the driver types are found: {names:?}");
    let feature_names: Vec<String> = listed_drivers().into_iter().map(|(feature, ..)| feature).collect();
    let cfgs: Vec<String> = feature_names.iter().map(|f| format!("feature = \"{f}\"")).collect();
    let crate_names: Vec<String> = drivers.iter().map(|d| d.trim_end_matches("/src").to_owned()).collect();
    let mut offenders = Vec::new();
    // The published crates that are not drivers (the tests and the examples name backends).
    let published = crates().into_iter().filter(|c| {
        let manifest = std::fs::read_to_string(workspace().join(c).join("../Cargo.toml")).expect("manifest");
        !drivers.contains(c) && !manifest.contains("publish = false")
    });
    let mut checked = 0;
    for dir in published {
        let root = dir.trim_end_matches("/src").to_owned();
        let mut files = Vec::new();
        all_files(&workspace().join(&root), &mut files);
        for file in files {
            let relative =
                file.strip_prefix(workspace()).expect("in the workspace").to_string_lossy().into_owned();
            if MAY_NAME_A_DRIVER.contains(&relative.as_str())
                || relative.starts_with(&format!("{root}/tests/"))
            {
                continue;
            }
            let Ok(source) = std::fs::read_to_string(&file) else {
                // Binary (an image): nothing to name a driver with.
                continue;
            };
            checked += 1;
            let state_sql_type = STATE_SQL_TYPE.contains(&relative.as_str());
            let mut named = |what: String| {
                let postgres_state_type =
                    ["names `diesel::pg`", "has `feature = \"postgres\"`", "has the feature `postgres`"]
                        .contains(&what.as_str());
                if !(state_sql_type && postgres_state_type) {
                    offenders.push(format!("{relative} {what}"));
                }
            };
            if relative.ends_with(".rs") {
                let code = without_inline_modules(&code_only(&source));
                for name in names.iter().filter(|n| contains_word(&code, n)) {
                    named(format!("names `{name}`"));
                }
                let with_strings = without_comments(&source);
                for cfg in cfgs.iter().filter(|f| with_strings.contains(f.as_str())) {
                    named(format!("has `{cfg}`"));
                }
            } else {
                let text =
                    if relative.ends_with(".toml") { without_hash_comments(&source) } else { source.clone() };
                for name in names.iter().chain(&crate_names).filter(|n| contains_word(&text, n)) {
                    named(format!("names `{name}`"));
                }
                if relative.ends_with("Cargo.toml") {
                    for feature in feature_names.iter().filter(|f| manifest_turns_on(&text, f)) {
                        named(format!("has the feature `{feature}`"));
                    }
                }
            }
        }
    }
    assert!(checked > 100, "the published crates' files are read: {checked}");
    assert!(
        offenders.is_empty(),
        "a driver named in a published crate outside jobs-core's drivers.rs and manifest:\n{}",
        offenders.join("\n")
    );
}

/// Whether manifest `text` turns on, or defines, a backend's feature: `"postgres"`,
/// `'postgres'`, `"postgres_backend"` (diesel's), a key `postgres = …`, `jobs-core/postgres`,
/// `jobs-core?/postgres`, `diesel/postgres_backend`.
fn manifest_turns_on(text: &str, feature: &str) -> bool {
    let ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '-');
    // A crate's words about itself may name a database.
    let text: String = text
        .lines()
        .filter(|l| !["keywords", "categories", "description"].iter().any(|k| l.trim_start().starts_with(k)))
        .collect::<Vec<_>>()
        .join("\n");
    let text = text.as_str();
    [feature.to_owned(), format!("{feature}_backend")].iter().any(|name| {
        let quoted = text.contains(&format!("\"{name}\"")) || text.contains(&format!("'{name}'"));
        let key = text.lines().any(|l| {
            l.trim_start().strip_prefix(name.as_str()).is_some_and(|r| r.trim_start().starts_with('='))
        });
        let dependency = text
            .match_indices(&format!("/{name}"))
            .any(|(at, m)| !ident(text[at + m.len()..].chars().next()));
        quoted || key || dependency
    })
}

/// The workspace's diesel dependencies turn on no backend: each driver crate turns on its
/// own, so that a build on one database compiles no other's client.
#[test]
pub(crate) fn the_workspaces_diesel_dependencies_name_no_backend() {
    let manifest = std::fs::read_to_string(workspace().join("Cargo.toml")).expect("read Cargo.toml");
    let diesel: Vec<&str> = manifest.lines().filter(|l| l.starts_with("diesel")).collect();
    assert!(diesel.len() >= 3, "diesel, diesel-async, diesel_migrations: {diesel:?}");
    for line in diesel {
        let text = without_hash_comments(line);
        for (feature, ..) in listed_drivers() {
            assert!(!manifest_turns_on(&text, &feature), "the workspace's `{line}` turns on {feature}");
        }
    }
}

/// What [`the_workspaces_diesel_dependencies_name_no_backend`] promises, in the graph
/// cargo resolves: jobs-core on SQLite alone builds no Postgres or MySQL client and turns
/// on no other diesel backend (`cargo tree` of its normal dependencies and their
/// features, from the lock file).
#[test]
pub(crate) fn a_build_on_sqlite_alone_has_no_other_databases_client() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = std::process::Command::new(cargo)
        .args(["tree", "--frozen", "-p", "jobs-core", "--no-default-features", "--features", "sqlite"])
        .args(["-e", "normal,features", "--prefix", "none"])
        .current_dir(workspace())
        .output()
        .expect("run cargo tree");
    assert!(output.status.success(), "cargo tree: {}", String::from_utf8_lossy(&output.stderr));
    let tree = String::from_utf8_lossy(&output.stdout);
    assert!(tree.lines().any(|l| l.starts_with("libsqlite3-sys ")), "the tree is read:\n{tree}");
    let others = ["tokio-postgres ", "postgres-protocol ", "pq-sys ", "mysql_async ", "mysqlclient-sys "];
    let backends = ["\"postgres_backend\"", "\"mysql_backend\""];
    let found: Vec<&str> = tree
        .lines()
        .filter(|l| {
            others.iter().any(|o| l.starts_with(o))
                || l.starts_with("diesel feature") && backends.iter().any(|b| l.contains(b))
        })
        .collect();
    assert!(found.is_empty(), "jobs-core on SQLite alone builds another database's client: {found:?}");
}

/// `text` without its `#` comments (a manifest's).
fn without_hash_comments(text: &str) -> String {
    text.lines().map(|l| l.split_once('#').map_or(l, |(code, _)| code)).collect::<Vec<_>>().join("\n")
}

#[test]
pub(crate) fn the_backend_checker_sees_a_named_backend() {
    assert!(contains_word("use crate::postgres::Pool;", "crate::postgres"));
    assert!(contains_word("let d: PgDriver = x;", "PgDriver"));
    assert!(!contains_word("let d: MyPgDriver = x;", "PgDriver"));
    let source = "#[cfg(any(\n    feature = \"sqlite\",\n))] // feature = \"mysql\"";
    let cleaned = without_comments(source);
    assert!(cleaned.contains("feature = \"sqlite\"") && !cleaned.contains("mysql"));
    for manifest in [
        "features = [\"testing\", \"postgres\"]",
        "features = ['postgres']",
        "postgres= [\"dep:jobs-postgres\"]",
        "x = [\"jobs-core?/postgres\"]",
        "diesel = { features = [\"postgres_backend\"] }",
        "x = [\"diesel/postgres_backend\"]",
    ] {
        assert!(manifest_turns_on(manifest, "postgres"), "{manifest}");
    }
    for manifest in [
        "features = [\"postgres-types\"]",
        "jobs-core = { features = [\"all-drivers\"] }",
        "x = [\"jobs-core/postgres-tls\"]",
        "keywords = [\"jobs\", \"postgres\"]",
    ] {
        assert!(!manifest_turns_on(manifest, "postgres"), "{manifest}");
    }
}
