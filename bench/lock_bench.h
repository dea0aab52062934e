#pragma once

namespace berth::bench {

/// The model-lock section of berth_bench (`--lock-hold[=SECONDS]`): how long writes hold the
/// model's lock exclusively, and what that does to the verbs, on 5,000 nodes and 50,000 bound
/// pods (`quick`: 500 and 5,000, a fraction of a second per phase).
/// \return 0, or 1 when a verb answered an error.
int RunLockBench(bool quick, double seconds);

}  // namespace berth::bench
