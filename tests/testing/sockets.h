#pragma once

// Blocking TCP clients for tests that talk to an in-process server on loopback.

namespace berth::testing {

struct LoopbackOptions {
  int timeout_ms = 5000;           ///< receive and send timeout: a hung server fails the test
  const char* source = nullptr;    ///< the client's address (another of 127.0.0.0/8: another peer)
  int receive_buffer = 0;          ///< SO_RCVBUF before connecting (a slow reader's small window)
};

/// A connected socket to 127.0.0.1:`port`, with TCP_NODELAY as Go's net/http sets it; fails the
/// running test if it cannot connect. The caller closes it.
int ConnectLoopback(int port, const LoopbackOptions& options = {});

}  // namespace berth::testing
