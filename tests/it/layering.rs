//! The crate's layering, checked on its source (a scan of every `crate::` path, `use`
//! groups included, and of every outside crate's path), as DESIGN.md §8 draws it:
//!
//! ```text
//! api → service → {stream → engine → training → ranking, search, embed, chat, experiments}
//!     → storage → domain (the base)
//! ```
//!
//! - A module imports its own layer and the layers below it, never one above; no circle
//!   between modules.
//! - The middle layer is ordered too: `stream` (Kafka's consumers feed the engine) above
//!   `engine` (the shard actors, which hand events to the learner) above `training` (the
//!   learner, which builds the models) above the leaves `ranking`, `search`, `embed`,
//!   `chat`, `experiments` and `api_keys`.
//! - `api` imports only `service` and the base: a handler decodes, makes one service
//!   call and encodes, so every type it names is the service's or the base's.
//! - `storage` is reached only from below the service layer.
//! - Each outside library is confined to its module: rocksdb → `storage`, rdkafka →
//!   `stream`, tantivy → `search`, actix → `engine`, candle (and its tokenizer) →
//!   `embed`, hyper → `api`.
//! - No `pub use` (or `pub type`) passes another module's items through: a type is
//!   named where it is defined.
//!
//! `lib.rs`, `main.rs` (with its `cli` commands) and `server.rs` assemble the node: they
//! sit outside the layers and may import any module, but not the outside libraries
//! above.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, top first; a module may import its own layer's modules and any below.
const LAYERS: &[&[&str]] = &[
    &["api"],
    &["service"],
    // The middle layer, in DESIGN's order.
    &["stream"],
    &["engine"],
    &["training"],
    &["ranking", "search", "embed", "chat", "experiments", "api_keys"],
    &["storage"],
    // The base.
    &[
        "domain",
        "config",
        "timestamp",
        "clock",
        "topology",
        "metrics",
        "allocator",
    ],
];

/// The layer of the base: types and helpers every layer shares.
const BASE: usize = LAYERS.len() - 1;

/// Modules that assemble the node rather than sit in a layer.
const ROOTS: &[&str] = &["lib", "main", "server", "cli"];

/// Each outside library (its crate name) and the one module that may use it.
const CONFINED: &[(&str, &str)] = &[
    ("rocksdb", "storage"),
    ("librocksdb_sys", "storage"),
    ("rdkafka", "stream"),
    ("tantivy", "search"),
    ("actix", "engine"),
    ("actix_rt", "engine"),
    ("candle_core", "embed"),
    ("candle_nn", "embed"),
    ("candle_transformers", "embed"),
    ("tokenizers", "embed"),
    ("hyper", "api"),
    ("hyper_util", "api"),
    ("http_body_util", "api"),
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            found.push(path);
        }
    }
}

/// The top-level module a source file belongs to (`src/engine/x.rs` → `engine`).
fn module_of(src: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(src).unwrap();
    let first = relative.components().next().unwrap().as_os_str().to_string_lossy();
    first.trim_end_matches(".rs").to_owned()
}

/// The code of a file without its comments (line comments and doc comments).
fn code(text: &str) -> String {
    text.lines()
        .map(|line| match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn identifier(text: &str) -> &str {
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}

/// The top-level modules `code` names through `crate::`, including every member of
/// a `use crate::{a::…, b}` group.
fn crate_imports(code: &str) -> BTreeSet<String> {
    let mut imports = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0;
            let mut start = 0;
            for (index, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        imports.insert(identifier(group[start..index].trim()).to_owned());
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        imports.insert(identifier(group[start..index].trim()).to_owned());
                        start = index + 1;
                    }
                    _ => {}
                }
            }
        } else {
            imports.insert(identifier(rest).to_owned());
        }
    }
    imports.retain(|name| !name.is_empty() && name != "self");
    imports
}

struct Graph {
    /// module → modules it imports (other than itself).
    edges: BTreeMap<String, BTreeSet<String>>,
    /// (outside library, module, file) for every file that names the library.
    libraries: Vec<(&'static str, String, PathBuf)>,
    /// (file, the line) for every `pub use` or `pub type` that names another module.
    passed_through: Vec<(PathBuf, String)>,
}

/// True when `code` names the outside crate `name` (`rocksdb`): as the start of a path
/// (`rocksdb::DB`, `::rocksdb::Options`) or in a `use` or `extern crate` of the crate
/// itself (`use rocksdb;`, `use rocksdb as db;`), not as part of a longer name
/// (`librocksdb`, `my_rocksdb`) or a field (`.rocksdb`).
fn names_crate(code: &str, name: &str) -> bool {
    code.match_indices(name).any(|(at, _)| {
        let (before, after) = (&code[..at], &code[at + name.len()..]);
        let joined_before = before
            .chars()
            .next_back()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
        let joined_after = after
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
        if joined_before || joined_after {
            return false;
        }
        let before = before.trim_end_matches("::").trim_end();
        after.starts_with("::") || before.ends_with("use") || before.ends_with("extern crate")
    })
}

/// The `pub use` and `pub type` statements of `code` that name an item of another
/// top-level module than `module`, each on one line.
fn pass_throughs(code: &str, module: &str) -> Vec<String> {
    const STARTS: [&str; 4] = ["pub use ", "pub(crate) use ", "pub type ", "pub(crate) type "];
    let mut found = Vec::new();
    let mut lines = code.lines();
    while let Some(line) = lines.next() {
        let line = line.trim_start();
        if !STARTS.iter().any(|start| line.starts_with(start)) {
            continue;
        }
        let mut statement = line.to_owned();
        while !statement.contains(';') {
            match lines.next() {
                Some(next) => statement.push_str(next),
                None => break,
            }
        }
        let statement = statement.split(';').next().unwrap_or_default();
        if crate_imports(statement).iter().any(|import| import != module) {
            found.push(statement.split_whitespace().collect::<Vec<_>>().join(" "));
        }
    }
    found
}

fn graph() -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut graph = Graph {
        edges: BTreeMap::new(),
        libraries: Vec::new(),
        passed_through: Vec::new(),
    };
    for file in files {
        let module = module_of(&src, &file);
        let code = code(&std::fs::read_to_string(&file).unwrap());
        let imports = graph.edges.entry(module.clone()).or_default();
        imports.extend(crate_imports(&code).into_iter().filter(|import| *import != module));
        for (library, _) in CONFINED {
            if names_crate(&code, library) {
                graph.libraries.push((library, module.clone(), file.clone()));
            }
        }
        for line in pass_throughs(&code, &module) {
            graph.passed_through.push((file.clone(), line));
        }
    }
    graph
}

