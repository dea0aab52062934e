#pragma once

namespace berth::bench {

/// The loop section of berth_bench (`--loop`, issue 17 points 4 and 5): what one scheduled pod
/// costs berth, counting everything. berth runs as its own process (`berth serve --kubeconfig`)
/// against the in-process fake API server (tests/testing/fake_apiserver), whose watches feed it
/// as a real server's would; this process plays kube-scheduler: for each pending pod in turn its
/// own resource fit over kube-scheduler's node sample, then berth's filter, prioritize and bind
/// over a kept-alive connection, one pod at a time. berth binds through the API server (one TLS
/// connection, kept alive) and sees its binding come back on the pod watch.
///
/// One line per cluster size and percentageOfNodesToScore, for each berth binary: berth's CPU per
/// scheduled pod (every thread of the process, from /proc/PID/task/*/schedstat, over the
/// window from the pods' creation to the last binding confirmed on berth's watch), API calls
/// per pod, API bytes per pod (request and answer bodies, watch events), verb bytes per pod
/// (what kube-scheduler sends and decodes), and with `--before BINARY` the same figures of that
/// binary measured in the same run and the ratio of the medians; with several rounds, also the
/// median of the ratios within each round (the two binaries run back to back in a round). The
/// current binary's CPU is also broken down by thread (berth names its threads: watch-pods,
/// http-worker, intents, housekeeping, ...).
///
/// Flags (after --loop): --sizes=500,2000,5000 --pods=2000 --percentages=100,0 --rounds=1
/// --berth=BINARY (default: `berth` beside berth_bench) --before=BINARY --perf-out=PREFIX (records
/// `perf record --call-graph dwarf` of the current binary's window per row into PREFIX-NODES-PCT.data;
/// --perf-freq=N samples a second, 499 by default; --perf-flat without call graphs)
/// --syscalls (berth's system calls per pod, by thread, for both binaries: `perf stat` of the
/// raw_syscalls:sys_enter tracepoint) --pin --quick --pace=N (at most N scheduling attempts a second) --config=FILE (berth's configuration)
/// --bind=inline|beside (a pod's bind answered before the next pod's filter, or sent beside it
/// on a second connection).
/// \return 0, or 1 when a pod was not bound or a call failed (never for a figure).
int RunLoopBench(int argc, char** argv);

}  // namespace berth::bench
