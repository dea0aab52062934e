#pragma once

// Names the calling thread for `top -H`, `ps -L`, perf and /proc/PID/task/TID/comm, so an operator
// (and berth_bench --loop) can tell where berth's CPU goes. Linux keeps at most 15 characters;
// longer names are cut. The main thread is never renamed: its name is the process's.
// Also lowers a thread's priority, for background work that must yield to the verbs.

#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <string>
#include <string_view>

namespace berth::extender {

inline void NameThisThread(std::string_view name) {
  std::string cut(name.substr(0, 15));
  pthread_setname_np(pthread_self(), cut.c_str());
}

/// Gives the calling thread (only it: Linux keeps a nice value per thread) the lowest
/// priority, nice 19: sharing a core with a thread of normal priority, it gets about 1/70 of
/// it. An unprivileged thread cannot raise it again, so call it on a thread made for the work.
/// \return whether it took effect.
inline bool LowerThisThreadPriority() {
  return setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19) == 0;
}

}  // namespace berth::extender
