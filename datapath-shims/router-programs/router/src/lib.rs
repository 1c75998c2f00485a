//! `ccp-router`: a user-space router and mahimahi-style link emulator between two network
//! namespaces joined through TUN devices, hosting the router-side datapath programs of
//! `ccp-qdisc` (drop-tail, ABC, DCTCP marking, HULL phantom queue, QCN congestion point, CoDel).
//!
//! * [`topology`]: namespaces `PFX-snd`/`PFX-rcv`, TUN devices, addresses, cleanup, with
//!   [`route`] for the route features `ip` cannot set (microsecond TCP timestamps);
//! * [`router`]: the event loop (qdisc → [`link`] → [`delay`] per direction), with per-flow-class
//!   delays ([`classes`]) after the shared queue and HULL's [`pacer`] on the sender's side;
//! * [`emulator`]: both together as one handle for tests and experiment runners;
//! * [`trace`]: mahimahi trace files; [`feedback`]: QCN notifications on the wire;
//! * [`log`] and [`summary`]: the per-packet CSV and the exit summary, with delays as
//!   [`percentiles`] (shared with `ccp-lab`'s metrics);
//! * [`cli`]: the `ccp-router` command line, turned into a topology and a router configuration
//!   by [`args_to_config`]; [`demo`]: the newcomer demo (a kernel bulk flow through the emulator,
//!   printed each second and plotted).

pub mod args_to_config;
pub mod classes;
pub mod cli;
pub mod clock;
pub mod config;
pub mod delay;
pub mod demo;
pub mod emulator;
pub mod error;
pub mod feedback;
pub mod link;
pub mod log;
pub mod netns;
pub mod pacer;
pub mod packet;
pub mod percentiles;
pub mod plot;
pub mod route;
pub mod router;
pub mod summary;
pub mod tcp;
pub mod topology;
pub mod trace;
pub mod tun;

pub use classes::ClassDelay;
pub use config::{DirectionConfig, FeedbackConfig, PacerConfig, PhantomDrain, QdiscKind, RouterConfig};
pub use emulator::Emulator;
pub use error::{Error, Result};
pub use link::LinkShape;
pub use router::Router;
pub use summary::Summary;
pub use topology::{cleanup_prefix, Side, Topology, TopologyConfig};
pub use trace::Trace;
