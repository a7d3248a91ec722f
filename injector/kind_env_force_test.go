//go:build linux

package injector

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestEnvForceRoundTrip(t *testing.T) {
	l := newLab(t, 1500, "n1")
	in := newInjector(t)
	for _, tc := range []struct {
		where, file, line string
	}{
		{"profile.d", "profile.d/nccl.sh", "export NCCL_P2P_DISABLE=1"},
		{"job-env", "commlab/job.env", "NCCL_P2P_DISABLE=1"},
		{"container-env", "commlab/container.env", "NCCL_P2P_DISABLE=1"},
	} {
		t.Run(tc.where, func(t *testing.T) {
			f := mustParse(t, in, "env-force", map[string]string{"where": tc.where, "vars": "NCCL_P2P_DISABLE=1 NCCL_SOCKET_IFNAME=eth0"})
			roundTrip(t, l, in, "n1", f, func(t *testing.T, e Entry) {
				tg := l.target("n1")
				b, err := os.ReadFile(filepath.Join(tg.EtcDir, tc.file))
				if err != nil {
					t.Fatal(err)
				}
				mustContain(t, "cat "+tc.file, string(b), tc.line)
				// The workload, launched with EnvFor like the bench launcher does, sees them.
				vars, err := EnvFor(tg)
				if err != nil {
					t.Fatal(err)
				}
				cmd := exec.Command("ip", "netns", "exec", l.NetNS("n1"), "env")
				cmd.Env = append(os.Environ(), vars...)
				out, err := cmd.Output()
				if err != nil {
					t.Fatal(err)
				}
				mustContain(t, "the workload's environment", string(out), "NCCL_P2P_DISABLE=1\n", "NCCL_SOCKET_IFNAME=eth0\n")
			})
			if vars, _ := EnvFor(l.target("n1")); len(vars) != 0 {
				t.Errorf("EnvFor after revert: %v", vars)
			}
		})
	}
}

func TestEnvForPrecedence(t *testing.T) {
	etc := t.TempDir()
	tg := Target{Sandbox: "s", Node: "n", EtcDir: etc}
	write := func(rel, body string) {
		p := filepath.Join(etc, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("commlab/container.env", "A=container\nB=container\nC=container\n")
	write("profile.d/a.sh", "# comment\nexport B=profile\nexport C=profile\nD=not-exported\n")
	write("commlab/job.env", "C=job\n")
	got, err := EnvFor(tg)
	if err != nil {
		t.Fatal(err)
	}
	if want := "A=container B=profile C=job"; strings.Join(got, " ") != want {
		t.Errorf("EnvFor = %v, want %s", got, want)
	}
}
