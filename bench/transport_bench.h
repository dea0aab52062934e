#pragma once

namespace berth::bench {

/// The transport section of berth_bench (`--transport[=SECONDS]`, issue 16 points 1 and 6):
/// filter on the verb port and /healthz on the operations port, measured alone and while 2,000
/// idle connections and 200 slow-header clients hold sockets on that port; then the memory and
/// CPU of large request bodies (16 concurrent 60 MiB bodies, gzip bombs) and how fast refused
/// requests are answered. `quick`: a fraction of the clients and bytes, for the smoke test.
/// \return 0, or 1 when a check failed (a wrong reply; never a timing).
int RunTransportBench(bool quick, double seconds);

}  // namespace berth::bench
