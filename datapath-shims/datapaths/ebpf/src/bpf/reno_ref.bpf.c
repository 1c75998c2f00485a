// SPDX-License-Identifier: GPL-2.0
/*
 * The anchor of the per-ACK cost (benchmarks only): the kernel's own Reno as a BPF struct_ops,
 * every op one kfunc call into tcp_cong.c. Its cong_avoid's run time per call, with
 * kernel.bpf_stats_enabled, is measured exactly as ccp's cong_control is (the trampoline and
 * the accounting included), so ccp's figure over this one is what the fold, the control entry
 * and the reports add to a Reno step.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char _license[] SEC("license") = "GPL";

extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;
extern __u32 tcp_reno_ssthresh(struct sock *sk) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;

SEC("struct_ops")
void BPF_PROG(reno_ref_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	tcp_reno_cong_avoid(sk, ack, acked);
}

SEC("struct_ops")
__u32 BPF_PROG(reno_ref_ssthresh, struct sock *sk)
{
	return tcp_reno_ssthresh(sk);
}

SEC("struct_ops")
__u32 BPF_PROG(reno_ref_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops.link")
struct tcp_congestion_ops reno_ref = {
	.cong_avoid = (void *)reno_ref_cong_avoid,
	.ssthresh = (void *)reno_ref_ssthresh,
	.undo_cwnd = (void *)reno_ref_undo_cwnd,
	.name = "ccp_reno_ref",
};
