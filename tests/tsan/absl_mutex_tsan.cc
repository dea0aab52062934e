// ThreadSanitizer builds only (BERTH_SANITIZE=thread): makes abseil's Mutex and CondVar visible
// to ThreadSanitizer.
//
// Debian's abseil is a shared library built without -fsanitize=thread, so its Mutex takes and
// releases the lock in code ThreadSanitizer does not see, and every field guarded by an
// absl::Mutex would be reported as a data race. This file defines the lock entry points in the
// test executable itself: the dynamic linker binds every call (ours, and those made inside
// libabsl_synchronization) to these definitions first. Each calls abseil's own function (found
// with dlsym(RTLD_NEXT)) and tells ThreadSanitizer what happened: an acquire on the mutex's
// address after it is taken, a release before it is given up.
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/base/options.h"
#include "absl/synchronization/mutex.h"

namespace {

#define BERTH_STR2(x) #x
#define BERTH_STR(x) BERTH_STR2(x)

/// Abseil's own definition of a member, by its Itanium mangled name after "absl::<inline ns>::".
template <class Fn>
Fn Real(const char* rest) {
  const std::string ns = BERTH_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  const std::string name = "_ZN4absl" + std::to_string(ns.size()) + ns + rest;
  void* sym = dlsym(RTLD_NEXT, name.c_str());
  if (sym == nullptr) {
    std::fprintf(stderr, "absl_mutex_tsan: %s not found\n", name.c_str());
    std::abort();
  }
  return reinterpret_cast<Fn>(sym);
}

void Acquired(const void* mu) { __tsan_acquire(const_cast<void*>(mu)); }
void Releasing(const void* mu) { __tsan_release(const_cast<void*>(mu)); }

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

void Mutex::Lock() {
  static const auto real = Real<void (*)(Mutex*)>("5Mutex4LockEv");
  real(this);
  Acquired(this);
}
void Mutex::ReaderLock() {
  static const auto real = Real<void (*)(Mutex*)>("5Mutex10ReaderLockEv");
  real(this);
  Acquired(this);
}
bool Mutex::TryLock() {
  static const auto real = Real<bool (*)(Mutex*)>("5Mutex7TryLockEv");
  const bool locked = real(this);
  if (locked) Acquired(this);
  return locked;
}
bool Mutex::ReaderTryLock() {
  static const auto real = Real<bool (*)(Mutex*)>("5Mutex13ReaderTryLockEv");
  const bool locked = real(this);
  if (locked) Acquired(this);
  return locked;
}
void Mutex::Unlock() {
  static const auto real = Real<void (*)(Mutex*)>("5Mutex6UnlockEv");
  Releasing(this);
  real(this);
}
void Mutex::ReaderUnlock() {
  static const auto real = Real<void (*)(Mutex*)>("5Mutex12ReaderUnlockEv");
  Releasing(this);
  real(this);
}
void Mutex::LockWhen(const Condition& cond) {
  static const auto real = Real<void (*)(Mutex*, const Condition&)>("5Mutex8LockWhenERKNS0_9ConditionE");
  real(this, cond);
  Acquired(this);
}
bool Mutex::LockWhenWithTimeout(const Condition& cond, Duration timeout) {
  static const auto real = Real<bool (*)(Mutex*, const Condition&, Duration)>(
      "5Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  const bool met = real(this, cond, timeout);
  Acquired(this);
  return met;
}
// Await* give the lock up while they wait and hold it again when they return.
void Mutex::Await(const Condition& cond) {
  static const auto real = Real<void (*)(Mutex*, const Condition&)>("5Mutex5AwaitERKNS0_9ConditionE");
  Releasing(this);
  real(this, cond);
  Acquired(this);
}
bool Mutex::AwaitWithTimeout(const Condition& cond, Duration timeout) {
  static const auto real = Real<bool (*)(Mutex*, const Condition&, Duration)>(
      "5Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  Releasing(this);
  const bool met = real(this, cond, timeout);
  Acquired(this);
  return met;
}
bool Mutex::AwaitWithDeadline(const Condition& cond, Time deadline) {
  static const auto real = Real<bool (*)(Mutex*, const Condition&, Time)>(
      "5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  Releasing(this);
  const bool met = real(this, cond, deadline);
  Acquired(this);
  return met;
}
void CondVar::Wait(Mutex* mu) {
  static const auto real = Real<void (*)(CondVar*, Mutex*)>("7CondVar4WaitEPNS0_5MutexE");
  Releasing(mu);
  real(this, mu);
  Acquired(mu);
}
bool CondVar::WaitWithTimeout(Mutex* mu, Duration timeout) {
  static const auto real = Real<bool (*)(CondVar*, Mutex*, Duration)>(
      "7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  Releasing(mu);
  const bool timed_out = real(this, mu, timeout);
  Acquired(mu);
  return timed_out;
}

ABSL_NAMESPACE_END
}  // namespace absl
