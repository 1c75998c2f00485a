//! Consistency of `p4-bfc/bfc_tna.p4`, `p4-bfc/bfc_v1model.p4` and the model's manifest
//! (specs/bfc.md §12.1, §17 item 7): nothing compiles the P4 here, so this test reads the
//! declarations with a small line-oriented parser and checks, in both directions, that every
//! `const`, register, table and field of `bfc_h` / `bfc_ctrl_h` / `bfc_meta_t` has the same name,
//! width and size in the model. A failure lists every mismatched name.
//!
//! What the parser understands (and so what the .p4 files must keep to):
//! - `const bit<W> NAME = EXPR;` where EXPR is literals and earlier constants joined by `* / + -`;
//! - `register<bit<W>>(SIZE) name;` (v1model) and `Register<bit<W>, bit<I>>(SIZE, init) name;`
//!   (TNA) at the start of a line;
//! - `table name {` … `size = EXPR;` … `}`;
//! - `header|struct NAME {` with one `bit<W> field;` per line, for the three checked names.
//!
//! Other headers (Ethernet, IPv4, the TNA bridge and mirror headers) are target plumbing and are
//! not compared.

use std::collections::BTreeMap;
use std::path::PathBuf;

use ccp_bfc_model::manifest::{Kind, MANIFEST};

const CHECKED_AGGREGATES: &[&str] = &["bfc_h", "bfc_ctrl_h", "bfc_meta_t"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Decl {
    kind: Kind,
    width: u32,
    size: u64,
}

fn strip_comments(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    let mut rest = src;
    while let Some(i) = rest.find("/*") {
        out.push_str(&rest[..i]);
        let end = rest[i..].find("*/").map(|j| i + j + 2).unwrap_or(rest.len());
        // Keep line structure so messages can still say "line N".
        out.extend(rest[i..end].chars().filter(|&c| c == '\n'));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

fn parse_number(tok: &str) -> Option<u64> {
    // P4 sized literals: 32w0x1, 8w3.
    let t = match tok.find('w') {
        Some(i) if tok[..i].chars().all(|c| c.is_ascii_digit()) && i > 0 => &tok[i + 1..],
        _ => tok,
    };
    let t = t.replace('_', "");
    if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()
    } else {
        t.parse().ok()
    }
}

/// Evaluates `a op b op c …` with `*`/`/` binding tighter than `+`/`-`.
fn eval(expr: &str, consts: &BTreeMap<String, u64>) -> Result<u64, String> {
    let spaced = expr.replace('*', " * ").replace('/', " / ").replace('+', " + ").replace('-', " - ");
    let toks: Vec<&str> = spaced.split_whitespace().collect();
    let value = |t: &str| -> Result<u64, String> {
        parse_number(t).or_else(|| consts.get(t).copied()).ok_or_else(|| format!("cannot evaluate {t:?} in {expr:?}"))
    };
    let mut terms: Vec<(char, u64)> = Vec::new();
    let mut i = 0;
    let mut sign = '+';
    while i < toks.len() {
        let mut v = value(toks[i])?;
        i += 1;
        while i + 1 < toks.len() && (toks[i] == "*" || toks[i] == "/") {
            let r = value(toks[i + 1])?;
            v = if toks[i] == "*" { v * r } else { v / r };
            i += 2;
        }
        terms.push((sign, v));
        if i < toks.len() {
            sign = toks[i].chars().next().unwrap();
            i += 1;
        }
    }
    Ok(terms.iter().fold(0i128, |acc, &(s, v)| if s == '-' { acc - v as i128 } else { acc + v as i128 }) as u64)
}

/// `bit<W>` at the start of `s` → W.
fn bit_width(s: &str) -> Option<u32> {
    s.strip_prefix("bit<")?.split('>').next()?.trim().parse().ok()
}

fn parse_p4(src: &str) -> Result<BTreeMap<String, Decl>, String> {
    let text = strip_comments(src);
    let mut consts: BTreeMap<String, u64> = BTreeMap::new();
    let mut decls: BTreeMap<String, Decl> = BTreeMap::new();
    let insert = |decls: &mut BTreeMap<String, Decl>, name: String, d: Decl| -> Result<(), String> {
        if decls.insert(name.clone(), d).is_some() {
            return Err(format!("{name} declared twice"));
        }
        Ok(())
    };
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim();
        let lineno = i + 1;
        i += 1;
        if let Some(rest) = line.strip_prefix("const ") {
            let width = bit_width(rest).ok_or_else(|| format!("line {lineno}: const without bit<W> type: {line}"))?;
            let after = &rest[rest.find('>').unwrap() + 1..];
            let (name, expr) = after.split_once('=').ok_or_else(|| format!("line {lineno}: const without value"))?;
            let name = name.trim().to_string();
            let v = eval(expr.trim().trim_end_matches(';'), &consts).map_err(|e| format!("line {lineno}: {e}"))?;
            consts.insert(name.clone(), v);
            insert(&mut decls, name, Decl { kind: Kind::Const, width, size: v })?;
        } else if let Some(rest) = line.strip_prefix("register<").or_else(|| line.strip_prefix("Register<")) {
            let width = bit_width(rest).ok_or_else(|| format!("line {lineno}: register without bit<W>: {line}"))?;
            let open = rest.find('(').ok_or_else(|| format!("line {lineno}: register without size"))?;
            let close = rest.find(')').ok_or_else(|| format!("line {lineno}: register without size"))?;
            let size_expr = rest[open + 1..close].split(',').next().unwrap_or("");
            let size = eval(size_expr, &consts).map_err(|e| format!("line {lineno}: {e}"))?;
            let name = rest[close + 1..].trim().trim_end_matches(';').trim().to_string();
            insert(&mut decls, name, Decl { kind: Kind::Register, width, size })?;
        } else if let Some(rest) = line.strip_prefix("table ") {
            let name = rest.trim_end_matches('{').trim().to_string();
            let mut depth = line.matches('{').count() as i64 - line.matches('}').count() as i64;
            let mut size = None;
            while i < lines.len() && depth > 0 {
                let l = lines[i].trim();
                depth += l.matches('{').count() as i64 - l.matches('}').count() as i64;
                if let Some(expr) = l.strip_prefix("size =") {
                    size = Some(eval(expr.trim().trim_end_matches(';'), &consts).map_err(|e| format!("line {}: {e}", i + 1))?);
                }
                i += 1;
            }
            let size = size.ok_or_else(|| format!("table {name} (line {lineno}) has no size"))?;
            insert(&mut decls, name, Decl { kind: Kind::Table, width: 0, size })?;
        } else if let Some(rest) = line.strip_prefix("header ").or_else(|| line.strip_prefix("struct ")) {
            let agg = rest.trim_end_matches('{').trim().to_string();
            let checked = CHECKED_AGGREGATES.contains(&agg.as_str());
            while i < lines.len() && !lines[i].trim().starts_with('}') {
                let l = lines[i].trim();
                i += 1;
                if !checked || l.is_empty() {
                    continue;
                }
                let width = bit_width(l).ok_or_else(|| format!("line {i}: {agg} field is not bit<W>: {l}"))?;
                let field = l[l.find('>').unwrap() + 1..].trim().trim_end_matches(';').trim();
                insert(&mut decls, format!("{agg}.{field}"), Decl { kind: Kind::Field, width, size: 0 })?;
            }
        }
    }
    Ok(decls)
}

fn manifest() -> BTreeMap<String, Decl> {
    MANIFEST.iter().map(|m| (m.name.to_string(), Decl { kind: m.kind, width: m.width, size: m.size })).collect()
}

/// Every difference between a parsed file and the manifest, one line each.
fn mismatches(file: &str, p4: &BTreeMap<String, Decl>, model: &BTreeMap<String, Decl>) -> Vec<String> {
    let mut out = Vec::new();
    for (name, d) in p4 {
        match model.get(name) {
            None => out.push(format!("{file}: {:?} `{name}` is declared in the P4 but missing from the model manifest", d.kind)),
            Some(m) if m != d => out.push(format!(
                "{file}: `{name}` differs: P4 {:?} width {} size/value {}, model {:?} width {} size/value {}",
                d.kind, d.width, d.size, m.kind, m.width, m.size
            )),
            Some(_) => {}
        }
    }
    for (name, m) in model {
        if !p4.contains_key(name) {
            out.push(format!("{file}: {:?} `{name}` is in the model manifest but not declared in the P4", m.kind));
        }
    }
    out
}

fn p4_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join(name)
}

