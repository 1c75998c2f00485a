//! The `ccp-agent` command line.

mod attach;
mod ctl;
mod receiver;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use tracing::error;

use crate::cnm::CnmListener;
use crate::config::{AgentConfig, Overrides, DEFAULT_CONFIG_PATH};
use crate::control::server::ControlServer;
use crate::datapath::{self, Kind, OpenContext};
use crate::install::InstallPaths;
use crate::metrics::MetricsServer;
use crate::permissions::resolve_group;
use crate::runtime::{Runtime, Services};
use crate::trace::{FlowTrace, ReportRecord};
use attach::Direct;
use ccp_ebpf::attach::args::{AttachArgs, DetachArgs};
use ctl::CtlArgs;

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

    /// Log format: human-readable text, or one JSON object per line (for log collectors).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the agent.
    Run(RunArgs),
    /// Control a running agent through its control socket: status, swap, default, reload,
    /// attach, detach, algorithms.
    Ctl(CtlArgs),
    /// List every algorithm with its parameters, defaults, units and reference.
    Algorithms {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Only this algorithm: a native name, or a Python class `py:path/to/file.py:Class`
        /// (the path relative to the working directory), which the full list does not show.
        name: Option<String>,
    },
    /// Validate a configuration file and report the first error with its line.
    CheckConfig {
        /// The file to check.
        file: PathBuf,
    },
    /// Switch flows to the kernel datapath's congestion control (`run --datapath ebpf` must be
    /// running): existing flows, new flows of cgroups, namespace defaults.
    Attach(Direct<AttachArgs>),
    /// Switch flows back to the congestion control they had (or the configured restore one),
    /// and remove what attach installed. Without selections: everything attach did.
    Detach(Direct<DetachArgs>),
    /// Install the binary, a default configuration and the systemd unit.
    Install(InstallArgs),
    /// The Inigo receiver on a device: relative forward delay of arriving TCP segments, CE on
    /// late ones or a cap on the advertised window (tc programs; enable, disable, status).
    Receiver(receiver::ReceiverArgs),
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

    /// Which datapath to serve: ebpf (this kernel's TCP flows), unix (libccp user-space
    /// datapaths), netlink (ccp-kernel).
    #[arg(long, value_name = "KIND", value_parser = parse_datapath)]
    pub datapath: Option<String>,

    /// Directory for unix-socket IPC (portus convention: /tmp/ccp).
    #[arg(long, value_name = "DIR")]
    pub ipc_dir: Option<PathBuf>,

    /// Name of the agent's unix socket inside --ipc-dir (portus convention: portus).
    #[arg(long, value_name = "NAME")]
    pub ipc_name: Option<String>,

    /// Default report interval, microseconds.
    #[arg(long, value_name = "US")]
    pub report_interval_us: Option<u64>,

    /// The control socket (default: [control] socket, else /run/ccp-agent/control.sock as root,
    /// $XDG_RUNTIME_DIR/ccp-agent/control.sock or /tmp/ccp-agent-UID/control.sock otherwise).
    #[arg(long, value_name = "PATH")]
    pub control_socket: Option<PathBuf>,

    /// Do not open a control socket.
    #[arg(long, conflicts_with = "control_socket")]
    pub no_control: bool,

    /// Serve Prometheus metrics on this loopback address, e.g. 127.0.0.1:9464.
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics: Option<String>,

    /// Write one JSON line per report (datapath measurements, the agent's decision, the
    /// algorithm's state) to FILE.
    #[arg(long, value_name = "FILE")]
    pub trace_flows: Option<PathBuf>,

    /// Record every report given to an algorithm in FILE, one JSON line each:
    /// {"flow": ID, "report": REPORT}, REPORT as ccp_contract::Report serialises (for replaying a
    /// run through any algorithm). Created mode 0600; a symbolic link is refused.
    #[arg(long, value_name = "FILE")]
    pub record_reports: Option<PathBuf>,

    /// Time budget of each call into a Python algorithm (`py:` names), ms: a call past it is
    /// abandoned and counts as the algorithm's fault.
    #[arg(long, value_name = "MS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub python_call_budget_ms: u64,

    /// Where Python algorithm calls run. thread: on the interpreter's own thread; the agent's
    /// loop never waits for a Python report whatever the code does (blocked inside C:
    /// time.sleep, blocking I/O), and a report costs 1.1-1.4x inline's CPU when ten or more
    /// arrive together, up to 2.8x when they come one at a time. inline: on the agent's loop;
    /// a runaway loop is still interrupted at its budget, but Python blocked inside C blocks
    /// the agent with it.
    #[arg(long, value_name = "MODE", value_enum, default_value_t = PythonIsolation::Thread)]
    pub python_isolation: PythonIsolation,

    /// Receive QCN congestion notification messages (CNMs) on this UDP address, e.g.
    /// 0.0.0.0:7470, and deliver each to its flow at once. Needs --cnm-allow-from (or [cnm]
    /// allow_from). Off by default.
    #[arg(long, value_name = "ADDR:PORT")]
    pub cnm_listen: Option<String>,

    /// A congestion point's source address or prefix whose CNMs are believed (repeatable;
    /// replaces [cnm] allow_from). Any local user can send UDP to the port: list only the
    /// congestion points' own addresses (ccp-router: its --router-addr, 10.77.0.254).
    #[arg(long, value_name = "ADDR|PREFIX")]
    pub cnm_allow_from: Vec<String>,

    /// Listen for CNMs inside this network namespace (a name from `ip netns`, or a path): CNMs
    /// go to the sender's address, so they arrive in the sender's namespace.
    #[arg(long, value_name = "NAME|PATH")]
    pub cnm_netns: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct InstallArgs {
    /// Where the binary goes.
    #[arg(long, default_value = "/usr/local/bin")]
    pub bin_dir: PathBuf,
    /// Where the configuration goes (an existing agent.toml is kept).
    #[arg(long, default_value = "/etc/ccp-agent")]
    pub config_dir: PathBuf,
    /// Where the systemd unit goes.
    #[arg(long, default_value = "/etc/systemd/system")]
    pub unit_dir: PathBuf,
    /// Show what would be installed without touching anything.
    #[arg(long)]
    pub dry_run: bool,
}

