//! The control socket's protocol: one JSON object per line each way.
//!
//! A request names a command in `cmd`; the agent answers with `{"ok": true, "result": …}` or
//! `{"ok": false, "error": "…"}`. Line-delimited JSON keeps the protocol scriptable with
//! `socat`/`nc -U` as well as `ccp-agent ctl`, and versionable by adding fields.

use serde::{Deserialize, Serialize};

use crate::datapath::Selection;

/// Which flows a swap applies to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Target {
    /// One flow, by the id `status` shows.
    Flow(u64),
    /// Every flow.
    All,
    /// Flows matching a rule's conditions (the `[[rules]]` match keys).
    Match(MatchSpec),
}

/// The conditions of a `[[rules]]` match table, as the control socket carries them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatchSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src_port: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst_port: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src_addr: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst_addr: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addr: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cong_alg: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub algorithm: Option<String>,
}

/// The most flow rows one status request returns. Rows are built in the agent's loop: 10,000
/// took ~0.2 s of it in a release build and over a second in a debug one, past the eBPF
/// datapath's 1 s silence timeout; 2,000 take a fifth of that (`ctl status --offset` pages).
pub const MAX_STATUS_ROWS: usize = 2_000;

/// A command to the agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// Datapaths, policy, counters and every flow with its live state (with `summary`, the flow
    /// count instead of the flows: cheap with 100,000 of them). (Struct variants, not unit ones,
    /// so that unknown fields are refused here too.)
    Status {
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        summary: bool,
        /// Rows from this flow on (flows in a stable order), at most `limit` (default and most:
        /// `MAX_STATUS_ROWS`, so one request never holds the agent's loop for long).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        offset: Option<usize>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit: Option<usize>,
    },
    /// The registry: every algorithm with its parameters.
    Algorithms {},
    /// Replace the algorithm of running flows, seeded from each flow's state.
    Swap {
        target: Target,
        algorithm: String,
        #[serde(default)]
        params: toml::Table,
    },
    /// Change the algorithm new flows get when no rule matches.
    Default {
        algorithm: String,
        #[serde(default)]
        params: toml::Table,
    },
    /// Re-read the configuration file; new flows follow it, and existing flows too on request.
    Reload {
        #[serde(default)]
        apply_existing: bool,
    },
    /// Switch existing kernel flows to the agent (datapaths whose flows live in this kernel).
    Attach {
        #[serde(default)]
        spec: Selection,
    },
    /// Hand kernel flows back to the kernel's own congestion control.
    Detach {
        #[serde(default)]
        spec: Selection,
    },
}

/// The agent's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response {
    pub ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub result: serde_json::Value,
}

impl Response {
    pub fn ok(result: serde_json::Value) -> Response {
        Response { ok: true, error: None, result }
    }

    pub fn error(message: impl Into<String>) -> Response {
        Response { ok: false, error: Some(message.into()), result: serde_json::Value::Null }
    }
}

/// The longest request line the agent accepts, bytes.
pub const MAX_REQUEST_BYTES: usize = 64 * 1024;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_as_json_lines() {
        let cases = [
            Request::Status { summary: false, offset: None, limit: None },
            Request::Status { summary: true, offset: None, limit: None },
            Request::Status { summary: false, offset: Some(10_000), limit: Some(500) },
            Request::Algorithms {},
            Request::Swap { target: Target::Flow(7), algorithm: "cubic".into(), params: "beta = 0.8".parse().unwrap() },
            Request::Swap { target: Target::All, algorithm: "reno".into(), params: toml::Table::new() },
            Request::Swap {
                target: Target::Match(MatchSpec { dst_port: Some(5201), algorithm: Some("reno".into()), ..MatchSpec::default() }),
                algorithm: "dctcp".into(),
                params: toml::Table::new(),
            },
            Request::Default { algorithm: "cubic".into(), params: toml::Table::new() },
            Request::Reload { apply_existing: true },
            Request::Attach { spec: Selection { ports: vec![5201], ..Selection::default() } },
            Request::Detach { spec: Selection::default() },
        ];
        for r in cases {
            let line = serde_json::to_string(&r).unwrap();
            assert!(!line.contains('\n'));
            assert_eq!(serde_json::from_str::<Request>(&line).unwrap(), r, "{line}");
        }
    }

    #[test]
    fn hand_written_requests_parse() {
        let r: Request =
            serde_json::from_str(r#"{"cmd":"swap","target":{"flow":3},"algorithm":"dctcp","params":{"g":0.125}}"#).unwrap();
        assert_eq!(r, Request::Swap { target: Target::Flow(3), algorithm: "dctcp".into(), params: "g = 0.125".parse().unwrap() });
        let r: Request = serde_json::from_str(r#"{"cmd":"swap","target":"all","algorithm":"reno"}"#).unwrap();
        assert!(matches!(r, Request::Swap { target: Target::All, .. }));
    }

    /// Found by agent/fuzz (control): serde_json's default float parser is one ULP off for some
    /// numbers, so a parameter drifted on every trip through the socket.
    #[test]
    fn float_params_round_trip_exactly() {
        let line = r#"{"cmd":"default","algorithm":"bbr","params":{"seed":3.3100000000000003e156}}"#;
        let r: Request = serde_json::from_str(line).unwrap();
        let Request::Default { params, .. } = &r else { panic!("{r:?}") };
        assert_eq!(params["seed"], toml::Value::Float("3.3100000000000003e156".parse().unwrap()));
        let again = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<Request>(&again).unwrap(), r, "{again}");
    }

    #[test]
    fn unknown_commands_and_fields_are_errors() {
        assert!(serde_json::from_str::<Request>(r#"{"cmd":"reboot"}"#).is_err());
        assert!(serde_json::from_str::<Request>(r#"{"cmd":"status","verbose":true}"#).is_err());
        assert!(serde_json::from_str::<Request>(r#"{"cmd":"swap","target":{"flow":1},"algorithm":"reno","params":{"x":null}}"#)
            .is_err());
        assert!(serde_json::from_str::<Request>(r#"{"cmd":"attach","spec":{"prots":[1]}}"#).is_err());
    }
}
