//! The `ccp-agent` command line.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use ccp_algorithms::{registry, ParamKind};
use clap::{Parser, Subcommand};
use tracing::error;

use crate::config::{AgentConfig, DatapathKind, Overrides, DEFAULT_CONFIG_PATH};
use crate::datapath::libccp::netlink::NetlinkTransport;
use crate::datapath::libccp::unix::UnixTransport;
use crate::datapath::libccp::LibccpDatapath;
use crate::datapath::Datapath;
use crate::runtime::Runtime;

/// ccp-agent: congestion control off the datapath.
///
/// Algorithms run in this agent; datapaths (libccp user-space datapaths, ccp-kernel) report
/// measurements and apply the windows and rates the agent sends back.
#[derive(Debug, Parser)]
#[command(name = "ccp-agent", version, about, long_about = None)]
pub struct Cli {
    /// Log filter (error, warn, info, debug, trace, or a tracing directive such as
    /// "ccp_agent=debug"). Overrides the CCP_LOG environment variable.
    #[arg(long, global = true, value_name = "FILTER")]
    pub log_level: Option<String>,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the agent.
    Run(RunArgs),
    /// List every algorithm with its parameters, defaults, units and reference.
    Algorithms {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Validate a configuration file and report the first error with its line.
    CheckConfig {
        /// The file to check.
        file: PathBuf,
    },
}

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Default algorithm for new flows (overrides the config's [default] algorithm).
    #[arg(long, short = 'a', value_name = "NAME")]
    pub algorithm: Option<String>,

    /// A parameter for the default algorithm, as NAME=VALUE (VALUE in TOML syntax; repeatable).
    #[arg(long = "param", short = 'p', value_name = "NAME=VALUE", value_parser = parse_param)]
    pub params: Vec<(String, toml::Value)>,

    /// Configuration file (TOML). Default: /etc/ccp-agent/agent.toml if it exists, else built-in defaults.
    #[arg(long, short = 'c', value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Which datapath IPC to serve.
    #[arg(long, value_enum)]
    pub datapath: Option<DatapathKind>,

    /// Directory for unix-socket IPC (portus convention: /tmp/ccp).
    #[arg(long, value_name = "DIR")]
    pub ipc_dir: Option<PathBuf>,

    /// Name of the agent's unix socket inside --ipc-dir (portus convention: portus).
    #[arg(long, value_name = "NAME")]
    pub ipc_name: Option<String>,

    /// Default report interval, microseconds.
    #[arg(long, value_name = "US")]
    pub report_interval_us: Option<u64>,
}

fn parse_param(s: &str) -> Result<(String, toml::Value), String> {
    let (k, v) = s.split_once('=').ok_or_else(|| format!("{s:?} is not NAME=VALUE"))?;
    let k = k.trim();
    if k.is_empty() {
        return Err(format!("{s:?} has an empty name"));
    }
    let value = match format!("v = {v}").parse::<toml::Table>() {
        Ok(mut t) => t.remove("v").unwrap_or_else(|| toml::Value::String(v.to_string())),
        // Bare words are strings: `--param mode=delay`.
        Err(_) => toml::Value::String(v.to_string()),
    };
    Ok((k.to_string(), value))
}

fn init_logging(filter: Option<&str>) {
    let filter = filter.map(str::to_string).or_else(|| std::env::var("CCP_LOG").ok()).unwrap_or_else(|| "info".to_string());
    let env = tracing_subscriber::EnvFilter::try_new(&filter).unwrap_or_else(|e| {
        eprintln!("ccp-agent: invalid log filter {filter:?} ({e}); using info");
        tracing_subscriber::EnvFilter::new("info")
    });
    // Colour only on a terminal: logs captured to files or by supervisors stay plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt().with_env_filter(env).with_writer(std::io::stderr).with_ansi(ansi).init();
    // Algorithm panics are contained by the controller; route the message through the log.
    std::panic::set_hook(Box::new(|info| {
        let at = info.location().map(|l| format!("{}:{}", l.file(), l.line())).unwrap_or_default();
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        error!(at = %at, "panic: {msg}");
    }));
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.log_level.as_deref());
    let result = match cli.command {
        Command::Run(args) => run(args),
        Command::Algorithms { json } => {
            print_algorithms(json);
            Ok(())
        }
        Command::CheckConfig { file } => check_config(&file),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ccp-agent: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn load_config(path: Option<&Path>, overrides: &Overrides) -> anyhow::Result<AgentConfig> {
    let cfg = match path {
        Some(p) => AgentConfig::load(p, overrides)?,
        None if Path::new(DEFAULT_CONFIG_PATH).exists() => AgentConfig::load(Path::new(DEFAULT_CONFIG_PATH), overrides)?,
        None => AgentConfig::defaults(overrides)?,
    };
    Ok(cfg)
}

fn run(args: RunArgs) -> anyhow::Result<()> {
    let overrides = Overrides {
        algorithm: args.algorithm,
        params: args.params,
        datapath: args.datapath,
        ipc_dir: args.ipc_dir,
        ipc_name: args.ipc_name,
        report_interval_us: args.report_interval_us,
    };
    let cfg = load_config(args.config.as_deref(), &overrides)?;
    tracing::info!(
        config = %cfg.source,
        default = cfg.policy.default.algorithm(),
        rules = cfg.policy.rules.len(),
        report_interval_us = cfg.limits.default_report_interval_us,
        "ccp-agent starting"
    );
    let datapath: Box<dyn Datapath> = match cfg.datapath.kind {
        DatapathKind::Unix => {
            let t = UnixTransport::bind(&cfg.datapath.unix.dir, &cfg.datapath.unix.name)?;
            Box::new(LibccpDatapath::new(t, cfg.datapath.address_order())?)
        }
        DatapathKind::Netlink => {
            let t = NetlinkTransport::bind(cfg.datapath.netlink.group).context("netlink datapath")?;
            Box::new(LibccpDatapath::new(t, cfg.datapath.address_order())?)
        }
    };
    let mut rt = Runtime::new(&cfg, vec![datapath])?;
    rt.run()
}

fn check_config(file: &Path) -> anyhow::Result<()> {
    let cfg = AgentConfig::load(file, &Overrides::default())?;
    println!(
        "{}: OK (datapath {:?}, default algorithm {}, {} rule(s), fallback {})",
        file.display(),
        cfg.datapath.kind,
        cfg.policy.default.algorithm(),
        cfg.policy.rules.len(),
        cfg.policy.fallback.algorithm()
    );
    Ok(())
}

fn print_algorithms(json: bool) {
    if json {
        let list: Vec<_> = registry::all()
            .iter()
            .map(|a| {
                let params: Vec<_> = a
                    .params
                    .iter()
                    .map(|p| {
                        serde_json::json!({
                            "name": p.name,
                            "default": p.default_value().to_string(),
                            "range": p.range_text(),
                            "unit": p.unit,
                            "doc": p.doc,
                        })
                    })
                    .collect();
                serde_json::json!({ "name": a.name, "summary": a.summary, "reference": a.reference, "params": params })
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&list).unwrap_or_default());
        return;
    }
    for a in registry::all() {
        println!("{} — {}", a.name, a.summary);
        println!("  reference: {}", a.reference);
        if a.params.is_empty() {
            println!("  (no parameters)");
        }
        for p in a.params {
            let unit = if p.unit.is_empty() { String::new() } else { format!(" {}", p.unit) };
            let default = match p.kind {
                ParamKind::Choice { default, .. } => format!("{default:?}"),
                _ => p.default_value().to_string(),
            };
            println!("  {:<22} default {}{}  ({})", p.name, default, unit, p.range_text());
            println!("  {:<22} {}", "", p.doc);
        }
        println!();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn params_parse_as_toml_values() {
        assert_eq!(parse_param("g=0.5").unwrap(), ("g".into(), toml::Value::Float(0.5)));
        assert_eq!(parse_param("n=3").unwrap(), ("n".into(), toml::Value::Integer(3)));
        assert_eq!(parse_param("on=true").unwrap(), ("on".into(), toml::Value::Boolean(true)));
        assert_eq!(parse_param("mode=delay").unwrap(), ("mode".into(), toml::Value::String("delay".into())));
        assert_eq!(parse_param("mode=\"delay\"").unwrap(), ("mode".into(), toml::Value::String("delay".into())));
        assert!(parse_param("novalue").is_err());
        assert!(parse_param("=1").is_err());
    }
}
