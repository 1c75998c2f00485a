//! A user-space TCP sender as a pure state machine (no I/O, no clock, no
//! threads, no randomness): `wire` frames, `conn` is one sending connection,
//! `fallback` is the in-process congestion control used while no agent steers
//! the flow, `source` is the synthetic byte stream and its checksum.
//!
//! No floating-point logarithms or powers anywhere: the binary that links this
//! also links libccp, whose exported C symbol `log` shadows libm's.
//!
//! ```
//! use ccp_user_tcp::{wire, Config, Conn, Endpoints, Fallback, Inbound, State, TcpFlags, TcpIn};
//! use ccp_user_tcp::source::fill_pattern;
//! use std::net::Ipv4Addr;
//!
//! let ep = Endpoints {
//!     src_mac: [2, 0, 0, 0, 0, 1], dst_mac: [2, 0, 0, 0, 0, 2],
//!     src_ip: Ipv4Addr::new(10, 0, 0, 1), dst_ip: Ipv4Addr::new(10, 0, 0, 2),
//!     src_port: 40000, dst_port: 5001,
//! };
//! let mut conn = Conn::new(&Config::default(), 0x1234, Some(100_000), 0);
//! let mut cc = Fallback::new_cubic(1448, 10 * 1448);
//! let mut frames = Vec::new();
//! let mut emit = |seg: &ccp_user_tcp::SegOut| {
//!     let mut buf = [0u8; 1600];
//!     let n = wire::build_tcp(&mut buf, &ep, seg, |p| fill_pattern(seg.stream_offset, p)).unwrap();
//!     frames.push(buf[..n].to_vec());
//!     true // false = no room now; the segment is offered again next time
//! };
//! assert_eq!(conn.poll_transmit(0, &mut emit), 1); // the SYN
//!
//! // The peer's SYN-ACK, as the NIC would hand it over.
//! let synack = TcpIn {
//!     seq: 999, ack: 0x1235, window: 65535, mss: Some(1460), wscale: Some(7),
//!     sack_permitted: true,
//!     flags: TcpFlags { syn: true, ack: true, ..TcpFlags::default() },
//!     ..TcpIn::default()
//! };
//! assert!(conn.on_segment(&synack, 10_000).is_none());
//! assert_eq!(conn.state(), State::Established);
//! cc.resume(conn.cwnd_bytes());
//!
//! // Ten segments (the initial window) leave; each ACK's sample drives the window.
//! assert_eq!(conn.poll_transmit(10_000, &mut emit), 10);
//! let Ok(Inbound::Tcp(first)) = wire::parse(&frames[1]) else { panic!() };
//! let ack = TcpIn { seq: 1000, ack: first.seq.wrapping_add(1448), window: 1000,
//!                   flags: TcpFlags { ack: true, ..TcpFlags::default() }, ..TcpIn::default() };
//! let sample = conn.on_segment(&ack, 20_000).expect("new data acknowledged");
//! assert_eq!((sample.bytes_acked, sample.rtt_sample_us), (1448, Some(10_000)));
//! conn.set_cwnd_bytes(cc.on_sample(&sample, u32::from(conn.mss())));
//! ```

pub mod conn;
pub mod fallback;
pub mod source;
pub mod wire;

pub use conn::{AckSample, Config, Conn, ConnStats, FailReason, SegOut, State};
pub use fallback::{Cubic, Fallback, Reno};
pub use wire::{ArpIn, Endpoints, Inbound, TcpFlags, TcpIn, WireError};

#[cfg(test)]
mod sim;
