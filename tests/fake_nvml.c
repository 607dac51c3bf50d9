/* A stand-in for NVIDIA's libnvidia-ml.so.1, built by the tests: the few
 * NVML calls ltd makes, answered from a text file whose path is in
 * $LT_FAKE_NVML_FILE, read afresh on every call so a test changes the GPUs'
 * state by rewriting it. Lines:
 *
 *   count N              N GPUs (default 0)
 *   proc GPU PID MIB     a compute process on GPU holding MIB ("na": unknown)
 *   mem GPU USED TOTAL   memory in MiB
 *   util GPU PERCENT     utilisation
 *   minor GPU N          its /dev/nvidiaN (default: its index)
 *   fail init            nvmlInit fails (a driver that is not loaded)
 *   live                 as a driver does: a proc line whose PID is gone is
 *                        not reported, and each live proc's MIB adds to its
 *                        GPU's used memory (the GPU check kit's fake CUDA
 *                        writes proc lines as its processes allocate)
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} FakeProcessInfo;

typedef struct {
  unsigned long long total, free, used;
} FakeMemory;

typedef struct {
  unsigned int gpu, memory;
} FakeUtilization;

enum { kOk = 0, kInvalidArgument = 2, kInsufficientSize = 7, kDriverNotLoaded = 9, kUnknown = 999 };

#define MAX_PROCS 256
struct State {
  int count;
  int fail_init;
  int live;
  int proc_gpu[MAX_PROCS];
  unsigned proc_pid[MAX_PROCS];
  unsigned long long proc_bytes[MAX_PROCS];
  int procs;
  unsigned long long used[64], total[64];
  unsigned util[64];
  int minor[64];
};

static int Read(struct State* s) {
  memset(s, 0, sizeof *s);
  for (int i = 0; i < 64; ++i) s->minor[i] = i;
  const char* path = getenv("LT_FAKE_NVML_FILE");
  if (path == NULL) return 0;
  FILE* f = fopen(path, "r");
  if (f == NULL) return 0;
  char line[256];
  while (fgets(line, sizeof line, f) != NULL) {
    int gpu = 0;
    unsigned pid = 0, percent = 0;
    unsigned long long a = 0, b = 0;
    char mib[32];
    if (sscanf(line, "count %d", &s->count) == 1) continue;
    if (strncmp(line, "fail init", 9) == 0) s->fail_init = 1;
    if (strncmp(line, "live", 4) == 0) s->live = 1;
    if (sscanf(line, "proc %d %u %31s", &gpu, &pid, mib) == 3 && s->procs < MAX_PROCS) {
      s->proc_gpu[s->procs] = gpu;
      s->proc_pid[s->procs] = pid;
      s->proc_bytes[s->procs] = strcmp(mib, "na") == 0 ? ~0ull : strtoull(mib, NULL, 10) << 20;
      ++s->procs;
    }
    if (sscanf(line, "mem %d %llu %llu", &gpu, &a, &b) == 3 && gpu >= 0 && gpu < 64) {
      s->used[gpu] = a << 20;
      s->total[gpu] = b << 20;
    }
    if (sscanf(line, "minor %d %u", &gpu, &percent) == 2 && gpu >= 0 && gpu < 64) {
      s->minor[gpu] = (int)percent;
    }
    if (sscanf(line, "util %d %u", &gpu, &percent) == 2 && gpu >= 0 && gpu < 64) {
      s->util[gpu] = percent;
    }
  }
  fclose(f);
  if (s->count > 64) s->count = 64;
  if (s->live) {
    int kept = 0;
    for (int p = 0; p < s->procs; ++p) {
      if (kill((pid_t)s->proc_pid[p], 0) != 0 && errno == ESRCH) continue;
      int g = s->proc_gpu[p];
      if (g >= 0 && g < 64 && s->proc_bytes[p] != ~0ull) s->used[g] += s->proc_bytes[p];
      s->proc_gpu[kept] = g;
      s->proc_pid[kept] = s->proc_pid[p];
      s->proc_bytes[kept] = s->proc_bytes[p];
      ++kept;
    }
    s->procs = kept;
  }
  return 0;
}

/* A device handle is its index plus one, as a pointer. */
typedef void* Device;
static int Index(Device d) { return (int)(uintptr_t)d - 1; }

int nvmlInit_v2(void) {
  struct State s;
  Read(&s);
  return s.fail_init ? kDriverNotLoaded : kOk;
}
int nvmlShutdown(void) { return kOk; }
const char* nvmlErrorString(int rc) {
  return rc == kDriverNotLoaded ? "Driver Not Loaded (fake)" : "Unknown Error (fake)";
}
int nvmlDeviceGetCount_v2(unsigned int* n) {
  struct State s;
  Read(&s);
  *n = (unsigned)s.count;
  return kOk;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, Device* d) {
  struct State s;
  Read(&s);
  if ((int)i >= s.count) return kInvalidArgument;
  *d = (Device)(uintptr_t)(i + 1);
  return kOk;
}
int nvmlDeviceGetComputeRunningProcesses_v3(Device d, unsigned int* n, FakeProcessInfo* out) {
  struct State s;
  Read(&s);
  unsigned found = 0;
  for (int p = 0; p < s.procs; ++p) found += s.proc_gpu[p] == Index(d);
  if (found > *n) {
    *n = found;
    return kInsufficientSize;
  }
  unsigned k = 0;
  for (int p = 0; p < s.procs; ++p) {
    if (s.proc_gpu[p] != Index(d)) continue;
    out[k].pid = s.proc_pid[p];
    out[k].usedGpuMemory = s.proc_bytes[p];
    out[k].gpuInstanceId = out[k].computeInstanceId = ~0u;
    ++k;
  }
  *n = k;
  return kOk;
}
int nvmlDeviceGetMemoryInfo(Device d, FakeMemory* m) {
  struct State s;
  Read(&s);
  m->used = s.used[Index(d)];
  m->total = s.total[Index(d)];
  m->free = m->total - m->used;
  return kOk;
}
int nvmlDeviceGetUtilizationRates(Device d, FakeUtilization* u) {
  struct State s;
  Read(&s);
  u->gpu = s.util[Index(d)];
  u->memory = 0;
  return kOk;
}
int nvmlDeviceGetMinorNumber(Device d, unsigned int* minor) {
  struct State s;
  Read(&s);
  *minor = (unsigned)s.minor[Index(d)];
  return kOk;
}
