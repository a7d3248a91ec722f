"""nccl-tests-style collective benchmark over torch.distributed (NCCL), written
for commlab (nccl/workload.go) for GPU nodes that have PyTorch but not the
nccl-tests binaries.

Run it under torchrun, one process per GPU:

    torchrun --standalone --nproc_per_node=N nccl_tests.py -b 8 -e 128M -f 2 --op all_reduce

It prints the table nccl-tests prints (size, count, type, redop, root, then
time, algbw, busbw, #wrong out-of-place and in-place, and the "# Avg bus
bandwidth" footer), with nccl-tests' definitions:

  * size is the larger of the send and receive buffers; count is the count
    passed to the collective (per rank for all_gather, reduce_scatter, alltoall);
  * algbw = bytes / time, with the bytes nccl-tests counts for each collective;
  * busbw = algbw x factor: all_reduce 2(n-1)/n; all_gather, reduce_scatter and
    alltoall (n-1)/n; broadcast 1;
  * time is the mean over iterations of the wall time, averaged over ranks;
  * #wrong counts elements that differ from the expected result of one
    checked run (inputs are small integers, exact in every type);
  * sizes below one 16-byte-aligned element per rank are skipped.

Differences from nccl-tests, because torch.distributed has no such call:
all_reduce and broadcast have no out-of-place form, so both columns time the
in-place call (on separate buffers); alltoall has no in-place form, so its
in-place columns read N/A.
"""
import argparse
import os
import socket
import sys
import time

OPS = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "alltoall"]
BUSBW = {
    "all_reduce": lambda n: 2.0 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
}
TYPES = {
    "float": ("float32", 4), "half": ("float16", 2), "bfloat16": ("bfloat16", 2),
    "double": ("float64", 8), "int32": ("int32", 4), "int8": ("int8", 1), "uint8": ("uint8", 1),
    "int64": ("int64", 8),
}


def parse_size(s):
    s = s.strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if s and s[-1] in mult:
        return int(float(s[:-1]) * mult[s[-1]])
    return int(s)


def fmt_time(us):
    if us >= 10000.0:
        return "%7.0f" % us
    if us >= 100.0:
        return "%7.1f" % us
    return "%7.2f" % us