#[test]
fn p4_programs_and_model_declare_the_same_names_and_sizes() {
    let model = manifest();
    let mut all = Vec::new();
    for file in ["bfc_tna.p4", "bfc_v1model.p4"] {
        let src = std::fs::read_to_string(p4_path(file)).unwrap_or_else(|e| panic!("reading {file}: {e}"));
        let parsed = parse_p4(&src).unwrap_or_else(|e| panic!("{file}: {e}"));
        all.extend(mismatches(file, &parsed, &model));
    }
    assert!(all.is_empty(), "P4 / model mismatches:\n  {}", all.join("\n  "));
}

#[test]
fn the_checker_reports_a_resized_register_and_a_missing_table() {
    // Guards against a parser that silently matches nothing.
    let src = std::fs::read_to_string(p4_path("bfc_v1model.p4")).unwrap();
    let doctored = src
        .replace("register<bit<16>>(PAUSE_COUNTER_SIZE) pause_counter;", "register<bit<32>>(PAUSE_COUNTER_SIZE) pause_counter;")
        .replace("table th_table {", "table th_tbl {");
    let parsed = parse_p4(&doctored).unwrap();
    let found = mismatches("doctored", &parsed, &manifest());
    assert!(found.iter().any(|m| m.contains("`pause_counter` differs")), "{found:?}");
    assert!(found.iter().any(|m| m.contains("`th_table` is in the model manifest but not declared")), "{found:?}");
    assert!(found.iter().any(|m| m.contains("`th_tbl` is declared in the P4 but missing")), "{found:?}");
}

#[test]
fn the_parser_sees_every_kind() {
    let src = std::fs::read_to_string(p4_path("bfc_tna.p4")).unwrap();
    let parsed = parse_p4(&src).unwrap();
    for kind in [Kind::Const, Kind::Register, Kind::Table, Kind::Field] {
        assert!(parsed.values().any(|d| d.kind == kind), "no {kind:?} parsed from bfc_tna.p4");
    }
    assert_eq!(parsed["FLOW_TABLE_SIZE"].size, 102_400);
    assert_eq!(parsed["flow_ts"], Decl { kind: Kind::Register, width: 32, size: 102_400 });
}
