//go:build linux

package netns

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/commlab/commlab/internal/hostns"
	"github.com/commlab/commlab/internal/testlab"
)

// node2NSID is the id that TestNSIDAttack gives node2's namespace in node1's, as
// a learner could (an nsid for a namespace file passed from a shell on node2).
const node2NSID = 42

// TestNSIDAttack is issue 18's attack (item 6), run as the learner on node1 (this
// test binary, copied to the learner's home, acts as helperNSIDAttack): with
// CAP_NET_ADMIN and netlink's target namespace id (IFLA_TARGET_NETNSID), read the
// switch's port of node2 (p2-rdma0, in the fabric, whose id node1 has as its
// rdma0's link-netnsid) and delete it (which removes node2's rdma0), and move
// node1's links into node2 (through an id for node2) and into the fabric. Every
// attempt must be refused, and no link may change place.
func TestNSIDAttack(t *testing.T) {
	sb := upSandbox(t, "2x1", Options{HomeSize: 256 << 20})
	id := sb.ID()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := copyFile(self, filepath.Join(sb.LearnerHome(), "nsid-attack"), 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, sb, "node1", "ip", "netns", "set", NetNSName(id, "node2"), strconv.Itoa(node2NSID))
	links := func() map[string]string {
		return map[string]string{
			"node1":  namesAndMACs(run(t, sb, "node1", "ip", "-br", "link")),
			"node2":  namesAndMACs(run(t, sb, "node2", "ip", "-br", "link")),
			"fabric": namesAndMACs(host(t, "ip", "-n", FabricNetNSName(id), "-br", "link")),
		}
	}
	before := links()

	c, err := sb.LearnerExec(context.Background(), "node1", "/home/learner/nsid-attack")
	if err != nil {
		t.Fatal(err)
	}
	c.Env = append(c.Env, helperEnv+"=nsid-attack")
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("attack as the learner: %v\n%s", err, out)
	}
	t.Logf("as the learner on node1:\n%s", out)
	results := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if op, res, ok := strings.Cut(line, " "); ok {
			results[op] = res
		}
	}
	if results["own-link"] != "ok" {
		t.Fatalf("the learner cannot read its own node's rdma0, so the attack did not run:\n%s", out)
	}
	for _, op := range []string{"get-fabric-port", "move-into-node2", "move-into-fabric", "del-fabric-port"} {
		if r := results[op]; r != "EACCES" && r != "EPERM" {
			t.Errorf("%s through a target nsid from node1: %q, want EACCES or EPERM", op, r)
		}
	}
	after := links()
	for ns, b := range before {
		if after[ns] != b {
			t.Errorf("the attack changed the links of %s:\n%s\nwere:\n%s", ns, after[ns], b)
		}
	}
}

// namesAndMACs keeps the name and address of each line of `ip -br link`, which
// say where each link lives, and drops its state: a bridge still coming up goes
// from UNKNOWN to UP on its own while the attack runs.
func namesAndMACs(brief string) string {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(brief), "\n") {
		if f := strings.Fields(line); len(f) >= 3 {
			fmt.Fprintf(&b, "%s %s\n", f[0], f[2])
		}
	}
	return b.String()
}

// helperNSIDAttack runs in node1 as the learner: it prints one line per attempt,
// the operation and "ok" or the errno's name.
func helperNSIDAttack() int {
	rdma, err := netlink.LinkByName("rdma0")
	if err != nil {
		fmt.Println("own-link", err)
		return 0
	}
	eth, err := netlink.LinkByName("eth0")
	if err != nil {
		fmt.Println("own-link", err)
		return 0
	}
	fabric := rdma.Attrs().NetNsID
	for _, a := range []struct {
		op string
		do func() error
	}{
		{"own-link", func() error { return linkRequest(unix.RTM_GETLINK, -1, 0, "rdma0") }},
		{"get-fabric-port", func() error { return linkRequest(unix.RTM_GETLINK, fabric, 0, "p2-rdma0") }},
		// RTM_SETLINK with a target nsid moves the link there (under a new name).
		{"move-into-node2", func() error { return linkRequest(unix.RTM_SETLINK, node2NSID, eth.Attrs().Index, "moved0") }},
		{"move-into-fabric", func() error { return linkRequest(unix.RTM_SETLINK, fabric, rdma.Attrs().Index, "moved1") }},
		{"del-fabric-port", func() error { return linkRequest(unix.RTM_DELLINK, fabric, 0, "p2-rdma0") }},
	} {
		res := "ok"
		var errno unix.Errno
		if err := a.do(); errors.As(err, &errno) {
			res = unix.ErrnoName(errno)
		} else if err != nil {
			res = err.Error()
		}
		fmt.Println(a.op, res)
	}
	return 0
}

// linkRequest sends an rtnetlink link request for the link index (or, if 0, the
// link name; otherwise name is the link's new name) in the caller's namespace, with
// IFLA_TARGET_NETNSID nsid if nsid >= 0.
func linkRequest(op, nsid, index int, name string) error {
	req := nl.NewNetlinkRequest(op, unix.NLM_F_ACK)
	msg := nl.NewIfInfomsg(unix.AF_UNSPEC)
	msg.Index = int32(index)
	req.AddData(msg)
	if nsid >= 0 {
		req.AddData(nl.NewRtAttr(unix.IFLA_TARGET_NETNSID, nl.Uint32Attr(uint32(nsid))))
	}
	req.AddData(nl.NewRtAttr(unix.IFLA_IFNAME, nl.ZeroTerminated(name)))
	_, err := req.Execute(unix.NETLINK_ROUTE, 0)
	return err
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// TestNodeUserNS: a learner's program enters only a node namespace with a user
// namespace of its own; one in commlab's user namespace (a node built before nodes
// had one) is refused, since the learner's capabilities would count everywhere.
func TestNodeUserNS(t *testing.T) {
	needRoot(t)
	for _, tc := range []struct {
		create func(string) (*netlink.Handle, vnetns.NsHandle, error)
		ok     bool
	}{
		{hostns.Create, false},
		{hostns.CreateConfined, true},
	} {
		name := NetNSName(testlab.NewID(), "node1")
		h, ns, err := tc.create(name)
		if err != nil {
			t.Fatal(err)
		}
		h.Close()
		ns.Close()
		f, err := nodeUserNS(filepath.Join(netnsDir, name))
		if err == nil {
			f.Close()
		}
		if (err == nil) != tc.ok {
			t.Errorf("nodeUserNS(%s): %v, want success %v", name, err, tc.ok)
		}
		if err := hostns.Delete(name); err != nil {
			t.Error(err)
		}
	}
}
