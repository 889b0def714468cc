//! The docs cannot drift from the tree: every repository path and every test the docs cite
//! in backticks exists, and no crate's modules depend on each other in a cycle (the shape
//! ARCHITECTURE.md describes). Both read files only.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the repository")
        .to_path_buf()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// A suite's source: its file, or every file of its directory.
fn suite_source(path: &Path) -> String {
    if !path.is_dir() {
        return read(path);
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(path)
        .expect("a suite directory")
        .map(|entry| entry.expect("an entry").path())
        .filter(|file| file.extension().is_some_and(|extension| extension == "rs"))
        .collect();
    files.sort();
    files.iter().map(|file| read(file)).collect()
}

/// The documents whose citations are held to the tree.
fn documents() -> Vec<PathBuf> {
    let root = root();
    let mut documents: Vec<PathBuf> = [
        "ARCHITECTURE.md",
        "RELIABILITY.md",
        "README.md",
        "BENCHMARKS.md",
        "vendor/README.md",
        "fuzz/README.md",
        "crates/example/README.md",
    ]
    .iter()
    .map(|name| root.join(name))
    .collect();
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|entry| entry.expect("an entry").path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "md"))
        .collect();
    docs.sort();
    documents.extend(docs);
    documents
}

/// Every text between backticks, line by line (a span never crosses a line here).
fn spans(line: &str) -> impl Iterator<Item = &str> {
    line.split('`').skip(1).step_by(2)
}

/// The test suites by name: every `tests/<name>.rs` of the workspace's packages, and the
/// modules of the one integration binary (`tests/tests/it/<name>.rs`).
fn suites() -> BTreeMap<String, PathBuf> {
    let root = root();
    let mut directories = vec![
        root.join("tests/tests/it"),
        root.join("tests/programs/tests"),
    ];
    for parent in ["crates", "examples"] {
        for entry in std::fs::read_dir(root.join(parent)).expect("packages") {
            let tests = entry.expect("an entry").path().join("tests");
            if tests.is_dir() {
                directories.push(tests);
            }
        }
    }
    let mut suites = BTreeMap::new();
    for directory in directories {
        for entry in std::fs::read_dir(directory).expect("a suite directory") {
            let path = entry.expect("an entry").path();
            // A suite is a file, or a directory of files (`worker_handlers/mod.rs` and the
            // modules beside it) whose tests are cited by the suite's name alone.
            let is_suite = path.extension().is_some_and(|extension| extension == "rs")
                || path.join("mod.rs").is_file();
            if is_suite {
                let name = path
                    .file_stem()
                    .expect("a name")
                    .to_string_lossy()
                    .into_owned();
                suites.insert(name, path);
            }
        }
    }
    suites
}

/// A span that names a file or directory of the repository: slash-separated, starting with
/// one of its top-level entries. (A path relative to a crate, `verify/mac.rs`, is not
/// checked: it names no repository root.)
fn cited_path(span: &str, top_level: &BTreeSet<String>) -> Option<String> {
    let path = span.trim_end_matches(['.', ',', ':']);
    let first = path.split('/').next()?;
    let plain = path
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '_' | '-'));
    (plain && path.contains('/') && top_level.contains(first)).then(|| path.to_owned())
}

/// Whether `suite`'s source defines a function `name`.
fn defines(source: &str, name: &str) -> bool {
    source.contains(&format!("fn {name}(")) || source.contains(&format!("fn {name}<"))
}