#[test]
fn the_group_parser_reads_every_member() {
    let imports = crate_imports("use crate::{a::b, c, d::{e, f}};\nlet x = crate::g::h();");
    assert_eq!(imports, BTreeSet::from(["a", "c", "d", "g"].map(String::from)));
}

#[test]
fn the_scanners_tell_paths_and_pass_throughs_apart() {
    assert!(names_crate("use rocksdb::DB;", "rocksdb"));
    assert!(names_crate("let x = ::rocksdb::Options::default();", "rocksdb"));
    assert!(names_crate("use rocksdb as db;", "rocksdb"));
    assert!(names_crate("use rocksdb;", "rocksdb"));
    assert!(names_crate("extern crate rocksdb;", "rocksdb"));
    assert!(!names_crate("use librocksdb::DB;", "rocksdb"));
    assert!(!names_crate("let y = my_rocksdb::x();", "rocksdb"));
    assert!(!names_crate("let rocksdb = open(); rocksdb.put(k, v);", "rocksdb"));
    assert!(!names_crate("use crate::storage::rocksdb_options;", "rocksdb"));
    let code = "pub use crate::engine::Remap;\npub use self::inner::Thing;\nuse crate::storage::Cf;\n\
                pub use crate::service::{a::B, c};\npub type Alias = crate::ranking::Rules;\npub use crate::api::X;";
    assert_eq!(
        pass_throughs(code, "api"),
        vec![
            "pub use crate::engine::Remap".to_owned(),
            "pub use crate::service::{a::B, c}".to_owned(),
            "pub type Alias = crate::ranking::Rules".to_owned(),
        ]
    );
}

#[test]
fn every_module_imports_only_its_layer_and_below() {
    let graph = graph();
    let mut problems = Vec::new();
    for (module, imports) in &graph.edges {
        if ROOTS.contains(&module.as_str()) {
            continue;
        }
        let Some(layer) = layer_of(module) else {
            problems.push(format!("{module} is in no layer"));
            continue;
        };
        for import in imports {
            match layer_of(import) {
                Some(imported) if imported >= layer => {}
                Some(_) => problems.push(format!("{module} imports {import}, a layer above it")),
                None => problems.push(format!("{module} imports {import}, which is in no layer")),
            }
        }
    }
    for module in ["api", "service"] {
        if graph
            .edges
            .get(module)
            .is_some_and(|imports| imports.contains("storage"))
        {
            problems.push(format!("{module} imports storage (only modules below service may)"));
        }
    }
    assert!(problems.is_empty(), "layering broken:\n{}", problems.join("\n"));
}

#[test]
fn the_api_imports_only_the_services_and_the_base() {
    let graph = graph();
    let outside: Vec<&String> = graph.edges["api"]
        .iter()
        .filter(|import| import.as_str() != "service" && layer_of(import) != Some(BASE))
        .collect();
    assert!(outside.is_empty(), "api imports {outside:?}: only service and the base");
}

#[test]
fn each_outside_library_stays_in_its_module() {
    let graph = graph();
    let strays: Vec<String> = graph
        .libraries
        .iter()
        .filter(|(library, module, _)| CONFINED.iter().any(|(name, home)| name == library && home != module))
        .map(|(library, module, file)| format!("{library} in {module}: {}", file.display()))
        .collect();
    assert!(
        strays.is_empty(),
        "outside libraries used outside their module:\n{}",
        strays.join("\n")
    );
}

#[test]
fn no_pub_use_passes_another_modules_items_through() {
    let graph = graph();
    let lines: Vec<String> = graph
        .passed_through
        .iter()
        .map(|(file, line)| format!("{}: {line}", file.display()))
        .collect();
    assert!(
        lines.is_empty(),
        "items passed through another module:\n{}",
        lines.join("\n")
    );
}

#[test]
fn no_circle_between_modules() {
    let graph = graph();
    // Depth-first search for a back edge.
    fn visit<'a>(
        module: &'a str,
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|m| *m == module) {
            let mut circle: Vec<String> = path[at..].iter().map(|m| m.to_string()).collect();
            circle.push(module.to_owned());
            return Some(circle);
        }
        if !done.insert(module) {
            return None;
        }
        path.push(module);
        for import in graph.get(module).into_iter().flatten() {
            if let Some(circle) = visit(import, graph, path, done) {
                return Some(circle);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    for module in graph.edges.keys() {
        if ROOTS.contains(&module.as_str()) {
            continue;
        }
        let mut path = Vec::new();
        if let Some(circle) = visit(module, &graph.edges, &mut path, &mut done) {
            panic!("import circle: {}", circle.join(" → "));
        }
    }
}
