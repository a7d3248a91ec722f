"""Host<->device copy bandwidth over PCIe, written for commlab (gpu/pcie.go).

Copies between pinned (page-locked) host memory and GPU memory with
torch.Tensor.copy_(non_blocking=True), timed with CUDA events, in each
direction and in both at once on two streams; optionally from pageable memory
too, to show what pinning buys. Prints one JSON object per line so that
commlab can read it: first {"info": ...}, then one {"mode", "dir", "bytes",
"iters", "seconds", "gbps"} per measurement (GB/s = 1e9 bytes/s).
"""
import argparse
import json
import sys


def parse_size(s):
    s = s.strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if s and s[-1] in mult:
        return int(float(s[:-1]) * mult[s[-1]])
    return int(s)


def emit(obj):
    print(json.dumps(obj), flush=True)


def timed(torch, stream, fn, iters):
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    with torch.cuda.stream(stream):
        start.record(stream)
        for _ in range(iters):
            fn()
        end.record(stream)
    end.synchronize()
    return start.elapsed_time(end) / 1e3


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--device", type=int, default=0)
    p.add_argument("--sizes", default="16M,64M,256M,1G")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--pageable", action="store_true", help="also copy from pageable host memory")
    args = p.parse_args()

    try:
        import torch
    except ImportError as e:
        emit({"error": "PyTorch is not installed for %s: %s" % (sys.executable, e)})
        return 3
    if not torch.cuda.is_available():
        emit({"error": "torch.cuda.is_available() is False: no usable GPU for PyTorch"})
        return 3
    dev = torch.device("cuda", args.device)
    torch.cuda.set_device(dev)
    props = torch.cuda.get_device_properties(dev)
    emit({"info": {"python": sys.version.split()[0], "torch": torch.__version__,
                   "cuda": torch.version.cuda, "name": props.name, "device": args.device}})

    s1 = torch.cuda.Stream(dev)
    s2 = torch.cuda.Stream(dev)
    for size in [parse_size(x) for x in args.sizes.split(",") if x.strip()]:
        host = torch.empty(size, dtype=torch.uint8, pin_memory=True).fill_(1)
        host2 = torch.empty(size, dtype=torch.uint8, pin_memory=True)
        gpu = torch.empty(size, dtype=torch.uint8, device=dev).fill_(2)
        gpu2 = torch.empty(size, dtype=torch.uint8, device=dev)
        cases = [
            ("h2d", lambda: gpu2.copy_(host, non_blocking=True)),
            ("d2h", lambda: host2.copy_(gpu, non_blocking=True)),
        ]
        for name, fn in cases:
            timed(torch, s1, fn, args.warmup)
            sec = timed(torch, s1, fn, args.iters)
            emit({"mode": "pinned", "dir": name, "bytes": size, "iters": args.iters,
                  "seconds": sec, "gbps": size * args.iters / sec / 1e9})

        # Both directions at once: H2D on one stream, D2H on another, timed
        # from a common start event to when both have finished.
        for it in (args.warmup, args.iters):
            torch.cuda.synchronize(dev)
            start = torch.cuda.Event(enable_timing=True)
            mid = torch.cuda.Event()
            end = torch.cuda.Event(enable_timing=True)
            start.record(s1)
            s2.wait_event(start)
            with torch.cuda.stream(s1):
                for _ in range(it):
                    gpu2.copy_(host, non_blocking=True)
            with torch.cuda.stream(s2):
                for _ in range(it):
                    host2.copy_(gpu, non_blocking=True)
            mid.record(s2)
            s1.wait_event(mid)
            end.record(s1)
            end.synchronize()
            sec = start.elapsed_time(end) / 1e3
        emit({"mode": "pinned", "dir": "bidir", "bytes": 2 * size, "iters": args.iters,
              "seconds": sec, "gbps": 2 * size * args.iters / sec / 1e9})

        if args.pageable:
            pg = torch.empty(size, dtype=torch.uint8).fill_(1)
            fn = lambda: gpu2.copy_(pg, non_blocking=True)
            timed(torch, s1, fn, 1)
            sec = timed(torch, s1, fn, max(1, args.iters // 4))
            emit({"mode": "pageable", "dir": "h2d", "bytes": size, "iters": max(1, args.iters // 4),
                  "seconds": sec, "gbps": size * max(1, args.iters // 4) / sec / 1e9})
        del host, host2, gpu, gpu2
    return 0


if __name__ == "__main__":
    sys.exit(main())
