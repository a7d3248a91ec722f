"""Puts two ranks on one GPU, which NCCL refuses, to record the real error
lines for the log parser's tests (see ../README.md). Run on a GPU node:

    NCCL_DEBUG=INFO python3 -m torch.distributed.run --standalone --nproc_per_node 2 dup_gpu.py
"""
import torch
import torch.distributed as dist

torch.cuda.set_device(0)
dist.init_process_group("nccl", device_id=torch.device("cuda", 0))
t = torch.ones(1, device="cuda")
dist.all_reduce(t)
torch.cuda.synchronize()
print("all_reduce gave", t.item())
dist.destroy_process_group()
