package injector

// Mechanism says how kind is applied on a host with features f: the kernel or
// userspace facility it uses there, or why it cannot be applied. One table, so
// `commlab faults --kinds` and the course say the same.
func Mechanism(kind string, f Features) string {
	netem := func(what string) string {
		if f.Netem {
			return "sch_netem (" + what + ")"
		}
		return "none here: needs sch_netem, which this kernel lacks"
	}
	nft := func(what string) string {
		if f.Nftables {
			return "nftables " + what
		}
		return "none here: needs nftables"
	}
	switch kind {
	case "corrupt":
		bpf := TCBPF()
		switch {
		case bpf == nil && f.Netem:
			return "tc BPF at clsact (cls_bpf; payload bit flip, bpf_l4_csum_replace); via=netem: sch_netem corrupt"
		case bpf == nil:
			return "tc BPF at clsact (cls_bpf; payload bit flip, bpf_l4_csum_replace); via=netem unavailable (no sch_netem)"
		case f.Netem:
			return "via=netem only (sch_netem corrupt); tc BPF refused: " + bpf.Error()
		}
		return "none here: tc BPF refused (" + bpf.Error() + ") and no sch_netem"
	case "delay", "jitter":
		if f.Netem {
			return netem("delay/jitter on the root qdisc")
		}
		if err := TCBPF(); err != nil {
			return "none here: no sch_netem, and the userspace wire's tc BPF redirect is refused (" + err.Error() + ")"
		}
		return "userspace wire (AF_PACKET with PACKET_VNET_HDR via a veth pair, tc BPF redirect at clsact egress; no sch_netem here)"
	case "loss":
		return lossMechanism(nft("netdev ingress hook, numgen random"), "every frame")
	case "roce-drop":
		return lossMechanism(nft("netdev ingress hook on UDP 4791"), "UDP 4791")
	case "port-block":
		return nft("inet input/output chains")
	case "nic-rate":
		if !f.TBF {
			return "none here: needs sch_tbf"
		}
		if f.Mirred {
			return "tbf root qdisc (egress); clsact + u32 + mirred to an ifb with tbf (ingress)"
		}
		return "tbf root qdisc (egress only: no ifb/mirred for ingress)"
	case "nic-down", "nic-flap", "mtu-mismatch", "wrong-route":
		return "netlink (rtnetlink link/route changes)"
	case "congestion":
		return "iperf3 flows from the other nodes"
	case "cpu-squeeze", "mem-pressure", "numa-misbind":
		if f.Cgroup == "" {
			return "none here: no cgroup hierarchy"
		}
		return "cgroup " + f.Cgroup + " limits on the workload cgroup"
	case "env-force":
		return "files in the node's /etc (profile.d, job env)"
	case "shm-small":
		return "a small tmpfs on /dev/shm in the node's mount namespace"
	case "pcie-speed":
		return "setpci on the GPU's upstream port (hardware; operator opt-in)"
	}
	return ""
}

// lossMechanism says how loss and roce-drop work in each direction: inbound,
// the nftables drop in; outbound, a tc BPF program that readdresses a share of
// the frames the NIC sends to its own MAC, so they leave and are discarded.
func lossMechanism(in, frames string) string {
	out := "tc BPF at clsact egress (" + frames + ": destination MAC set to the NIC's own, bpf_skb_store_bytes)"
	if err := TCBPF(); err != nil {
		out = "none here: tc BPF refused (" + err.Error() + ")"
	}
	return "in: " + in + "; out: " + out
}
