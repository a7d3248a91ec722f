package main

import (
	"strings"
	"testing"

	"github.com/commlab/commlab/bench"
)

func TestOnlyThisNode(t *testing.T) {
	two := []bench.HostSpec{{Node: "node1", Ranks: 2}, {Node: "node2", Ranks: 2}}
	for _, tc := range []struct {
		name, here, sandbox string
		hosts               []bench.HostSpec
		refused             string // "" when allowed
	}{
		{"host shell, labels", "", "", two, ""},
		{"host shell, sandbox", "", "s1", two, ""},
		{"lab terminal, this node only", "node1", "", two[:1], ""},
		{"lab terminal, no --hosts", "node1", "", nil, ""},
		{"lab terminal, another node", "node1", "", two, "node2"},
		{"lab terminal, only another node", "node2", "", two[:1], "node1"},
	} {
		err := onlyThisNode(tc.here, tc.sandbox, tc.hosts)
		switch {
		case tc.refused == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), "--hosts names "+tc.refused)):
			t.Errorf("%s: err = %v, want a refusal naming %s", tc.name, err, tc.refused)
		}
	}
}
