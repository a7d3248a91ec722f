package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/commlab/commlab/nccl"
)

// nccl-log explain --json prints the verdict model; the text form reads the
// same verdict out, and binary input gets an answer, not an error.
func TestNCCLLogExplainVerdict(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	shm := write("shm.txt", []byte("misc/shmutils.cc:87 NCCL WARN Error: failed to extend /dev/shm/nccl-YrFC5V to 33030532 bytes, error: No space left on device (28)\n"))
	bin := write("core", append([]byte{0x7f, 'E', 'L', 'F'}, make([]byte, 4096)...))
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"text", []string{"nccl-log", "explain", shm}, []string{"symptom: shm-failure", "1. shm-limit", "$ df -h /dev/shm", "form of NCCL 2.12+", "chapters: ch10"}},
		{"binary", []string{"nccl-log", "explain", bin}, []string{"symptom: unrecognised", "not read: binary data", "needs: the text of the log"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := run(t, c.args...)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
	out, err := run(t, "nccl-log", "explain", "--json", shm)
	if err != nil {
		t.Fatal(err)
	}
	var v nccl.Verdict
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if v.Model != nccl.VerdictModel || v.Symptom.ID != "shm-failure" || len(v.Evidence) == 0 || v.Evidence[0].Line != 1 || v.Log == nil {
		t.Errorf("verdict %+v", v)
	}
}
