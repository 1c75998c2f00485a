//! The agent's modules stand in layers: the graph of which top-level module names which
//! (`crate::X` in its code, tests included) has no cycle, so each module reads, and is tested,
//! with only what stands below it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The top-level modules a file's code names with `crate::`, comments left out.
fn named(text: &str) -> BTreeSet<String> {
    let code: String = text.lines().map(|l| l.split("//").next().unwrap_or_default()).collect::<Vec<_>>().join("\n");
    let ident = |s: &str| s.trim_start().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect::<String>();
    let mut out = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        let Some(group) = rest.strip_prefix('{') else {
            out.insert(ident(rest));
            continue;
        };
        // `crate::{a, b::c, d::{e, f}}`: the first name of each path at depth 0.
        let (mut depth, mut start) = (0, 0);
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    out.insert(ident(&group[start..i]));
                    break;
                }
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    out.insert(ident(&group[start..i]));
                    start = i + 1;
                }
                _ => {}
            }
        }
    }
    out.retain(|m| !m.is_empty());
    out
}

fn walk(dir: &Path, files: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            walk(&p, files);
        } else if p.extension().is_some_and(|x| x == "rs") {
            files.push(p);
        }
    }
}

/// Module → the modules it names, for every top-level module of `src`.
fn graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    walk(src, &mut files);
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let first = f.strip_prefix(src).unwrap().components().next().unwrap().as_os_str().to_string_lossy().into_owned();
        let module = first.strip_suffix(".rs").unwrap_or(&first).to_string();
        if module == "lib" || module == "main" {
            continue;
        }
        let uses = named(&std::fs::read_to_string(&f).unwrap());
        g.entry(module.clone()).or_default().extend(uses.into_iter().filter(|m| *m != module));
    }
    g
}

/// A cycle of `g` as the path round it, if there is one.
fn cycle(g: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        m: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        done: &mut BTreeSet<String>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == m) {
            let mut round = path[i..].to_vec();
            round.push(m.to_string());
            return Some(round);
        }
        if done.contains(m) {
            return None;
        }
        path.push(m.to_string());
        for next in g.get(m).into_iter().flatten() {
            if let Some(c) = visit(next, g, done, path) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(m.to_string());
        None
    }
    let mut done = BTreeSet::new();
    g.keys().find_map(|m| visit(m, g, &mut done, &mut Vec::new()))
}

#[test]
fn no_module_names_one_that_names_it_back() {
    let g = graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(g.contains_key("runtime") && g["runtime"].contains("flows"), "the graph is read: {g:?}");
    if let Some(c) = cycle(&g) {
        panic!("the agent's modules name each other in a cycle: {}", c.join(" -> "));
    }
}

#[test]
fn the_reader_sees_paths_groups_and_no_comments() {
    let text =
        "use crate::a::X;\nuse crate::{b, c::{D, E},\n  f::G};\n// crate::h in a comment\nlet x = crate::i::j(); /// crate::k";
    let names: Vec<String> = named(text).into_iter().collect();
    assert_eq!(names, ["a", "b", "c", "f", "i"]);
    let mut g = BTreeMap::new();
    g.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    g.insert("b".to_string(), BTreeSet::from(["c".to_string()]));
    assert_eq!(cycle(&g), None);
    g.insert("c".to_string(), BTreeSet::from(["a".to_string()]));
    assert_eq!(cycle(&g).unwrap().join(" -> "), "a -> b -> c -> a");
}