def counts(op, nbytes, elt, n):
    """(sendcount, recvcount, paramcount) as nccl-tests' GetCollByteCount."""
    count = nbytes // elt
    if op in ("all_reduce", "broadcast"):
        return count, count, count
    base = (count // n) & ~(16 // elt - 1) if elt <= 16 else count // n
    if op == "all_gather":
        return base, base * n, base
    if op == "reduce_scatter":
        return base * n, base, base
    if op == "alltoall":
        return base * n, base * n, base
    raise ValueError(op)


def algbw_bytes(op, param, elt, n):
    """The bytes nccl-tests divides by the time for algbw."""
    if op in ("all_reduce", "broadcast"):
        return param * elt
    return param * elt * n


class Bench:
    def __init__(self, args, torch, dist):
        self.a, self.torch, self.dist = args, torch, dist
        self.rank, self.n = dist.get_rank(), dist.get_world_size()
        self.dev = torch.device("cuda", torch.cuda.current_device())
        self.dtype = getattr(torch, TYPES[args.datatype][0])
        self.elt = TYPES[args.datatype][1]
        self.redop = {"sum": dist.ReduceOp.SUM, "prod": dist.ReduceOp.PRODUCT,
                      "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN,
                      "avg": getattr(dist.ReduceOp, "AVG", None)}[args.op_red]

    def expected_reduce(self):
        n = self.n
        return {"sum": n * (n + 1) / 2, "prod": float(__import__("math").factorial(n)),
                "max": float(n), "min": 1.0, "avg": (n + 1) / 2}[self.a.op_red]

    def buffers(self, op, send, recv, in_place):
        """Input and output tensors, and the closure running the collective."""
        t, r, n = self.torch, self.rank, self.n
        z = lambda c: t.zeros(c, dtype=self.dtype, device=self.dev)
        dist = self.dist
        if op == "all_reduce":
            buf = z(send)
            return buf, buf, lambda: dist.all_reduce(buf, op=self.redop)
        if op == "all_gather":
            out = z(recv)
            inp = out.narrow(0, r * send, send) if in_place else z(send)
            return inp, out, lambda: dist.all_gather_into_tensor(out, inp)
        if op == "reduce_scatter":
            inp = z(send)
            out = inp.narrow(0, r * recv, recv) if in_place else z(recv)
            return inp, out, lambda: dist.reduce_scatter_tensor(out, inp, op=self.redop)
        if op == "broadcast":
            buf = z(send)
            return buf, buf, lambda: dist.broadcast(buf, src=self.a.root)
        if op == "alltoall":
            inp, out = z(send), z(recv)
            return inp, out, lambda: dist.all_to_all_single(out, inp)
        raise ValueError(op)

    def fill_and_expect(self, op, inp, out, send, recv, param):
        """Fill the input with small integers and return the expected output."""
        t, r, n = self.torch, self.rank, self.n
        if op == "all_reduce":
            inp.fill_(r + 1)
            return t.full((recv,), self.expected_reduce(), dtype=self.dtype, device=self.dev)
        if op == "all_gather":
            inp.fill_(r + 1)
            return t.arange(1, n + 1, device=self.dev).repeat_interleave(param).to(self.dtype)
        if op == "reduce_scatter":
            inp.fill_(r + 1)
            return t.full((recv,), self.expected_reduce(), dtype=self.dtype, device=self.dev)
        if op == "broadcast":
            inp.fill_(self.a.root + 1 if r == self.a.root else 0)
            return t.full((recv,), self.a.root + 1, dtype=self.dtype, device=self.dev)
        if op == "alltoall":
            # Rank r sends chunk j filled with (r*n + j + 1) to rank j.
            inp.copy_((t.arange(n, device=self.dev) + r * n + 1).repeat_interleave(param).to(self.dtype))
            return (t.arange(n, device=self.dev) * n + r + 1).repeat_interleave(param).to(self.dtype)
        raise ValueError(op)

    def time_one(self, fn):
        t, a = self.torch, self.a
        for _ in range(a.warmup_iters):
            fn()
        t.cuda.synchronize()
        self.dist.barrier()
        start = time.perf_counter()
        for _ in range(a.iters):
            fn()
        t.cuda.synchronize()
        sec = (time.perf_counter() - start) / a.iters
        v = t.tensor([sec], dtype=t.float64, device=self.dev)
        self.dist.all_reduce(v)
        return v.item() / self.n

    def check(self, op, send, recv, param, in_place):
        inp, out, fn = self.buffers(op, send, recv, in_place)
        want = self.fill_and_expect(op, inp, out, send, recv, param)
        fn()
        self.torch.cuda.synchronize()
        wrong = self.torch.tensor([(out != want).sum().item()], device=self.dev, dtype=self.torch.int64)
        self.dist.all_reduce(wrong)
        return int(wrong.item())

    def run(self, op):
        a, n = self.a, self.n
        factor = BUSBW[op](n)
        bw_sum, bw_count, errors = 0.0, 0, 0
        size = a.minbytes
        root = a.root if op == "broadcast" else -1
        redop = a.op_red if op in ("all_reduce", "reduce_scatter") else "none"
        self.header(op)
        while size <= a.maxbytes:
            send, recv, param = counts(op, size, self.elt, n)
            if param == 0:
                # Below one aligned element per rank: nothing to move.
                size = size * a.stepfactor if a.stepfactor > 1 else size + a.stepbytes
                continue
            shown = max(send, recv) * self.elt
            line = "%12d  %12d  %8s  %6s  %6d" % (shown, param, a.datatype, redop, root)
            for in_place in (False, True):
                if in_place and op == "alltoall":
                    line += "  %7s  %6s  %6s  %5s" % ("N/A", "N/A", "N/A", "N/A")
                    continue
                _, _, fn = self.buffers(op, send, recv, in_place)
                sec = self.time_one(fn)
                algbw = algbw_bytes(op, param, self.elt, n) / 1e9 / sec if sec > 0 else 0.0
                busbw = algbw * factor
                wrong = self.check(op, send, recv, param, in_place) if a.check else None
                if wrong:
                    errors += 1
                line += "  %7s  %6.2f  %6.2f  %5s" % (fmt_time(sec * 1e6), algbw, busbw,
                                                     "N/A" if wrong is None else "%d" % wrong)
                bw_sum += busbw
                bw_count += 1
            if self.rank == 0:
                print(line, flush=True)
            size = size * a.stepfactor if a.stepfactor > 1 else size + a.stepbytes
        if self.rank == 0:
            print("# %-20s : %d %s" % ("Out of bounds values", errors, "FAILED" if errors else "OK"))
            print("# %-20s : %g " % ("Avg bus bandwidth", bw_sum / bw_count if bw_count else 0.0))
            print("#", flush=True)
        return errors

    def header(self, op):
        if self.rank != 0:
            return
        print("#\n# Collective test starting: %s (torch.distributed %s)" % (op, op))
        print("#")
        print("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          "
              % ("", "", "", "", ""))
        print("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s"
              % ("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
                 "time", "algbw", "busbw", "#wrong"))
        print("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s"
              % ("(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", ""),
              flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--op", default="all_reduce", help="one of %s, or all" % ", ".join(OPS))
    p.add_argument("-b", "--minbytes", default="8")
    p.add_argument("-e", "--maxbytes", default="128M")
    p.add_argument("-f", "--stepfactor", type=int, default=2)
    p.add_argument("-i", "--stepbytes", type=int, default=1 << 20)
    p.add_argument("-n", "--iters", type=int, default=20)
    p.add_argument("-w", "--warmup_iters", type=int, default=5)
    p.add_argument("-d", "--datatype", default="float", choices=sorted(TYPES))
    p.add_argument("-o", "--op_red", default="sum", choices=["sum", "prod", "max", "min", "avg"])
    p.add_argument("-r", "--root", type=int, default=0)
    p.add_argument("-c", "--check", type=int, default=1)
    a = p.parse_args()
    a.minbytes, a.maxbytes = parse_size(a.minbytes), parse_size(a.maxbytes)
    ops = OPS if a.op == "all" else [a.op]
    for op in ops:
        if op not in OPS:
            print("nccl_tests.py: unknown --op %r: want one of %s or all" % (op, ", ".join(OPS)), file=sys.stderr)
            return 2
    if a.minbytes <= 0 or a.minbytes > a.maxbytes:
        print("nccl_tests.py: invalid sizes: -b %d -e %d" % (a.minbytes, a.maxbytes), file=sys.stderr)
        return 2

    import torch
    import torch.distributed as dist
    if "RANK" not in os.environ:
        print("nccl_tests.py: run me under torchrun (RANK, WORLD_SIZE, LOCAL_RANK unset)", file=sys.stderr)
        return 2
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    # device_id makes the NCCL communicator start now, so NCCL_DEBUG=INFO
    # init lines come before the table.
    dist.init_process_group("nccl", device_id=dev)
    rank, n = dist.get_rank(), dist.get_world_size()
    if a.op_red == "avg" and getattr(dist.ReduceOp, "AVG", None) is None:
        print("nccl_tests.py: this torch has no ReduceOp.AVG", file=sys.stderr)
        return 2

    props = torch.cuda.get_device_properties(dev)
    line = "#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] %s" % (
        rank, 0, os.getpid(), socket.gethostname(), local, pci_bus_id(torch, local), props.name)
    lines = [None] * n
    dist.all_gather_object(lines, line)
    if rank == 0:
        nccl = ".".join(str(x) for x in torch.cuda.nccl.version())
        print("# commlab nccl_tests.py (torch.distributed) torch %s nccl %s" % (torch.__version__, nccl))
        print("# nThread 1 nGpus 1 minBytes %d maxBytes %d step: %d(%s) warmup iters: %d iters: %d agg iters: 1 validation: %d graph: 0"
              % (a.minbytes, a.maxbytes, a.stepfactor if a.stepfactor > 1 else a.stepbytes,
                 "factor" if a.stepfactor > 1 else "bytes", a.warmup_iters, a.iters, a.check))
        print("#\n# Using devices")
        for l in lines:
            print(l)
        sys.stdout.flush()
    bench = Bench(a, torch, dist)
    errors = 0
    for op in ops:
        errors += bench.run(op)
    dist.destroy_process_group()
    return 1 if errors else 0


def pci_bus_id(torch, dev):
    p = torch.cuda.get_device_properties(dev)
    try:
        return "%04x:%02x:%02x" % (p.pci_domain_id, p.pci_bus_id, p.pci_device_id)
    except AttributeError:
        return "?"


if __name__ == "__main__":
    sys.exit(main())
