#pragma once

namespace berth::bench {

/// The ETA section of berth_bench (`--eta`): the wall time of one ETA forecast pass
/// (extender/sim/forecast.h) at 1,000 nodes / 1,000 waiting jobs and 5,000 nodes / 10,000
/// waiting jobs (`quick`: 300 / 200), the time the copy holds the model's reader lock, and filter
/// latency (p50, p99) while passes run on another thread against while none does.
/// \return 0, or 1 when a pass failed or left a waiting job out.
int RunEtaBench(bool quick);

}  // namespace berth::bench
