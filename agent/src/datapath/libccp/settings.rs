//! `[datapath.unix]` and `[datapath.netlink]`: the libccp datapaths' own settings.

use std::path::PathBuf;

use anyhow::Context;
use serde::Deserialize;

use super::netlink::{NetlinkTransport, CCP_MULTICAST_GROUP};
use super::unix::UnixTransport;
use super::{AddressOrder, LibccpDatapath};
use crate::datapath::{parse_section, Kind};
use crate::permissions::resolve_group;

/// libccp user-space datapaths over unix datagram sockets.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct UnixSettings {
    /// The socket directory: created 0700 (01770 and `group` when set); an existing one owned
    /// by another user, or writable by others, is refused. The agent replies only to sockets
    /// directly inside it.
    pub dir: PathBuf,
    pub name: String,
    /// A group whose members' datapaths may talk to the agent (socket mode 0660, directory
    /// 01770); without it the socket is 0600: only the agent's own user (and root) can send to it.
    pub group: Option<String>,
    /// Byte order of addresses and ports in CREATE: user-space datapaths built on the libccp
    /// crate send plain numbers.
    pub address_order: AddressOrder,
}

impl Default for UnixSettings {
    fn default() -> Self {
        UnixSettings {
            dir: PathBuf::from("/tmp/ccp"),
            name: "portus".to_string(),
            group: None,
            address_order: AddressOrder::Host,
        }
    }
}

/// ccp-kernel over netlink.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct NetlinkSettings {
    /// The multicast group ccp-kernel sends to.
    pub group: u32,
    /// Byte order of addresses and ports in CREATE: ccp-kernel copies the kernel's big-endian
    /// values.
    pub address_order: AddressOrder,
    /// Accept messages from user-space netlink sockets as well as from the kernel. Off by
    /// default: NETLINK_USERSOCK lets any local user send to the agent, so with this on any
    /// user can create flows in the agent. Only for a user-space stand-in for ccp-kernel
    /// (tests) on a host without untrusted users.
    pub allow_user_peers: bool,
}

impl Default for NetlinkSettings {
    fn default() -> Self {
        NetlinkSettings { group: CCP_MULTICAST_GROUP, address_order: AddressOrder::Network, allow_user_peers: false }
    }
}

pub const UNIX: Kind = Kind {
    name: "unix",
    summary: "libccp user-space datapaths over unix datagram sockets (portus's /tmp/ccp/<name> convention)",
    reports_per_rtt: true,
    check: |section| parse_section::<UnixSettings>(section).map(|_| ()),
    open: |section, _| {
        let s: UnixSettings = parse_section(section).map_err(|e| anyhow::anyhow!("[datapath.unix]: {e}"))?;
        let group = s.group.as_deref().map(resolve_group).transpose().context("[datapath.unix] group")?;
        let t = UnixTransport::bind(&s.dir, &s.name, group)?;
        Ok(Box::new(LibccpDatapath::new(t, s.address_order)?))
    },
};

pub const NETLINK: Kind = Kind {
    name: "netlink",
    summary: "ccp-kernel over netlink (NETLINK_USERSOCK, multicast group 22; root)",
    reports_per_rtt: true,
    check: |section| parse_section::<NetlinkSettings>(section).map(|_| ()),
    open: |section, _| {
        let s: NetlinkSettings = parse_section(section).map_err(|e| anyhow::anyhow!("[datapath.netlink]: {e}"))?;
        let t = NetlinkTransport::bind(s.group, s.allow_user_peers).context("netlink datapath")?;
        Ok(Box::new(LibccpDatapath::new(t, s.address_order)?))
    },
};
