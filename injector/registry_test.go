package injector

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// goodParams are valid parameters for every builtin kind.
var goodParams = map[string]map[string]string{
	"nic-rate":     {"nic": "rdma0", "rate": "100mbit", "qdisc": "htb"},
	"nic-down":     {"nic": "rdma0"},
	"nic-flap":     {"nic": "rdma0", "period": "2s", "duty": "25%"},
	"mtu-mismatch": {"nic": "rdma0", "mtu": "1400"},
	"wrong-route":  {"to": "198.18.1.0/24", "nic": "eth0"},
	"loss":         {"nic": "rdma0", "percent": "1%"},
	"delay":        {"nic": "rdma0", "delay": "5ms", "jitter": "1ms"},
	"jitter":       {"nic": "rdma0", "jitter": "2ms"},
	"corrupt":      {"nic": "rdma0", "percent": "0.1%"},
	"roce-drop":    {"nic": "rdma0", "percent": "50%", "direction": "in"},
	"port-block":   {"ports": "29500"},
	"congestion":   {"nic": "rdma0", "senders": "n2,n3", "rate": "200mbit"},
	"env-force":    {"vars": "NCCL_P2P_DISABLE=1", "where": "job-env"},
	"cpu-squeeze":  {"cpus": "0.5"},
	"mem-pressure": {"limit": "256MiB"},
	"shm-small":    {"size": "64KiB"},
	"numa-misbind": {"gpu": "1"},
	"pcie-speed":   {"gpu": "0", "gen": "3"},
}

func TestRegistryBuiltin(t *testing.T) {
	reg, err := NewRegistry(Builtin()...)
	if err != nil {
		t.Fatal(err)
	}
	if len(reg.Kinds()) != len(goodParams) {
		t.Errorf("%d kinds registered, goodParams covers %d", len(reg.Kinds()), len(goodParams))
	}
	tg := Target{Sandbox: "s1", Node: "n1", Cgroup: "commlab/s1/n1"}
	for _, k := range reg.Kinds() {
		t.Run(k.Name, func(t *testing.T) {
			if k.Summary == "" {
				t.Error("no summary")
			}
			params, err := reg.Params(k.Name)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range params {
				if p.Doc == "" {
					t.Errorf("parameter %s has no doc", p.Name)
				}
			}
			f, err := reg.Parse(k.Name, goodParams[k.Name])
			if err != nil {
				t.Fatalf("parse %v: %v", goodParams[k.Name], err)
			}
			if f.Kind() != k.Name {
				t.Errorf("Kind() = %q", f.Kind())
			}
			if cmd := f.Command(tg); len(cmd) == 0 || cmd[0] == "" {
				t.Error("no debrief command")
			}
			// The journal's JSON brings back the same fault.
			raw, _ := json.Marshal(f)
			g, err := reg.decode(k.Name, raw)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(FormatParams(f), FormatParams(g)) {
				t.Errorf("JSON round trip: %v != %v", FormatParams(f), FormatParams(g))
			}
			// So does the text form.
			h, err := reg.Parse(k.Name, FormatParams(f))
			if err != nil || !reflect.DeepEqual(FormatParams(f), FormatParams(h)) {
				t.Errorf("text round trip: %v, %v", FormatParams(h), err)
			}
			// The zero value must be refused: no fault with nothing to do.
			if err := k.New().Validate(); err == nil && len(params) > 0 && hasRequired(params) {
				t.Error("defaults validate although a parameter is required")
			}
		})
	}
}

func hasRequired(ps []Param) bool {
	for _, p := range ps {
		if p.Required {
			return true
		}
	}
	return false
}

func TestRegistryErrors(t *testing.T) {
	if _, err := NewRegistry(NICRateKind(), NICRateKind()); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("duplicate kind: %v", err)
	}
	if _, err := NewRegistry(Kind{Name: "x"}); err == nil {
		t.Error("kind without constructors accepted")
	}
	reg, _ := NewRegistry(NICRateKind())
	if _, err := reg.Parse("loss", nil); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "known: nic-rate") {
		t.Errorf("unknown kind: %v", err)
	}
	if got := strings.Join(reg.ParamNames(), ","); got != "direction,nic,qdisc,rate" {
		t.Errorf("param names %s", got)
	}
}
