#!/usr/bin/env bash
# Network namespaces and a veth pair for the DPDK datapath (ccp-dpdk) on this host, no NIC needed.
#
#   scripts/dpdk-veth.sh up [PREFIX]             PREFIX-dp holds veth PREFIX-a, which DPDK drives
#                                               (net_af_xdp or net_af_packet); PREFIX-rx holds
#                                               PREFIX-b = 10.99.0.2/24 for a kernel receiver.
#   scripts/dpdk-veth.sh router SENDER_NS [PREFIX]
#                                               PREFIX-dp's veth to a ccp-router's sender
#                                               namespace instead: PREFIX-b = 10.98.0.1/24 there,
#                                               forwarding on, so the sender reaches the router's
#                                               receiver (10.77.0.2) through the emulated link.
#   scripts/dpdk-veth.sh down [PREFIX]           deletes what `up`/`router` made.
#
# DPDK's AF_XDP and AF_PACKET drivers need checksum and segmentation offloads off on both veth
# ends (a veth otherwise hands out frames with unfinished checksums), which this does.
set -euo pipefail

cmd=${1:-}
case "$cmd" in
up)
    pfx=${2:-ccpd}
    ip netns add "$pfx-dp"
    ip netns add "$pfx-rx"
    ip link add "$pfx-a" netns "$pfx-dp" type veth peer name "$pfx-b" netns "$pfx-rx"
    ip -n "$pfx-rx" addr add 10.99.0.2/24 dev "$pfx-b"
    ;;
router)
    sender_ns=${2:?usage: $0 router SENDER_NS [PREFIX]}
    pfx=${3:-ccpd}
    ip netns add "$pfx-dp"
    ip link add "$pfx-a" netns "$pfx-dp" type veth peer name "$pfx-b" netns "$sender_ns"
    ip -n "$sender_ns" addr add 10.98.0.1/24 dev "$pfx-b"
    ip netns exec "$sender_ns" sysctl -qw net.ipv4.ip_forward=1
    ;;
down)
    pfx=${2:-ccpd}
    ip netns del "$pfx-dp" 2>/dev/null || true
    ip netns del "$pfx-rx" 2>/dev/null || true
    exit 0
    ;;
*)
    sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac

other_ns=$( [ "$cmd" = up ] && echo "$pfx-rx" || echo "$sender_ns" )
ip -n "$pfx-dp" link set lo up
ip -n "$pfx-dp" link set "$pfx-a" up
ip -n "$other_ns" link set lo up
ip -n "$other_ns" link set "$pfx-b" up
ip netns exec "$pfx-dp" ethtool -K "$pfx-a" tx off gso off tso off gro off >/dev/null
ip netns exec "$other_ns" ethtool -K "$pfx-b" tx off gso off tso off gro off >/dev/null

if [ "$cmd" = up ]; then
    cat <<EOT
ready. A receiver:   ip netns exec $pfx-rx ccp-dpdk sink --listen 10.99.0.2:5201
       the sender:   ip netns exec $pfx-dp ccp-dpdk send --vdev net_af_xdp0,iface=$pfx-a --ip 10.99.0.1 --dst 10.99.0.2:5201
EOT
else
    cat <<EOT
ready. The sender:   ip netns exec $pfx-dp ccp-dpdk send --vdev net_af_xdp0,iface=$pfx-a --ip 10.98.0.2 --gateway 10.98.0.1 --dst 10.77.0.2:5201
EOT
fi
