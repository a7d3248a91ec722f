package nccl

import (
	"bytes"
	"encoding/json"
	"math/rand"
	"strings"
	"testing"
)

// Each form of input the issue lists gets its symptom, first cause, and
// (where the wording changed between releases) the NCCL version range.
func TestDiagnoseForms(t *testing.T) {
	cases := []struct {
		name, in            string
		symptom, cause, ver string
	}{
		{"ib 2.7-2.9", "node1:1:2 [0] transport/net_ib.cc:839 NCCL WARN NET/IB : Got completion with error 12, opcode 1, len 32768, vendor err 129",
			"ib-completion", "network-fault", "NCCL 2.7-2.9"},
		{"ib 2.10-2.19 without prefix", "transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<3333> with error 4, opcode 1, len 0, vendor err 81 (Send)",
			"ib-completion", "gpudirect-registration", "NCCL 2.10-2.19"},
		{"ib 2.20+", "NCCL WARN NET/IB : Got completion from peer 10.0.0.2<3333> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:10.0.0.1",
			"ib-completion", "network-fault", "NCCL 2.20+"},
		{"ib 2.29+", "NCCL WARN NET/IB : Got completion from peer 10.0.0.2<3333> with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_SEND(0) vendor_err=129 hca mlx5_0",
			"ib-completion", "network-fault", "NCCL 2.29+"},
		{"shm 2.7-2.11", "[3] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space left on device",
			"shm-failure", "shm-limit", "NCCL 2.7-2.11"},
		{"shm 2.12+", "misc/shmutils.cc:87 NCCL WARN Error: failed to extend /dev/shm/nccl-YrFC5V to 33030532 bytes, error: No space left on device (28)",
			"shm-failure", "shm-limit", "NCCL 2.12+"},
		{"connect retries 2.24+", "h:1:2 [0] misc/socket.cc:611 NCCL WARN socketStartConnect: exceeded error retry count after 35 attempts (Connection refused)",
			"connect-failed", "firewall", "NCCL 2.24+"},
		{"bootstrap on lo", "h:1:1 [0] NCCL INFO Bootstrap : Using lo:127.0.0.1<0>\nh:1:2 [0] NCCL WARN Call to connect returned Connection refused, retrying",
			"connect-failed", "wrong-interface", ""},
		{"socket fallback", "h:1:1 [0] NCCL INFO NET/IB : No device found.\nh:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>\nh:1:1 [0] NCCL INFO Using network Socket",
			"socket-fallback", "rdma-unavailable", ""},
		{"ifname set, none found", "h:1:1 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth9\nh:1:1 [0] bootstrap.cc:126 NCCL WARN Bootstrap : no socket interface found",
			"no-interface", "ifname-mismatch", ""},
		{"xid 79", "[ 1843.3] NVRM: Xid (PCI:0000:b3:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
			"gpu-lost", "gpu-hardware", ""},
		{"xid 45 after nvlink xid", "kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1, name=python3, Ch 00000001 caused by previous Xid 149",
			"nvlink-error", "nvlink-hardware", ""},
		{"xid 48", "NVRM: Xid (PCI:0000:3b:00): 48, pid=1, DBE (double bit error) ECC error", "gpu-xid", "gpu-hardware", ""},
		{"aer", "pcieport 0000:00:03.1: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)", "pcie-error", "pcie-link", ""},
		{"lspci downgraded", "\t\tLnkSta:\tSpeed 8GT/s (downgraded), Width x8 (downgraded)", "pcie-error", "pcie-link", ""},
		{"ibv_devinfo port down", "\t\t\tstate:\t\t\tPORT_DOWN (1)", "ib-link-down", "network-fault", ""},
		{"memlock", "misc/ibvwrap.cc:278 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory", "ib-setup", "memlock-limit", ""},
		{"cuda 999", "include/alloc.h:112 NCCL WARN Cuda failure 999 'unknown error'", "cuda-error", "gpu-hardware", ""},
		{"nvls", "transport/nvls.cc:157 NCCL WARN Cuda failure 1 'invalid argument'", "cuda-error", "nvls-unsupported", ""},
		{"driver", "misc/cudawrap.cc:182 NCCL WARN Cuda failure 'CUDA driver version is insufficient for CUDA runtime version'", "driver-mismatch", "driver-too-old", ""},
		{"duplicate gpu via pytorch", "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.\nLast error:\nDuplicate GPU detected : rank 1 and rank 0 both on CUDA device 1000",
			"duplicate-gpu", "rank-device-mapping", ""},
		{"nccl-tests code only", "host: Test NCCL failure common.cu:1119 'unhandled system error (run with NCCL_DEBUG=INFO for details) / '",
			"unexplained-error", "shm-limit", ""},
		{"watchdog, ranks on different work", "[rank0]:[E ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600013 milliseconds before timing out.\n" +
			"[rank1]:[E ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=8, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600010 milliseconds before timing out.",
			"watchdog-timeout", "rank-desync", ""},
		{"ib error beats the timeout it caused", "[E ProcessGroupNCCL.cpp:455] Some NCCL operations have failed or timed out.\nLast error: NET/IB : Got completion from peer 1.2.3.4<5> with error 12, opcode 0, len 0, vendor err 129",
			"ib-completion", "network-fault", "NCCL 2.10-2.19"},
		{"nccl-tests wrong values", "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n" +
			"     1048576        262144     float     sum      -1    50.11   20.93   36.62      3    49.80   21.06   36.85      0",
			"wrong-results", "p2p-corruption", ""},
		{"nccl-tests header, no rows", "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\nh:1:2 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 commId 0x2 - Init COMPLETE",
			"collective-hang", "firewall", ""},
		{"healthy table", "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n" +
			"     1048576        262144     float     sum      -1    50.11   20.93   36.62      0    49.80   21.06   36.85      0\n# Avg bus bandwidth    : 36.7",
			"healthy", "", ""},
		{"init never completes", "h:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\nh:1:2 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 commId 0x2 - Init START",
			"init-hang", "wrong-interface", ""},
		{"gdb stack in bootstrap", "#2  bootstrapNetAccept (recvComm=0x7ff) at bootstrap.cc:20\n#3  bootstrapRecv (commState=0x1) at bootstrap.cc:332",
			"init-hang", "wrong-interface", ""},
		{"heartbeat", "[rank1]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 1] Heartbeat monitor timed out! Process will be terminated after dumping debug info.",
			"watchdog-stuck", "cuda-hang", ""},
		{"prose", "I ran my training and it did not work, please help", "unrecognised", "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := Diagnose([]byte(c.in))
			if v.Symptom.ID != c.symptom {
				t.Fatalf("symptom %s, want %s; evidence %+v", v.Symptom.ID, c.symptom, v.Evidence)
			}
			if c.cause != "" && (len(v.Causes) == 0 || v.Causes[0].ID != c.cause) {
				t.Errorf("causes %+v, want %s first", v.Causes, c.cause)
			}
			if c.ver != "" && (len(v.Evidence) == 0 || !strings.HasPrefix(v.Evidence[0].Versions, c.ver)) {
				t.Errorf("evidence %+v, want versions %q", v.Evidence, c.ver)
			}
			for _, e := range v.Evidence {
				if e.Line < 1 || e.Line > v.Input.Lines {
					t.Errorf("evidence line %d outside 1..%d", e.Line, v.Input.Lines)
				}
			}
			if len(v.Causes) > 0 && len(v.Next) == 0 {
				t.Errorf("causes but no next commands")
			}
		})
	}
}

