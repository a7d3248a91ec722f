package nccl

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func parseFile(t testing.TB, path string) *Log {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l, err := Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Real multi-rank logs from public issues (testdata/README.md): transports
// per peer, rings, trees, sockets, IB, return codes, watchdog timeouts.
func TestParsePublicLogs(t *testing.T) {
	t.Run("p2p-shm-8gpu", func(t *testing.T) {
		l := parseFile(t, "testdata/public/p2p-shm-8gpu.log")
		if len(l.Rings) != 2 || !reflect.DeepEqual(l.Rings[0].Order, []int{0, 1, 2, 3, 4, 5, 6, 7}) || l.Rings[1].Of != 2 {
			t.Errorf("rings %+v", l.Rings)
		}
		if len(l.Trees) != 2 {
			t.Errorf("trees %v", l.Trees)
		}
		if len(l.Transports) != 7 {
			t.Errorf("%d transports, want 7: %+v", len(l.Transports), l.Transports)
		}
		got := map[string]string{}
		for _, p := range l.Peers() {
			got[fmt.Sprintf("%d->%d", p.From, p.To)] = strings.Join(p.Via, "|")
		}
		want := map[string]string{"0->1": "P2P/direct pointer/read", "1->2": "P2P/direct pointer", "2->3": "P2P/direct pointer/read",
			"3->4": "SHM/direct/direct", "5->6": "P2P/direct pointer", "6->7": "P2P/direct pointer/read"}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("peers %v, want %v", got, want)
		}
		if k := l.TransportKinds(); !reflect.DeepEqual(k, []string{"P2P", "SHM"}) {
			t.Errorf("kinds %v", k)
		}
		if l.Failed() {
			t.Errorf("a healthy init log reads as failed: %+v %+v", l.Warnings, l.Errors)
		}
	})
	t.Run("socket-abort", func(t *testing.T) {
		l := parseFile(t, "testdata/public/socket-abort.log")
		if len(l.Warnings) != 4 {
			t.Fatalf("%d warnings, want 4", len(l.Warnings))
		}
		for _, w := range l.Warnings {
			if w.Meaning == "" {
				t.Errorf("warning without an explanation: %+v", w)
			}
		}
		w := l.Warnings[0]
		if w.Source != "misc/socket.cc:483" || w.Host != "ubuntu" || w.PID != 39964 || !strings.Contains(w.Meaning, "TCP connection") {
			t.Errorf("first warning %+v", w)
		}
		if !strings.Contains(l.Warnings[2].Meaning, "peer closed") {
			t.Errorf("third warning %+v", l.Warnings[2])
		}
		if want := map[Result]int{SystemError: 6, RemoteError: 1, InternalError: 4}; !reflect.DeepEqual(l.Codes, want) {
			t.Errorf("codes %v, want %v", l.Codes, want)
		}
		if len(l.Errors) != 3 || l.Errors[0].Source != "misc/socket.cc:564" || l.Errors[1].Source != "misc/socket.cc:749" {
			t.Errorf("errors %+v", l.Errors)
		}
		if p := l.Peers(); len(p) != 1 || p[0].From != 5 || p[0].To != 4 || !reflect.DeepEqual(p[0].Channels, []int{20, 21}) {
			t.Errorf("peers %+v", p)
		}
	})
	t.Run("net-socket-send", func(t *testing.T) {
		l := parseFile(t, "testdata/public/net-socket-send.log")
		if len(l.Transports) != 5 || l.Transports[0].Dir != "send" || l.Transports[0].Kind() != "NET/Socket" || l.Transports[4].Via != "NET/Socket/7" {
			t.Errorf("transports %+v", l.Transports)
		}
		if l.Codes[SystemError] != 2 {
			t.Errorf("codes %v", l.Codes)
		}
	})
	t.Run("ib-bootstrap", func(t *testing.T) {
		l := parseFile(t, "testdata/public/ib-bootstrap.log")
		if !reflect.DeepEqual(l.Bootstrap, []string{"em1:172.18.28.82<0>", "em1:172.18.28.81<0>"}) {
			t.Errorf("bootstrap %v", l.Bootstrap)
		}
		if !reflect.DeepEqual(l.IBDevs, []string{"[0]mlx5_0:1/IB"}) || l.Network != "IB" {
			t.Errorf("IB devs %v network %q", l.IBDevs, l.Network)
		}
		if len(l.Warnings) != 1 || !strings.Contains(l.Warnings[0].Meaning, "same rank") {
			t.Errorf("warnings %+v", l.Warnings)
		}
		if len(l.Hosts) != 2 {
			t.Errorf("hosts %v", l.Hosts)
		}
	})
	t.Run("watchdog", func(t *testing.T) {
		l := parseFile(t, "testdata/public/watchdog.log")
		want := []WatchdogTimeout{
			{Line: 1, Rank: 1, SeqNum: 808, Op: "ALLREDUCE", NumelIn: 9801523, NumelOut: 9801523, TimeoutMs: 600000, RanMs: 600020},
			{Line: 3, Rank: 0, SeqNum: 808, Op: "ALLREDUCE", NumelIn: 9801523, NumelOut: 9801523, TimeoutMs: 600000, RanMs: 600030},
			{Line: 5, Rank: 1, SeqNum: 469508, Op: "ALLREDUCE", TimeoutMs: 1800000, RanMs: 1802212},
		}
		if !reflect.DeepEqual(l.Timeouts, want) {
			t.Errorf("timeouts\n got %+v\nwant %+v", l.Timeouts, want)
		}
		if len(l.Errors) != 2 || !strings.Contains(l.Errors[0].Meaning, "fell behind") {
			t.Errorf("errors %+v", l.Errors)
		}
	})
	t.Run("pytorch-system-error", func(t *testing.T) {
		l := parseFile(t, "testdata/public/pytorch-system-error.log")
		if l.Codes[SystemError] != 1 || l.Version != "2.10.3" || len(l.Errors) != 1 || !strings.HasPrefix(l.Errors[0].Meaning, "ncclSystemError") {
			t.Errorf("codes %v version %q errors %+v", l.Codes, l.Version, l.Errors)
		}
	})
}

