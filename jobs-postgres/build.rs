//! Hashes the migration files so test templates are rebuilt whenever a migration changes.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::Path;

fn visit(dir: &Path, files: &mut Vec<std::path::PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            visit(&path, files)?;
        } else {
            files.push(path);
        }
    }
    Ok(())
}

fn main() -> std::io::Result<()> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files = Vec::new();
    visit(&dir, &mut files)?;
    files.sort();
    let mut hasher = DefaultHasher::new();
    for file in &files {
        println!("cargo:rerun-if-changed={}", file.display());
        file.strip_prefix(&dir).unwrap_or(file).hash(&mut hasher);
        std::fs::read(file)?.hash(&mut hasher);
    }
    println!("cargo:rustc-env=JOBS_MIGRATIONS_HASH={:016x}", hasher.finish());
    Ok(())
}
