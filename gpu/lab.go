package gpu

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
)

// LabGPUs are the GPUs a GPU lab is given, and where this host keeps the driver's
// user-space libraries, as the host's own NVML shows them.
type LabGPUs struct {
	// UUIDs of the lab's GPUs, in NVML order: what CUDA_VISIBLE_DEVICES lists.
	UUIDs []string
	// DriverLibDir is the directory libnvidia-ml.so.1 was loaded from. Every
	// driver install puts libcuda.so.1 beside it, so a lab's programs find CUDA's
	// driver library however the host installed it (ld.so.cache, LD_LIBRARY_PATH,
	// a container toolkit's /usr/local/nvidia/lib64). Empty if it cannot be told.
	DriverLibDir string
}

// loadedFrom returns the directory of the first mapping in maps (a
// /proc/PID/maps file) whose file name starts with lib.
func loadedFrom(maps, lib string) string {
	f, err := os.Open(maps)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 {
			continue
		}
		p := fields[len(fields)-1]
		if strings.HasPrefix(filepath.Base(p), lib) {
			return filepath.Dir(p)
		}
	}
	return ""
}
