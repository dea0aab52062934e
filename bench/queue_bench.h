#pragma once

namespace berth::bench {

/// The queue section of berth_bench (`--queues`): admission plans and the filter verb with
/// 10,000 pending jobs in 100 queues on 5,000 nodes (`quick`: 1,000 in 10 on 500).
/// \return 0, or 1 when a check failed.
int RunQueueBench(bool quick);

}  // namespace berth::bench
