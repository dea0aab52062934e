#pragma once

namespace berth::bench {

/// The HTTPS section of berth_bench (`--tls[=SECONDS]`, issue 16 point 7): the same server with
/// and without TLS in one run. Keep-alive calls as kube-scheduler makes them (a do-nothing route
/// and filter at 5,000 nodes, one connection, one call at a time), and a new connection per
/// call (handshake included), each with its ratio to plain HTTP. `quick`: a short smoke run.
/// \return 0, or 1 when a call failed (never for a timing).
int RunTlsBench(bool quick, double seconds);

}  // namespace berth::bench
