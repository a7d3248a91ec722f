package injector

import (
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/commlab/commlab/internal/host"
)

// Places on the host where commlab keeps per-node state that must vanish with a reboot.
const (
	netnsDir = host.NetNSDir
	runDir   = host.RunDir
)

// Target is where a fault lands: one node of a sandbox. On the netns backend the
// node is a network namespace named cl-<sandbox>-<node> under /run/netns.
type Target struct {
	Sandbox string `json:"sandbox"`
	Node    string `json:"node"`
	// NetNS is the node's namespace under /run/netns; empty means cl-<sandbox>-<node>.
	NetNS string `json:"netns,omitempty"`
	// Cgroup is the cgroup of the node's workloads, relative to each hierarchy's
	// root and under commlab/ (cpu-squeeze, mem-pressure, congestion's processes).
	Cgroup string `json:"cgroup,omitempty"`
	// EtcDir is the directory the node's workloads see as /etc (env-force);
	// empty means /run/commlab/nodes/<sandbox>/<node>/etc.
	EtcDir string `json:"etc_dir,omitempty"`

	// Filled by the injector when it resolves the target; journaled so a revert
	// never acts on a namespace that was deleted and recreated under the same name.
	NetNSInode uint64 `json:"netns_inode,omitempty"`
	BootID     string `json:"boot_id,omitempty"`
}

// netnsName is the namespace name with its default.
func (t Target) netnsName() string {
	if t.NetNS != "" {
		return t.NetNS
	}
	return host.NetNSName(t.Sandbox, t.Node)
}

// netnsPath is the namespace's file.
func (t Target) netnsPath() string { return filepath.Join(netnsDir, t.netnsName()) }

// etcDir is EtcDir with its default.
func (t Target) etcDir() string {
	if t.EtcDir != "" {
		return t.EtcDir
	}
	return host.NodeEtcDir(t.Sandbox, t.Node)
}

// NodeEtc is the directory the node's workloads see as /etc (env-force writes there).
func (t Target) NodeEtc() string { return t.etcDir() }

// peer is the target for another node of the same sandbox (congestion senders).
func (t Target) peer(node string) Target {
	return Target{Sandbox: t.Sandbox, Node: node}
}

// String is sandbox/node.
func (t Target) String() string { return t.Sandbox + "/" + t.Node }

// Validate checks every name in t (syntax only).
func (t Target) Validate() error {
	if err := ValidSandbox(t.Sandbox); err != nil {
		return err
	}
	if err := ValidNode(t.Node); err != nil {
		return err
	}
	if err := validNetNS(t.netnsName()); err != nil {
		return err
	}
	// The journal records sandbox and node; a namespace of another sandbox (or
	// node) would fault what the journal does not name.
	if !host.OwnsNetNS(t.Sandbox, t.Node, t.netnsName()) {
		return invalid("netns %s is not node %s's namespace %s", t.netnsName(), t, host.NetNSName(t.Sandbox, t.Node))
	}
	if t.Cgroup != "" {
		if err := validCgroup(t.Cgroup); err != nil {
			return err
		}
		if own := "commlab/" + t.Sandbox + "/" + t.Node; t.Cgroup != own && !strings.HasPrefix(t.Cgroup, own+"/") {
			return invalid("cgroup %s is not under node %s's cgroup %s", t.Cgroup, t, own)
		}
	}
	if t.EtcDir != "" && (!filepath.IsAbs(t.EtcDir) || filepath.Clean(t.EtcDir) != t.EtcDir || t.EtcDir == "/etc") {
		return invalid("etc dir %q: want a clean absolute path other than the host's /etc", t.EtcDir)
	}
	return nil
}

var (
	bootOnce sync.Once
	bootVal  string
)

// bootID identifies this boot; pids, namespaces and cgroup settings from another
// boot are gone.
func bootID() string {
	bootOnce.Do(func() {
		b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
		if err == nil {
			bootVal = strings.TrimSpace(string(b))
		}
	})
	return bootVal
}

// sameBoot reports whether state recorded under id belongs to this boot.
func sameBoot(id string) bool { return id != "" && id == bootID() }
