package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/commlab/commlab/bench/ncclmsg"
)

// TestMain lets the test binary act as a rank process: the launcher re-executes
// it with the COMMLAB_BENCH_* variables, as `commlab bench rank` would run.
func TestMain(m *testing.M) {
	if os.Getenv(EnvRank) != "" {
		os.Exit(rankMain())
	}
	os.Exit(m.Run())
}

func rankMain() int {
	re, err := RankEnvFromOS(os.Getenv)
	if err == nil {
		var o Options
		if err = json.Unmarshal([]byte(os.Getenv(EnvOpts)), &o); err == nil {
			if re.Rank == 0 && re.ID == "" {
				re.IDOut = os.NewFile(3, "id")
			}
			err = RunRank(context.Background(), o, re, os.Stdout)
		}
	}
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		return 1
	}
	return 0
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// launch runs the benchmark with real rank processes on loopback.
func launch(t *testing.T, o Options, env ...string) (stdout, stderr string, err error) {
	t.Helper()
	var so, se syncBuf
	l := &Launcher{Starter: LocalStarter{}, Exe: os.Args[0], Stdout: &so, Stderr: &se, Grace: 3 * time.Second,
		Env: append([]string{"NCCL_SOCKET_IFNAME=lo", "COMMLAB_BENCH_TIMEOUT=15"}, env...)}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	err = l.Run(ctx, o)
	return so.String(), se.String(), err
}

func smallOpts(coll Collective, hosts string) Options {
	o := DefaultOptions()
	o.Coll, o.MinBytes, o.MaxBytes, o.StepFactor, o.Iters, o.Warmup = coll, 8, 64<<10, 8, 2, 1
	if hosts != "" {
		o.Hosts, _ = ParseHosts(hosts)
	}
	return o
}

var rowRE = regexp.MustCompile(`(?m)^\s+(\d+)\s+(\d+)\s+(float|int32)\s+(\w+)\s+(-?\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)$`)

func TestLaunchTableAndTransportSelection(t *testing.T) {
	for _, tc := range []struct {
		name  string
		hosts string
		env   []string
		want  []string // regexps that must match the output
		not   []string
	}{
		{"p2p", "n1:2", nil, []string{`via P2P/CUMEM`}, []string{`via SHM`, `via NET`}},
		{"p2p-disable", "n1:2", []string{"NCCL_P2P_DISABLE=1"}, []string{`Channel 00 : 0\[0\] -> 1\[1\] via SHM/direct/direct`, `NCCL_P2P_DISABLE set by environment to 1$`}, []string{`via P2P`}},
		{"p2p-level-loc", "n1:2", []string{"NCCL_P2P_LEVEL=0"}, []string{`via SHM/direct/direct`, `NCCL_P2P_LEVEL set by environment to LOC$`}, []string{`via P2P`}},
		{"both-disabled", "n1:2", []string{"NCCL_P2P_DISABLE=1", "NCCL_SHM_DISABLE=1"}, []string{`\[send\] via NET/Socket/0`, `\[receive\] via NET/Socket/0`}, []string{`via P2P`, `via SHM`}},
		{"inter-node-socket", "n1:1,n2:1", nil, []string{`NET/IB : No device found\.\n.*NET/IB : Using \[RO\]; OOB lo:127\.0\.0\.1<0>\n.*Failed to initialize NET plugin IB`, `NET/Socket : Using \[0\]lo:127\.0\.0\.1<0>`, `Using network Socket`, `via NET/Socket/0`}, []string{`via NET/IB`}},
		{"inter-node-ib", "n1:1,n2:1", []string{"NCCL_IB_HCA=lo", "COMMLAB_BENCH_ROCE_PORT=34791"}, []string{`NET/IB : Using \[0\]lo:1/RoCE \[RO\]; OOB lo:127\.0\.0\.1<0>`, `NCCL_IB_HCA set to lo$`, `Using network IB`, `via NET/IB/0`}, []string{`via NET/Socket`}},
		{"ib-disable", "n1:1,n2:1", []string{"NCCL_IB_HCA=lo", "NCCL_IB_DISABLE=1"}, []string{`NCCL_IB_DISABLE set by environment to 1\.$`, `Using network Socket`, `via NET/Socket/0`}, []string{`via NET/IB`}},
		{"mixed", "n1:2,n2:2", nil, []string{`0\[0\] -> 1\[1\] via P2P/CUMEM`, `1\[1\] -> 2\[0\] \[send\] via NET/Socket/0`, `Channel 00/02 : 0 1 2 3`, `Connected all rings, use ring PXN 0 GDR 0`, `Connected all trees`, `NCCL INFO NCCL version 2\.28\.9\+commlab-emulation`, `NCCL INFO Bootstrap: Using lo:127\.0\.0\.1<0>`}, nil},
		// nccl-tests' split: two 2-rank communicators at once, each numbering its ranks from 0.
		{"split-across-nodes", "n1:2,n2:2", []string{"NCCL_TESTS_SPLIT_MASK=0x1"}, []string{`#  Rank  1 Group  1 Pid +\d+ on +n1 `, `#  Rank  2 Group  0 Pid +\d+ on +n2 `, `^n2:.*rank 1 nranks 2 .* Init COMPLETE`, `^n1:.*0\[1\] -> 1\[1\] \[send\] via NET/Socket/0`, `Channel 00/02 : 0 1$`}, []string{`via P2P`, `nranks 4`}},
		{"split-within-nodes", "n1:2,n2:2", []string{"NCCL_TESTS_SPLIT=DIV 2"}, []string{`#  Rank  1 Group  0 Pid +\d+ on +n1 `, `#  Rank  3 Group  1 Pid +\d+ on +n2 `, `^n2:.*0\[0\] -> 1\[1\] via P2P/CUMEM`}, []string{`via NET`, `nranks 4`}},
		{"claims-2.26", "n1:1", []string{"COMMLAB_BENCH_NCCL_VERSION=2.26"}, []string{`NCCL version 2\.26\.6\+commlab-emulation`}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, err := launch(t, smallOpts(AllReduce, tc.hosts), append(tc.env, "NCCL_DEBUG=INFO")...)
			if err != nil {
				t.Fatalf("run: %v\nstderr:\n%s\nstdout:\n%s", err, errOut, out)
			}
			for _, w := range tc.want {
				if !regexp.MustCompile("(?m)" + w).MatchString(out) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tc.not {
				if regexp.MustCompile("(?m)" + w).MatchString(out) {
					t.Errorf("output has %q:\n%s", w, out)
				}
			}
			checkNCCLLines(t, out)
			rows := rowRE.FindAllStringSubmatch(out, -1)
			if want := len(smallOpts(AllReduce, "").Sizes()); len(rows) != want {
				t.Errorf("got %d table rows, want %d:\n%s", len(rows), want, out)
			}
			for _, r := range rows {
				if r[9] != "0" || r[13] != "0" {
					t.Errorf("row has wrong elements: %q", r[0])
				}
			}
			if !strings.Contains(out, "# Avg bus bandwidth    : ") || !strings.Contains(out, "# Out of bounds values : 0 OK") {
				t.Errorf("footer missing:\n%s", out)
			}
		})
	}
}

