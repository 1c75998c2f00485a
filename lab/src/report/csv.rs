//! Reading the CSV files ccp-lab and ccp-sim write: columns found by name (files may gain
//! columns), quoted cells as `output::text` writes them, and numbers that may be empty.

/// A CSV file's header and rows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Table {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// Parses CSV text; `None` when there is not even a header line.
    pub fn parse(text: &str) -> Option<Table> {
        let mut lines = text.lines().filter(|l| !l.trim().is_empty());
        let header = split(lines.next()?);
        Some(Table { header, rows: lines.map(split).collect() })
    }

    /// The position of a column.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.header.iter().position(|h| h == name)
    }

    /// A row's cell in the named column (empty when the row is short).
    pub fn cell<'a>(&self, row: &'a [String], name: &str) -> Option<&'a str> {
        self.column(name).and_then(|i| row.get(i)).map(String::as_str)
    }

    /// A row's number in the named column (none when empty or not a finite number).
    pub fn number(&self, row: &[String], name: &str) -> Option<f64> {
        self.cell(row, name).and_then(|c| c.trim().parse::<f64>().ok()).filter(|v| v.is_finite())
    }
}

/// One line's cells; a quoted cell may hold commas and doubled quotes.
fn split(line: &str) -> Vec<String> {
    let mut cells = Vec::new();
    let mut cell = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                cell.push('"');
                chars.next();
            }
            ('"', true) => quoted = false,
            ('"', false) if cell.is_empty() => quoted = true,
            (',', false) => cells.push(std::mem::take(&mut cell)),
            (c, _) => cell.push(c),
        }
    }
    cells.push(cell);
    cells
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_by_name_with_quotes_and_gaps() {
        let t = Table::parse("a,b,c\n1,\"x, \"\"y\"\"\",\n\n2.5,z\n").unwrap();
        assert_eq!(t.rows.len(), 2);
        assert_eq!(t.cell(&t.rows[0], "b"), Some("x, \"y\""));
        assert_eq!(t.number(&t.rows[0], "a"), Some(1.0));
        assert_eq!(t.number(&t.rows[0], "c"), None, "empty");
        assert_eq!(t.number(&t.rows[1], "c"), None, "short row");
        assert_eq!(t.number(&t.rows[1], "nope"), None);
        assert_eq!(Table::parse(""), None);
        assert_eq!(Table::parse("h\n").unwrap().rows.len(), 0);
    }
}
