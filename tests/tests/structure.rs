//! The workspace's structure, checked from its sources:
//! - no module imports another that imports it back, directly or through others (in each
//!   library crate, every `use` and every `crate::`/`super::`/`self::` path counts, a
//!   parent's `pub use` of its child included);
//! - production code never reaches the `testing` modules;
//! - outside the driver crates, only jobs-core's `drivers.rs` names a driver;
//! - `worker/mod.rs` and every file of every driver crate stay under 350 lines.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The workspace's members, from its `Cargo.toml`.
fn members() -> Vec<String> {
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
fn crates() -> Vec<String> {
    members()
        .into_iter()
        .filter(|m| workspace().join(m).join("src/lib.rs").is_file())
        .map(|m| format!("{m}/src"))
        .collect()
}

/// The driver crates, by source directory: each implements `ConnectionDriver` and owns a
/// backend's SQL.
fn drivers() -> Vec<String> {
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
fn rust_name(dir: &str) -> String {
    dir.trim_end_matches("/src").replace('-', "_")
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read source dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a source file: `lib.rs` is the root, `a/mod.rs` and `a.rs` are `a`.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).expect("under src");
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let last = parts.pop().expect("a file name");
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" {
        parts.push(stem.to_owned());
    }
    parts
}

/// The source without comments and string literals (so that paths in docs, messages and
/// SQL are not taken for imports).
fn code_only(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let bytes: Vec<char> = source.chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c == '/' && bytes.get(i + 1) == Some(&'/') {
            while i < bytes.len() && bytes[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && bytes.get(i + 1) == Some(&'*') {
            i += 2;
            while i + 1 < bytes.len() && !(bytes[i] == '*' && bytes[i + 1] == '/') {
                i += 1;
            }
            i += 2;
        } else if c == '"' {
            i += 1;
            while i < bytes.len() && bytes[i] != '"' {
                if bytes[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' && bytes.get(i + 2) == Some(&'\'') {
            i += 3;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// `code` with its inline modules resolved: a `#[cfg(test)]` module is dropped (tests are
/// not the module's imports), and in any other (`mod sealed { use super::X; }`) `super`
/// is the file's own module.
fn without_inline_modules(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = find_inline_mod(rest) {
        let open = at + rest[at..].find('{').expect("a brace");
        let mut depth = 0;
        let mut close = open;
        for (i, ch) in rest[open..].char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        close = open + i;
                        break;
                    }
                }
                _ => {}
            }
        }
        let before = &rest[..at];
        let is_test = before.trim_end().ends_with("#[cfg(test)]");
        out.push_str(before);
        if !is_test {
            out.push_str(&rest[open + 1..close].replace("super::", "self::"));
        }
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out
}

/// Where the next `mod name {` starts.
fn find_inline_mod(code: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(at) = code[from..].find("mod ").map(|i| from + i) {
        let starts_word = !code[..at].chars().last().is_some_and(|c| c.is_alphanumeric() || c == '_');
        let after: String = code[at + 4..]
            .chars()
            .skip_while(|c| c.is_alphanumeric() || *c == '_')
            .take_while(|c| !c.is_alphanumeric() && *c != ';')
            .collect();
        if starts_word && after.trim_start().starts_with('{') {
            return Some(at);
        }
        from = at + 4;
    }
    None
}

/// Expands a `use` tree (`a::{b, c::{d, e}}`) into its paths.
fn expand_use(tree: &str) -> Vec<String> {
    // One space between words (`v as u`), none around punctuation.
    let words = tree.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut tree = String::with_capacity(words.len());
    for (i, c) in words.char_indices() {
        let next = words[i + c.len_utf8()..].chars().next();
        let punct = |c: Option<char>| c.is_some_and(|c| "{},:".contains(c));
        if c == ' ' && (punct(tree.chars().last()) || punct(next)) {
            continue;
        }
        tree.push(c);
    }
    fn go(prefix: &str, tree: &str, out: &mut Vec<String>) {
        if let Some(open) = tree.find('{') {
            let head = &tree[..open];
            let body = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
            let mut depth = 0;
            let mut start = 0;
            for (i, ch) in body.char_indices() {
                match ch {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        go(&format!("{prefix}{head}"), &body[start..i], out);
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            go(&format!("{prefix}{head}"), &body[start..], out);
        } else if !tree.is_empty() {
            let path = tree.split(" as ").next().unwrap_or(tree);
            out.push(format!("{prefix}{path}"));
        }
    }
    let mut out = Vec::new();
    go("", &tree, &mut out);
    out
}

/// Every path a module's code names: `use` trees, and inline `crate::`, `super::`,
/// `self::` paths.
fn named_paths(code: &str) -> Vec<String> {
    let mut paths = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("use ") {
        let before = rest[..at].chars().last();
        let after = &rest[at + 4..];
        rest = after;
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let Some(end) = after.find(';') else { break };
        paths.extend(expand_use(&after[..end]));
    }
    for start in ["crate::", "super::", "self::"] {
        let mut rest = code;
        while let Some(at) = rest.find(start) {
            let before = rest[..at].chars().last();
            let path: String =
                rest[at..].chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':').collect();
            rest = &rest[at + start.len()..];
            // `crate::{a, b}` is a `use` tree, expanded above.
            if !path.ends_with("::")
                && !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':' || c == '$')
            {
                paths.push(path);
            }
        }
    }
    paths
}

/// The module a path from `module` reaches (the longest module prefix), if it is a path
/// within the crate.
fn resolve(module: &[String], path: &str, modules: &BTreeSet<Vec<String>>) -> Option<Vec<String>> {
    let segments: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
    let (mut base, rest): (Vec<String>, &[&str]) = match segments.first() {
        Some(&"crate") => (Vec::new(), &segments[1..]),
        Some(&"self") => (module.to_vec(), &segments[1..]),
        Some(&"super") => {
            let mut base = module.to_vec();
            let mut i = 0;
            while segments.get(i) == Some(&"super") {
                // `super` of module a::b (in `a/b.rs`) is `a`; of module a (`a/mod.rs`),
                // the crate root.
                base.pop();
                i += 1;
            }
            (base, &segments[i..])
        }
        _ => return None,
    };
    let mut found = base.clone();
    for seg in rest {
        base.push((*seg).to_owned());
        if modules.contains(&base) {
            found = base.clone();
        } else {
            break;
        }
    }
    Some(found)
}

/// A crate's module graph: each module's edges, with the path that made each one.
type Graph = BTreeMap<Vec<String>, BTreeMap<Vec<String>, String>>;

fn graph(crate_dir: &str) -> (Graph, BTreeMap<Vec<String>, PathBuf>) {
    let src = workspace().join(crate_dir);
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let files: Vec<PathBuf> = files.into_iter().filter(|f| !f.ends_with("main.rs")).collect();
    let by_module: BTreeMap<Vec<String>, PathBuf> =
        files.iter().map(|f| (module_of(&src, f), f.clone())).collect();
    let modules: BTreeSet<Vec<String>> = by_module.keys().cloned().collect();
    let mut edges: Graph = BTreeMap::new();
    for (module, file) in &by_module {
        let code = without_inline_modules(&code_only(&std::fs::read_to_string(file).expect("read source")));
        for path in named_paths(&code) {
            if let Some(target) = resolve(module, &path, &modules)
                && target != *module
            {
                edges.entry(module.clone()).or_default().entry(target).or_insert(path);
            }
        }
        // Paths relative to the module (`use child::X`, `child::f()`) reach its children.
        for child in modules.iter().filter(|m| m.len() == module.len() + 1 && m.starts_with(module)) {
            let needle = format!("{}::", child[module.len()]);
            let named = code.match_indices(&needle).any(|(at, _)| {
                !code[..at].chars().last().is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
            });
            if named {
                edges.entry(module.clone()).or_default().entry(child.clone()).or_insert(needle);
            }
        }
    }
    (edges, by_module)
}

fn name(module: &[String]) -> String {
    if module.is_empty() { "crate".to_owned() } else { module.join("::") }
}

/// A cycle, if any (depth-first).
fn find_cycle(edges: &Graph) -> Option<Vec<Vec<String>>> {
    fn visit(
        node: &Vec<String>,
        edges: &Graph,
        stack: &mut Vec<Vec<String>>,
        done: &mut BTreeSet<Vec<String>>,
    ) -> Option<Vec<Vec<String>>> {
        if let Some(at) = stack.iter().position(|n| n == node) {
            let mut cycle = stack[at..].to_vec();
            cycle.push(node.clone());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        stack.push(node.clone());
        for next in edges.get(node).into_iter().flat_map(|e| e.keys()) {
            if let Some(cycle) = visit(next, edges, stack, done) {
                return Some(cycle);
            }
        }
        stack.pop();
        done.insert(node.clone());
        None
    }
    let mut done = BTreeSet::new();
    for node in edges.keys() {
        if let Some(cycle) = visit(node, edges, &mut Vec::new(), &mut done) {
            return Some(cycle);
        }
    }
    None
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

#[test]
fn the_checker_finds_every_crate_and_driver() {
    let crates = crates();
    for expected in [
        "jobs-driver/src",
        "jobs-core/src",
        "jobs-dashboard/src",
        "jobs-macros/src",
        "jobs-mysql/src",
        "jobs-conformance/src",
    ] {
        assert!(crates.iter().any(|c| c == expected), "{expected} not in {crates:?}");
    }
    assert_eq!(drivers(), ["jobs-postgres/src", "jobs-sqlite/src", "jobs-mysql/src"]);
}

/// The source without comments, strings kept (feature names are strings).
fn without_comments(source: &str) -> String {
    source
        .lines()
        .map(|l| match l.find("//") {
            // A `//` inside a string (a URL) is rare in attributes; lines are cut at the first.
            Some(at) => &l[..at],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// What names a backend in the code of a crate that is not its driver: the driver crates
/// (`jobs_postgres`), jobs-core's re-exports of them (`jobs_core::postgres`,
/// `crate::postgres`), the driver types (`PgDriver`), diesel's backends and connections.
fn backend_names() -> Vec<String> {
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
fn only_jobs_cores_drivers_module_names_a_driver() {
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

/// Whether `code` has `name` with no identifier character on either side.
fn contains_word(code: &str, name: &str) -> bool {
    let ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    code.match_indices(name)
        .any(|(at, _)| !ident(code[..at].chars().last()) && !ident(code[at + name.len()..].chars().next()))
}

#[test]
fn the_backend_checker_sees_a_named_backend() {
    assert!(contains_word("use crate::postgres::Pool;", "crate::postgres"));
    assert!(contains_word("let d: PgDriver = x;", "PgDriver"));
    assert!(!contains_word("let d: MyPgDriver = x;", "PgDriver"));
    let source = "#[cfg(any(\n    feature = \"sqlite\",\n))] // feature = \"mysql\"";
    let cleaned = without_comments(source);
    assert!(cleaned.contains("feature = \"sqlite\"") && !cleaned.contains("mysql"));
}
