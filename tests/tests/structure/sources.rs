//! Reading the workspace's sources: Rust files, their code without comments (and
//! strings), the paths each module names, and each crate's module graph with its cycles.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::workspace;

pub(crate) fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
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
pub(crate) fn module_of(src: &Path, file: &Path) -> Vec<String> {
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
pub(crate) fn code_only(source: &str) -> String {
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
pub(crate) fn without_inline_modules(code: &str) -> String {
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
pub(crate) fn find_inline_mod(code: &str) -> Option<usize> {
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
pub(crate) fn expand_use(tree: &str) -> Vec<String> {
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
pub(crate) fn named_paths(code: &str) -> Vec<String> {
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
pub(crate) fn resolve(module: &[String], path: &str, modules: &BTreeSet<Vec<String>>) -> Option<Vec<String>> {
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
pub(crate) type Graph = BTreeMap<Vec<String>, BTreeMap<Vec<String>, String>>;

pub(crate) fn graph(crate_dir: &str) -> (Graph, BTreeMap<Vec<String>, PathBuf>) {
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

pub(crate) fn name(module: &[String]) -> String {
    if module.is_empty() { "crate".to_owned() } else { module.join("::") }
}

/// A cycle, if any (depth-first).
pub(crate) fn find_cycle(edges: &Graph) -> Option<Vec<Vec<String>>> {
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

/// The source without comments, strings kept (feature names are strings).
pub(crate) fn without_comments(source: &str) -> String {
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

/// Whether `code` has `name` with no identifier character on either side.
pub(crate) fn contains_word(code: &str, name: &str) -> bool {
    let ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    code.match_indices(name)
        .any(|(at, _)| !ident(code[..at].chars().last()) && !ident(code[at + name.len()..].chars().next()))
}
