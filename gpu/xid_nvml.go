//go:build linux && cgo

package gpu

import (
	"context"
	"fmt"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// WatchXid registers every GPU for Xid events and waits for them until d
// has passed or ctx ends. NVML delivers only events that happen while the set
// is registered; ScanKernelXids finds earlier ones in the kernel log.
func (n *NVML) WatchXid(ctx context.Context, d time.Duration) ([]XidEvent, error) {
	set, ret := n.lib.EventSetCreate()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("create NVML event set: %s", nvmlErr(ret))
	}
	defer set.Free()
	handles, err := n.devices()
	if err != nil {
		return nil, err
	}
	registered := 0
	for i, h := range handles {
		if ret := h.RegisterEvents(nvml.EventTypeXidCriticalError, set); ret != nvml.SUCCESS {
			// Some GPUs (and MIG setups) refuse Xid events; the others still count.
			if ret == nvml.ERROR_NOT_SUPPORTED {
				continue
			}
			return nil, fmt.Errorf("register Xid events on GPU %d: %s", i, nvmlErr(ret))
		}
		registered++
	}
	if registered == 0 {
		return nil, fmt.Errorf("register Xid events: no GPU supports them")
	}
	deadline := time.Now().Add(d)
	var out []XidEvent
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return out, nil
		}
		if err := ctx.Err(); err != nil {
			return out, fmt.Errorf("watch Xid events: %w", err)
		}
		// Short waits so cancellation is noticed within 200 ms.
		data, ret := set.Wait(uint32(min(left, 200*time.Millisecond).Milliseconds()))
		switch ret {
		case nvml.SUCCESS:
			ev := XidEvent{Xid: data.EventData, Source: "nvml"}
			if data.Device != nil {
				if pci, ret := data.Device.GetPciInfo(); ret == nvml.SUCCESS {
					ev.BusID = NormBusID(cString(pci.BusId[:]))
				}
			}
			out = append(out, ev)
		case nvml.ERROR_TIMEOUT:
		default:
			return out, fmt.Errorf("wait for Xid events: %s", nvmlErr(ret))
		}
	}
}