// The ncclResult_t codes match nccl.h, and PyTorch's sentences map back to them.
func TestResultCodes(t *testing.T) {
	cases := []struct {
		code Result
		name string
		text string
	}{
		{0, "ncclSuccess", ""},
		{1, "ncclUnhandledCudaError", "unhandled cuda error (run with NCCL_DEBUG=INFO for details)"},
		{2, "ncclSystemError", "unhandled system error (run with NCCL_DEBUG=INFO for details)"},
		{3, "ncclInternalError", "internal error - please report this issue to the NCCL developers"},
		{4, "ncclInvalidArgument", "invalid argument (run with NCCL_DEBUG=WARN for details)"},
		{5, "ncclInvalidUsage", "invalid usage (run with NCCL_DEBUG=WARN for details)"},
		{6, "ncclRemoteError", "remote process exited or there was a network error"},
		{7, "ncclInProgress", "NCCL operation in progress"},
		{8, "ncclTimeout", ""},
	}
	for _, c := range cases {
		if got := c.code.Name(); got != c.name {
			t.Errorf("code %d: name %q, want %q", int(c.code), got, c.name)
		}
		if c.text == "" {
			continue
		}
		if got, ok := resultFromText(c.text); !ok || got != c.code {
			t.Errorf("%q -> %v %v, want %d", c.text, got, ok, int(c.code))
		}
	}
	if Result(42).Name() != "ncclResult 42" {
		t.Errorf("unknown code name %q", Result(42).Name())
	}
}

// Explain says what each problem means; on a clean log it says so.
func TestExplainPublic(t *testing.T) {
	var b strings.Builder
	if err := parseFile(t, "testdata/public/socket-abort.log").Explain(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"warnings (4)", "ncclSystemError(2)×6", "ncclRemoteError(6)×1", "SHM: through a shared host-memory buffer", "verdict: problems found"} {
		if !strings.Contains(out, want) {
			t.Errorf("explanation lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	if err := parseFile(t, "testdata/public/p2p-shm-8gpu.log").Explain(&b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "verdict: no warnings, errors or timeouts") || !strings.Contains(b.String(), "3 -> 4 via SHM/direct/direct") {
		t.Errorf("clean explanation:\n%s", b.String())
	}
}

// BenchmarkParse measures parser throughput (MB/s) on a large log built by
// repeating recorded lines: the H200 logs and the public ones.
func BenchmarkParse(b *testing.B) {
	var unit []byte
	for _, glob := range []string{"testdata/h200/*.log", "testdata/public/*.log"} {
		files, _ := filepath.Glob(glob)
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				b.Fatal(err)
			}
			unit = append(unit, data...)
		}
	}
	if len(unit) == 0 {
		b.Fatal("no testdata logs")
	}
	var big []byte
	for len(big) < 64<<20 {
		big = append(big, unit...)
	}
	b.SetBytes(int64(len(big)))
	b.ResetTimer()
	for b.Loop() {
		if _, err := Parse(strings.NewReader(string(big))); err != nil {
			b.Fatal(err)
		}
	}
}