// Garbage, binary, compressed, empty and oversized input all get an answer
// that says what was read and what is missing, never a crash.
func TestDiagnoseBadInput(t *testing.T) {
	rnd := rand.New(rand.NewSource(1))
	random := make([]byte, 1<<20)
	rnd.Read(random)
	longLine := bytes.Repeat([]byte("NCCL WARN "), 2<<20) // 20 MiB, no newline
	huge := bytes.Repeat([]byte("h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n"), 1<<16)
	cases := []struct {
		name      string
		in        []byte
		max       int64
		binary    bool
		truncated bool
		wantNeeds string
		wantSympt string
	}{
		{"empty", nil, 0, false, false, "NCCL_DEBUG=INFO", "unrecognised"},
		{"random bytes", random, 0, true, false, "the text of the log", "unrecognised"},
		{"gzip", []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0}, 0, true, false, "gunzip", "unrecognised"},
		{"nul-padded text", append(bytes.Repeat([]byte{0}, 4096), []byte("NCCL WARN Duplicate GPU detected")...), 0, true, false, "the text of the log", "unrecognised"},
		{"one 20 MiB line", longLine, 0, false, false, "", ""},
		{"over the limit", huge, 1 << 20, false, true, "", ""},
		{"invalid utf-8 and ANSI colour", []byte("\x1b[31mnode:1:2 [0] NCCL WARN Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1000\x1b[0m \xff\xfe\n"), 0, false, false, "", "duplicate-gpu"},
		{"CR line ends", []byte("a\rNVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus\r"), 0, false, false, "", "gpu-lost"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, err := DiagnoseReader(bytes.NewReader(c.in), c.max)
			if err != nil {
				t.Fatal(err)
			}
			if (v.Input.Binary != "") != c.binary {
				t.Errorf("binary %q, want %v", v.Input.Binary, c.binary)
			}
			if v.Input.Truncated != c.truncated {
				t.Errorf("truncated %v, want %v", v.Input.Truncated, c.truncated)
			}
			if c.wantSympt != "" && v.Symptom.ID != c.wantSympt {
				t.Errorf("symptom %s, want %s", v.Symptom.ID, c.wantSympt)
			}
			if c.wantNeeds != "" && !strings.Contains(strings.Join(v.Needs, "\n"), c.wantNeeds) {
				t.Errorf("needs %q lack %q", v.Needs, c.wantNeeds)
			}
			var b bytes.Buffer
			if err := v.WriteText(&b); err != nil || !strings.Contains(b.String(), "symptom: "+v.Symptom.ID) {
				t.Errorf("text %q, err %v", b.String(), err)
			}
			if _, err := json.Marshal(v); err != nil {
				t.Error(err)
			}
		})
	}
}

