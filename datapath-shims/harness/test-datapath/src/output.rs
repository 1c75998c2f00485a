//! JSON Lines records on stdout.
//!
//! Formatted by hand (integers, booleans and short strings only), so no serialization crate is
//! linked into a binary that must stay clear of `f64::ln`. Every record starts with `t_us`,
//! `sid` and `ev`; README.md documents the fields of each event.

use std::io::{self, BufWriter, Write};

/// A field value.
#[derive(Debug, Clone, Copy)]
pub enum Value<'a> {
    U64(u64),
    Str(&'a str),
    Bool(bool),
}

impl From<u64> for Value<'_> {
    fn from(v: u64) -> Self {
        Value::U64(v)
    }
}

impl From<u32> for Value<'_> {
    fn from(v: u32) -> Self {
        Value::U64(u64::from(v))
    }
}

impl<'a> From<&'a str> for Value<'a> {
    fn from(v: &'a str) -> Self {
        Value::Str(v)
    }
}

impl From<bool> for Value<'_> {
    fn from(v: bool) -> Self {
        Value::Bool(v)
    }
}

/// Buffers records and writes them out on [`JsonLines::flush`], so a burst of events costs one
/// write system call.
pub struct JsonLines<W: Write> {
    out: BufWriter<W>,
    line: String,
}

impl<W: Write> JsonLines<W> {
    pub fn new(out: W) -> Self {
        JsonLines { out: BufWriter::with_capacity(64 * 1024, out), line: String::with_capacity(256) }
    }

    /// Appends one record: `{"t_us":..,"sid":..,"ev":"..",<fields>}`.
    pub fn record(&mut self, t_us: u64, sid: u32, ev: &str, fields: &[(&str, Value)]) -> io::Result<()> {
        use std::fmt::Write as _;
        self.line.clear();
        // Writing to a String cannot fail.
        let _ = write!(self.line, "{{\"t_us\":{t_us},\"sid\":{sid},\"ev\":");
        push_json_str(&mut self.line, ev);
        for (key, value) in fields {
            self.line.push(',');
            push_json_str(&mut self.line, key);
            self.line.push(':');
            match value {
                Value::U64(v) => {
                    let _ = write!(self.line, "{v}");
                }
                Value::Str(s) => push_json_str(&mut self.line, s),
                Value::Bool(b) => self.line.push_str(if *b { "true" } else { "false" }),
            }
        }
        self.line.push_str("}\n");
        self.out.write_all(self.line.as_bytes())
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// Appends `s` as a JSON string literal.
fn push_json_str(buf: &mut String, s: &str) {
    buf.push('"');
    for c in s.chars() {
        match c {
            '"' => buf.push_str("\\\""),
            '\\' => buf.push_str("\\\\"),
            '\n' => buf.push_str("\\n"),
            '\r' => buf.push_str("\\r"),
            '\t' => buf.push_str("\\t"),
            c if u32::from(c) < 0x20 => {
                use std::fmt::Write as _;
                let _ = write!(buf, "\\u{:04x}", u32::from(c));
            }
            c => buf.push(c),
        }
    }
    buf.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_records() {
        let mut out = JsonLines::new(Vec::new());
        out.record(5, 1, "cwnd", &[("cwnd_bytes", 14_480u32.into())]).unwrap();
        out.record(6, 0, "start", &[("alg", "a\"b\\c\n\u{1}".into()), ("ok", true.into())]).unwrap();
        out.flush().unwrap();
        let text = String::from_utf8(out.out.into_inner().unwrap()).unwrap();
        assert_eq!(
            text,
            "{\"t_us\":5,\"sid\":1,\"ev\":\"cwnd\",\"cwnd_bytes\":14480}\n\
             {\"t_us\":6,\"sid\":0,\"ev\":\"start\",\"alg\":\"a\\\"b\\\\c\\n\\u0001\",\"ok\":true}\n"
        );
    }
}
