// The devices a daemon owns: CUDA GPUs (found with nvidia-smi, with their memory) or virtual CPU
// devices, each a fixed set of cores, for machines without GPUs (that is how CI runs the daemon).
// The pool maps onto the policies' Topology as one node per memory size (and, under Slurm, per
// node), so a gang prefers devices of one kind and a job's memory need rules out devices that are
// too small.
#pragma once

#include <string>
#include <vector>

#include "scheduler/cluster.h"

namespace ember::sched {

struct PoolDevice {
  std::string name;        // "gpu3", "cpu1"
  int cuda_index = -1;     // for CUDA_VISIBLE_DEVICES (PCI bus order, as nvidia-smi numbers them)
  double memory_gib = 0;   // 0: unknown/unlimited
  std::vector<int> cores;  // CPU devices: the cores its job is pinned to
  std::string node;        // the Slurm node it is on (--backend slurm); "": this machine
  std::string type;        // device type (cpu:N@TYPE,...); "": untyped
};

struct Pool {
  std::vector<PoolDevice> devices;  // in topology order: device i is global device i
  std::string note;                 // a choice made for the user, said when the daemon starts
  Topology topology() const;
  bool cpu() const { return !devices.empty() && devices[0].cuda_index < 0; }
  bool typed() const { return !devices.empty() && !devices[0].type.empty(); }
  std::string describe() const;  // "4 CPU devices of 2 cores each" / "8 GPUs (80 GiB)"
};

// `spec`: "auto" (every GPU nvidia-smi lists, else one CPU device per core), "gpu" (every GPU;
// an error when there is none), "gpu:0,2,3" (those GPUs), "cpu:N" (N devices sharing the cores
// this process may use, split evenly; with more devices than cores, cores are shared) or
// "cpu:NxC" (N devices of C cores). `cpu_memory_gib` is what each CPU device offers (0: any job
// fits). "cpu:N@TYPE,M@TYPE,..." makes typed virtual devices (N of TYPE, then M of the next...)
// sharing the cores as cpu:N would: a heterogeneous pool for the policies that know device types
// (gavel), on a machine of one kind. GPUs are typed from their names (gpu_type) when the machine
// has more than one type, and untyped when all are of one type. Throws ember::Error naming the
// spec for anything else.
Pool make_pool(const std::string& spec, double cpu_memory_gib = 0);

// A GPU as nvidia-smi reports it.
struct GpuInfo {
  int index = 0;
  double memory_gib = 0;
  std::string type;  // from its name, gpu_type(); "" when nvidia-smi gave no name
};

// The GPUs nvidia-smi reports; empty when there is no nvidia-smi or no GPU.
std::vector<GpuInfo> query_gpus();

// The device type a GPU's marketing name stands for, as the speed table spells types: the first
// word with a digit, lower case, cut at its first '-', and a word of digits alone joined to the
// word before it. "NVIDIA H200" -> h200, "Tesla V100-SXM2-32GB" -> v100, "NVIDIA A100-SXM4-80GB"
// -> a100, "NVIDIA H100 80GB HBM3" -> h100, "NVIDIA GeForce RTX 4090" -> rtx4090, "" -> "".
std::string gpu_type(const std::string& name);

}  // namespace ember::sched
