package topology

import (
	"embed"
	"errors"
	"fmt"
	"os"
	"path"
	"regexp"
	"sort"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/commlab/commlab/internal/boundedread"
	"github.com/commlab/commlab/internal/host"
)

// Limits that come from the address plan and from Linux interface names.
const (
	MaxSwitches = 16 // one /26 each inside a sandbox's /22
	MaxNodes    = 62 // hosts of a /26
	DefaultMTU  = 1500
	MinMTU      = 576
	MaxMTU      = 9000
)

// ErrInvalid marks a topology that cannot be built; the message names file:line:column.
var ErrInvalid = errors.New("invalid topology")

var (
	reTopoName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,31}$`)
	// Switch names become bridge names "br-<name>" (15 characters at most).
	reSwitch = regexp.MustCompile(`^[a-z][a-z0-9]{0,11}$`)
	// NIC names must leave room for the fabric-side peer "p<node#>-<nic>" (15 characters).
	reNIC = regexp.MustCompile(`^[a-z][a-z0-9]{0,10}$`)
)

// Names the backend uses for itself.
var reservedNodes = map[string]bool{"fab": true}
var reservedNICs = map[string]bool{"lo": true}

//go:embed builtin/*.yaml
var builtinFS embed.FS

// BuiltinNames lists the topologies shipped with commlab, sorted.
func BuiltinNames() []string {
	ents, _ := builtinFS.ReadDir("builtin")
	var out []string
	for _, e := range ents {
		out = append(out, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	sort.Strings(out)
	return out
}

// BuiltinNodesAndNICs is scenarios.Options.Topology for the built-in topologies:
// the node and NIC names of topology name, false if there is none by that name.
func BuiltinNodesAndNICs(name string) (nodes, nics []string, ok bool) {
	t, err := Builtin(name)
	if err != nil {
		return nil, nil, false
	}
	return t.NodeNames(), t.NICNames(), true
}

// Builtin loads a topology shipped with commlab by name (e.g. "4x2").
func Builtin(name string) (*Topology, error) {
	data, err := builtinFS.ReadFile(path.Join("builtin", name+".yaml"))
	if err != nil {
		return nil, fmt.Errorf("%w: no built-in topology %q (have %s)", ErrInvalid, name, strings.Join(BuiltinNames(), ", "))
	}
	t, err := Parse("builtin/"+name+".yaml", data)
	if err != nil {
		return nil, err
	}
	t.Source = "builtin:" + name
	return t, nil
}

// Load reads a topology by built-in name (e.g. "4x2") or from a YAML file: a
// name with a '/' or a .yaml/.yml suffix is always a file.
func Load(nameOrPath string) (*Topology, error) {
	isFile := strings.Contains(nameOrPath, "/") || strings.HasSuffix(nameOrPath, ".yaml") || strings.HasSuffix(nameOrPath, ".yml")
	if !isFile && !fileExists(nameOrPath) {
		return Builtin(nameOrPath)
	}
	data, err := boundedread.File(nameOrPath, boundedread.Config)
	if err != nil {
		return nil, fmt.Errorf("read topology: %w", err)
	}
	return Parse(nameOrPath, data)
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

type rawTopology struct {
	Name        string      `yaml:"name"`
	Description string      `yaml:"description"`
	Switches    []rawSwitch `yaml:"switches"`
	IntraNode   *rawIntra   `yaml:"intra_node"`
	NICs        []rawNIC    `yaml:"nics"`
	Nodes       []rawNode   `yaml:"nodes"`
}

type rawSwitch struct {
	Name string `yaml:"name"`
	Role string `yaml:"role"`
	Rate string `yaml:"rate"`
	MTU  *int   `yaml:"mtu"`
}

type rawIntra struct {
	Name string `yaml:"name"`
	Rate string `yaml:"rate"`
}

type rawNIC struct {
	Name   string `yaml:"name"`
	Switch string `yaml:"switch"`
	Rate   string `yaml:"rate"`
}

type rawNode struct {
	Name string   `yaml:"name"`
	NICs []rawNIC `yaml:"nics"`
}

// Parse decodes and validates a topology; file names the source in errors.
// Every problem found is reported, each as "file:line:column: message", joined
// and wrapped in [ErrInvalid].
func Parse(file string, data []byte) (*Topology, error) {
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil, yamlError(file, err)
	}
	if len(f.Docs) != 1 || f.Docs[0].Body == nil {
		return nil, fmt.Errorf("%w: %s:1:1: want exactly one YAML document", ErrInvalid, file)
	}
	var raw rawTopology
	if err := yaml.NodeToValue(f.Docs[0].Body, &raw, yaml.DisallowUnknownField()); err != nil {
		return nil, yamlError(file, err)
	}
	v := &validator{file: file, ast: f}
	t := v.topology(&raw)
	if len(v.errs) > 0 {
		sort.SliceStable(v.errs, func(i, j int) bool { return v.errs[i].pos.less(v.errs[j].pos) })
		errs := make([]error, len(v.errs))
		for i, e := range v.errs {
			errs[i] = e.err
		}
		return nil, fmt.Errorf("%w:\n%w", ErrInvalid, errors.Join(errs...))
	}
	t.Source = file
	return t, nil
}

// yamlError turns a go-yaml error into file:line:column: message.
func yamlError(file string, err error) error {
	var ye yaml.Error
	if errors.As(err, &ye) && ye.GetToken() != nil && ye.GetToken().Position != nil {
		p := ye.GetToken().Position
		return fmt.Errorf("%w: %s:%d:%d: %s", ErrInvalid, file, p.Line, p.Column, ye.GetMessage())
	}
	return fmt.Errorf("%w: %s: %v", ErrInvalid, file, err)
}

// validator resolves raw YAML into a Topology, collecting positioned errors.
type validator struct {
	file string
	ast  *ast.File
	errs []posError
}

type pos struct{ line, col int }

func (a pos) less(b pos) bool { return a.line < b.line || a.line == b.line && a.col < b.col }

type posError struct {
	pos pos
	err error
}

// errorf records an error at the YAML path p ("$.nodes[2].name"); when p does
// not exist (a missing key) the closest existing parent gives the position.
func (v *validator) errorf(p string, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if v.ast == nil {
		// Not parsed from a file: name the field instead of a position.
		v.errs = append(v.errs, posError{err: fmt.Errorf("%s: %s: %s", v.file, strings.TrimPrefix(p, "$."), msg)})
		return
	}
	line, col := v.locate(p)
	v.errs = append(v.errs, posError{pos{line, col}, fmt.Errorf("%s:%d:%d: %s", v.file, line, col, msg)})
}

func (v *validator) locate(p string) (int, int) {
	for p != "" && p != "$" {
		if yp, err := yaml.PathString(p); err == nil {
			if n, err := yp.FilterFile(v.ast); err == nil && n != nil && n.GetToken() != nil && n.GetToken().Position != nil {
				pos := n.GetToken().Position
				return pos.Line, pos.Column
			}
		}
		i := strings.LastIndexAny(p, ".[")
		if i <= 0 {
			break
		}
		p = p[:i]
	}
	return 1, 1
}

func (v *validator) topology(raw *rawTopology) *Topology {
	t := &Topology{Name: raw.Name, Description: raw.Description}
	switch {
	case raw.Name == "":
		v.errorf("$.name", "name is missing")
	case !reTopoName.MatchString(raw.Name):
		v.errorf("$.name", "name %q: want lowercase letters, digits, '.', '_' or '-' (at most 32)", raw.Name)
	}

	// Switches.
	if len(raw.Switches) == 0 {
		v.errorf("$.switches", "switches: declare at least one switch")
	}
	if len(raw.Switches) > MaxSwitches {
		v.errorf("$.switches", "switches: %d declared, at most %d fit the address plan", len(raw.Switches), MaxSwitches)
	}
	seenSw := map[string]bool{}
	mgmt := 0
	for i, rs := range raw.Switches {
		p := fmt.Sprintf("$.switches[%d]", i)
		s := Switch{Name: rs.Name, Role: Data, MTU: DefaultMTU}
		switch {
		case rs.Name == "":
			v.errorf(p+".name", "switch name is missing")
		case !reSwitch.MatchString(rs.Name):
			v.errorf(p+".name", "switch name %q: want a lowercase letter then letters or digits (at most 12)", rs.Name)
		case seenSw[rs.Name]:
			v.errorf(p+".name", "switch %q is declared twice", rs.Name)
		}
		seenSw[rs.Name] = true
		switch Role(rs.Role) {
		case "", Data:
		case Management:
			s.Role = Management
			mgmt++
			if mgmt > 1 {
				v.errorf(p+".role", "switch %q: only one management switch is allowed", rs.Name)
			}
		default:
			v.errorf(p+".role", "switch %q: role %q: want management or data", rs.Name, rs.Role)
		}
		if rs.Rate == "" {
			if s.Role == Data {
				v.errorf(p+".rate", "switch %q: a data switch needs a rate, e.g. rate: 200Mbit", rs.Name)
			}
		} else {
			s.Rate = v.rate(true, p+".rate", "switch "+rs.Name, rs.Rate)
		}
		if rs.MTU != nil {
			s.MTU = *rs.MTU
			if s.MTU < MinMTU || s.MTU > MaxMTU {
				v.errorf(p+".mtu", "switch %q: mtu %d: want %d to %d", rs.Name, s.MTU, MinMTU, MaxMTU)
			}
		}
		t.Switches = append(t.Switches, s)
	}

	// Intra-node fabric.
	if raw.IntraNode != nil {
		in := &IntraNode{Name: raw.IntraNode.Name}
		if in.Name == "" {
			in.Name = "nvlink"
		}
		if raw.IntraNode.Rate == "" {
			v.errorf("$.intra_node.rate", "intra_node needs a rate, e.g. rate: 1Gbit")
		} else {
			in.Rate = v.rate(true, "$.intra_node.rate", "intra_node", raw.IntraNode.Rate)
		}
		t.IntraNode = in
	}

	// Nodes.
	if len(raw.Nodes) == 0 {
		v.errorf("$.nodes", "nodes: declare at least one node")
	}
	if len(raw.Nodes) > MaxNodes {
		v.errorf("$.nodes", "nodes: %d declared, at most %d fit the address plan", len(raw.Nodes), MaxNodes)
	}
	seenNode := map[string]bool{}
	ports := map[string]int{}
	sharedReported := false
	for i, rn := range raw.Nodes {
		p := fmt.Sprintf("$.nodes[%d]", i)
		switch {
		case rn.Name == "":
			v.errorf(p+".name", "node name is missing")
		case host.ValidNode(rn.Name) != nil:
			v.errorf(p+".name", "node name %q: want a lowercase letter then lowercase letters, digits or '-' (at most 15)", rn.Name)
		case reservedNodes[rn.Name]:
			v.errorf(p+".name", "node name %q is reserved for the sandbox's fabric", rn.Name)
		case seenNode[rn.Name]:
			v.errorf(p+".name", "node %q is declared twice", rn.Name)
		}
		seenNode[rn.Name] = true
		nics, np := rn.NICs, p+".nics"
		report := true // problems of the shared NIC list are reported for its first user only
		if len(nics) == 0 {
			nics, np = raw.NICs, "$.nics"
			report = !sharedReported
			sharedReported = true
		}
		errorf := func(p, format string, args ...any) {
			if report {
				v.errorf(p, format, args...)
			}
		}
		if len(nics) == 0 {
			v.errorf(p, "node %q has no NICs: list nics under the node or at the top level", rn.Name)
		}
		node := Node{Name: rn.Name}
		seenNIC := map[string]bool{}
		onSwitch := map[string]bool{}
		mgmtNICs := 0
		for j, rc := range nics {
			cp := fmt.Sprintf("%s[%d]", np, j)
			switch {
			case rc.Name == "":
				errorf(cp+".name", "node %q: NIC name is missing", rn.Name)
			case !reNIC.MatchString(rc.Name) || reservedNICs[rc.Name]:
				errorf(cp+".name", "node %q: NIC name %q: want a lowercase letter then letters or digits (at most 11), not lo", rn.Name, rc.Name)
			case seenNIC[rc.Name]:
				errorf(cp+".name", "node %q: NIC %q is declared twice", rn.Name, rc.Name)
			}
			seenNIC[rc.Name] = true
			si := t.switchIndex(rc.Switch)
			if si < 0 {
				if rc.Switch == "" {
					errorf(cp+".switch", "node %q: NIC %q: switch is missing", rn.Name, rc.Name)
				} else {
					errorf(cp+".switch", "node %q: NIC %q: unknown switch %q", rn.Name, rc.Name, rc.Switch)
				}
				continue
			}
			sw := t.Switches[si]
			if onSwitch[sw.Name] {
				errorf(cp+".switch", "node %q: two NICs on switch %q (one address per node per switch)", rn.Name, sw.Name)
			}
			onSwitch[sw.Name] = true
			c := NIC{Name: rc.Name, Switch: sw.Name, Role: sw.Role, Rate: sw.Rate, MTU: sw.MTU}
			if c.Role == Management {
				mgmtNICs++
			}
			if rc.Rate != "" {
				c.Rate = v.rate(report, cp+".rate", fmt.Sprintf("node %q NIC %q", rn.Name, rc.Name), rc.Rate)
			}
			ports[sw.Name]++
			node.NICs = append(node.NICs, c)
		}
		if mgmtNICs > 1 {
			errorf(np, "node %q has %d management NICs, at most one", rn.Name, mgmtNICs)
		}
		t.Nodes = append(t.Nodes, node)
	}
	if len(raw.Nodes) > 1 {
		checked := map[string]bool{}
		for i, s := range t.Switches {
			if s.Name != "" && !checked[s.Name] && ports[s.Name] < 2 {
				v.errorf(fmt.Sprintf("$.switches[%d].name", i), "switch %q has %d NIC(s) plugged in: a switch links at least two nodes", s.Name, ports[s.Name])
			}
			checked[s.Name] = true
		}
	}
	return t
}

func (v *validator) rate(report bool, p, what, s string) Rate {
	r, err := ParseRate(s)
	if err != nil {
		if report {
			v.errorf(p, "%s: %v", what, err)
		}
		return 0
	}
	if r < MinRate || r > MaxRate {
		if report {
			v.errorf(p, "%s: rate %s: want %s to %s", what, r, MinRate, MaxRate)
		}
	}
	return r
}

// Validate checks a Topology built in Go rather than parsed (e.g. decoded from
// a state file) with the same rules as Parse.
func (t *Topology) Validate() error {
	if t == nil {
		return fmt.Errorf("%w: no topology", ErrInvalid)
	}
	raw := rawTopology{Name: t.Name, Description: t.Description}
	for _, s := range t.Switches {
		rs := rawSwitch{Name: s.Name, Role: string(s.Role)}
		if s.Rate > 0 {
			rs.Rate = s.Rate.String()
		}
		if s.MTU != 0 {
			mtu := s.MTU
			rs.MTU = &mtu
		}
		raw.Switches = append(raw.Switches, rs)
	}
	if t.IntraNode != nil {
		raw.IntraNode = &rawIntra{Name: t.IntraNode.Name, Rate: t.IntraNode.Rate.String()}
	}
	for _, n := range t.Nodes {
		rn := rawNode{Name: n.Name}
		for _, c := range n.NICs {
			rc := rawNIC{Name: c.Name, Switch: c.Switch}
			if sw, ok := t.Switch(c.Switch); !ok || c.Rate != sw.Rate {
				rc.Rate = c.Rate.String() // 0 renders as 0bit and is refused
			}
			if sw, ok := t.Switch(c.Switch); ok && c.MTU != 0 && c.MTU != sw.MTU {
				return fmt.Errorf("%w: node %q NIC %q: mtu %d differs from switch %q's %d", ErrInvalid, n.Name, c.Name, c.MTU, sw.Name, sw.MTU)
			}
			rn.NICs = append(rn.NICs, rc)
		}
		raw.Nodes = append(raw.Nodes, rn)
	}
	v := &validator{file: fmt.Sprintf("topology %q", t.Name)}
	v.topology(&raw)
	if len(v.errs) > 0 {
		errs := make([]error, len(v.errs))
		for i, e := range v.errs {
			errs[i] = e.err
		}
		return fmt.Errorf("%w:\n%w", ErrInvalid, errors.Join(errs...))
	}
	return nil
}
