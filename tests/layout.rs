//! The layout rules of docs/design.md that a compiler does not check: inside every crate (the host's, the
//! component logic, the benchmarks, the test kit), no module imports another that (directly or through others)
//! imports it back, a module and everything below it counting as one (grouped `use` lists read). A crate root
//! only declares and re-exports modules, so it is not a node of the graph. Test-only code (behind `#[cfg(test)]`,
//! or a `tests.rs` / `*_tests.rs` module) is left out. Also: the
//! design's crate graph is the real one, every relative link of the README and `docs/` leads somewhere, and no
//! file refers to a folder outside the repository.

mod support;

use osds_testkit::readme::{code_spans, documentation_pages};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type ModulePath = Vec<String>;

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `src/live/feed.rs` → `["live", "feed"]`; `lib.rs`, `main.rs` and `mod.rs` name their folder.
fn module_path(src: &Path, file: &Path) -> ModulePath {
    let relative = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("lib" | "main" | "mod")
    ) {
        parts.pop();
    }
    parts
}

/// The paths written as `crate::…`, `super::…` or `self::…` in `text`, each as its segments; a grouped list
/// (`crate::a::{b, c::D}`) gives one path per item.
fn paths(text: &str) -> Vec<Vec<String>> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    for start in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(at) = text[from..].find(start) {
            let begin = from + at;
            from = begin + start.len();
            let preceded =
                begin > 0 && (bytes[begin - 1].is_ascii_alphanumeric() || bytes[begin - 1] == b'_');
            if preceded || (begin > 1 && &text[begin - 2..begin] == "::") {
                continue;
            }
            read_path(&text[begin..], Vec::new(), &mut found);
        }
    }
    found
}

/// Reads the path at the start of `rest` after the segments `prefix`, into `found`: its segments, or, for a
/// `{…}` list, each item's. Returns how many bytes it read.
fn read_path(rest: &str, mut prefix: Vec<String>, found: &mut Vec<Vec<String>>) -> usize {
    let mut read = 0;
    loop {
        let here = &rest[read..];
        if let Some(list) = here.strip_prefix('{') {
            read += 1;
            let mut inner = list;
            loop {
                let trimmed = inner.trim_start();
                read += inner.len() - trimmed.len();
                if let Some(after) = trimmed.strip_prefix('}') {
                    read += 1;
                    let _ = after;
                    return read;
                }
                if trimmed.is_empty() {
                    return read;
                }
                let used = read_path(trimmed, prefix.clone(), found);
                read += used.max(1);
                inner = &rest[read..];
                let skipped = inner.trim_start();
                read += inner.len() - skipped.len();
                if let Some(after) = skipped.strip_prefix(',') {
                    read += 1;
                    inner = after;
                } else {
                    inner = skipped;
                }
            }
        }
        let end = here
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(here.len());
        if end == 0 {
            break;
        }
        prefix.push(here[..end].to_string());
        read += end;
        match rest[read..].strip_prefix("::") {
            Some(_) => read += 2,
            None => break,
        }
    }
    if !prefix.is_empty() {
        found.push(prefix);
    }
    read
}

/// The module of `crate_modules` that `path`, written in `module`, refers to (its longest module prefix).
fn target(
    module: &ModulePath,
    path: &[String],
    modules: &BTreeSet<ModulePath>,
) -> Option<ModulePath> {
    let (mut base, mut rest): (ModulePath, &[String]) = match path[0].as_str() {
        "crate" => (Vec::new(), &path[1..]),
        "self" => (module.clone(), &path[1..]),
        _ => (module.clone(), path),
    };
    while rest.first().is_some_and(|s| s == "super") {
        base.pop();
        rest = &rest[1..];
    }
    (0..=rest.len()).rev().find_map(|n| {
        let mut candidate = base.clone();
        candidate.extend(rest[..n].iter().cloned());
        (!candidate.is_empty() && modules.contains(&candidate)).then_some(candidate)
    })
}

/// One import cycle among `edges`, if any.
fn cycle(edges: &BTreeMap<ModulePath, BTreeSet<ModulePath>>) -> Option<Vec<ModulePath>> {
    fn visit(
        node: &ModulePath,
        edges: &BTreeMap<ModulePath, BTreeSet<ModulePath>>,
        state: &mut BTreeMap<ModulePath, bool>,
        stack: &mut Vec<ModulePath>,
    ) -> Option<Vec<ModulePath>> {
        state.insert(node.clone(), false);
        stack.push(node.clone());
        for next in edges.get(node).into_iter().flatten() {
            match state.get(next) {
                Some(false) => {
                    let at = stack.iter().position(|n| n == next).unwrap();
                    let mut found = stack[at..].to_vec();
                    found.push(next.clone());
                    return Some(found);
                }
                Some(true) => {}
                None => {
                    if let Some(found) = visit(next, edges, state, stack) {
                        return Some(found);
                    }
                }
            }
        }
        stack.pop();
        state.insert(node.clone(), true);
        None
    }
    let mut state = BTreeMap::new();
    for node in edges.keys() {
        if !state.contains_key(node)
            && let Some(found) = visit(node, edges, &mut state, &mut Vec::new())
        {
            return Some(found);
        }
    }
    None
}

