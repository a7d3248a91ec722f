//go:build linux

package injector

import (
	"encoding/binary"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// nftMsg is one nf_tables request, decoded far enough to check what is sent.
type nftMsg struct {
	typ               uint16 // NFT_MSG_*
	table, chain, dev string
	hook              uint32
	hasHook, hasExprs bool
	comment           string
}

// captureNft queues through fn on a connection that records the netlink
// messages its Flush sends instead of sending them (no root, no kernel).
func captureNft(t *testing.T, fn func(c *nftables.Conn)) []nftMsg {
	t.Helper()
	var out []nftMsg
	c, err := nftables.New(nftables.WithTestDial(func(req []netlink.Message) ([]netlink.Message, error) {
		for _, m := range req {
			if m.Header.Type>>8 != unix.NFNL_SUBSYS_NFTABLES {
				continue // batch begin/end
			}
			out = append(out, decodeNft(t, m))
		}
		return req, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	fn(c)
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	return out
}

func decodeNft(t *testing.T, m netlink.Message) nftMsg {
	t.Helper()
	r := nftMsg{typ: uint16(m.Header.Type & 0xff)}
	ad, err := netlink.NewAttributeDecoder(m.Data[4:]) // after struct nfgenmsg
	if err != nil {
		t.Fatal(err)
	}
	ad.ByteOrder = binary.BigEndian // nf_tables attributes are in network order
	for ad.Next() {
		switch {
		case r.typ == unix.NFT_MSG_NEWTABLE && ad.Type() == unix.NFTA_TABLE_NAME,
			r.typ == unix.NFT_MSG_NEWCHAIN && ad.Type() == unix.NFTA_CHAIN_TABLE,
			r.typ == unix.NFT_MSG_NEWRULE && ad.Type() == unix.NFTA_RULE_TABLE:
			r.table = ad.String()
		case r.typ == unix.NFT_MSG_NEWCHAIN && ad.Type() == unix.NFTA_CHAIN_NAME,
			r.typ == unix.NFT_MSG_NEWRULE && ad.Type() == unix.NFTA_RULE_CHAIN:
			r.chain = ad.String()
		case r.typ == unix.NFT_MSG_NEWCHAIN && ad.Type() == unix.NFTA_CHAIN_HOOK:
			r.hasHook = true
			ad.Nested(func(nd *netlink.AttributeDecoder) error {
				nd.ByteOrder = binary.BigEndian
				for nd.Next() {
					switch nd.Type() {
					case unix.NFTA_HOOK_HOOKNUM:
						r.hook = nd.Uint32()
					case unix.NFTA_HOOK_DEV:
						r.dev = nd.String()
					}
				}
				return nil
			})
		case r.typ == unix.NFT_MSG_NEWRULE && ad.Type() == unix.NFTA_RULE_EXPRESSIONS:
			r.hasExprs = len(ad.Bytes()) > 0
		case r.typ == unix.NFT_MSG_NEWRULE && ad.Type() == unix.NFTA_RULE_USERDATA:
			r.comment, _ = userdata.GetString(ad.Bytes(), userdata.TypeComment)
		}
	}
	if err := ad.Err(); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestQueueAdd: a fault's chains go into the sandbox's own table (commlab-<id>,
// see internal/host), each with its hook and device, and no rule carries a
// comment (a learner's nft list ruleset must not name the fault).
func TestQueueAdd(t *testing.T) {
	in, out := nftables.ChainHookIngress, nftables.ChainHookEgress
	chains := []nftChain{
		{name: "f0000abcd-in", hook: in, device: "rdma0", rules: [][]expr.Any{drop(), randomBelow(1, 50, drop()...)}},
		{name: "f0000abcd-out", hook: out, device: "rdma0", rules: [][]expr.Any{drop()}},
	}
	msgs := captureNft(t, func(c *nftables.Conn) { queueAdd(c, "k3f9a2", nftables.TableFamilyNetdev, chains) })
	want := []nftMsg{
		{typ: unix.NFT_MSG_NEWTABLE, table: "commlab-k3f9a2"},
		{typ: unix.NFT_MSG_NEWCHAIN, table: "commlab-k3f9a2", chain: "f0000abcd-in", hasHook: true, hook: uint32(*in), dev: "rdma0"},
		{typ: unix.NFT_MSG_NEWRULE, table: "commlab-k3f9a2", chain: "f0000abcd-in", hasExprs: true},
		{typ: unix.NFT_MSG_NEWRULE, table: "commlab-k3f9a2", chain: "f0000abcd-in", hasExprs: true},
		{typ: unix.NFT_MSG_NEWCHAIN, table: "commlab-k3f9a2", chain: "f0000abcd-out", hasHook: true, hook: uint32(*out), dev: "rdma0"},
		{typ: unix.NFT_MSG_NEWRULE, table: "commlab-k3f9a2", chain: "f0000abcd-out", hasExprs: true},
	}
	if len(msgs) != len(want) {
		t.Fatalf("%d messages, want %d: %+v", len(msgs), len(want), msgs)
	}
	for i := range want {
		if msgs[i] != want[i] {
			t.Errorf("message %d: %+v, want %+v", i, msgs[i], want[i])
		}
	}
}
