package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/commlab/commlab/gpu"
	"github.com/commlab/commlab/nccl"
	"github.com/spf13/cobra"
)

// gpuExit ends the process with a status of its own (2 when there is no
// GPU); tests replace it.
var gpuExit = os.Exit

// noGPUExit is the status of every gpu subcommand on a host without NVML.
const noGPUExit = 2

func newGPUCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "gpu",
		Short: "Inspect a GPU node: inventory, topology matrix, health, PCIe bandwidth, NCCL workloads",
		Long: "Reads the node through NVML (libnvidia-ml.so.1) and sysfs. Without the NVIDIA driver every\n" +
			"subcommand says so and exits with status 2: GPU labs need a GPU node.",
	}
	cmd.AddCommand(newGPUInventoryCmd(), newGPUTopoCmd(), newGPUHealthCmd(), newGPUPCIeCmd(), newGPUNCCLTestCmd(), newGPUCheckCmd())
	return cmd
}

// openNVML opens NVML, or tells the user there is no GPU here and exits 2.
func openNVML(cmd *cobra.Command) (*gpu.NVML, error) {
	n, err := gpu.Open()
	if errors.Is(err, gpu.ErrNoDriver) {
		fmt.Fprintf(cmd.ErrOrStderr(), "commlab: %v\n", err)
		gpuExit(noGPUExit)
		return nil, err // reached only when a test replaced gpuExit
	}
	return n, err
}

// inventory reads the node, or an inventory recorded earlier with --from.
func inventory(cmd *cobra.Command, from string, opt gpu.SnapshotOptions) (*gpu.Inventory, *gpu.NVML, error) {
	if from != "" {
		inv, err := gpu.ReadInventoryFile(from)
		return inv, nil, err
	}
	n, err := openNVML(cmd)
	if err != nil {
		return nil, nil, err
	}
	inv, err := n.Snapshot(cmd.Context(), opt)
	if err != nil {
		n.Close()
		return nil, nil, err
	}
	return inv, n, nil
}