// Every symptom links to chapters, and every cause it names has commands.
func TestTaxonomyComplete(t *testing.T) {
	for _, s := range Symptoms {
		if len(s.Chapters) == 0 || s.TitleZH == "" {
			t.Errorf("%s: no chapters or Chinese title", s.ID)
		}
		for _, c := range s.causes {
			if len(Causes[c].Check) == 0 {
				t.Errorf("%s: cause %s has no commands", s.ID, c)
			}
		}
	}
	for _, sg := range signals {
		if _, i := symptomInfo(sg.symptom); i < 0 {
			t.Errorf("signal %v names unknown symptom", sg.any)
		}
		for _, c := range sg.causes {
			if _, ok := Causes[c]; !ok {
				t.Errorf("signal %v names unknown cause %s", sg.any, c)
			}
		}
	}
}

// FuzzDiagnose: any bytes get a verdict from the taxonomy whose evidence
// points at lines that exist (go test -fuzz FuzzDiagnose ./nccl).
func FuzzDiagnose(f *testing.F) {
	for _, c := range loadCorpus(f) {
		f.Add([]byte(c.Excerpt))
	}
	f.Add([]byte{0x1f, 0x8b})
	f.Add([]byte("#  size count type\n 1 1 float sum -1 1 1 1 5 1 1 1 5"))
	f.Fuzz(func(t *testing.T, data []byte) {
		v := Diagnose(data)
		if _, i := symptomInfo(v.Symptom.ID); i < 0 {
			t.Fatalf("symptom %q not in the taxonomy", v.Symptom.ID)
		}
		for _, e := range v.Evidence {
			if e.Line < 1 || e.Line > v.Input.Lines {
				t.Fatalf("evidence line %d outside 1..%d", e.Line, v.Input.Lines)
			}
		}
		if _, err := json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	})
}
