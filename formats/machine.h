/* machine.h: facts of this machine read from /proc and /sys: the CPU (model, the ISA flags the
 * kernels care about, physical cores), RAM, the memory cgroup limit, GPUs, and the block device
 * under a folder. File reads only: nothing here measures. The probe's own functions on top of
 * these (coli_probe_machine, coli_probe_disk_ident, coli_probe_check_machine) are in probe.h. */
#ifndef COLI_MACHINE_H
#define COLI_MACHINE_H

#include <stddef.h>

#include "error.h"

/* Physical cores this process may run on: distinct (package, core) pairs of the CPUs in its
 * affinity mask, from sysfs; the mask's CPU count when the topology cannot be read. The
 * kernels' default thread count. */
int coli_machine_physical_cores(void);
/* CPUs in this process's affinity mask (logical CPUs, SMT siblings counted). */
int coli_machine_logical_cpus(void);

/* /proc/cpuinfo: the first "model name" ("unknown" when there is none) and, space-separated in
 * a fixed order, those of the flags avx2 fma f16c avx512f avx512bw avx512vl avx512_vnni
 * avx512_bf16 avx512_fp16 amx_tile amx_int8 amx_bf16 it lists. */
int coli_machine_cpu(char *model, size_t model_size, char *isa, size_t isa_size, coli_err *e);

/* /proc/meminfo: MemTotal and MemAvailable, in bytes. */
int coli_machine_memory(double *total, double *available, coli_err *e);

/* The memory limit of this process's cgroups, in bytes: the smallest of cgroup v1's
 * memory.limit_in_bytes and v2's memory.max over its cgroup and their ancestors (the hierarchy
 * enforces each); 0 when none is set (v1's "unlimited" is 2^63 rounded to a page). */
double coli_machine_cgroup_limit(void);

/* The GPU device nodes a driver exposes (/dev/nvidiaN, /dev/dri/renderD*, /dev/kfd), as
 * "nvidia0 dri/renderD128 (vendor 0x1002) kfd", or "none found". */
void coli_machine_gpus(char *out, size_t size);

#endif