func newGPUInventoryCmd() *cobra.Command {
	var asJSON, throughput bool
	cmd := &cobra.Command{
		Use:   "inventory",
		Short: "Read every GPU (UUID, PCI, NUMA, PCIe, NVLink, ECC, clocks) and NIC once",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			inv, n, err := inventory(cmd, "", gpu.SnapshotOptions{Throughput: throughput})
			if err != nil {
				return err
			}
			defer n.Close()
			if asJSON {
				return inv.WriteJSON(cmd.OutOrStdout())
			}
			return writeInventory(cmd.OutOrStdout(), inv)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (what `gpu topo --from` and `gpu health --from` read)")
	cmd.Flags().BoolVar(&throughput, "throughput", true, "read the PCIe throughput counters (NVML samples each for 20 ms)")
	return cmd
}

func writeInventory(w io.Writer, inv *gpu.Inventory) error {
	var b strings.Builder
	fmt.Fprintf(&b, "node %s: driver %s, NVML %s, CUDA driver %d\n", inv.Host, inv.Driver, inv.NVML, inv.CUDADriver)
	for _, g := range inv.GPUs {
		fmt.Fprintf(&b, "GPU%d %s %s %s, %d MiB, NUMA node %d (NVML affinity %s), CPUs %s\n", g.Index, g.Name, g.UUID, g.BusID, g.MemTotalMiB, g.NUMANode, g.NUMAAffinity, g.CPUAffinity)
		fmt.Fprintf(&b, "  PCIe Gen%d x%d (max Gen%d x%d, GPU max Gen%d), tx %d KB/s rx %d KB/s, %d replays; path %s\n",
			g.PCIe.CurGen, g.PCIe.CurWidth, g.PCIe.MaxGen, g.PCIe.MaxWidth, g.PCIe.GPUMaxGen, g.PCIe.TxKBps, g.PCIe.RxKBps, g.PCIe.Replays, strings.Join(g.PCIPath, "/"))
		up := 0
		for _, l := range g.NVLinks {
			if l.Active {
				up++
			}
		}
		fmt.Fprintf(&b, "  NVLink %d/%d up; ECC on=%v volatile uncorrected %d; remapped rows %d+%d pending=%v\n",
			up, len(g.NVLinks), g.ECC.Enabled, g.ECC.VolatileUncorrected, g.ECC.RemapCorrectable, g.ECC.RemapUncorrectable, g.ECC.RemapPending)
		fmt.Fprintf(&b, "  clocks SM %d/%d MHz mem %d/%d MHz, P%d, util %d%%, %d C, %.0f W; reasons: %s\n",
			g.Clocks.SMMHz, g.Clocks.MaxSMMHz, g.Clocks.MemMHz, g.Clocks.MaxMemMHz, g.Pstate, g.UtilGPU, g.TempC,
			float64(g.PowerMilliW)/1000, strings.Join(gpu.ReasonNames(g.Clocks.Reasons), ", "))
		if len(g.Unsupported) > 0 {
			fmt.Fprintf(&b, "  not reported: %s\n", strings.Join(g.Unsupported, "; "))
		}
	}
	for _, n := range inv.NICs {
		fmt.Fprintf(&b, "NIC %s (netdevs %s, rdma=%v) %s NUMA %d driver %s; path %s\n", n.Name, strings.Join(n.Netdevs, ","), n.RDMA, n.BusID, n.NUMANode, n.Driver, strings.Join(n.PCIPath, "/"))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func newGPUTopoCmd() *cobra.Command {
	var (
		from    string
		allNICs bool
		plain   bool
	)
	cmd := &cobra.Command{
		Use:   "topo",
		Short: "Print the GPU/NIC topology matrix in the format of `nvidia-smi topo -m`",
		Long: "GPU-GPU cells come from NVLink (NV#) or NVML's common PCI ancestor; cells with a NIC from\n" +
			"the sysfs PCI paths and NUMA nodes. NICs are the RDMA devices, as nvidia-smi lists them;\n" +
			"--all-nics adds the netdevs on a PCI function that no RDMA device claims.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			inv, n, err := inventory(cmd, from, gpu.SnapshotOptions{})
			if err != nil {
				return err
			}
			if n != nil {
				defer n.Close()
			}
			m := gpu.BuildMatrix(inv, gpu.MatrixOptions{AllNICs: allNICs})
			m.Plain = plain
			return m.Write(cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "read an inventory recorded with `gpu inventory --json` instead of this node")
	cmd.Flags().BoolVar(&allNICs, "all-nics", false, "also list NICs without RDMA (plain Ethernet, virtio), which nvidia-smi leaves out")
	cmd.Flags().BoolVar(&plain, "plain", false, "no underline escape around the header (nvidia-smi always prints one)")
	return cmd
}

func newGPUHealthCmd() *cobra.Command {
	var (
		from      string
		xidWait   time.Duration
		kernelLog bool
		asJSON    bool
	)
	cmd := &cobra.Command{
		Use:   "health",
		Short: "Check PCIe links, NVLinks, ECC, clocks and Xid events; exit 1 when a check fails",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			inv, n, err := inventory(cmd, from, gpu.SnapshotOptions{})
			if err != nil {
				return err
			}
			var xids []gpu.XidEvent
			var sources []string
			if n != nil {
				defer n.Close()
				if xidWait > 0 {
					ev, err := n.WatchXid(cmd.Context(), xidWait)
					if err != nil {
						return err
					}
					xids = append(xids, ev...)
					sources = append(sources, fmt.Sprintf("NVML Xid events watched for %s", xidWait))
				}
				if kernelLog {
					ev, err := gpu.KernelXids()
					if err != nil {
						sources = append(sources, "kernel log not read ("+err.Error()+")")
					} else {
						xids = append(xids, ev...)
						sources = append(sources, "kernel log (/dev/kmsg) read")
					}
				}
			} else {
				sources = append(sources, "none (inventory read from "+from+")")
			}
			rep := gpu.Check(inv, xids)
			rep.XidWatched = strings.Join(sources, "; ")
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(rep); err != nil {
					return err
				}
			} else if err := rep.Write(cmd.OutOrStdout(), inv); err != nil {
				return err
			}
			if !rep.Healthy() {
				return fmt.Errorf("gpu health: %d checks failed", rep.Count(gpu.Fail))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "check an inventory recorded with `gpu inventory --json` instead of this node")
	cmd.Flags().DurationVar(&xidWait, "xid-wait", 2*time.Second, "how long to watch NVML for Xid events (0: not at all)")
	cmd.Flags().BoolVar(&kernelLog, "kernel-log", true, "also look for Xid lines in the kernel log (needs root)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the findings as JSON")
	return cmd
}

func newGPUPCIeCmd() *cobra.Command {
	var opt gpu.PCIeOptions
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "pcie",
		Short: "Measure host<->GPU copy bandwidth (pinned memory, PyTorch) against the PCIe link's ceiling",
		Long: "Runs a PyTorch script embedded in commlab that copies between pinned host memory and the GPU,\n" +
			"while NVML reads the link's generation and width (idle GPUs train their links down). The\n" +
			"ceiling is per-lane GT/s × lanes × encoding efficiency (8b/10b for Gen1/2, 128b/130b for\n" +
			"Gen3-5) / 8, per direction.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			n, err := openNVML(cmd)
			if err != nil {
				return err
			}
			defer n.Close()
			res, err := n.MeasurePCIe(cmd.Context(), opt)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(res)
			}
			return res.Write(cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.IntVar(&opt.GPU, "gpu", 0, "NVML index of the GPU")
	f.StringVar(&opt.Python, "python", "python3", "Python interpreter with PyTorch")
	f.StringVar(&opt.Sizes, "sizes", "16M,64M,256M,1G", "copy sizes")
	f.IntVar(&opt.Iters, "iters", 20, "copies timed per size and direction")
	f.BoolVar(&opt.Pageable, "pageable", true, "also copy from pageable (unpinned) memory, for contrast")
	f.DurationVar(&opt.Timeout, "timeout", 3*time.Minute, "stop the script after this long")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newGPUNCCLTestCmd() *cobra.Command {
	w := nccl.Workload{}
	var (
		printScript bool
		timeout     time.Duration
	)
	cmd := &cobra.Command{
		Use:   "nccl-test",
		Short: "Run an NCCL benchmark: nccl-tests if on PATH, else commlab's torch.distributed script",
		Long: "Prints an nccl-tests table (size, count, type, redop, root, time, algbw, busbw, #wrong, out-of-place\n" +
			"and in-place, \"# Avg bus bandwidth\"). Set NCCL_DEBUG=INFO to get the init lines that\n" +
			"`commlab nccl-log explain` reads.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if printScript {
				_, err := cmd.OutOrStdout().Write(nccl.Script())
				return err
			}
			if w.GPUs == 0 {
				n, err := openNVML(cmd)
				if err != nil {
					return err
				}
				inv, err := n.Snapshot(cmd.Context(), gpu.SnapshotOptions{})
				n.Close()
				if err != nil {
					return err
				}
				w.GPUs = len(inv.GPUs)
				if w.GPUs == 0 {
					return errors.New("nccl-test: NVML sees no GPU")
				}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			plan, err := w.Run(ctx, nil, os.Stdout, os.Stderr)
			if err != nil {
				return fmt.Errorf("nccl-test (%s): %w", plan.Kind, err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "commlab: ran %s on %d GPU(s)\n", plan.Kind, w.GPUs)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&w.Op, "op", "all_reduce", "all_reduce, all_gather, reduce_scatter, broadcast, alltoall or all")
	f.StringVarP(&w.MinBytes, "minbytes", "b", "8", "smallest size")
	f.StringVarP(&w.MaxBytes, "maxbytes", "e", "128M", "largest size")
	f.IntVarP(&w.StepFactor, "stepfactor", "f", 2, "size multiplier between rows")
	f.IntVarP(&w.Iters, "iters", "n", 20, "timed iterations per size")
	f.IntVarP(&w.Warmup, "warmup_iters", "w", 5, "warm-up iterations per size")
	f.StringVarP(&w.DataType, "datatype", "d", "float", "float, half, bfloat16, double, int32, int8, uint8, int64")
	f.IntVar(&w.GPUs, "gpus", 0, "ranks, one per GPU (0: every GPU NVML sees)")
	f.StringVar(&w.Python, "python", "python3", "Python interpreter with PyTorch, for the script")
	f.BoolVar(&w.Script, "script", false, "use the script even when nccl-tests is on PATH")
	f.BoolVar(&printScript, "print-script", false, "print the embedded script and exit")
	f.DurationVar(&timeout, "timeout", 30*time.Minute, "stop the benchmark after this long")
	return cmd
}
