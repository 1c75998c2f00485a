//! Where a key is in a scenario's text: the line an error about it names (the `toml` crate
//! reports byte spans, not key paths).

/// The first line at or after `from` (1-based) inside the same table that assigns `key`.
pub(super) fn find_key_after(text: &str, from: usize, key: &str) -> Option<usize> {
    for (i, line) in text.lines().enumerate().skip(from - 1) {
        let t = line.trim_start();
        if i + 1 > from && t.starts_with('[') {
            return None;
        }
        if assigns(t, key) {
            return Some(i + 1);
        }
    }
    None
}

fn assigns(line: &str, key: &str) -> bool {
    line.strip_prefix(key).is_some_and(|rest| rest.trim_start().starts_with('='))
}

/// The 1-based line of a dotted key such as `switch.qdisc.k_pkts` or `workload.flows[1].dst`:
/// the line that assigns it inside its table (or as a dotted key in a parent table), else the
/// line that assigns the nearest enclosing key (a key inside an inline table:
/// `cc = { algorithm = "x" }`), else its table's header, else 1.
pub fn locate(text: &str, key: &str) -> usize {
    let (exact, header) = scan(text, key);
    if let Some(line) = exact {
        return line;
    }
    let mut k = key;
    while let Some((parent, _)) = k.rsplit_once('.') {
        if let (Some(line), _) = scan(text, parent) {
            return line;
        }
        k = parent;
    }
    header.unwrap_or(1)
}

/// The line assigning `key` exactly, if any, and the header line of its table, if any.
fn scan(text: &str, key: &str) -> (Option<usize>, Option<usize>) {
    let parts: Vec<&str> = key.split('.').collect();
    let (table_parts, leaf) = parts.split_at(parts.len().saturating_sub(1));
    let leaf = leaf.first().copied().unwrap_or("");
    // "flows[2]" names the third `[[...flows]]` table.
    let mut want_index = 0usize;
    let table: Vec<&str> = table_parts
        .iter()
        .map(|p| match p.split_once('[') {
            Some((name, idx)) => {
                want_index = idx.trim_end_matches(']').parse().unwrap_or(0);
                name
            }
            None => p,
        })
        .collect();
    let table = table.join(".");
    let mut current = String::new();
    let mut occurrence = 0usize;
    let mut seen = 0usize;
    let mut header_line = None;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        let header = t
            .strip_prefix("[[")
            .and_then(|h| h.split("]]").next())
            .map(|h| (h, true))
            .or_else(|| t.strip_prefix('[').and_then(|h| h.split(']').next()).map(|h| (h, false)));
        if let Some((h, array)) = header {
            current = h.trim().to_string();
            occurrence = 0;
            if current == table {
                if array {
                    occurrence = seen;
                    seen += 1;
                }
                if occurrence == want_index && header_line.is_none() {
                    header_line = Some(i + 1);
                }
            }
            continue;
        }
        if current == table && occurrence == want_index && assigns(t, leaf) {
            return (Some(i + 1), header_line);
        }
        // A dotted key in a parent table ("qdisc.k_pkts = 20" under [switch]).
        let rest = if current.is_empty() { Some(table.as_str()) } else { table.strip_prefix(&format!("{current}.")) };
        if let Some(rest) = rest.filter(|r| !r.is_empty()) {
            if assigns(t, &format!("{rest}.{leaf}")) {
                return (Some(i + 1), header_line);
            }
        }
        if table.is_empty() && current.is_empty() && assigns(t, leaf) {
            return (Some(i + 1), header_line);
        }
    }
    (None, header_line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locate_finds_keys_tables_and_array_items() {
        let text = "a = 1\n[x]\nb = 2\n[[y.z]]\nc = 1\n[[y.z]]\nc = 2\n[p]\nq.r = 3\n";
        assert_eq!(locate(text, "a"), 1);
        assert_eq!(locate(text, "x.b"), 3);
        assert_eq!(locate(text, "y.z[1].c"), 7);
        assert_eq!(locate(text, "y.z[0].c"), 5);
        assert_eq!(locate(text, "p.q.r"), 9);
        assert_eq!(locate(text, "x.missing"), 2);
        // Keys inside an inline table: the line that assigns the table.
        let text = "[[f]]\na = 1\n[[f]]\ncc = { algorithm = \"x\", params = { g = 1 } }\n";
        assert_eq!(locate(text, "f[1].cc.algorithm"), 4);
        assert_eq!(locate(text, "f[1].cc.params.g"), 4);
        assert_eq!(locate(text, "f[0].cc.algorithm"), 1, "not in that entry: the fallback");
    }
}
