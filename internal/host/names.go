package host

import (
	"crypto/rand"
	"fmt"
	"path"
	"regexp"
	"strings"
)

// Where things live on the host. Everything commlab creates carries its prefix
// or sits under its directories, so a sweep never touches anything else.
const (
	// Prefix starts every namespace and run-time directory a sandbox owns.
	Prefix = "cl-"
	// SlurmPrefix starts the namespaces of Slurm labs' nodes (cls-<job>-<node>).
	// It is not Prefix, so a local sweep (lab sweep, serve's start) never takes
	// them for a dead local sandbox: only their job's epilog removes them.
	SlurmPrefix = "cls-"
	// NetNSDir holds the named network namespaces (iproute2's convention).
	NetNSDir = "/run/netns"
	// RunDir holds commlab's run-time files (journal locks, node etc dirs, mount
	// namespaces, sandbox homes); like the namespaces it is gone after a reboot.
	RunDir = "/run/commlab"
	// LabsRunDir holds the sandboxes' learner homes and slot files.
	LabsRunDir = RunDir + "/labs"
	// FabricNode names the namespace that holds a sandbox's switches.
	FabricNode = "fab"
	// CgroupRoot is the parent of every commlab cgroup, relative to a hierarchy root.
	CgroupRoot = "commlab"
)

var (
	// Sandbox ids have no '-', so "cl-<id>-<node>" splits without ambiguity.
	reID = regexp.MustCompile(`^[a-z0-9]{1,12}$`)
	// Node names become namespace, cgroup and host names; no shell metacharacters,
	// and short enough that cl-<id>-<node> stays a readable namespace name.
	reNode = regexp.MustCompile(`^[a-z][a-z0-9-]{0,14}$`)
)

// ValidID checks a sandbox id: 1 to 12 lowercase letters or digits.
func ValidID(id string) error {
	if !reID.MatchString(id) {
		return fmt.Errorf("sandbox id %q: want 1 to 12 lowercase letters or digits", id)
	}
	return nil
}

// ValidNode checks a node name: a lowercase letter, then up to 14 lowercase
// letters, digits or '-'.
func ValidNode(node string) error {
	if !reNode.MatchString(node) {
		return fmt.Errorf("node %q: want a lowercase letter, then up to 14 lowercase letters, digits or '-'", node)
	}
	return nil
}

// NewID returns a random sandbox id of 8 characters, starting with a letter so
// that ids never look like numbers in logs.
func NewID() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	b[0] = alphabet[int(b[0])%26]
	return string(b)
}

// NetNSName is the namespace of a sandbox's node: cl-<id>-<node>.
func NetNSName(id, node string) string { return Prefix + id + "-" + node }

// NetNSPath is the file of that namespace.
func NetNSPath(id, node string) string { return path.Join(NetNSDir, NetNSName(id, node)) }

// FabricNetNSName is the namespace that holds a sandbox's switches.
func FabricNetNSName(id string) string { return NetNSName(id, FabricNode) }

// FabricPort names the fabric's end of node number n's NIC (n from 1):
// "p3-rdma0". Topology validation keeps it within 15 characters.
func FabricPort(n int, nic string) string { return fmt.Sprintf("p%d-%s", n, nic) }

// BridgeName names a switch's bridge inside the fabric namespace: "br-<switch>".
func BridgeName(sw string) string { return "br-" + sw }

// SlurmNetNSName is the namespace of a Slurm lab's node on its compute node:
// cls-<job>-<node>.
func SlurmNetNSName(job, node string) string { return SlurmPrefix + job + "-" + node }

// SlurmSandboxID is the sandbox id that names a Slurm job's nodes in the
// injector's journal: j<job>.
func SlurmSandboxID(job string) string { return "j" + job }

// OwnsNetNS says whether name is the namespace of node of sandbox id:
// cl-<id>-<node>, or, for a Slurm job's sandbox j<job>, cls-<job>-<node>.
func OwnsNetNS(id, node, name string) bool {
	if name == NetNSName(id, node) {
		return true
	}
	job, ok := strings.CutPrefix(id, "j")
	return ok && job != "" && strings.Trim(job, "0123456789") == "" && name == SlurmNetNSName(job, node)
}

// reOwnedNetNS: every namespace commlab creates, sandbox nodes, scratch
// namespaces (cl-probe-...) and Slurm labs' nodes alike, starts with Prefix or
// SlurmPrefix and holds no path or shell metacharacters.
var reOwnedNetNS = regexp.MustCompile(`^(` + Prefix + `|` + SlurmPrefix + `)[a-z0-9][a-z0-9._-]{0,60}$`)

// ValidOwnedNetNS checks that name is a namespace commlab may create, change or
// delete: cl-... or cls-... with letters, digits, '.', '_' and '-' only.
func ValidOwnedNetNS(name string) error {
	if !reOwnedNetNS.MatchString(name) {
		return fmt.Errorf("netns %q: want a namespace named %s... or %s... (commlab only touches its own namespaces)", name, Prefix, SlurmPrefix)
	}
	return nil
}

// ParseNetNS splits a namespace name cl-<id>-<node> (the fabric's included); ok
// is false for a name commlab does not own.
func ParseNetNS(name string) (id, node string, ok bool) {
	id, node, found := strings.Cut(strings.TrimPrefix(name, Prefix), "-")
	if !strings.HasPrefix(name, Prefix) || !found || ValidID(id) != nil ||
		(node != FabricNode && ValidNode(node) != nil) {
		return "", "", false
	}
	return id, node, true
}

// SandboxOf extracts the sandbox id from a namespace or directory name "cl-<id>"
// or "cl-<id>-<rest>"; ok is false for names commlab does not own.
func SandboxOf(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, Prefix)
	if !ok {
		return "", false
	}
	id, _, _ := strings.Cut(rest, "-")
	if ValidID(id) != nil {
		return "", false
	}
	return id, true
}

// SandboxCgroup is a sandbox's cgroup relative to each hierarchy root: commlab/<id>.
func SandboxCgroup(id string) string { return CgroupRoot + "/" + id }

// NodeCgroup is a node's cgroup, inside the sandbox's: the limits faults change
// (cpu, cpuset, memory) apply here, to the node's two leaves below.
func NodeCgroup(id, node string) string { return SandboxCgroup(id) + "/" + node }

// A node's processes live in one of two leaves of its cgroup (on cgroup v2 a
// group with children that share CPU may hold no processes of its own):
const (
	// ShellLeaf holds the learner's shells and every command run on the node,
	// at the default CPU weight.
	ShellLeaf = "shell"
	// WorkloadLeaf holds the lab's workload (the ranks of its chart and grading)
	// at a lower CPU weight, so that it cannot starve the shells.
	WorkloadLeaf = "workload"
)

// NodeEtcDir is where a node's overlaid /etc files (the env-force fault's
// profile.d, for one) live on the host.
func NodeEtcDir(id, node string) string { return path.Join(RunDir, "nodes", id, node, "etc") }
