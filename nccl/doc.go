// Package nccl reads and runs NCCL collectives: it parses NCCL_DEBUG=INFO/WARN
// logs and PyTorch's NCCL errors and watchdog timeouts into what a learner or
// the grader needs (version, ranks, transports per peer, rings and trees,
// channels, interfaces, error codes, timeouts) and explains them; it parses
// nccl-tests tables; and it runs an NCCL workload with the nccl-tests binaries
// when they are on PATH, otherwise with a torch.distributed script embedded in
// the binary (nccl_tests.py) that prints the same table.
package nccl
