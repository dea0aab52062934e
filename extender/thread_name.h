#pragma once

// Names the calling thread for `top -H`, `ps -L`, perf and /proc/PID/task/TID/comm, so an operator
// (and berth_bench --loop) can tell where berth's CPU goes. Linux keeps at most 15 characters;
// longer names are cut. The main thread is never renamed: its name is the process's.

#include <pthread.h>

#include <string>
#include <string_view>

namespace berth::extender {

inline void NameThisThread(std::string_view name) {
  std::string cut(name.substr(0, 15));
  pthread_setname_np(pthread_self(), cut.c_str());
}

}  // namespace berth::extender