/// One import loop among the modules under `src`: at each level a module and everything below it are one
/// node, so `a::x` importing `b` and `b` importing `a::y` is a loop between `a` and `b`.
fn import_cycle(src: &Path) -> Option<Vec<ModulePath>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: BTreeSet<ModulePath> = files.iter().map(|f| module_path(src, f)).collect();
    let mut imports: Vec<(ModulePath, ModulePath)> = Vec::new();
    for file in &files {
        let module = module_path(src, file);
        // Test modules of their own files (`tests.rs`, `*_tests.rs`) are test-only code too.
        let test_only = module
            .last()
            .is_some_and(|m| m == "tests" || m.ends_with("_tests"));
        if module.is_empty() || test_only {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        // Unit tests sit at the end of a file, behind `#[cfg(test)]`; they may reach anywhere.
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for path in paths(code) {
            if let Some(to) = target(&module, &path, &modules).filter(|to| *to != module) {
                imports.push((module.clone(), to));
            }
        }
    }
    // Each import is an edge between the two children of the modules' deepest common ancestor.
    let mut edges: BTreeMap<ModulePath, BTreeSet<ModulePath>> = BTreeMap::new();
    for (from, to) in imports {
        let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
        if common == from.len() || common == to.len() {
            continue; // a module and its own parent or child
        }
        edges
            .entry(from[..=common].to_vec())
            .or_default()
            .insert(to[..=common].to_vec());
    }
    cycle(&edges)
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let root = support::tests_dir().join("..");
    let mut crates: Vec<PathBuf> = std::fs::read_dir(root.join("host"))
        .unwrap()
        .map(|e| e.unwrap().path().join("src"))
        .collect();
    for other in [
        "components/wolfx-core/src",
        "components/hyp-core/src",
        "bench/src",
        "bench/accuracy/src",
        "tests/testkit/src",
        "tests/fake-relay/src",
    ] {
        crates.push(root.join(other));
    }
    crates.sort();
    assert!(crates.len() >= 13, "{crates:?}");
    let cycles: Vec<String> = crates
        .iter()
        .filter_map(|src| {
            let found = import_cycle(src)?;
            let shown: Vec<String> = found.iter().map(|m| m.join("::")).collect();
            Some(format!("{}: {}", src.display(), shown.join(" → ")))
        })
        .collect();
    assert!(cycles.is_empty(), "import cycles:\n{}", cycles.join("\n"));
}

#[test]
fn the_cycle_finder_finds_a_cycle() {
    let dir = support::tempdir("layout-cycle");
    std::fs::write(dir.join("lib.rs"), "mod a;\nmod b;\n").unwrap();
    std::fs::write(dir.join("a.rs"), "use crate::b::B;\npub struct A;\n").unwrap();
    std::fs::write(dir.join("b.rs"), "pub struct B(super::a::A);\n").unwrap();
    let found = import_cycle(&dir).expect("a ↔ b");
    assert_eq!(found.len(), 3, "{found:?}");
    std::fs::write(
        dir.join("b.rs"),
        "pub struct B;\n#[cfg(test)]\nuse super::a::A;\n",
    )
    .unwrap();
    assert_eq!(import_cycle(&dir), None);
    // A loop between a module's children and a sibling, through a grouped `use` list.
    let dir = support::tempdir("layout-module-cycle");
    std::fs::create_dir_all(dir.join("a")).unwrap();
    std::fs::write(dir.join("lib.rs"), "mod a;\nmod b;\n").unwrap();
    std::fs::write(dir.join("a/mod.rs"), "mod x;\nmod y;\n").unwrap();
    std::fs::write(dir.join("a/x.rs"), "use crate::{b::B, a::y::Y};\n").unwrap();
    std::fs::write(dir.join("a/y.rs"), "pub struct Y;\n").unwrap();
    std::fs::write(dir.join("b.rs"), "pub struct B(crate::a::y::Y);\n").unwrap();
    let found = import_cycle(&dir).expect("a ↔ b, through a::x and a::y");
    assert_eq!(found.first(), found.last(), "{found:?}");
    assert_eq!(paths("use crate::{b::B, a::{y::Y, x}};").len(), 3);
}

/// The host crates' dependencies on workspace crates, read from their `Cargo.toml` (`[dependencies]` only).
fn crate_dependencies(root: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let folders = [
        "host/osds",
        "host/osds-server",
        "host/osds-api",
        "host/osds-store",
        "host/osds-runtime",
        "host/osds-detector",
        "host/osds-contract",
        "host/osds-time",
    ];
    let workspace: BTreeSet<&str> = folders
        .iter()
        .map(|f| f.rsplit('/').next().unwrap())
        .chain(["wolfx-core", "hyp-core"])
        .collect();
    folders
        .iter()
        .map(|folder| {
            let text = std::fs::read_to_string(root.join(folder).join("Cargo.toml")).unwrap();
            let manifest: toml::Table = toml::from_str(&text).unwrap();
            let name = manifest["package"]["name"].as_str().unwrap().to_string();
            let dependencies = manifest
                .get("dependencies")
                .and_then(|d| d.as_table())
                .map(|d| {
                    d.keys()
                        .filter(|k| workspace.contains(k.as_str()))
                        .cloned()
                        .collect()
                })
                .unwrap_or_default();
            (name, dependencies)
        })
        .collect()
}

