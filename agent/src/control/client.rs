//! The client side of the control socket, for `ccp-agent ctl`.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context};

use super::protocol::{Request, Response};

/// How long the agent may take to answer.
const REPLY_TIMEOUT: Duration = Duration::from_secs(30);

/// Sends one request and waits for its response.
pub fn call(socket: &Path, request: &Request) -> anyhow::Result<Response> {
    let stream = match UnixStream::connect(socket) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!("no control socket at {} — is ccp-agent running (with [control] enabled)?", socket.display())
        }
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            bail!("permission denied on {}: only root, the agent's user or its control group may control it", socket.display())
        }
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            bail!("nothing is listening on {} (a stale socket from an agent that exited?)", socket.display())
        }
        Err(e) => return Err(e).with_context(|| format!("connecting to {}", socket.display())),
    };
    stream.set_read_timeout(Some(REPLY_TIMEOUT))?;
    let mut line = serde_json::to_vec(request)?;
    line.push(b'\n');
    // An agent that refuses a peer answers at once and hangs up, possibly before the request is
    // written: a failed write still leaves its answer to read.
    let sent = (&stream).write_all(&line);
    let mut reply = String::new();
    let read = BufReader::new(&stream).read_line(&mut reply);
    if let Ok(response) = serde_json::from_str::<Response>(&reply) {
        return Ok(response);
    }
    sent.context("sending the request")?;
    read.context("reading the agent's reply")?;
    if reply.trim().is_empty() {
        bail!("the agent closed the connection without answering");
    }
    bail!("unreadable reply {reply:?}")
}
