// Package hostns creates and deletes commlab's named network namespaces
// (/run/netns/<name>, as `ip netns add` does). It is the one place that does so
// for the lab sandboxes (labs/netns), the Slurm agent's nodes (labs/slurm), the
// injector's feature probe and the root tests' scratch labs (internal/testlab);
// it sits below all of them, so none has to import another. Linux only.
package hostns
