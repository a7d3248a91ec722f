package gpu

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
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

// ForLab picks the first n GPUs of this node for a lab.
func ForLab(n int) (LabGPUs, error) {
	nv, err := Open()
	if err != nil {
		return LabGPUs{}, err
	}
	defer nv.Close()
	return nv.forLab(n, "/proc/self/maps")
}

func (n *NVML) forLab(want int, maps string) (LabGPUs, error) {
	count, ret := n.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return LabGPUs{}, fmt.Errorf("count GPUs: %s", nvmlErr(ret))
	}
	if count < want {
		return LabGPUs{}, fmt.Errorf("this lab needs %d GPUs in one node, this host has %d", want, count)
	}
	var out LabGPUs
	for i := 0; i < want; i++ {
		d, ret := n.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return LabGPUs{}, fmt.Errorf("open GPU %d: %s", i, nvmlErr(ret))
		}
		uuid, ret := d.GetUUID()
		if ret != nvml.SUCCESS {
			return LabGPUs{}, fmt.Errorf("read UUID of GPU %d: %s", i, nvmlErr(ret))
		}
		out.UUIDs = append(out.UUIDs, uuid)
	}
	out.DriverLibDir = loadedFrom(maps, "libnvidia-ml.so")
	return out, nil
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