func TestLaunchEveryCollective(t *testing.T) {
	for _, c := range Collectives {
		t.Run(string(c), func(t *testing.T) {
			o := smallOpts(c, "n1:2,n2:1")
			o.Root = 2
			o.Op = "all"
			out, errOut, err := launch(t, o)
			if err != nil {
				t.Fatalf("run: %v\n%s", err, errOut)
			}
			rows := rowRE.FindAllStringSubmatch(out, -1)
			want := len(o.Sizes())
			if c.reduces() {
				want *= 3
			}
			if len(rows) != want {
				t.Fatalf("got %d rows, want %d:\n%s", len(rows), want, out)
			}
			for _, r := range rows {
				if r[9] != "0" || (r[13] != "0" && r[13] != "N/A") {
					t.Errorf("wrong elements: %q", r[0])
				}
				if c.rooted() && r[5] != "2" || !c.rooted() && r[5] != "-1" {
					t.Errorf("root column: %q", r[0])
				}
			}
		})
	}
}

func TestDebugFileAndTrace(t *testing.T) {
	dir := t.TempDir()
	o := smallOpts(AllReduce, "a:1,b:1")
	o.Trace = filepath.Join(dir, "trace.json")
	out, errOut, err := launch(t, o, "NCCL_DEBUG=INFO", "NCCL_DEBUG_FILE="+filepath.Join(dir, "nccl.%h.%p.log"))
	if err != nil {
		t.Fatalf("run: %v\n%s", err, errOut)
	}
	if strings.Contains(out, "NCCL INFO") {
		t.Errorf("INFO lines went to stdout despite NCCL_DEBUG_FILE:\n%s", out)
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "nccl.*.log"))
	if len(logs) != 2 {
		t.Fatalf("want one debug file per rank, got %v", logs)
	}
	for _, f := range logs {
		b, _ := os.ReadFile(f)
		if !strings.Contains(string(b), "Connected all rings") {
			t.Errorf("%s lacks the init lines:\n%s", f, b)
		}
	}
	b, err := os.ReadFile(o.Trace)
	if err != nil {
		t.Fatal(err)
	}
	var tr struct {
		TraceEvents []struct {
			Name string  `json:"name"`
			Ph   string  `json:"ph"`
			PID  int     `json:"pid"`
			TID  int     `json:"tid"`
			Dur  float64 `json:"dur"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(b, &tr); err != nil {
		t.Fatalf("trace is not JSON: %v", err)
	}
	perRank := map[int]map[string]int{0: {}, 1: {}}
	for _, e := range tr.TraceEvents {
		if e.Ph == "X" {
			perRank[e.TID][e.Name]++
		}
	}
	if o.Check != 1 {
		t.Fatalf("the test expects -c 1, got %d", o.Check)
	}
	// warmup 2 sizes × 1, then per size and half: the timed iterations and one checked
	// call, with the check's local work (init data, verify) around it.
	halves := len(o.Sizes()) * 2
	want := map[string]int{"all_reduce": 2*o.Warmup + halves*(o.Iters+1), "init data": halves, "verify": halves}
	for r := range 2 {
		for name, n := range want {
			if perRank[r][name] != n {
				t.Errorf("rank %d has %d %q slices in the trace, want %d", r, perRank[r][name], name, n)
			}
		}
	}
}

func TestBadInput(t *testing.T) {
	if _, err := ParseCollective("all_reduse"); err == nil || !strings.Contains(err.Error(), "unknown collective") {
		t.Errorf("unknown collective: %v", err)
	}
	o := smallOpts(AllReduce, "n1:2")
	o.MinBytes, o.MaxBytes = 1<<20, 8
	if _, _, err := launch(t, o); err == nil || !strings.Contains(err.Error(), "size range reversed") {
		t.Errorf("reversed sizes: %v", err)
	}
	for _, h := range []string{"", "n1:0", "n1:x", "n1,n1", "bad name:2"} {
		if _, err := ParseHosts(h); err == nil {
			t.Errorf("ParseHosts(%q) accepted", h)
		}
	}
	_, errOut, err := launch(t, smallOpts(AllReduce, "n1:2"), "NCCL_SOCKET_IFNAME=nosuchnic0")
	if err == nil || !strings.Contains(errOut, `no interface matches NCCL_SOCKET_IFNAME="nosuchnic0"`) {
		t.Errorf("bad NCCL_SOCKET_IFNAME: err %v, stderr:\n%s", err, errOut)
	}
}

func TestRankDiesMidRun(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string
	}{
		{"socket", nil},
		{"ib", []string{"NCCL_IB_HCA=lo", "COMMLAB_BENCH_ROCE_PORT=44791", "NCCL_IB_TIMEOUT=14"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := smallOpts(AllReduce, "n1:1,n2:1,n3:1")
			o.MinBytes, o.MaxBytes, o.Iters = 4<<20, 4<<20, 100000
			var so, se syncBuf
			l := &Launcher{Starter: LocalStarter{}, Exe: os.Args[0], Stdout: &so, Stderr: &se, Grace: 20 * time.Second,
				Env: append([]string{"NCCL_SOCKET_IFNAME=lo", "COMMLAB_BENCH_TIMEOUT=10"}, tc.env...)}
			l.Started = func(rank int, _ string, p Proc) {
				if rank == 1 {
					time.AfterFunc(1500*time.Millisecond, func() { p.Kill() })
				}
			}
			start := time.Now()
			err := l.Run(context.Background(), o)
			took := time.Since(start)
			var re *RankError
			if !errors.As(err, &re) {
				t.Fatalf("want a RankError, got %v", err)
			}
			if took > 25*time.Second {
				t.Errorf("took %s to notice the dead rank", took)
			}
			if !strings.Contains(se.String(), "Test NCCL failure") {
				t.Errorf("survivors did not report an NCCL-style failure:\n%s", se.String())
			}
			t.Logf("after %s: %v\n%s", took.Round(time.Millisecond), err, se.String())
		})
	}
}

// checkNCCLLines fails on a debug line whose text is not in the format of an
// NCCL 2.28.9 message (bench/ncclmsg), or whose prefix is not NCCL's.
func checkNCCLLines(t *testing.T, out string) {
	t.Helper()
	var res []*regexp.Regexp
	for _, m := range ncclmsg.All() {
		re := m.Regexp().String()
		if m == ncclmsg.RingPrefix || m == ncclmsg.VersionBanner {
			re = strings.TrimSuffix(re, "$") // followed by the ranks / the version
		}
		res = append(res, regexp.MustCompile(re))
	}
	prefix := regexp.MustCompile(`^[\w.-]+:\d+:\d+ \[\d+\] (NCCL INFO |[\w/]+\.cc:\d+ NCCL WARN )`)
	for _, line := range strings.Split(out, "\n") {
		if !strings.Contains(line, " NCCL INFO ") && !strings.Contains(line, " NCCL WARN ") {
			continue
		}
		p := prefix.FindString(line)
		if p == "" {
			t.Errorf("debug line without NCCL's prefix: %q", line)
			continue
		}
		body, ok := line[len(p):], false
		for _, re := range res {
			ok = ok || re.MatchString(body)
		}
		if !ok {
			t.Errorf("debug line in no NCCL format: %q", line)
		}
	}
}
