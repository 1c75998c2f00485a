//! The `ccp-agent` command line.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use ccp_algorithms::{registry, ParamKind};
use ccp_ebpf::attach::{Attach, Attacher, Detach, Filter, Namespaces, Net, Outcome};
use clap::{Parser, Subcommand};
use tracing::error;

use crate::config::{AgentConfig, DatapathKind, Overrides, DEFAULT_CONFIG_PATH};
use crate::datapath::ebpf::{self, EbpfDatapath};
use crate::datapath::libccp::netlink::NetlinkTransport;
use crate::datapath::libccp::unix::UnixTransport;
use crate::datapath::libccp::LibccpDatapath;
use crate::datapath::Datapath;
use crate::runtime::Runtime;

/// ccp-agent: congestion control off the datapath.
///
/// Algorithms run in this agent; datapaths (this kernel's BPF congestion control, libccp
/// user-space datapaths, ccp-kernel) report measurements and apply the windows and rates the
/// agent sends back.
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
    /// Switch flows to the kernel datapath's congestion control (`run --datapath ebpf` must be
    /// running): existing flows, new flows of cgroups, namespace defaults.
    Attach(AttachArgs),
    /// Switch flows back to the congestion control they had (or the configured restore one),
    /// and remove what attach installed. Without selections: everything attach did.
    Detach(DetachArgs),
}

/// Which flows and namespaces an attach or detach covers.
#[derive(Debug, clap::Args)]
pub struct SelectArgs {
    /// Flows with either end on this port (repeatable; with --addr, both must match).
    #[arg(long = "port", value_name = "PORT")]
    pub ports: Vec<u16>,

    /// Flows with either end in this address or prefix, e.g. 10.0.0.0/8 (repeatable).
    #[arg(long = "addr", value_name = "ADDR[/LEN]", value_parser = parse_net)]
    pub addrs: Vec<Net>,

    /// Every flow.
    #[arg(long)]
    pub all: bool,

    /// A network namespace to work in: a name from `ip netns`, or a path such as
    /// /proc/PID/ns/net (repeatable). Default: this process's namespace.
    #[arg(long = "netns", value_name = "NAME|PATH", value_parser = parse_netns)]
    pub netns: Vec<PathBuf>,

    /// Every network namespace that can be named.
    #[arg(long)]
    pub all_netns: bool,

    /// Configuration file (for its [datapath.ebpf] section).
    #[arg(long, short = 'c', value_name = "FILE")]
    pub config: Option<PathBuf>,
}

impl SelectArgs {
    fn filter(&self) -> Option<Filter> {
        let f = Filter { all: self.all, ports: self.ports.clone(), nets: self.addrs.clone() };
        f.selects_something().then_some(f)
    }

    fn namespaces(&self) -> Namespaces {
        Namespaces { paths: self.netns.clone(), all: self.all_netns }
    }
}

#[derive(Debug, clap::Args)]
pub struct AttachArgs {
    #[command(flatten)]
    pub select: SelectArgs,

    /// A cgroup v2 directory (absolute, or relative to the cgroup2 mount) whose new flows get
    /// the congestion control when they are established (repeatable).
    #[arg(long = "cgroup", value_name = "DIR")]
    pub cgroups: Vec<PathBuf>,

    /// Also make the congestion control the default of the namespaces.
    #[arg(long = "default")]
    pub set_default: bool,
}

#[derive(Debug, clap::Args)]
pub struct DetachArgs {
    #[command(flatten)]
    pub select: SelectArgs,

    /// Remove the sockops program from this cgroup only (repeatable).
    #[arg(long = "cgroup", value_name = "DIR")]
    pub cgroups: Vec<PathBuf>,
}

fn parse_net(s: &str) -> Result<Net, String> {
    s.parse()
}

