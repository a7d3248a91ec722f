package backend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"github.com/commlab/commlab/labs/netns"
)

// ErrGPUUnusable marks a GPU lab whose GPUs cannot be used from the learner's shell
// on this host; the error's text names the device node, library or setting at fault.
var ErrGPUUnusable = errors.New("the GPU cannot be used inside the lab")

// gpuProbe runs in the lab node as the learner's shell would run it and prints JSON:
// where commlab is on the learner's PATH, which /dev/nvidia* nodes cannot be opened, whether libcuda.so.1 loads, whether
// PyTorch imports, and what CUDA says when it starts.
const gpuProbe = `
import glob, json, os, ctypes, shutil
r = {"dev": [], "commlab": shutil.which("commlab") or ""}
for p in sorted(glob.glob("/dev/nvidia*")):
    if os.path.isdir(p):
        continue
    try:
        os.close(os.open(p, os.O_RDWR))
    except OSError as e:
        r["dev"].append("%s: %s" % (p, e.strerror))
try:
    ctypes.CDLL("libcuda.so.1")
except OSError as e:
    r["libcuda"] = str(e)
try:
    import torch
except Exception as e:
    r["torch"] = "%s: %s" % (type(e).__name__, e)
else:
    try:
        torch.cuda.init()
        r["count"] = torch.cuda.device_count()
    except Exception as e:
        r["cuda"] = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
print(json.dumps(r))
`

// probeResult is what gpuProbe printed.
type probeResult struct {
	Dev     []string `json:"dev"`
	LibCUDA string   `json:"libcuda"`
	Torch   string   `json:"torch"`
	CUDA    string   `json:"cuda"`
	Count   int      `json:"count"`
	Commlab string   `json:"commlab"`
}

// verdict says why want GPUs cannot be used, or nil if they can.
func (r probeResult) verdict(want int, python string, env []string) error {
	var why []string
	if r.Commlab == "" {
		why = append(why, "commlab is not on the learner's PATH (the chapters run `commlab gpu pcie`): install the binary where every user can read it, e.g. /usr/local/bin")
	}
	if r.Count >= want && r.CUDA == "" && r.Torch == "" && len(why) == 0 {
		return nil
	}
	if r.Torch != "" {
		why = append(why, fmt.Sprintf("PyTorch does not import in %s (%s); commlab's PATH must find the python3 that has PyTorch", python, r.Torch))
	}
	if r.LibCUDA != "" {
		lp := "unset"
		for _, kv := range env {
			if v, ok := strings.CutPrefix(kv, "LD_LIBRARY_PATH="); ok {
				lp = v
			}
		}
		why = append(why, fmt.Sprintf("libcuda.so.1 does not load (%s; LD_LIBRARY_PATH %s)", r.LibCUDA, lp))
	}
	if len(r.Dev) > 0 {
		why = append(why, "device nodes the learner cannot open: "+strings.Join(r.Dev, ", "))
	}
	if r.CUDA != "" {
		why = append(why, "CUDA does not start: "+r.CUDA)
	}
	if len(why) == 0 {
		why = append(why, fmt.Sprintf("CUDA sees %d GPU(s) in the lab, the lab needs %d", r.Count, want))
	}
	return fmt.Errorf("%w: %s", ErrGPUUnusable, strings.Join(why, "; "))
}

// probeGPU checks, before the learner gets the lab, that CUDA starts from node as a
// program in the learner's shell would (same uid, namespaces, mounts, cgroup and
// environment) and sees want GPUs.
func probeGPU(ctx context.Context, sb *netns.Sandbox, node, path, python string, env []string, want int) error {
	c, err := sb.LearnerExec(ctx, node, python, "-c", gpuProbe)
	if err != nil {
		return err
	}
	for i, kv := range c.Env {
		if strings.HasPrefix(kv, "PATH=") {
			c.Env[i] = "PATH=" + path + ":" + strings.TrimPrefix(kv, "PATH=")
		}
	}
	c.Env = append(c.Env, env...)
	out, err := c.Output()
	var r probeResult
	if jerr := json.Unmarshal(lastLine(out), &r); jerr != nil {
		detail := strings.TrimSpace(string(out))
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			detail = strings.TrimSpace(string(ee.Stderr))
		} else if err == nil {
			err = jerr
		}
		return fmt.Errorf("%w: %s cannot be run as the learner (%v): %s; PyTorch must be installed where every user can read it",
			ErrGPUUnusable, python, err, lastLine([]byte(detail)))
	}
	return r.verdict(want, python, env)
}

// lastLine is the last non-empty line of b.
func lastLine(b []byte) []byte {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return []byte(lines[len(lines)-1])
}
