#pragma once

namespace berth::bench {

/// The answer-size section of berth_bench (`--answers`): the bytes of berth's filter and
/// prioritize answers, as it writes them and in its earlier long form, at 500, 2,000 and 5,000
/// candidates on a 5,000-node GPU cluster (`quick`: 100 and 300 on 300 nodes), for a CPU-only
/// pod (most nodes score 0), a 1-GPU pod (every node scores), an 8-GPU pod (many nodes
/// rejected) and a gang member whose PodGroup is missing (every node rejected with the same
/// pod-level message). Checks that kube-scheduler decodes both forms to the same decision.
/// \return 0, or 1 when a check failed.
int RunAnswerBench(bool quick);

}  // namespace berth::bench
