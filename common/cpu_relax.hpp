// Spin-wait helper. gradcomm's short waits (a rendezvous, a NCCL enqueue) spin on
// the CPU's pause instruction and never call sched_yield(): on EEVDF kernels
// (Linux 6.6+) a yield queues the thread behind every runnable thread for a whole
// slice, and with the cores busy (data-loader workers) each yield cost
// milliseconds (bench/results/2026-11-23-cpu-spin-under-load/).
#pragma once

namespace gradcomm {

// Tells the core that this is a spin-wait: it saves power and lets a hyperthread
// sibling run, without giving up the thread's place in the scheduler.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

}  // namespace gradcomm
