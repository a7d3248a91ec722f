// Package bench is commlab's collective benchmark: an emulation of NCCL and
// nccl-tests on CPU ranks, for learners without GPUs. Ranks are real processes
// (started by a Launcher through a Starter, locally or in lab namespaces) that
// bootstrap like NCCL, pick transports from NCCL_* variables (P2P, SHM,
// NET/Socket, emulated NET/IB over UDP 4791), run ring and tree collectives on
// real data, and print nccl-tests' table and NCCL_DEBUG=INFO-style lines.
package bench
