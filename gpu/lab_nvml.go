//go:build linux && cgo

package gpu

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

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