/// A bare name is one of `ip netns`'s.
fn parse_netns(s: &str) -> Result<PathBuf, String> {
    if s.is_empty() {
        return Err("empty namespace".into());
    }
    Ok(if s.contains('/') { PathBuf::from(s) } else { Path::new("/run/netns").join(s) })
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
        Command::Attach(args) => attach(args),
        Command::Detach(args) => detach(args),
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
        DatapathKind::Ebpf => Box::new(
            EbpfDatapath::open(&cfg.datapath.ebpf, cfg.limits.default_report_interval_us, cfg.flow_idle_timeout)
                .context("ebpf datapath")?,
        ),
    };
    let mut rt = Runtime::new(&cfg, vec![datapath])?;
    rt.run()
}

/// Prints what an attach or detach did; fails when a flow could not be switched.
fn report_outcome(verb: &str, out: &Outcome) -> anyhow::Result<()> {
    for sw in &out.switched {
        let end = |e: &Option<ccp_ebpf::Endpoint>| e.map_or_else(|| "?".to_string(), |e| format!("{}:{}", e.addr, e.port));
        let status = sw.errno.map_or_else(|| "ok".to_string(), |e| std::io::Error::from_raw_os_error(e).to_string());
        println!("{} {} -> {} [{}] {} -> {}: {status}", sw.netns, end(&sw.local), end(&sw.remote), sw.cookie, sw.from, sw.to);
    }
    for c in &out.cgroups {
        println!("cgroup {}: sockops {verb}ed", c.display());
    }
    for d in &out.defaults {
        println!("default {d}");
    }
    for w in &out.warnings {
        eprintln!("warning: {w}");
    }
    let failed = out.failures().count();
    println!("{verb}: {} flow(s) switched, {failed} failed", out.switched.len() - failed);
    if failed > 0 {
        anyhow::bail!("{failed} flow(s) could not be switched");
    }
    Ok(())
}

fn attacher(config: Option<&Path>) -> anyhow::Result<Attacher> {
    let cfg = load_config(config, &Overrides::default())?;
    Ok(Attacher::from_pins(ebpf::attach_settings(&cfg.datapath.ebpf)))
}

fn attach(args: AttachArgs) -> anyhow::Result<()> {
    let existing = args.select.filter();
    let a = Attach {
        new_flows: existing.clone().unwrap_or_else(Filter::all),
        existing,
        namespaces: args.select.namespaces(),
        cgroups: args.cgroups,
        set_default: args.set_default,
    };
    report_outcome("attach", &attacher(args.select.config.as_deref())?.attach(&a)?)
}

fn detach(args: DetachArgs) -> anyhow::Result<()> {
    let d = Detach { filter: args.select.filter(), namespaces: args.select.namespaces(), cgroups: args.cgroups };
    report_outcome("detach", &attacher(args.select.config.as_deref())?.detach(&d)?)
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

    #[test]
    fn attach_and_detach_arguments_parse() {
        let cli = Cli::try_parse_from([
            "ccp-agent",
            "attach",
            "--port",
            "5201",
            "--addr",
            "10.0.0.0/8",
            "--netns",
            "snd",
            "--netns",
            "/proc/1/ns/net",
            "--cgroup",
            "test",
            "--default",
        ])
        .unwrap();
        let Command::Attach(a) = cli.command else { panic!("not attach") };
        let f = a.select.filter().unwrap();
        assert_eq!(f.ports, vec![5201]);
        assert_eq!(f.nets, vec!["10.0.0.0/8".parse().unwrap()]);
        assert!(!f.all);
        assert_eq!(a.select.netns, vec![PathBuf::from("/run/netns/snd"), PathBuf::from("/proc/1/ns/net")]);
        assert_eq!(a.cgroups, vec![PathBuf::from("test")]);
        assert!(a.set_default);

        let cli = Cli::try_parse_from(["ccp-agent", "detach"]).unwrap();
        let Command::Detach(d) = cli.command else { panic!("not detach") };
        assert!(d.select.filter().is_none(), "no selection: detach everything");
        assert!(Cli::try_parse_from(["ccp-agent", "attach", "--addr", "10.0.0.0/99"]).is_err());
        assert!(Cli::try_parse_from(["ccp-agent", "run", "--datapath", "ebpf"]).is_ok());
    }
}
