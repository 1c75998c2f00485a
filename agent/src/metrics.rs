//! A Prometheus text endpoint, off by default and meant for loopback.
//!
//! The exposition format is a handful of lines rendered from the agent's own counters at
//! scrape time, and the "server" answers exactly one thing (`GET /metrics`), so both are written
//! here rather than pulling an HTTP stack into the agent's event loop.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{self, Read, Write};
use std::net::SocketAddr;

use anyhow::Context;
use mio::net::{TcpListener, TcpStream};
use mio::{Interest, Registry, Token};
use tracing::warn;

pub const LISTENER: Token = Token(usize::MAX - 2);
const CONN_BASE: usize = 1 << 29;
const MAX_CONNECTIONS: usize = 16;
/// The most of a request we read before answering (we only need the request line).
const MAX_REQUEST_BYTES: usize = 8 * 1024;

/// One metric family: name, type, help, and samples keyed by their label set.
pub struct Family {
    pub name: &'static str,
    pub kind: &'static str,
    pub help: &'static str,
    pub samples: Vec<(Vec<(&'static str, String)>, f64)>,
}

impl Family {
    pub fn single(name: &'static str, kind: &'static str, help: &'static str, value: f64) -> Family {
        Family { name, kind, help, samples: vec![(Vec::new(), value)] }
    }
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// Renders families in the Prometheus text exposition format (version 0.0.4).
pub fn render(families: &[Family]) -> String {
    let mut out = String::new();
    for f in families {
        let _ = writeln!(out, "# HELP {} {}", f.name, f.help);
        let _ = writeln!(out, "# TYPE {} {}", f.name, f.kind);
        for (labels, value) in &f.samples {
            if labels.is_empty() {
                let _ = writeln!(out, "{} {}", f.name, value);
            } else {
                let l: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{}\"", escape(v))).collect();
                let _ = writeln!(out, "{}{{{}}} {}", f.name, l.join(","), value);
            }
        }
    }
    out
}

/// Counts per label value, for gauges like "flows per algorithm".
pub fn by_label(label: &'static str, values: impl Iterator<Item = String>) -> Vec<(Vec<(&'static str, String)>, f64)> {
    let mut m: BTreeMap<String, f64> = BTreeMap::new();
    for v in values {
        *m.entry(v).or_default() += 1.0;
    }
    m.into_iter().map(|(v, n)| (vec![(label, v)], n)).collect()
}

struct Conn {
    stream: TcpStream,
    request: Vec<u8>,
    opened: std::time::Instant,
}

pub struct MetricsServer {
    listener: TcpListener,
    addr: SocketAddr,
    conns: Vec<Option<Conn>>,
}

impl MetricsServer {
    pub fn bind(addr: SocketAddr) -> anyhow::Result<MetricsServer> {
        let listener = TcpListener::bind(addr).with_context(|| format!("binding the metrics endpoint {addr}"))?;
        let addr = listener.local_addr()?;
        Ok(MetricsServer { listener, addr, conns: Vec::new() })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn register(&mut self, registry: &Registry) -> io::Result<()> {
        registry.register(&mut self.listener, LISTENER, Interest::READABLE)
    }

    pub fn owns(token: Token) -> bool {
        token == LISTENER || (CONN_BASE..CONN_BASE + MAX_CONNECTIONS).contains(&token.0)
    }

    /// Handles readiness; calls `body` to render the metrics when a request is complete. `now`:
    /// when the runtime took up the work, the time a connection accepted now was opened.
    pub fn ready(&mut self, registry: &Registry, token: Token, now: std::time::Instant, body: impl Fn() -> String) {
        if token == LISTENER {
            loop {
                match self.listener.accept() {
                    Ok((mut stream, _)) => {
                        let slot = match self.conns.iter().position(Option::is_none) {
                            Some(i) => i,
                            None if self.conns.len() < MAX_CONNECTIONS => {
                                self.conns.push(None);
                                self.conns.len() - 1
                            }
                            None => {
                                // Full: any local user can open connections and sit on them, so
                                // the oldest makes room (a real scrape takes milliseconds).
                                let oldest =
                                    (0..self.conns.len()).min_by_key(|i| self.conns[*i].as_ref().map(|c| c.opened)).unwrap_or(0);
                                if let Some(mut c) = self.conns[oldest].take() {
                                    let _ = registry.deregister(&mut c.stream);
                                }
                                oldest
                            }
                        };
                        if registry.register(&mut stream, Token(CONN_BASE + slot), Interest::READABLE).is_ok() {
                            self.conns[slot] = Some(Conn { stream, request: Vec::new(), opened: now });
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                    Err(e) => {
                        warn!(error = %e, "metrics accept failed");
                        return;
                    }
                }
            }
        }
        let slot = token.0 - CONN_BASE;
        let Some(conn) = self.conns.get_mut(slot).and_then(Option::as_mut) else { return };
        let mut buf = [0u8; 2048];
        let mut done = false;
        loop {
            match conn.stream.read(&mut buf) {
                Ok(0) => {
                    done = true;
                    break;
                }
                Ok(n) => {
                    conn.request.extend_from_slice(&buf[..n]);
                    if conn.request.windows(4).any(|w| w == b"\r\n\r\n") || conn.request.len() > MAX_REQUEST_BYTES {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(_) => {
                    done = true;
                    break;
                }
            }
        }
        if !done {
            let first = String::from_utf8_lossy(conn.request.split(|b| *b == b'\n').next().unwrap_or_default()).into_owned();
            let response = match first.split_whitespace().collect::<Vec<_>>().as_slice() {
                ["GET", "/metrics", ..] | ["GET", "/", ..] => {
                    let text = body();
                    format!(
                        "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\n\r\n{text}",
                        text.len()
                    )
                }
                _ => "HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n".to_string(),
            };
            // The response is small; a short write here just truncates one scrape.
            let _ = conn.stream.write_all(response.as_bytes());
        }
        if let Some(mut c) = self.conns[slot].take() {
            let _ = registry.deregister(&mut c.stream);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_format() {
        let fams = [
            Family::single("ccp_reports_total", "counter", "Reports received.", 42.0),
            Family {
                name: "ccp_flows",
                kind: "gauge",
                help: "Flows by algorithm.",
                samples: by_label("algorithm", ["reno", "cubic", "reno"].iter().map(|s| s.to_string())),
            },
        ];
        let t = render(&fams);
        assert!(t.contains("# TYPE ccp_reports_total counter\nccp_reports_total 42\n"), "{t}");
        assert!(t.contains("ccp_flows{algorithm=\"cubic\"} 1\nccp_flows{algorithm=\"reno\"} 2\n"), "{t}");
    }

    #[test]
    fn label_values_are_escaped() {
        let f = Family { name: "m", kind: "gauge", help: "h", samples: vec![(vec![("k", "a\"b\\c\nd".to_string())], 1.0)] };
        assert!(render(&[f]).contains("m{k=\"a\\\"b\\\\c\\nd\"} 1"));
    }
}
