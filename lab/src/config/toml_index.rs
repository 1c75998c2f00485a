//! Which key each line of a TOML text defines, to turn a parser's byte span into a key and a key
//! into a line (the `toml` crate reports spans, not key paths).

use std::collections::BTreeMap;

/// One segment of a key path: `schemes[2]` is ("schemes", Some(2)).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seg {
    name: String,
    index: Option<usize>,
}

fn parse_path(key: &str) -> Vec<Seg> {
    key.split('.')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('[') {
            Some((name, rest)) => Seg { name: name.to_string(), index: rest.trim_end_matches(']').parse().ok() },
            None => Seg { name: p.to_string(), index: None },
        })
        .collect()
}

fn render_path(segs: &[Seg]) -> String {
    segs.iter()
        .map(|s| match s.index {
            Some(i) => format!("{}[{i}]", s.name),
            None => s.name.clone(),
        })
        .collect::<Vec<_>>()
        .join(".")
}

/// Which key each line of a TOML text defines (following `[table]` and `[[array]]` headers and
/// dotted keys), to turn a parser's byte span into a key and a key into a line.
#[derive(Debug)]
pub struct TomlIndex {
    /// Per line (0-based): the full key path it defines or opens, if any.
    lines: Vec<Option<Vec<Seg>>>,
}

impl TomlIndex {
    pub fn new(text: &str) -> TomlIndex {
        let mut current: Vec<Seg> = Vec::new();
        // Occurrences of each array-of-tables path (with its parents' indices), to number them.
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        let mut lines = Vec::new();
        for raw in text.lines() {
            let t = strip_comment(raw).trim();
            let entry = if let Some(h) = t.strip_prefix("[[").and_then(|h| h.split_once("]]")).map(|(h, _)| h) {
                let mut path = with_parent_indices(&current, h);
                // The array itself is numbered by its own count, not by the table in effect.
                if let Some(last) = path.last_mut() {
                    last.index = None;
                }
                let n = counts.entry(render_path(&path)).or_insert(0);
                if let Some(last) = path.last_mut() {
                    last.index = Some(*n);
                    *n += 1;
                }
                current = path.clone();
                Some(path)
            } else if let Some(h) = t.strip_prefix('[').and_then(|h| h.split_once(']')).map(|(h, _)| h) {
                current = with_parent_indices(&current, h);
                Some(current.clone())
            } else if let Some((k, _)) = t.split_once('=') {
                let mut path = current.clone();
                path.extend(parse_path(&k.replace(['"', '\''], "").replace(' ', "")));
                Some(path)
            } else {
                None
            };
            lines.push(entry);
        }
        TomlIndex { lines }
    }

    /// The key a 1-based line defines, or the table it belongs to.
    pub fn path_at(&self, line: usize) -> String {
        self.lines
            .iter()
            .take(line)
            .rev()
            .flatten()
            .next()
            .map(|p| render_path(p))
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| "(top level)".into())
    }

    /// The 1-based line that best matches `key` (the longest matching prefix of its path; the
    /// line of an inline table's key when the key is inside it; line 1 when nothing matches).
    pub fn locate(&self, key: &str) -> usize {
        let want = parse_path(key);
        let mut best = (0usize, 1usize);
        for (i, p) in self.lines.iter().enumerate() {
            let Some(p) = p else { continue };
            let matched =
                p.iter().zip(&want).take_while(|(a, b)| a.name == b.name && (b.index.is_none() || a.index == b.index)).count();
            // A line deeper than the key (a field of the wanted table) must not beat the table.
            if matched > best.0 && matched == p.len().min(want.len()) {
                best = (matched, i + 1);
            }
        }
        best.1
    }
}

/// A header's segments, with the current indices of array-of-tables parents it nests in.
fn with_parent_indices(current: &[Seg], header: &str) -> Vec<Seg> {
    let mut path = parse_path(&header.replace(['"', '\''], "").replace(' ', ""));
    for (i, seg) in path.iter_mut().enumerate() {
        if let Some(c) = current.get(i) {
            if c.name == seg.name && seg.index.is_none() {
                seg.index = c.index;
            } else {
                break;
            }
        }
    }
    path
}

/// The part of a line before a `#` comment that is not inside a string.
fn strip_comment(line: &str) -> &str {
    let mut quote: Option<char> = None;
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (None, '#') => return &line[..i],
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            _ => {}
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_and_quotes_do_not_confuse_the_index() {
        let idx = TomlIndex::new("a = \"# not a comment\" # yes\n[t] # c\n\"b\" = 1\n");
        assert_eq!(idx.path_at(1), "a");
        assert_eq!(idx.path_at(3), "t.b");
        assert_eq!(idx.locate("t.b"), 3);
        assert_eq!(idx.locate("nothing.here"), 1);
    }
}
