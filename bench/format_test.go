package bench

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/commlab/commlab/bench/ncclmsg"
	"github.com/commlab/commlab/bench/ncclsock"
	"github.com/commlab/commlab/bench/transport"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

func TestTableGolden(t *testing.T) {
	var b bytes.Buffer
	WriteHeader(&b, Header{Program: "all_reduce_perf", NCCL: versionString(ncclmsg.Default), NThreads: 1, NGpus: 1, MinBytes: 8, MaxBytes: 134217728, Step: 2, StepIsFactor: true,
		Warmup: 5, Iters: 20, AggIters: 1, Check: 1,
		Devices: []DeviceLine{{Rank: 0, Pid: 1234, Host: "node1", Device: 0}, {Rank: 1, Pid: 1240, Host: "node2", Device: 0}}})
	n := 2
	var sum float64
	var cnt int
	// Fixed timings: a latency floor plus size over a 1.25 GB/s link.
	for size := int64(8); size <= 134217728; size *= 16 {
		row := Row{Bytes: size, Count: size / 4, Type: "float", RedOp: "sum", Root: -1}
		for i, r := range []*Result{&row.Out, &row.In} {
			sec := 30e-6 + float64(size)/1.25e9 + float64(i)*1e-6
			r.TimeUs = sec * 1e6
			r.AlgBw = float64(size) / 1e9 / sec
			r.BusBw = r.AlgBw * AllReduce.BusBwFactor(n)
			sum += r.BusBw
			cnt++
		}
		row.In.Wrong = -1
		WriteRow(&b, row)
	}
	WriteFooter(&b, 0, sum/float64(cnt))
	golden := filepath.Join("testdata", "table.golden")
	if *update {
		if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.Bytes(), want) {
		t.Errorf("table differs from %s (run with -update to accept):\n%s", golden, b.String())
	}
}

func TestFloatStr(t *testing.T) {
	for _, tc := range []struct {
		v     float64
		width int
		want  string
	}{
		{0, 6, "  0.00"}, {1.234, 6, "  1.23"}, {123.456, 6, "123.46"}, {1234.5, 6, "1234.5"},
		{12345.6, 6, " 12346"}, {123456.7, 6, "123457"}, {1234567, 6, " 1e+06"},
		{10.71, 7, "  10.71"}, {71472.4, 7, "71472.4"}, {172378.2, 7, " 172378"}, {12345678, 7, "1.2e+07"},
	} {
		if got := floatStr(tc.v, tc.width); got != tc.want {
			t.Errorf("floatStr(%v, %d) = %q, want %q", tc.v, tc.width, got, tc.want)
		}
	}
}

func TestBusBwFactor(t *testing.T) {
	for _, tc := range []struct {
		c    Collective
		n    int
		want float64
	}{
		{AllReduce, 4, 1.5}, {AllReduce, 2, 1}, {AllGather, 4, 0.75}, {ReduceScatter, 8, 0.875},
		{AllToAll, 4, 0.75}, {Broadcast, 4, 1}, {Reduce, 4, 1}, {SendRecv, 4, 1},
	} {
		if got := tc.c.BusBwFactor(tc.n); got != tc.want {
			t.Errorf("%s n=%d: %v, want %v", tc.c, tc.n, got, tc.want)
		}
	}
}

func TestParseEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		vars    map[string]string
		check   func(Env) bool
		wantErr string
	}{
		{"defaults", nil, func(e Env) bool {
			return e.Algo == "ring" && e.IBRetryCnt == 7 && e.IBTimeout == 18 && e.NSocks == 1 && e.NThreads == 1 && e.Channels() == 2
		}, ""},
		{"ib timeout", map[string]string{"NCCL_IB_TIMEOUT": "12"}, func(e Env) bool { return e.IBAckTimeout() == 16777216*time.Nanosecond }, ""},
		{"tree", map[string]string{"NCCL_ALGO": "Tree"}, func(e Env) bool { return e.Algo == "tree" }, ""},
		{"exclude ring", map[string]string{"NCCL_ALGO": "^Ring"}, func(e Env) bool { return e.Algo == "tree" }, ""},
		{"channels", map[string]string{"NCCL_MAX_NCHANNELS": "1"}, func(e Env) bool { return e.Channels() == 1 }, ""},
		{"min channels", map[string]string{"NCCL_MIN_NCHANNELS": "4"}, func(e Env) bool { return e.Channels() == 4 }, ""},
		{"bad algo", map[string]string{"NCCL_ALGO": "Bogus"}, nil, `NCCL_ALGO="Bogus"`},
		{"bad flag", map[string]string{"NCCL_IB_DISABLE": "yes"}, nil, "NCCL_IB_DISABLE"},
		{"too many sockets", map[string]string{"NCCL_SOCKET_NTHREADS": "16", "NCCL_NSOCKS_PERTHREAD": "8"}, nil, "at most 64"},
		{"retry range", map[string]string{"NCCL_IB_RETRY_CNT": "9"}, nil, "NCCL_IB_RETRY_CNT"},
		{"bad net", map[string]string{"NCCL_NET": "Carrier pigeon"}, nil, "NCCL_NET"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := ParseEnv(func(k string) string { return tc.vars[k] })
			if tc.wantErr != "" {
				if err == nil || !bytes.Contains([]byte(err.Error()), []byte(tc.wantErr)) {
					t.Fatalf("err = %v, want it to mention %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(e) {
				t.Errorf("unexpected config %+v", e)
			}
		})
	}
}

