//! Feeds arbitrary bytes to the control socket's request parsing, split into lines the way
//! `ControlServer::read` (agent/src/control/server.rs) splits what a connection sends: reads of
//! at most 4096 bytes appended to a buffer, cut at each '\n', each line lossily made UTF-8,
//! blank lines skipped, the connection given up once a line passes `MAX_REQUEST_BYTES`. Each
//! line is parsed as a `Request` with serde_json, as the server does. Parsing must never panic,
//! and every accepted request must serialise (as `ccp-agent ctl` sends it: one line) and parse
//! back to itself.
#![no_main]

use ccp_agent::control::protocol::{Request, Response, MAX_REQUEST_BYTES};
use libfuzzer_sys::fuzz_target;

/// The server's read size.
const READ_BYTES: usize = 4096;

fn check_line(text: &str) {
    let parsed = serde_json::from_str::<Request>(text).map_err(|e| format!("bad request: {e}"));
    match parsed {
        Ok(request) => {
            let line = serde_json::to_string(&request).expect("an accepted request serialises");
            assert!(!line.contains('\n'), "{line}");
            let back: Request = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line} does not parse back: {e}"));
            assert_eq!(back, request, "{line}");
        }
        Err(message) => {
            // The answer the server sends for it must serialise as one line.
            let line = serde_json::to_string(&Response::error(message)).expect("an error response serialises");
            assert!(!line.contains('\n'));
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut rbuf: Vec<u8> = Vec::new();
    for chunk in data.chunks(READ_BYTES) {
        rbuf.extend_from_slice(chunk);
        while let Some(nl) = rbuf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = rbuf.drain(..=nl).collect();
            let text = String::from_utf8_lossy(&line[..line.len() - 1]);
            if !text.trim().is_empty() {
                check_line(&text);
            }
        }
        if rbuf.len() > MAX_REQUEST_BYTES {
            return;
        }
    }
});