/// The names at the top of the repository (but `target`): what a cited path starts with.
fn top_level_names(root: &Path) -> BTreeSet<String> {
    std::fs::read_dir(root)
        .expect("the repository")
        .map(|entry| {
            entry
                .expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|name| name != "target")
        .collect()
}

/// The `::`-separated parts of a span that reads as a test citation (`suite::…::test`,
/// `…::test`, `suite::*`), or `None` for any other code span.
fn citation_parts(span: &str) -> Option<Vec<&str>> {
    let parts: Vec<&str> = span.split("::").collect();
    let test_like = |part: &&str| {
        part == &"…"
            || part == &"*"
            || part
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    };
    (parts.len() >= 2 && parts.iter().all(test_like)).then_some(parts)
}

#[test]
fn every_path_and_test_the_docs_cite_exists() {
    let root = root();
    let top_level = top_level_names(&root);
    let suites = suites();
    let sources: BTreeMap<&String, String> = suites
        .iter()
        .map(|(name, path)| (name, suite_source(path)))
        .collect();
    let mut missing = Vec::new();
    let mut checked = 0;
    for document in documents() {
        let shown = document
            .strip_prefix(&root)
            .expect("inside")
            .display()
            .to_string();
        for (number, line) in read(&document).lines().enumerate() {
            // `…::name` continues the suite named last on the same line.
            let mut suite: Option<&str> = None;
            for span in spans(line) {
                if let Some(path) = cited_path(span, &top_level) {
                    checked += 1;
                    if !root.join(&path).exists() {
                        missing.push(format!("{shown}:{}: path `{path}`", number + 1));
                    }
                    continue;
                }
                let Some(parts) = citation_parts(span) else {
                    continue;
                };
                let named = match parts[0] {
                    "…" => suite,
                    first if sources.contains_key(&first.to_owned()) => Some(first),
                    _ => None,
                };
                let Some(named) = named else { continue };
                suite = Some(named);
                let test = parts[parts.len() - 1];
                if test == "*" {
                    continue;
                }
                checked += 1;
                let source = &sources[&named.to_owned()];
                // A segment between the suite and the test names a module of the suite.
                let modules_named = parts[1..parts.len() - 1]
                    .iter()
                    .filter(|part| **part != "…")
                    .all(|module| source.contains(&format!("mod {module} ")));
                if !defines(source, test) || !modules_named {
                    missing.push(format!("{shown}:{}: test `{named}::…::{test}`", number + 1));
                }
            }
        }
    }
    assert!(
        checked > 100,
        "only {checked} citations found: is the parser broken?"
    );
    assert!(
        missing.is_empty(),
        "cited but absent:\n{}",
        missing.join("\n")
    );
}

/// A crate's modules: each module path (segments below the crate root) and the module
/// paths its own source names through `crate::` or `super::`.
fn module_references(source_root: &Path) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let mut modules = BTreeMap::new();
    // Modules declared under `#[cfg(test)]` (a file of unit tests or test vectors).
    let mut test_only: Vec<Vec<String>> = Vec::new();
    let mut pending = vec![source_root.to_path_buf()];
    while let Some(directory) = pending.pop() {
        for entry in std::fs::read_dir(&directory).expect("a source directory") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                if path.file_name().is_some_and(|name| name != "bin") {
                    pending.push(path);
                }
                continue;
            }
            if path.extension().is_none_or(|extension| extension != "rs") {
                continue;
            }
            let relative = path.strip_prefix(source_root).expect("inside");
            let mut segments: Vec<String> = relative
                .with_extension("")
                .iter()
                .map(|part| part.to_string_lossy().into_owned())
                .collect();
            if matches!(
                segments.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                segments.pop();
            }
            if segments.last().is_some_and(|last| last == "tests") {
                continue;
            }
            // Unit tests at a file's end may reach anything: they are not its dependencies;
            // nor is what a comment mentions.
            let text = read(&path);
            let mut lines = text.lines().map(str::trim);
            while let Some(line) = lines.next() {
                if line == "#[cfg(test)]"
                    && let Some(name) = lines
                        .next()
                        .and_then(|next| next.strip_prefix("mod "))
                        .and_then(|rest| rest.strip_suffix(';'))
                {
                    let mut module = segments.clone();
                    module.push(name.to_owned());
                    test_only.push(module);
                }
            }
            let code: String = text
                .split("\n#[cfg(test)]")
                .next()
                .unwrap_or_default()
                .lines()
                .filter(|line| !line.trim_start().starts_with("//"))
                .collect::<Vec<_>>()
                .join("\n");
            modules.insert(segments.clone(), references(&code, &segments));
        }
    }
    modules.retain(|module, _| !test_only.iter().any(|test| module.starts_with(test)));
    modules
}

/// The module paths `text`, the source of module `at`, names.
fn references(text: &str, at: &[String]) -> BTreeSet<Vec<String>> {
    let mut named = BTreeSet::new();
    let words = |rest: &str| -> Vec<Vec<String>> {
        // `a::b::C`, or a group `{a::X, b, self as c}` one level deep.
        let rest = rest.trim_start();
        if let Some(group) = rest.strip_prefix('{') {
            let group = group.split('}').next().unwrap_or_default();
            group
                .split(',')
                .map(|item| path_segments(item.trim()))
                .collect()
        } else {
            vec![path_segments(rest)]
        }
    };
    for (prefix, base) in [
        ("crate::", Vec::new()),
        ("super::", at[..at.len().saturating_sub(1)].to_vec()),
    ] {
        for (index, _) in text.match_indices(prefix) {
            let before = text[..index].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            for path in words(&text[index + prefix.len()..]) {
                let mut full = base.clone();
                full.extend(path);
                named.insert(full);
            }
        }
    }
    named
}

