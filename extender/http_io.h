#pragma once

// How berth's HTTP server moves bytes on one connection. The event loop and its workers read and
// write only through ConnectionIo, never through the socket itself, so that a TLS layer can take
// the place of PlainSocketIo: its Read may need the socket to be writable first (and its Write
// readable), which the results below can say.

#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>

namespace berth::extender::http {

struct IoResult {
  enum Kind : unsigned char {
    kOk,          ///< `bytes` moved (> 0)
    kWantRead,    ///< nothing moved: wait until the socket is readable
    kWantWrite,   ///< nothing moved: wait until the socket is writable
    kEof,         ///< the peer closed its side (reads only)
    kError,       ///< the connection is broken
  };
  Kind kind = kError;
  size_t bytes = 0;
};

/// One accepted connection's byte stream; non-blocking. Not thread-safe: one thread at a time
/// (the event loop, or the worker that owns the connection while it answers).
class ConnectionIo {
 public:
  virtual ~ConnectionIo() = default;
  virtual IoResult Read(char* buf, size_t len) = 0;
  /// Writes from `iov` (gathering); a partial write is kOk with fewer bytes. A layer that
  /// holds output of its own (HasPendingOutput) sends that first, and with `count` 0 only
  /// that: kOk once none is left.
  virtual IoResult Write(const iovec* iov, int count) = 0;
  /// No more bytes will be written (a TLS layer sends close_notify first).
  virtual void ShutdownWrite() = 0;
  /// Bytes taken by Write (or made by the layer itself, as TLS handshake messages are) that
  /// the socket has not taken yet. A reply is written only once there are none.
  virtual bool HasPendingOutput() const { return false; }
  /// After a Read that returned fewer bytes than asked: true if the next Read has something
  /// to return without a new readiness event (bytes the layer decoded already, or an end of
  /// stream it met after the bytes it returned). A plain socket's short read drained it.
  virtual bool MoreToRead() const { return false; }
  /// True when the connection failed before it could carry a request: a TLS handshake the
  /// client did not complete correctly (a plain-HTTP request, an untrusted certificate).
  virtual bool HandshakeFailed() const { return false; }
};

/// A plain TCP socket. Does not own the descriptor.
class PlainSocketIo final : public ConnectionIo {
 public:
  explicit PlainSocketIo(int fd) : fd_(fd) {}

  IoResult Read(char* buf, size_t len) override {
    for (;;) {
      const ssize_t n = ::recv(fd_, buf, len, 0);
      if (n > 0) return {IoResult::kOk, static_cast<size_t>(n)};
      if (n == 0) return {IoResult::kEof, 0};
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return {IoResult::kWantRead, 0};
      return {IoResult::kError, 0};
    }
  }

  IoResult Write(const iovec* iov, int count) override {
    msghdr msg{};
    msg.msg_iov = const_cast<iovec*>(iov);
    msg.msg_iovlen = static_cast<size_t>(count);
    for (;;) {
      const ssize_t n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL);
      if (n >= 0) return {IoResult::kOk, static_cast<size_t>(n)};
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return {IoResult::kWantWrite, 0};
      return {IoResult::kError, 0};
    }
  }

  void ShutdownWrite() override { ::shutdown(fd_, SHUT_WR); }

 private:
  int fd_;
};

}  // namespace berth::extender::http
