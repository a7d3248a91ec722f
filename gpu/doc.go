// Package gpu reads a GPU node: the inventory of its GPUs (through NVML, with
// github.com/NVIDIA/go-nvml) and NICs (through sysfs), a topology matrix in the
// format and legend of `nvidia-smi topo -m`, health rules (PCIe link, NVLink,
// ECC and remapped rows, clocks and their reasons, Xid events) and a
// host-to-device PCIe bandwidth measurement set against the link's ceiling.
//
// NVML is opened at run time with dlopen("libnvidia-ml.so.1"); go-nvml needs
// cgo, so commlab is built with CGO_ENABLED=1. On a host without the library
// or the driver, Open returns an error that wraps ErrNoDriver, and callers say
// that GPU labs need a GPU node instead of failing.
//
// Everything that decides or prints (BuildMatrix, Check, the formatters) works
// on an Inventory, plain data that a GPU node can record as JSON, so it is
// tested without a GPU on inventories recorded on a real H200.
package gpu