#[test]
fn the_design_documents_the_crate_graph_as_it_is() {
    let root = support::tests_dir().join("..");
    let design = std::fs::read_to_string(root.join("docs/design.md")).unwrap();
    // The lines `crate → a, b` (or `→ (none)`) of the graph in docs/design.md.
    let documented: BTreeMap<String, BTreeSet<String>> = design
        .lines()
        .filter_map(|line| line.split_once(" → "))
        .filter(|(name, _)| name.trim().starts_with("osds"))
        .map(|(name, deps)| {
            let deps = deps
                .split(',')
                .map(str::trim)
                .filter(|d| !d.is_empty() && *d != "(none)")
                .map(String::from)
                .collect();
            (name.trim().to_string(), deps)
        })
        .collect();
    let actual = crate_dependencies(&root);
    assert_eq!(documented, actual, "docs/design.md's crate graph");
}

/// The targets of the Markdown links `[text](target)` in `text` that point into the repository: not a URL, not
/// an anchor of the same page; a target's own `#anchor` is dropped.
fn relative_links(text: &str) -> Vec<String> {
    text.match_indices("](")
        .filter_map(|(at, _)| {
            let rest = &text[at + 2..];
            let target = &rest[..rest.find(')')?];
            let target = target.split('#').next().unwrap_or_default();
            (!target.is_empty() && !target.contains("://") && !target.starts_with("mailto:"))
                .then(|| target.to_string())
        })
        .collect()
}

#[test]
fn every_relative_link_of_the_readme_and_the_docs_resolves() {
    let pages = documentation_pages();
    let mut checked = 0;
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        for target in relative_links(&text) {
            let resolved = page.parent().unwrap().join(&target);
            assert!(
                resolved.exists(),
                "{}: the link to {target} leads nowhere",
                page.display()
            );
            checked += 1;
        }
    }
    assert!(
        checked > 0,
        "no relative link found: the link finder is broken"
    );
    assert_eq!(
        relative_links("[a](docs/x.md#y) [b](https://e.org) [c](#z) [d](../schemas/s.yaml)"),
        ["docs/x.md", "../schemas/s.yaml"]
    );
}

/// Every repository path the README and `docs/` name in prose (a code span word starting with one of the
/// repository's folders, placeholders such as `<channel>` or `*` aside) exists: a file moved or renamed cannot
/// stay in the pages. (Links are checked above; the shell blocks by each program's own tests.)
#[test]
fn every_path_the_documentation_names_exists() {
    let root = support::tests_dir().join("..");
    let pages = documentation_pages();
    let folders = [
        "host/",
        "components/",
        "tests/",
        "docs/",
        "deploy/",
        "wit/",
        "schemas/",
        "bench/",
        "examples/",
        ".ci/",
    ];
    let mut checked = 0;
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        for span in code_spans(&text) {
            for word in span.split_whitespace() {
                let word = word.trim_end_matches(['.', ',', ';', ':', ')']);
                let placeholder = word.contains(['<', '{', '*', '…']) || word.contains("...");
                if placeholder || !folders.iter().any(|f| word.starts_with(f)) {
                    continue;
                }
                let path = word.split([':', '#']).next().unwrap();
                assert!(
                    root.join(path).exists(),
                    "{}: `{span}` names {path}, which is not in the repository",
                    page.display()
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 50, "{checked}");
}

/// Every file under `dir` but build output, dependencies and version control.
fn source_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy();
        if matches!(name.as_ref(), "target" | ".git" | "node_modules") {
            continue;
        }
        if path.is_dir() {
            source_files(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// The repository stands alone: no file points at the workplace's reference folder beside the clone, whose
/// contents a clone does not have; what the project needs of it is in `docs/` in its own words.
#[test]
fn no_file_refers_to_a_folder_outside_the_repository() {
    let root = support::tests_dir().join("..");
    let mut files = Vec::new();
    source_files(&root, &mut files);
    assert!(files.len() > 100, "{} files", files.len());
    // The folder's name in two pieces, so that this file is not a reference to it and needs no exemption.
    let folder = concat!("sha", "red");
    let outside = [
        format!("../{folder}"),
        format!("{folder}/hyp.md"),
        format!("{folder}/DESIGN.md"),
        format!("{folder}/spec/"),
    ];
    for file in files {
        // Binary files (components, databases, images) are not read as text.
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        for reference in &outside {
            assert!(
                !text.contains(reference.as_str()),
                "{} refers to `{reference}`",
                file.display()
            );
        }
    }
}
