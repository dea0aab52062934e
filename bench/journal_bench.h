#pragma once

namespace berth::bench {

/// The journal section of berth_bench (`--journal`): filter latency with the decision journal
/// (`berth serve --journal`) off and on, at 500, 2,000 and 5,000 nodes (`quick`: 300), every
/// node a candidate as percentageOfNodesToScore: 100 sends them. Rounds alternate between a
/// Service without a journal and one with it, over two copies of the cluster; p50 and p99 of each and their ratio, and the journal's bytes per call.
/// \return 0, or 1 when a call failed.
int RunJournalBench(bool quick);

}  // namespace berth::bench
