//! Outside the driver crates, only jobs-core's `drivers.rs` names a driver.

use crate::sources::{code_only, contains_word, rust_files, without_comments, without_inline_modules};
use crate::{crates, drivers, rust_name, workspace};

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
    for diesel in
        ["diesel::pg", "diesel::sqlite", "diesel::mysql", "AsyncPgConnection", "AsyncMysqlConnection"]
    {
        names.push(diesel.to_owned());
    }
    names
}

/// Outside the driver crates, only jobs-core's `drivers.rs` names a driver (its crate, its
/// type, jobs-core's re-export of it, its diesel backend) or a backend's feature: the
/// engine, the dashboard and the macros reach the database through `jobs_driver`'s traits
/// alone, so a new driver changes none of them.
#[test]
pub(crate) fn only_jobs_cores_drivers_module_names_a_driver() {
    let drivers = drivers();
    let names = backend_names();
    assert!(names.iter().any(|n| n == "PgDriver"), "the driver types are found: {names:?}");
    let features: Vec<String> = drivers
        .iter()
        .map(|d| format!("feature = \"{}\"", rust_name(d).trim_start_matches("jobs_")))
        .collect();
    let mut offenders = Vec::new();
    // The published crates that are not drivers (the tests and the examples name backends).
    let published = crates().into_iter().filter(|c| {
        let manifest = std::fs::read_to_string(workspace().join(c).join("../Cargo.toml")).expect("manifest");
        !drivers.contains(c) && !manifest.contains("publish = false")
    });
    for dir in published {
        let mut files = Vec::new();
        rust_files(&workspace().join(&dir), &mut files);
        for file in files {
            if file.ends_with("jobs-core/src/drivers.rs") {
                continue;
            }
            let source = std::fs::read_to_string(&file).expect("read");
            // diesel lets only the crate that defines `JobState` derive its Postgres SQL
            // type (`FromSqlRow` is generic over the backend, which the orphan rule forbids
            // elsewhere): jobs-driver's `postgres` feature, which jobs-postgres turns on.
            let state_sql_type = ["state.rs", "lib.rs", "state_sql.rs", "sql_types.rs"]
                .iter()
                .any(|f| file.ends_with(format!("jobs-driver/src/{f}")));
            let code = without_inline_modules(&code_only(&source));
            for name in names.iter().filter(|n| contains_word(&code, n)) {
                if !(state_sql_type && name == "diesel::pg") {
                    offenders.push(format!("{} names `{name}`", file.display()));
                }
            }
            let with_strings = without_comments(&source);
            for feature in features.iter().filter(|f| with_strings.contains(f.as_str())) {
                if !(state_sql_type && feature == "feature = \"postgres\"") {
                    offenders.push(format!("{} has `{feature}`", file.display()));
                }
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "a backend named outside jobs-core/src/drivers.rs:\n{}",
        offenders.join("\n")
    );
}

#[test]
pub(crate) fn the_backend_checker_sees_a_named_backend() {
    assert!(contains_word("use crate::postgres::Pool;", "crate::postgres"));
    assert!(contains_word("let d: PgDriver = x;", "PgDriver"));
    assert!(!contains_word("let d: MyPgDriver = x;", "PgDriver"));
    let source = "#[cfg(any(\n    feature = \"sqlite\",\n))] // feature = \"mysql\"";
    let cleaned = without_comments(source);
    assert!(cleaned.contains("feature = \"sqlite\"") && !cleaned.contains("mysql"));
}