func TestMatchIfname(t *testing.T) {
	devs := devices("lo", "eth0", "rdma0", "rdma1", "docker0", "ib0")
	for _, tc := range []struct {
		spec string
		want string
	}{
		{"rdma", "rdma0,rdma1"},
		{"=rdma0", "rdma0"},
		{"^rdma,lo", "eth0,docker0,ib0"},
		{"^=docker0", "lo,eth0,rdma0,rdma1,ib0"},
		{"eth,ib", "eth0,ib0"},
		{"nosuch", ""},
	} {
		if got := names(matchIfname(tc.spec, devs)); got != tc.want {
			t.Errorf("matchIfname(%q) = %q, want %q", tc.spec, got, tc.want)
		}
	}
	if got := names(socketDevices("", devices("lo", "eth0", "rdma0", "docker0"))); got != "eth0,rdma0" {
		t.Errorf("default socket devices = %q, want eth0,rdma0 (NCCL skips lo and docker)", got)
	}
	if got := names(socketDevices("", devices("lo"))); got != "lo" {
		t.Errorf("default socket devices with only lo = %q", got)
	}
	if got := names(ibDevices("", devs)); got != "rdma0,rdma1" {
		t.Errorf("default HCAs = %q", got)
	}
	if got := names(ibDevices("=rdma1:1", devs)); got != "rdma1" {
		t.Errorf("NCCL_IB_HCA==rdma1:1 = %q", got)
	}
}

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		err  bool
	}{{"8", 8, false}, {"128M", 128 << 20, false}, {"1G", 1 << 30, false}, {"64k", 64 << 10, false}, {"1.5M", 3 << 19, false}, {"x", 0, true}, {"-1", 0, true}} {
		got, err := ParseSize(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v", tc.in, got, err)
		}
	}
}

func devices(names ...string) []transport.Device {
	var out []transport.Device
	for i, n := range names {
		out = append(out, transport.Device{Name: n, IP: netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)})})
	}
	return out
}

func names(devs []transport.Device) string {
	var s []string
	for _, d := range devs {
		s = append(s, d.Name)
	}
	return strings.Join(s, ",")
}

// TestFailureKind: a rank's failure carries the return-code text NCCL 2.24+ would
// print for the same cause (the messages are the bench's own, from the labs).
func TestFailureKind(t *testing.T) {
	const (
		system = "'unhandled system error (run with NCCL_DEBUG=INFO for details) / "
		remote = "'remote process exited or there was a network error / "
	)
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"root unreachable by timeout", errors.New("bootstrap: rank 2: connect to root 198.18.0.1:34869: no answer within 10s (last error: dial tcp 198.18.0.1:34869: i/o timeout)"), remote},
		{"root missing ranks", errors.New("bootstrap root: 3 of 4 ranks checked in within 10s; missing ranks [2]"), remote},
		{"root went away", fmt.Errorf("bootstrap: rank 1: read ring address from root 198.18.0.1:34869: %w", io.EOF), remote},
		{"peer never connected", errors.New("channel 01: rank 2 <- rank 1 (node2): wait for connection from rank 1 channel 1: no connection within 20s"), remote},
		{"collective stalled", errors.New("all_reduce of 4194304 bytes did not complete within 20s (watchdog; real NCCL would hang here)"), remote},
		{"refused", fmt.Errorf("dial: %w", syscall.ECONNREFUSED), remote},
		{"route gone (not retried by NCCL)", errors.New("bootstrap: rank 2: connect to root 198.18.4.1:4000: no answer within 20s (last error: dial tcp 198.18.4.1:4000: connect: network is unreachable)"), system},
		{"local failure", errors.New("create shared memory segment: no space left on device"), system},
		{"connect retries used up", fmt.Errorf("connect: %w", &ncclsock.Error{Code: ncclsock.RemoteError, Errno: syscall.ECONNREFUSED, Msg: "socketPollConnect: connect to 198.18.1.2<4000> returned Connection refused, exceeded error retry count after 35 attempts"}), remote},
		{"2.26 timed out, no POLLOUT", fmt.Errorf("connect: %w", &ncclsock.Error{Code: ncclsock.SystemError, Errno: syscall.ETIMEDOUT, Msg: "socketPollConnect poll() returned 1, no POLLOUT events"}), system},
		{"no route", fmt.Errorf("connect: %w", &ncclsock.Error{Code: ncclsock.SystemError, Errno: syscall.ENETUNREACH, Msg: "socketStartConnect: connect to 198.18.4.1<4000> failed : Network is unreachable"}), system},
	} {
		got := (&Failure{Node: "node3", Err: tc.err}).Error()
		if !strings.HasPrefix(got, "node3: Test NCCL failure commlab/bench "+tc.want) {
			t.Errorf("%s: %s", tc.name, got)
		}
	}
}
