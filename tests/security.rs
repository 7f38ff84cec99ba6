//! Static guards behind the page's security claims: no source the page ships turns text into
//! markup or code. (The end-to-end tests check the same at run time, under the page's CSP.)
#![cfg(not(target_arch = "wasm32"))]

use std::path::Path;

/// Every file below `dir` with one of `extensions`.
fn files(dir: &Path, extensions: &[&str], out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().map(Result::unwrap) {
        let path = entry.path();
        if path.is_dir() {
            files(&path, extensions, out);
        } else if path.extension().is_some_and(|e| extensions.iter().any(|x| e == *x)) {
            out.push(path);
        }
    }
}

#[test]
fn no_shipped_source_writes_html_or_evaluates_code() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut sources = Vec::new();
    files(&root.join("src"), &["rs"], &mut sources);
    files(&root.join("www"), &["js", "html"], &mut sources);
    assert!(sources.len() > 30, "found only {} sources", sources.len());
    // Spelled in pieces so that this file does not match itself.
    let forbidden = [
        ["inner", "_html"],
        ["inner", "HTML"],
        ["outer", "HTML"],
        ["insertAdjacent", "HTML"],
        ["document.", "write("],
        ["eval", "("],
        ["new ", "Function("],
    ];
    for path in &sources {
        let text = std::fs::read_to_string(path).unwrap();
        for [a, b] in forbidden {
            let needle = format!("{a}{b}");
            assert!(!text.contains(&needle), "{} uses {needle}", path.display());
        }
    }
    println!("{} shipped sources: none writes HTML from text or evaluates code", sources.len());
}
