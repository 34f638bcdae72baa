//! The crate's layering, checked on its source (a scan of every `crate::` path,
//! `use` groups included): which top-level module imports which. `api` → `service` → {`engine`, `ranking`, `search`, `embed`, `chat`,
//! `training`, `stream`, `api_keys`, `experiments`} → `storage` → the base (`domain`, `config`,
//! `time`, `clock`, `topology`, `metrics`, `allocator`). No circle between modules; only `api` speaks HTTP
//! (hyper); `storage` is reached only from below the service layer. `lib.rs`,
//! `main.rs` (with its `cli` commands) and `server.rs` assemble the node and are outside the layers.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, top first; a module may import its own layer's modules and any below.
const LAYERS: &[&[&str]] = &[
    &["api"],
    &["service"],
    &[
        "engine",
        "ranking",
        "search",
        "embed",
        "chat",
        "training",
        "stream",
        "api_keys",
        "experiments",
    ],
    &["storage"],
    &["domain", "config", "time", "clock", "topology", "metrics", "allocator"],
];

/// Modules that assemble the node rather than sit in a layer.
const ROOTS: &[&str] = &["lib", "main", "server", "cli"];

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
    /// module → files that use hyper or its companions.
    http: BTreeMap<String, Vec<PathBuf>>,
}

fn graph() -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut http: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    for file in files {
        let module = module_of(&src, &file);
        let code = code(&std::fs::read_to_string(&file).unwrap());
        let imports = edges.entry(module.clone()).or_default();
        imports.extend(crate_imports(&code).into_iter().filter(|import| *import != module));
        if ["hyper::", "hyper_util::", "http_body_util::"]
            .iter()
            .any(|crate_name| code.contains(crate_name))
        {
            http.entry(module).or_default().push(file);
        }
    }
    Graph { edges, http }
}

#[test]
fn the_group_parser_reads_every_member() {
    let imports = crate_imports("use crate::{a::b, c, d::{e, f}};\nlet x = crate::g::h();");
    assert_eq!(imports, BTreeSet::from(["a", "c", "d", "g"].map(String::from)));
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

#[test]
fn only_the_api_speaks_http() {
    let graph = graph();
    let outside: Vec<_> = graph
        .http
        .iter()
        .filter(|(module, _)| module.as_str() != "api")
        .flat_map(|(_, files)| files)
        .collect();
    assert!(outside.is_empty(), "hyper used outside src/api: {outside:?}");
}
