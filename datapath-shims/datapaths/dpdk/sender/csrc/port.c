/*
 * The one place ccp-dpdk touches DPDK's C API: EAL start-up, one Ethernet port with one RX and
 * one TX queue, and the mbuf operations that DPDK only offers as static inline functions (which
 * Rust cannot call). Everything above this file is Rust (src/port.rs wraps it).
 *
 * Checksums are computed by the sender in software, so no offload is requested: the virtual
 * devices this is tested on (net_af_xdp, net_af_packet on veth) have none to give.
 */
#include <stdint.h>
#include <string.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>

static struct rte_mempool *pool;

int ccpd_eal_init(int argc, char **argv) { return rte_eal_init(argc, argv); }

int ccpd_eal_cleanup(void) { return rte_eal_cleanup(); }

int ccpd_errno(void) { return rte_errno; }

const char *ccpd_strerror(int err) { return rte_strerror(err < 0 ? -err : err); }

uint16_t ccpd_port_count(void) { return rte_eth_dev_count_avail(); }

int ccpd_port_by_name(const char *name, uint16_t *port) { return rte_eth_dev_get_port_by_name(name, port); }

/* Configures and starts `port` with one RX and one TX queue, and a pool of `n_mbufs` buffers.
 * Returns 0 or a negative errno; `what` names the step that failed. */
int ccpd_port_start(uint16_t port, uint16_t rx_desc, uint16_t tx_desc, uint32_t n_mbufs, uint8_t mac[6],
                    uint16_t *mtu, const char **what) {
	struct rte_eth_conf conf;
	struct rte_ether_addr addr;
	int socket = rte_eth_dev_socket_id(port);
	int rc;

	if (socket < 0)
		socket = (int)rte_socket_id();
	*what = "rte_pktmbuf_pool_create";
	pool = rte_pktmbuf_pool_create("ccpd_pool", n_mbufs, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE, socket);
	if (pool == NULL)
		return -rte_errno;
	memset(&conf, 0, sizeof(conf));
	*what = "rte_eth_dev_configure";
	if ((rc = rte_eth_dev_configure(port, 1, 1, &conf)) < 0)
		return rc;
	*what = "rte_eth_dev_adjust_nb_rx_tx_desc";
	if ((rc = rte_eth_dev_adjust_nb_rx_tx_desc(port, &rx_desc, &tx_desc)) < 0)
		return rc;
	*what = "rte_eth_rx_queue_setup";
	if ((rc = rte_eth_rx_queue_setup(port, 0, rx_desc, (unsigned)socket, NULL, pool)) < 0)
		return rc;
	*what = "rte_eth_tx_queue_setup";
	if ((rc = rte_eth_tx_queue_setup(port, 0, tx_desc, (unsigned)socket, NULL)) < 0)
		return rc;
	*what = "rte_eth_dev_start";
	if ((rc = rte_eth_dev_start(port)) < 0)
		return rc;
	*what = "rte_eth_macaddr_get";
	if ((rc = rte_eth_macaddr_get(port, &addr)) < 0)
		return rc;
	memcpy(mac, addr.addr_bytes, 6);
	if (rte_eth_dev_get_mtu(port, mtu) < 0)
		*mtu = 1500;
	*what = "";
	return 0;
}

void ccpd_port_stop(uint16_t port) {
	rte_eth_dev_stop(port);
	rte_eth_dev_close(port);
}

uint16_t ccpd_rx(uint16_t port, struct rte_mbuf **pkts, uint16_t n) { return rte_eth_rx_burst(port, 0, pkts, n); }

uint16_t ccpd_tx(uint16_t port, struct rte_mbuf **pkts, uint16_t n) { return rte_eth_tx_burst(port, 0, pkts, n); }

/* The first segment's bytes; `segs` tells a chained frame (which the sender never needs). */
uint8_t *ccpd_data(struct rte_mbuf *m, uint16_t *len, uint16_t *segs) {
	*len = rte_pktmbuf_data_len(m);
	*segs = m->nb_segs;
	return rte_pktmbuf_mtod(m, uint8_t *);
}

/* A buffer of `len` bytes to build a frame in, or NULL when the pool is empty. */
struct rte_mbuf *ccpd_alloc(uint16_t len, uint8_t **data) {
	struct rte_mbuf *m = rte_pktmbuf_alloc(pool);
	if (m == NULL)
		return NULL;
	*data = (uint8_t *)rte_pktmbuf_append(m, len);
	if (*data == NULL) {
		rte_pktmbuf_free(m);
		return NULL;
	}
	return m;
}

/* Shortens a frame built in a buffer allocated larger. */
int ccpd_trim(struct rte_mbuf *m, uint16_t len) { return rte_pktmbuf_trim(m, len); }

void ccpd_free(struct rte_mbuf *m) { rte_pktmbuf_free(m); }

/* ipackets, opackets, ibytes, obytes, imissed, ierrors, oerrors, rx_nombuf */
int ccpd_stats(uint16_t port, uint64_t out[8]) {
	struct rte_eth_stats s;
	int rc = rte_eth_stats_get(port, &s);
	if (rc < 0)
		return rc;
	out[0] = s.ipackets;
	out[1] = s.opackets;
	out[2] = s.ibytes;
	out[3] = s.obytes;
	out[4] = s.imissed;
	out[5] = s.ierrors;
	out[6] = s.oerrors;
	out[7] = s.rx_nombuf;
	return 0;
}