fn parse_datapath(s: &str) -> Result<String, String> {
    Kind::find(s).map(|k| k.name.to_string())
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

fn init_logging(filter: Option<&str>, format: LogFormat) {
    let filter = filter.map(str::to_string).or_else(|| std::env::var("CCP_LOG").ok()).unwrap_or_else(|| "info".to_string());
    let env = tracing_subscriber::EnvFilter::try_new(&filter).unwrap_or_else(|e| {
        eprintln!("ccp-agent: invalid log filter {filter:?} ({e}); using info");
        tracing_subscriber::EnvFilter::new("info")
    });
    let builder = tracing_subscriber::fmt().with_env_filter(env).with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => {
            // Colour only on a terminal: logs captured to files or by supervisors stay plain text.
            let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
            builder.with_ansi(ansi).init();
        }
    }
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
    init_logging(cli.log_level.as_deref(), cli.log_format);
    enable_file_algorithms();
    let result = match cli.command {
        Command::Run(args) => run(args),
        Command::Ctl(args) => ctl::ctl(args),
        Command::Algorithms { json, name: Some(name) } => crate::catalog::algorithm(&name, json).map(|out| print!("{out}")),
        Command::Algorithms { json, name: None } => {
            if json {
                println!("{}", serde_json::to_string_pretty(&crate::catalog::algorithms_json()).unwrap_or_default());
            } else {
                print!("{}", crate::catalog::algorithms_text());
            }
            Ok(())
        }
        Command::CheckConfig { file } => check_config(&file),
        Command::Attach(args) => attach::attach(args),
        Command::Detach(args) => attach::detach(args),
        Command::Install(args) => install(args),
        Command::Receiver(args) => receiver::receiver(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ccp-agent: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Makes `py:file.py:Class` and `onnx:model.onnx` names resolve wherever an algorithm is named.
/// The agent usually runs as root and loading a class executes its file, so each file must first
/// pass the check a configuration file does (`permissions::check_python_file`); a learned
/// policy's model and manifest too, since they decide every window of the flows they steer.
fn enable_file_algorithms() {
    ccp_python::loader::set_file_check(crate::permissions::check_python_file);
    ccp_python::register();
    ccp_learned::set_file_check(crate::permissions::check_algorithm_file);
    ccp_learned::register();
}

/// The configuration file in use: the one given, else the default path if it exists.
fn config_path(given: Option<&Path>) -> Option<PathBuf> {
    given.map(Path::to_path_buf).or_else(|| Path::new(DEFAULT_CONFIG_PATH).exists().then(|| PathBuf::from(DEFAULT_CONFIG_PATH)))
}

/// `run --python-isolation`: where Python algorithm calls run (`ccp_python::Isolation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PythonIsolation {
    Inline,
    Thread,
}

fn load_config(path: Option<&Path>, overrides: &Overrides) -> anyhow::Result<AgentConfig> {
    Ok(match config_path(path) {
        Some(p) => AgentConfig::load(&p, overrides)?,
        None => AgentConfig::defaults(overrides)?,
    })
}

fn run(args: RunArgs) -> anyhow::Result<()> {
    ccp_python::set_call_budget(std::time::Duration::from_millis(args.python_call_budget_ms));
    ccp_python::set_isolation(match args.python_isolation {
        PythonIsolation::Thread => ccp_python::Isolation::Thread,
        PythonIsolation::Inline => ccp_python::Isolation::Inline,
    });
    // A Python algorithm's path on the command line is relative to the working directory; the
    // configuration's own are relative to its folder (`AgentConfig::load`).
    let algorithm = match args.algorithm {
        Some(a) => Some(
            ccp_algorithms::registry::absolute_name(&a, &std::env::current_dir().unwrap_or_default())
                .map_err(|e| anyhow::anyhow!("--algorithm {a}: {e}"))?,
        ),
        None => None,
    };
    let overrides = Overrides {
        algorithm,
        params: args.params,
        datapath: args.datapath,
        ipc_dir: args.ipc_dir,
        ipc_name: args.ipc_name,
        report_interval_us: args.report_interval_us,
        control_socket: args.control_socket,
        no_control: args.no_control,
        metrics_listen: args.metrics,
        cnm_listen: args.cnm_listen,
        cnm_netns: args.cnm_netns,
        cnm_allow_from: args.cnm_allow_from,
    };
    let path = config_path(args.config.as_deref());
    let cfg = load_config(path.as_deref(), &overrides)?;
    tracing::info!(
        config = %cfg.source,
        default = cfg.policy.default.algorithm(),
        rules = cfg.policy.rules.len(),
        report = ?cfg.limits.default_report,
        "ccp-agent starting"
    );
    // Everything that can fail on bad settings is opened before the datapath registers anything.
    let control = match cfg.control.enabled {
        true => {
            let group = cfg.control.group.as_deref().map(resolve_group).transpose().context("[control] group")?;
            Some(ControlServer::bind(&cfg.control.socket, group)?)
        }
        false => None,
    };
    let metrics = cfg.metrics_listen.map(MetricsServer::bind).transpose()?;
    let trace = args.trace_flows.as_deref().map(FlowTrace::create).transpose()?;
    let record = args.record_reports.as_deref().map(ReportRecord::create).transpose()?;
    let cnm = cfg.cnm.as_ref().map(CnmListener::bind).transpose()?;
    let datapath = datapath::open(&cfg.datapath, &OpenContext { limits: cfg.limits.clone() })
        .with_context(|| format!("{} datapath", cfg.datapath.kind))?;
    let services = Services { control, metrics, trace, record, cnm, reload_from: path.map(|p| (p, overrides)) };
    let mut rt = Runtime::new(&cfg, vec![datapath], services)?;
    rt.run()
}

fn check_config(file: &Path) -> anyhow::Result<()> {
    let cfg = AgentConfig::load(file, &Overrides::default())?;
    let cnm = cfg.cnm.as_ref().map_or_else(String::new, |c| {
        let from: Vec<String> = c.allow_from.iter().map(ToString::to_string).collect();
        format!(", CNMs on {} from {}", c.listen, from.join(" "))
    });
    println!(
        "{}: OK (datapath {}, default algorithm {}, {} rule(s), fallback {}{cnm})",
        file.display(),
        cfg.datapath.kind,
        cfg.policy.default.algorithm(),
        cfg.policy.rules.len(),
        cfg.policy.fallback.algorithm()
    );
    Ok(())
}

fn install(args: InstallArgs) -> anyhow::Result<()> {
    let paths = InstallPaths { bin_dir: args.bin_dir, config_dir: args.config_dir, unit_dir: args.unit_dir };
    let me = std::env::current_exe().context("locating this binary")?;
    let steps = crate::install::install(&me, &paths, args.dry_run)?;
    let prefix = if args.dry_run { "would install" } else { "installed" };
    for s in steps {
        println!("{prefix} {s}");
    }
    if !args.dry_run {
        println!("next: systemctl daemon-reload && systemctl enable --now ccp-agent");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datapath::Selection;
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
    fn run_takes_a_python_call_budget_in_range_and_a_report_record() {
        let run = |extra: &[&str]| {
            let cli = Cli::try_parse_from(["ccp-agent", "run"].iter().chain(extra)).map_err(|e| e.to_string())?;
            let Command::Run(r) = cli.command else { panic!("not run") };
            Ok::<_, String>(r)
        };
        assert_eq!(run(&[]).unwrap().python_call_budget_ms, 10, "the default is ccp_python's");
        assert_eq!(ccp_python::DEFAULT_CALL_BUDGET, std::time::Duration::from_millis(10));
        assert_eq!(run(&["--python-call-budget-ms", "250"]).unwrap().python_call_budget_ms, 250);
        assert_eq!(run(&["--python-call-budget-ms", "10000"]).unwrap().python_call_budget_ms, 10_000);
        for bad in ["0", "10001", "-1", "ten"] {
            let e = run(&[&format!("--python-call-budget-ms={bad}")]).unwrap_err();
            assert!(e.contains("--python-call-budget-ms"), "{bad}: {e}");
        }
        assert_eq!(run(&[]).unwrap().python_isolation, PythonIsolation::Thread);
        assert_eq!(run(&["--python-isolation", "inline"]).unwrap().python_isolation, PythonIsolation::Inline);
        assert!(run(&["--python-isolation", "fork"]).unwrap_err().contains("--python-isolation"));
        let r = run(&["--record-reports", "/tmp/r.jsonl"]).unwrap();
        assert_eq!(r.record_reports, Some(PathBuf::from("/tmp/r.jsonl")));
        let cli = Cli::try_parse_from(["ccp-agent", "algorithms", "--json", "py:x.py:X"]).unwrap();
        assert!(matches!(cli.command, Command::Algorithms { json: true, name: Some(n) } if n == "py:x.py:X"));
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
        let sel = Selection::from(&a.args);
        assert_eq!(sel.ports, vec![5201]);
        assert_eq!(sel.addrs, vec!["10.0.0.0/8".to_string()]);
        assert!(!sel.all);
        assert_eq!(sel.netns, vec![PathBuf::from("/run/netns/snd"), PathBuf::from("/proc/1/ns/net")]);
        assert_eq!(sel.cgroups, vec![PathBuf::from("test")]);
        assert!(sel.set_default);

        let cli = Cli::try_parse_from(["ccp-agent", "detach"]).unwrap();
        let Command::Detach(d) = cli.command else { panic!("not detach") };
        assert_eq!(Selection::from(&d.args), Selection::default(), "no selection: detach everything");
        assert!(Cli::try_parse_from(["ccp-agent", "attach", "--addr", "10.0.0.0/99"]).is_err());
        assert!(Cli::try_parse_from(["ccp-agent", "run", "--datapath", "ebpf"]).is_ok());
        let e = Cli::try_parse_from(["ccp-agent", "run", "--datapath", "dpdk"]).unwrap_err().to_string();
        assert!(e.contains("known: unix, netlink, ebpf"), "{e}");
    }

    #[test]
    fn ctl_arguments_parse() {
        let cli =
            Cli::try_parse_from(["ccp-agent", "ctl", "--socket", "/tmp/x.sock", "swap", "--all", "cubic", "-p", "beta=0.8"])
                .unwrap();
        assert!(matches!(cli.command, Command::Ctl(_)));
        // Exactly one target.
        assert!(Cli::try_parse_from(["ccp-agent", "ctl", "swap", "cubic"]).is_err());
        assert!(Cli::try_parse_from(["ccp-agent", "ctl", "swap", "--all", "--flow", "3", "cubic"]).is_err());
        assert!(Cli::try_parse_from([
            "ccp-agent",
            "ctl",
            "swap",
            "--match",
            "dst_port=5201",
            "--match",
            "algorithm=reno",
            "dctcp"
        ])
        .is_ok());
        assert!(Cli::try_parse_from(["ccp-agent", "ctl", "attach", "--port", "80"]).is_ok());
        assert!(Cli::try_parse_from(["ccp-agent", "run", "--no-control", "--control-socket", "/x"]).is_err());
        let cli = Cli::try_parse_from([
            "ccp-agent",
            "run",
            "--cnm-listen",
            "0.0.0.0:7470",
            "--cnm-allow-from",
            "10.77.0.254",
            "--cnm-allow-from",
            "10.1.0.0/16",
            "--cnm-netns",
            "lab-snd",
        ])
        .unwrap();
        let Command::Run(r) = cli.command else { panic!("not run") };
        assert_eq!(r.cnm_listen.as_deref(), Some("0.0.0.0:7470"));
        assert_eq!(r.cnm_allow_from, vec!["10.77.0.254".to_string(), "10.1.0.0/16".to_string()]);
        assert_eq!(r.cnm_netns.as_deref(), Some("lab-snd"));
    }
}
