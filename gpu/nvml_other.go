//go:build !linux || !cgo

package gpu

import (
	"context"
	"fmt"
	"time"
)

// errNoNVML is what every NVML entry point returns where go-nvml cannot be
// built (another OS, or cgo off): such a host has no usable GPUs, as one
// without the driver.
var errNoNVML = fmt.Errorf("%w: NVML needs a Linux build with cgo", ErrNoDriver)

// NVML is an open NVML library; none can be opened here.
type NVML struct{}

// Open refuses: see errNoNVML.
func Open() (*NVML, error) { return nil, errNoNVML }

// Count refuses: see errNoNVML.
func Count() (int, error) { return 0, errNoNVML }

// ForLab refuses: see errNoNVML.
func ForLab(int) (LabGPUs, error) { return LabGPUs{}, errNoNVML }

// Close does nothing.
func (n *NVML) Close() error { return nil }

// Snapshot refuses: see errNoNVML.
func (n *NVML) Snapshot(context.Context, SnapshotOptions) (*Inventory, error) {
	return nil, errNoNVML
}

// WatchXid refuses: see errNoNVML.
func (n *NVML) WatchXid(context.Context, time.Duration) ([]XidEvent, error) {
	return nil, errNoNVML
}

// MeasurePCIe refuses: see errNoNVML.
func (n *NVML) MeasurePCIe(context.Context, PCIeOptions) (*PCIeResult, error) {
	return nil, errNoNVML
}
