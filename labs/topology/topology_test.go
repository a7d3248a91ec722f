package topology

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

func TestParseRate(t *testing.T) {
	tests := []struct {
		in      string
		want    Rate
		wantErr string
	}{
		{"200Mbit", 200 * Mbit, ""},
		{"200mbit", 200 * Mbit, ""},
		{"1.5Gbit", 1500 * Mbit, ""},
		{"800kbit", 800 * Kbit, ""},
		{" 1gbit ", Gbit, ""},
		{"123bit", 123, ""},
		{"0Mbit", 0, "greater than 0"},
		{"-5Mbit", 0, "greater than 0"},
		{"200", 0, "give a unit"},
		{"200Mbps", 0, "byte units are ambiguous"},
		{"25MB/s", 0, "byte units are ambiguous"},
		{"fastMbit", 0, "not a number"},
		{"", 0, "empty"},
		{"NaNMbit", 0, "not a number"},
		{"lots", 0, "want a number and a unit"},
	}
	for _, tt := range tests {
		got, err := ParseRate(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseRate(%q) = %v, %v; want error containing %q", tt.in, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestRateString(t *testing.T) {
	for _, tt := range []struct {
		r    Rate
		want string
	}{{200 * Mbit, "200Mbit"}, {Gbit, "1Gbit"}, {1500 * Mbit, "1500Mbit"}, {1234, "1234bit"}, {0, "0bit"}} {
		if got := tt.r.String(); got != tt.want {
			t.Errorf("%d.String() = %q, want %q", uint64(tt.r), got, tt.want)
		}
		var back Rate
		if err := back.UnmarshalText([]byte(tt.want)); err != nil || back != tt.r {
			t.Errorf("UnmarshalText(%q) = %v, %v", tt.want, back, err)
		}
	}
}

func TestBuiltins(t *testing.T) {
	want := map[string]struct{ nodes, rails, nicsPerNode int }{
		"2x1":         {2, 1, 2},
		"4x2":         {4, 2, 3},
		"8x1":         {8, 1, 2},
		"2-node-rail": {2, 4, 5},
		"gpu-node":    {1, 0, 1},
	}
	names := BuiltinNames()
	if len(names) != len(want) {
		t.Fatalf("BuiltinNames() = %v, want %d topologies", names, len(want))
	}
	for _, name := range names {
		w, ok := want[name]
		if !ok {
			t.Errorf("unexpected built-in %q", name)
			continue
		}
		top, err := Builtin(name)
		if err != nil {
			t.Fatalf("Builtin(%q): %v", name, err)
		}
		if top.Name != name || len(top.Nodes) != w.nodes || top.Rails() != w.rails {
			t.Errorf("%s: name %q, %d nodes, %d rails; want %d nodes, %d rails", name, top.Name, len(top.Nodes), top.Rails(), w.nodes, w.rails)
		}
		for _, n := range top.Nodes {
			if len(n.NICs) != w.nicsPerNode {
				t.Errorf("%s: node %s has %d NICs, want %d", name, n.Name, len(n.NICs), w.nicsPerNode)
			}
			for _, c := range n.DataNICs() {
				if c.Rate == 0 || c.MTU == 0 {
					t.Errorf("%s: %s/%s has rate %v mtu %d", name, n.Name, c.Name, c.Rate, c.MTU)
				}
			}
		}
		if top.Source != "builtin:"+name {
			t.Errorf("%s: Source = %q", name, top.Source)
		}
	}
	if _, err := Load("4x2"); err != nil {
		t.Errorf("Load(4x2): %v", err)
	}
	if _, err := Builtin("9x9"); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "2-node-rail") {
		t.Errorf("Builtin(9x9) = %v; want ErrInvalid listing the built-ins", err)
	}
}

func TestLoadFileWithAnchors(t *testing.T) {
	top, err := Load("testdata/custom.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(top.NodeNames(), ","); got != "gpu-a,gpu-b,gpu-c" {
		t.Errorf("nodes = %s", got)
	}
	b, _ := top.Node("gpu-b")
	ib, ok := b.NIC("ib0")
	if !ok || ib.Rate != 100*Mbit || ib.MTU != 9000 || ib.Role != Data {
		t.Errorf("gpu-b ib0 = %+v, %v; want 100Mbit, mtu 9000, data", ib, ok)
	}
	c, _ := top.Node("gpu-c")
	if ib, _ := c.NIC("ib0"); ib.Rate != 50*Mbit {
		t.Errorf("gpu-c ib0 rate = %v, want the NIC's own 50Mbit", ib.Rate)
	}
	if e, _ := c.NIC("eth0"); e.Rate != 0 || e.Role != Management {
		t.Errorf("gpu-c eth0 = %+v; want unshaped management", e)
	}
}

// TestParseErrors checks that each bad input is refused with a message that
// names the problem and its line:column.
func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string // substrings, each must appear
	}{
		{"syntax", "name: x\nswitches: [\n", []string{"t.yaml:"}},
		{"unknown field", "name: x\nswitchs: []\n", []string{"t.yaml:2:1:", "unknown field"}},
		{"wrong type", "name: x\nswitches:\n  - {name: a, rate: 1Mbit, mtu: big}\nnodes: [{name: n}]\n", []string{"t.yaml:3:"}},
		{"empty", "", []string{"exactly one YAML document"}},
		{"no nodes no switches", "name: x\n", []string{"t.yaml:1:1: switches: declare at least one switch", "nodes: declare at least one node"}},
		{"shell metacharacters in node name", `
name: x
switches: [{name: s, rate: 1Mbit}]
nics: [{name: rdma0, switch: s}]
nodes:
  - name: "a;reboot"
  - name: b
`, []string{"t.yaml:6:11: node name \"a;reboot\""}},
		{"rate of zero", `
name: x
switches: [{name: s, rate: 0bit}]
nics: [{name: rdma0, switch: s}]
nodes: [{name: a}, {name: b}]
`, []string{"t.yaml:3:", "must be greater than 0"}},
		{"bare rate", `
name: x
switches: [{name: s, rate: 200}]
nics: [{name: rdma0, switch: s}]
nodes: [{name: a}, {name: b}]
`, []string{"give a unit"}},
		{"unknown switch", `
name: x
switches: [{name: s, rate: 10Mbit}]
nodes:
  - name: a
    nics: [{name: rdma0, switch: s}]
  - name: b
    nics:
      - {name: rdma0, switch: nope}
`, []string{"t.yaml:9:", "unknown switch \"nope\"", "switch \"s\" has 1 NIC(s)"}},
		{"duplicate node and nic", `
name: x
switches: [{name: s, rate: 10Mbit}, {name: t, rate: 10Mbit}]
nodes:
  - name: a
    nics: [{name: rdma0, switch: s}, {name: rdma0, switch: t}]
  - name: a
    nics: [{name: rdma0, switch: s}, {name: rdma1, switch: t}]
`, []string{"t.yaml:7:", "node \"a\" is declared twice", "NIC \"rdma0\" is declared twice"}},
		{"data switch without rate", `
name: x
switches: [{name: s}]
nics: [{name: rdma0, switch: s}]
nodes: [{name: a}, {name: b}]
`, []string{"a data switch needs a rate"}},
		{"bad mtu and role", `
name: x
switches: [{name: s, rate: 10Mbit, mtu: 70000, role: spine}]
nics: [{name: rdma0, switch: s}]
nodes: [{name: a}, {name: b}]
`, []string{"mtu 70000", "role \"spine\""}},
		{"long nic name", `
name: x
switches: [{name: s, rate: 10Mbit}]
nics: [{name: averyveryverylongnic, switch: s}]
nodes: [{name: a}, {name: b}]
`, []string{"NIC name \"averyveryverylongnic\""}},
		{"reserved names", `
name: x
switches: [{name: s, rate: 10Mbit}]
nics: [{name: lo, switch: s}]
nodes: [{name: fab}, {name: b}]
`, []string{"\"fab\" is reserved", "NIC name \"lo\""}},
		{"two NICs on one switch", `
name: x
switches: [{name: s, rate: 10Mbit}]
nics: [{name: rdma0, switch: s}, {name: rdma1, switch: s}]
nodes: [{name: a}, {name: b}]
`, []string{"two NICs on switch \"s\""}},
		{"rate out of range", `
name: x
switches: [{name: s, rate: 5Tbit}]
nics: [{name: rdma0, switch: s}]
nodes: [{name: a}, {name: b}]
`, []string{"want 1Mbit to 100Gbit"}},
		{"intra node without rate", `
name: x
switches: [{name: s, rate: 10Mbit}]
intra_node: {name: nvlink}
nics: [{name: rdma0, switch: s}]
nodes: [{name: a}, {name: b}]
`, []string{"intra_node needs a rate"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			top, err := Parse("t.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatalf("Parse succeeded: %+v", top)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v is not ErrInvalid", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestParseReportsAllErrors(t *testing.T) {
	_, err := Load("testdata/bad-many.yaml")
	if err == nil {
		t.Fatal("bad-many.yaml loaded")
	}
	for _, w := range []string{
		"testdata/bad-many.yaml:1:7: name \"Bad Name\"",
		"testdata/bad-many.yaml:4:25: switch rail0: rate \"0Mbit\": must be greater than 0",
		"testdata/bad-many.yaml:5:12: switch \"rail0\" is declared twice",
		"testdata/bad-many.yaml:5:39: switch \"rail0\": mtu 100",
		"testdata/bad-many.yaml:8:27: node \"node1;rm -rf /\": NIC \"rdma0\": unknown switch \"rail9\"",
		"testdata/bad-many.yaml:10:11: node name \"node1;rm -rf /\"",
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("missing %q in:\n%v", w, err)
		}
	}
}

func TestPlanGolden(t *testing.T) {
	for _, tt := range []struct {
		topo  string
		index int
	}{{"2x1", 0}, {"4x2", 3}, {"8x1", 127}, {"2-node-rail", 42}} {
		top, err := Builtin(tt.topo)
		if err != nil {
			t.Fatal(err)
		}
		p, err := top.Plan(tt.index)
		if err != nil {
			t.Fatal(err)
		}
		got := p.Table()
		golden := filepath.Join("testdata", "plan-"+tt.topo+".golden")
		if *update {
			if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (run go test -update)", err)
		}
		if got != string(want) {
			t.Errorf("plan of %s at index %d:\n%s\nwant:\n%s", tt.topo, tt.index, got, want)
		}
	}
}

// TestPlanDisjoint checks that addresses never collide, within a sandbox or
// between any two sandboxes, and all lie in 198.18.0.0/15.
func TestPlanDisjoint(t *testing.T) {
	top, err := Builtin("2-node-rail")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for idx := 0; idx < MaxSandboxes; idx++ {
		p, err := top.Plan(idx)
		if err != nil {
			t.Fatal(err)
		}
		if !Block.Contains(p.Slice.Addr()) || p.Slice.Bits() != SliceBits {
			t.Fatalf("slice %v outside %v", p.Slice, Block)
		}
		for _, n := range p.Nodes {
			for _, c := range n.NICs {
				a := c.Addr.Addr()
				if !p.Slice.Contains(a) {
					t.Errorf("index %d %s/%s: %v outside slice %v", idx, n.Name, c.Name, a, p.Slice)
				}
				who := p.Slice.String() + " " + n.Name + "/" + c.Name
				if prev, dup := seen[a.String()]; dup {
					t.Fatalf("%v given to %s and %s", a, prev, who)
				}
				seen[a.String()] = who
			}
		}
	}
	if _, err := top.Plan(MaxSandboxes); err == nil {
		t.Errorf("Plan(%d) succeeded, want an error", MaxSandboxes)
	}
	if _, err := top.Plan(-1); err == nil {
		t.Error("Plan(-1) succeeded")
	}
}

func TestValidateBuiltStruct(t *testing.T) {
	good, err := Builtin("4x2")
	if err != nil {
		t.Fatal(err)
	}
	if err := good.Validate(); err != nil {
		t.Fatalf("Validate(4x2) = %v", err)
	}
	tests := []struct {
		name   string
		change func(*Topology)
		want   string
	}{
		{"shell metacharacters", func(t *Topology) { t.Nodes[0].Name = "n1$(reboot)" }, `nodes[0].name: node name "n1$(reboot)"`},
		{"zero rate", func(t *Topology) { t.Nodes[1].NICs[1].Rate = 0 }, "must be greater than 0"},
		{"unknown switch", func(t *Topology) { t.Nodes[2].NICs[2].Switch = "spine" }, `unknown switch "spine"`},
		{"no NICs", func(t *Topology) { t.Nodes[3].NICs = nil }, `node "node4" has no NICs`},
		{"mtu mismatch", func(t *Topology) { t.Nodes[0].NICs[1].MTU = 9000 }, "differs from switch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			top, _ := Builtin("4x2")
			tt.change(top)
			err := top.Validate()
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate() = %v; want ErrInvalid containing %q", err, tt.want)
			}
		})
	}
}

// TestRateTBF: the bucket holds 10 ms at the rate and two maximal packets at
// least; the queue 25 ms more.
func TestRateTBF(t *testing.T) {
	tests := []struct {
		rate         Rate
		maxPacket    int
		burst, limit uint64
	}{
		{200 * Mbit, 1514, 250_000, 875_000},
		{8 * Kbit, 1514, 3028, 3053},
	}
	for _, tt := range tests {
		if b, l := tt.rate.TBF(tt.maxPacket); b != tt.burst || l != tt.limit {
			t.Errorf("%s.TBF(%d) = %d, %d; want %d, %d", tt.rate, tt.maxPacket, b, l, tt.burst, tt.limit)
		}
	}
}

func TestBuiltinNodesAndNICs(t *testing.T) {
	for _, tt := range []struct {
		name  string
		nodes int
		nic   string
		ok    bool
	}{
		{"4x2", 4, "rdma1", true},
		{"2x1", 2, "rdma0", true},
		{"no-such", 0, "", false},
	} {
		nodes, nics, ok := BuiltinNodesAndNICs(tt.name)
		if ok != tt.ok || len(nodes) != tt.nodes || tt.ok && !slices.Contains(nics, tt.nic) {
			t.Errorf("BuiltinNodesAndNICs(%q) = %v, %v, %v; want %d nodes, NIC %q, %v", tt.name, nodes, nics, ok, tt.nodes, tt.nic, tt.ok)
		}
	}
}
