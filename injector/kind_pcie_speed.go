package injector

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"
)

// PCIeSpeed lowers the target link speed of the PCIe port above a GPU and retrains the
// link, as a bad riser, a BIOS setting or a marginal slot does: the GPU then links at a
// lower generation (lspci's LnkSta "downgraded", nvidia-smi's "PCIe Generation Current").
// It changes real hardware, so it is a hardware kind: the injector refuses it unless
// the operator allows hardware faults, which is unsafe on a machine others use. Revert
// writes the port's prior Link Control 2 back and retrains the link.
type PCIeSpeed struct {
	GPU int `json:"gpu" param:"gpu" doc:"the GPU, numbered in PCI bus order as nvidia-smi and NVML do"`
	Gen int `json:"gen" param:"gen,required" doc:"target PCIe generation, 1 to 6 (2.5, 5, 8, 16, 32, 64 GT/s)"`
}

var _ Fault = (*PCIeSpeed)(nil)

// PCIeSpeedKind registers pcie-speed.
func PCIeSpeedKind() Kind {
	return Kind{Name: "pcie-speed", Summary: "lower the PCIe link speed above a GPU (hardware: needs --allow-hardware-faults)",
		Hardware: true,
		New:      func() Fault { return &PCIeSpeed{} }, NewUndo: func() Undo { return &pcieSpeedUndo{} }}
}

// Kind implements Fault.
func (f *PCIeSpeed) Kind() string { return "pcie-speed" }

// Validate implements Fault.
func (f *PCIeSpeed) Validate() error {
	if f.GPU < 0 || f.GPU > 63 {
		return invalid("gpu %d: want 0 to 63", f.GPU)
	}
	if f.Gen < 1 || f.Gen > 6 {
		return invalid("gen %d: want 1 to 6", f.Gen)
	}
	return nil
}

func (f *PCIeSpeed) claims() []string { return []string{fmt.Sprintf("pcie-gpu:%d", f.GPU)} }

// Command implements Fault: the setpci lines an operator would type.
func (f *PCIeSpeed) Command(t Target) []string {
	port, err := gpuPort(f.GPU)
	if err != nil {
		return []string{fmt.Sprintf("# pcie-speed: %v", err)}
	}
	return []string{
		fmt.Sprintf("setpci -s %s CAP_EXP+0x30.w=%04x:000f   # Link Control 2: target link speed", port, f.Gen),
		fmt.Sprintf("setpci -s %s CAP_EXP+0x10.w=0020:0020   # Link Control: retrain link", port),
	}
}

// PCIe capability registers (offsets from the capability) and their fields.
const (
	pcieCapID      = 0x10
	pcieLinkCtl    = 0x10
	pcieLinkStatus = 0x12 // read by tests
	pcieLinkCtl2   = 0x30
	retrainLink    = 1 << 5
	speedMask      = 0xf
)

// Apply implements Fault.
func (f *PCIeSpeed) Apply(ctx context.Context, t Target, op *Op) (Undo, error) {
	port, err := gpuPort(f.GPU)
	if err != nil {
		return nil, err
	}
	cfg := filepath.Join(sysRoot, "bus/pci/devices", port, "config")
	prior, err := readLinkCtl2(cfg)
	if err != nil {
		return nil, err
	}
	u := &pcieSpeedUndo{Config: cfg, Prior: prior, BootID: bootID()}
	if err := op.Record(u); err != nil {
		return nil, err
	}
	if err := setTargetSpeed(cfg, prior&^speedMask|uint16(f.Gen)); err != nil {
		return u, err
	}
	return u, ctx.Err()
}

type pcieSpeedUndo struct {
	Config string `json:"config"` // the port's config file in sysfs
	Prior  uint16 `json:"prior"`  // its Link Control 2 before the fault
	BootID string `json:"boot_id"`
}

var reConfigPath = regexp.MustCompile(`/bus/pci/devices/[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]/config$`)

// Revert implements Undo; after a reboot the port has its firmware's setting again.
func (u *pcieSpeedUndo) Revert(ctx context.Context) error {
	if u.BootID != "" && u.BootID != bootID() {
		return nil
	}
	if !reConfigPath.MatchString(u.Config) {
		return fmt.Errorf("refusing to write %q: not a PCI config file", u.Config)
	}
	if err := setTargetSpeed(u.Config, u.Prior); errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	return ctx.Err()
}

// gpuPort returns the PCI address of the port (root port or switch downstream port)
// above GPU gpu: its parent in the sysfs device tree.
func gpuPort(gpu int) (string, error) {
	gpus, err := nvidiaGPUs()
	if err != nil {
		return "", err
	}
	if gpu >= len(gpus) {
		return "", invalid("gpu %d: this host has %d NVIDIA GPU(s) in sysfs", gpu, len(gpus))
	}
	dev, err := filepath.EvalSymlinks(filepath.Join(sysRoot, "bus/pci/devices", gpus[gpu]))
	if err != nil {
		return "", err
	}
	port := filepath.Base(filepath.Dir(dev))
	if !rePCIAddr.MatchString(port) {
		return "", fmt.Errorf("%w: GPU %d (%s) sits on a root bus with no PCIe port above it (as in a VM): its link cannot be retrained from here", ErrUnsupported, gpu, gpus[gpu])
	}
	return port, nil
}

var rePCIAddr = regexp.MustCompile(`^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)

// pcieCap returns the offset of the PCI Express capability in a config space.
func pcieCap(cfg []byte) (int, error) {
	if len(cfg) < 64 || cfg[0x06]&0x10 == 0 {
		return 0, errors.New("no capability list")
	}
	for off, n := int(cfg[0x34])&^3, 0; off >= 0x40 && off+2 <= len(cfg) && n < 48; n++ {
		if cfg[off] == pcieCapID {
			return off, nil
		}
		off = int(cfg[off+1]) &^ 3
	}
	return 0, errors.New("no PCI Express capability")
}

func readLinkCtl2(path string) (uint16, error) {
	cfg, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	off, err := pcieCap(cfg)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	if off+pcieLinkCtl2+2 > len(cfg) {
		return 0, fmt.Errorf("%s: config space too short for Link Control 2", path)
	}
	return binary.LittleEndian.Uint16(cfg[off+pcieLinkCtl2:]), nil
}

// setTargetSpeed writes Link Control 2 and sets Retrain Link in Link Control, then
// gives the link time to train.
func setTargetSpeed(path string, ctl2 uint16) error {
	cfg, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	off, err := pcieCap(cfg)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	fh, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer fh.Close()
	var b [2]byte
	binary.LittleEndian.PutUint16(b[:], ctl2)
	if _, err := fh.WriteAt(b[:], int64(off+pcieLinkCtl2)); err != nil {
		return fmt.Errorf("write Link Control 2 of %s: %w", path, err)
	}
	binary.LittleEndian.PutUint16(b[:], binary.LittleEndian.Uint16(cfg[off+pcieLinkCtl:])|retrainLink)
	if _, err := fh.WriteAt(b[:], int64(off+pcieLinkCtl)); err != nil {
		return fmt.Errorf("retrain the link of %s: %w", path, err)
	}
	time.Sleep(100 * time.Millisecond) // link training takes well under this
	return nil
}