/// The lowercase leading segments of a path (`a::b::Type` → `[a, b]`).
fn path_segments(text: &str) -> Vec<String> {
    text.split("::")
        .map(|part| {
            part.chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect::<String>()
        })
        .take_while(|part| {
            !part.is_empty()
                && part.chars().next().is_some_and(|c| c.is_ascii_lowercase())
                && part != "self"
        })
        .collect()
}

/// A cycle among sibling modules of one crate, if any: `a` depends on `b` when anything in
/// `a` (its submodules included) names anything in `b`.
fn sibling_cycle(modules: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Option<Vec<String>> {
    let mut edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for (from, targets) in modules {
        for target in targets {
            // The longest prefix of the target that is a module.
            let Some(target) = (1..=target.len())
                .rev()
                .map(|length| target[..length].to_vec())
                .find(|prefix| modules.contains_key(prefix))
            else {
                continue;
            };
            let common = from.iter().zip(&target).take_while(|(a, b)| a == b).count();
            if common < from.len() && common < target.len() {
                edges
                    .entry(from[..=common].to_vec())
                    .or_default()
                    .insert(target[..=common].to_vec());
            }
        }
    }
    fn visit(
        node: &[String],
        edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        path: &mut Vec<Vec<String>>,
        done: &mut BTreeSet<Vec<String>>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|seen| seen == node) {
            let mut cycle: Vec<String> = path[start..].iter().map(|m| m.join("::")).collect();
            cycle.push(node.join("::"));
            return Some(cycle);
        }
        if !done.insert(node.to_vec()) {
            return None;
        }
        path.push(node.to_vec());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, edges, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    edges
        .keys()
        .find_map(|node| visit(node, &edges, &mut Vec::new(), &mut done))
}

#[test]
fn no_crate_has_a_module_cycle() {
    let root = root();
    let mut crates = Vec::new();
    for parent in ["crates", "examples"] {
        for entry in std::fs::read_dir(root.join(parent)).expect("crates") {
            let source = entry.expect("an entry").path().join("src");
            if source.is_dir() {
                crates.push(source);
            }
        }
    }
    crates.extend([root.join("tests/src"), root.join("tests/programs/src")]);
    assert!(crates.len() >= 10, "{crates:?}");
    let cycles: Vec<String> = crates
        .iter()
        .filter_map(|source| {
            sibling_cycle(&module_references(source))
                .map(|cycle| format!("{}: {}", source.display(), cycle.join(" → ")))
        })
        .collect();
    assert!(cycles.is_empty(), "module cycles:\n{}", cycles.join("\n"));
}

#[test]
fn a_cycle_between_sibling_modules_is_found() {
    let module = |path: &[&str], names: &[&[&str]]| {
        (
            path.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            names
                .iter()
                .map(|name| name.iter().map(|s| s.to_string()).collect())
                .collect::<BTreeSet<Vec<String>>>(),
        )
    };
    let at = vec!["config".to_owned(), "validate".to_owned()];
    let cyclic: BTreeMap<_, _> = [
        module(&[], &[]),
        module(&["config"], &[]),
        module(&["config", "validate"], &[&["config", "sinks", "resolve"]]),
        (
            vec!["config".to_owned(), "sinks".to_owned()],
            references(
                "use super::validate::{invalid, ID_RULE};",
                &["config".into(), "sinks".into()],
            ),
        ),
    ]
    .into_iter()
    .collect();
    assert_eq!(
        sibling_cycle(&cyclic),
        Some(vec![
            "config::sinks".to_owned(),
            "config::validate".to_owned(),
            "config::sinks".to_owned()
        ]),
        "{:?}",
        references("use super::validate::{invalid, ID_RULE};", &at)
    );
    let mut acyclic = cyclic.clone();
    acyclic.insert(
        vec!["config".to_owned(), "sinks".to_owned()],
        references(
            "use super::rules::invalid;",
            &["config".into(), "sinks".into()],
        ),
    );
    acyclic.insert(
        vec!["config".to_owned(), "rules".to_owned()],
        BTreeSet::new(),
    );
    assert_eq!(sibling_cycle(&acyclic), None);
}
