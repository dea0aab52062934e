#pragma once

#include <string>

namespace berth::bench {

/// The simulator section of berth_bench (`--simulate`): `berth simulate` on the gpu-mix profile
/// over a simulated week, berth and the baseline together, at 1,000 nodes with 10,000 jobs and
/// at 5,000 nodes with 50,000 jobs, the latter also under kube-scheduler's adaptive
/// percentageOfNodesToScore (`quick`: 200 nodes, 1,000 jobs; `size`
/// "NODESxJOBS" for one size of one's own). Prints wall time, the ratio of simulated to wall
/// time, and the cost per verb call against the same verb called in process on the same
/// cluster. \return 0, or 1 when a check failed.
int RunSimBench(bool quick, const std::string& size);

}  // namespace berth::bench
