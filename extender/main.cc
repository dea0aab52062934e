// berth: a Kubernetes scheduler extender for batch and AI training work.

#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "core/clock.h"
#include "core/cluster_model.h"
#include "core/strings.h"
#include "extender/build_info.h"
#include "extender/config.h"
#include "extender/demo_cluster.h"
#include "extender/http_server.h"
#include "extender/kube/kubeconfig.h"
#include "extender/kube/runtime.h"
#include "extender/logging.h"
#include "extender/service.h"
#include "policy/registry.h"
#include "spdlog/spdlog.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:8888", "HOST:PORT to serve the extender and debug API on");
ABSL_FLAG(std::string, ops_listen, "",
          "HOST:PORT to serve only the read-only operations endpoints on (GET /healthz, /readyz, "
          "/version, /debug/*), e.g. 0.0.0.0:8889 for probes while --listen stays on loopback");
ABSL_FLAG(std::string, config, "", "berth configuration file (JSON); see docs/configuration.md");
ABSL_FLAG(std::string, cluster, "",
          "standalone mode: load the cluster from this Kubernetes List JSON file "
          "(kubectl get nodes,pods -o json, or /debug/snapshot output) instead of the demo cluster");
ABSL_FLAG(std::string, kubeconfig, "",
          "Kubernetes mode: connect with this kubeconfig file (its current context)");
ABSL_FLAG(std::string, context, "", "Kubernetes mode: the kubeconfig context to use instead of current-context");
ABSL_FLAG(bool, in_cluster, false,
          "Kubernetes mode: connect with the pod's service account (the default in a pod, "
          "i.e. when KUBERNETES_SERVICE_HOST is set and no --cluster is given)");
ABSL_FLAG(std::string, scheduler_name, "",
          "schedulerName of berth's pods (default: the config's schedulerName, else berth-scheduler)");
ABSL_FLAG(std::string, log_level, "info", "trace, debug, info, warn, error or off");
ABSL_FLAG(std::string, log_format, "text", "text, or json for one JSON object per line");

namespace berth::extender {
namespace {

// absl prints "berth: " before this in --help.
constexpr char kUsage[] =
    "a Kubernetes scheduler extender for batch and AI training work.\n\n"
    "usage:\n"
    "  berth serve [--listen 127.0.0.1:8888] [--ops-listen HOST:PORT] [--config FILE]\n"
    "              [--cluster FILE | --kubeconfig FILE [--context NAME] | --in-cluster]\n"
    "              [--scheduler-name berth-scheduler] [--log-level info] [--log-format text|json]\n"
    "  berth version\n\n"
    "With no --cluster, --kubeconfig or --in-cluster, `berth serve` runs on its embedded demo "
    "cluster, or in a pod (KUBERNETES_SERVICE_HOST set) in Kubernetes mode with the pod's "
    "service account.";

int Fail(std::string_view message) {
  std::cerr << "berth: " << message << "\n";
  return 2;
}

// absl spells flags with underscores (--log_format); SPEC 2 and the usage text spell them with
// dashes (--log-format), as kube-scheduler's own flags are. Both are accepted: the name of each
// flag argument that names a berth flag once its dashes are underscores is rewritten. Values
// and unknown flags are left alone (absl then reports an unknown flag as it was written).
std::vector<std::string> UnderscoreFlagNames(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  for (size_t i = 1; i < args.size(); ++i) {
    std::string& a = args[i];
    if (a == "--") break;
    if (a.size() < 2 || a[0] != '-') continue;
    const size_t start = a[1] == '-' ? 2 : 1;
    const size_t end = std::min(a.find('='), a.size());
    std::string name = a.substr(start, end - start);
    std::replace(name.begin(), name.end(), '-', '_');
    std::string flag = name;
    if (absl::FindCommandLineFlag(flag) == nullptr && absl::StartsWith(name, "no")) {
      flag = name.substr(absl::StartsWith(name, "no_") ? 3 : 2);  // --no-in-cluster
      name = "no" + flag;
    }
    if (absl::FindCommandLineFlag(flag) == nullptr) continue;
    a = a.substr(0, start) + name + a.substr(end);
  }
  return args;
}

bool ParseListen(const std::string& listen, std::string* host, int* port) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0) return false;
  *host = listen.substr(0, colon);
  if (host->size() > 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  const std::string p = listen.substr(colon + 1);
  if (p.empty() || p.size() > 5 || p.find_first_not_of("0123456789") != std::string::npos) return false;
  *port = std::stoi(p);
  return *port <= 65535;
}

int Serve() {
  if (absl::Status s = SetupLogging(absl::GetFlag(FLAGS_log_level), absl::GetFlag(FLAGS_log_format));
      !s.ok()) {
    return Fail(ToStd(s.message()));
  }
  std::string host;
  int port = 0;
  if (!ParseListen(absl::GetFlag(FLAGS_listen), &host, &port)) {
    return Fail(StrCat("--listen: expected HOST:PORT such as 127.0.0.1:8888, got \"",
                       absl::GetFlag(FLAGS_listen), "\""));
  }
  Config config;
  if (const std::string path = absl::GetFlag(FLAGS_config); !path.empty()) {
    absl::StatusOr<Config> loaded = LoadConfigFile(path);
    if (!loaded.ok()) return Fail(ToStd(loaded.status().message()));
    config = *std::move(loaded);
  }
  if (const std::string name = absl::GetFlag(FLAGS_scheduler_name); !name.empty()) {
    config.scheduler_name = name;
  }
  config.policy.scheduler_name = config.scheduler_name;
  const std::string cluster_file = absl::GetFlag(FLAGS_cluster);
  const std::string kubeconfig = absl::GetFlag(FLAGS_kubeconfig);
  const kube::InClusterEnv env = kube::InClusterEnvFromProcess();
  if (!absl::GetFlag(FLAGS_context).empty() && kubeconfig.empty()) {
    return Fail("--context needs --kubeconfig");
  }
  if (!kubeconfig.empty() && absl::GetFlag(FLAGS_in_cluster)) {
    return Fail("--kubeconfig and --in-cluster exclude each other");
  }
  const bool kubernetes = !kubeconfig.empty() || absl::GetFlag(FLAGS_in_cluster) ||
                          (cluster_file.empty() && kube::InCluster(env));
  if (kubernetes && !cluster_file.empty()) {
    return Fail("--cluster cannot be combined with --kubeconfig or --in-cluster");
  }
  std::string ops_host;
  int ops_port = 0;
  if (const std::string ops = absl::GetFlag(FLAGS_ops_listen); !ops.empty() && !ParseListen(ops, &ops_host, &ops_port)) {
    return Fail(StrCat("--ops-listen: expected HOST:PORT such as 0.0.0.0:8889, got \"", ops, "\""));
  }

  core::RealClock clock;
  core::ClusterModel model(&clock);
  policy::Registry registry = policy::BuildDefaultRegistry();
  absl::StatusOr<std::unique_ptr<policy::Pipeline>> pipeline =
      registry.Build(config.policy, model.resources());
  if (!pipeline.ok()) return Fail(StrCat("policies: ", pipeline.status().message()));

  std::string policies;
  for (const std::string& m : (*pipeline)->Describe()) StrAppend(&policies, policies.empty() ? "" : " ", m);
  ServiceOptions options{.mode = kubernetes ? Mode::kKubernetes : Mode::kStandalone,
                         .scheduler_name = config.scheduler_name,
                         .topology_levels = config.topology_levels,
                         .bind_confirm_timeout = config.bind_confirm_timeout,
                         .reclaim_timeout = config.policy.pools.reclaim_timeout,
                         .pod_events = {.repeat_after = config.events_repeat_after,
                                        .min_interval = config.events_min_interval,
                                        .max_per_tick = config.events_max_per_second},
                         .version = kVersion,
                         .git_commit = kGitCommit,
                         .build_type = kBuildType};

  std::unique_ptr<kube::KubernetesRuntime> runtime;
  LocalBinder local_binder(&model);
  BinderInterface* binder = &local_binder;
  std::string source;
  if (kubernetes) {
    absl::StatusOr<kube::ClientConfig> kc =
        !kubeconfig.empty() ? kube::LoadKubeconfig(kubeconfig, absl::GetFlag(FLAGS_context))
                            : kube::InClusterConfig(env);
    if (!kc.ok()) return Fail(ToStd(kc.status().message()));
    kube::KubernetesOptions kopts;
    kopts.reflector.watch_timeout = config.watch_timeout;
    kopts.leader_election = config.leader_election;
    kopts.client.user_agent = StrCat("berth/", kVersion);
    kopts.scheduler_name = config.scheduler_name;
    kopts.pool_status_interval = config.pool_status_interval;
    absl::StatusOr<std::unique_ptr<kube::KubernetesRuntime>> rt =
        kube::KubernetesRuntime::Create(*std::move(kc), kopts, &model);
    if (!rt.ok()) return Fail(ToStd(rt.status().message()));
    runtime = *std::move(rt);
    binder = &runtime->binder();
    source = StrCat("kubernetes, ", runtime->client().server());
  }
  Service service(options, &model, *std::move(pipeline), binder, &clock);
  // Reclaim evicts through the Eviction API in Kubernetes mode (standalone mode's default
  // evictor removes the pod from the model).
  // Jobs admitted by their queue are nudged with a pod annotation patch, so kube-scheduler
  // retries them at once.
  std::unique_ptr<kube::KubeEvictor> evictor;
  std::unique_ptr<kube::KubeNudger> nudger;
  std::unique_ptr<kube::KubePodEventSink> pod_events;
  if (runtime) {
    evictor = std::make_unique<kube::KubeEvictor>(&runtime->writer());
    service.SetEvictor(evictor.get());
    nudger = std::make_unique<kube::KubeNudger>(&runtime->writer(), &clock);
    service.SetNudger(nudger.get());
    pod_events = std::make_unique<kube::KubePodEventSink>(&runtime->writer());
    service.SetPodEventSink(pod_events.get());
  }

  if (!kubernetes) {
    std::string text;
    if (!cluster_file.empty()) {
      absl::StatusOr<std::string> read = ReadFile(cluster_file);
      if (!read.ok()) return Fail(ToStd(read.status().message()));
      text = *std::move(read);
    } else {
      text = std::string(kDemoClusterJson);
    }
    absl::StatusOr<size_t> loaded =
        service.LoadList(text, cluster_file.empty() ? "demo cluster" : cluster_file);
    if (!loaded.ok()) return Fail(ToStd(loaded.status().message()));
    auto view = model.Read();
    source = StrCat("standalone, ", cluster_file.empty() ? "embedded demo cluster" : cluster_file,
                    ": ", view->node_count(), " nodes, ", view->pod_count(), " pods");
    service.SetReady(true);
  }

  HttpServer server(&service, HttpServerOptions{.max_body_bytes = config.max_request_bytes,
                                                .threads = config.http_threads});
  absl::StatusOr<int> bound = server.Bind(host, port);
  if (!bound.ok()) return Fail(ToStd(bound.status().message()));
  std::unique_ptr<HttpServer> ops_server;
  if (!ops_host.empty()) {
    ops_server = std::make_unique<HttpServer>(
        &service, HttpServerOptions{.max_body_bytes = 4096, .threads = 8, .read_only = true});
    absl::StatusOr<int> ops_bound = ops_server->Start(ops_host, ops_port);
    if (!ops_bound.ok()) return Fail(StrCat("--ops-listen: ", ops_bound.status().message()));
  }

  // Signals go to one thread that stops the server; housekeeping runs on another.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::atomic<bool> stopping{false};
  std::thread signal_thread([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    spdlog::info("signal {} received, shutting down", sig);
    stopping = true;
    server.Stop();
    if (ops_server) ops_server->Stop();
  });
  std::thread housekeeping([&] {
    int ticks = 0;
    while (!stopping) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      // Pool statistics of a model still being listed would be wrong: wait for the first lists.
      if (runtime && runtime->synced()) runtime->pool_status().Tick(absl::Now());
      ++ticks;
      if (ticks % 10 == 0 && (!runtime || runtime->synced())) {
        const AdmissionTickStats t = service.AdmissionTick();
        if (t.evicted > 0) spdlog::info("evicted {} pod(s) for fair share", t.evicted);
        if (t.events > 0) spdlog::debug("wrote {} event(s) about waiting pods", t.events);
      }
      if (ticks % 50 != 0) continue;
      if (!runtime || runtime->synced()) {
        if (int n = service.Housekeeping(); n > 0) spdlog::info("started {} reclaim(s)", n);
      }
      if (int n = model.ExpireBinds(config.bind_confirm_timeout); n > 0) {
        spdlog::warn("released {} bind(s) never confirmed within the timeout", n);
      }
    }
  });
  // /readyz turns ready only once every watched collection's first list is in the model.
  if (runtime) runtime->Start([&service] { service.SetReady(true); });

  const std::string url = StrCat("http://", host.find(':') != std::string::npos ? StrCat("[", host, "]") : host,
                                 ":", *bound);
  std::cout << "berth " << kVersion << " listening on " << url << " (" << source << ")\n"
            << "try: curl -s '" << url << "/debug/nodes?format=text'\n"
            << std::flush;
  spdlog::info("serving on {} with policies {}", url, policies);
  server.Run();
  stopping = true;
  housekeeping.join();
  if (ops_server) ops_server->Stop();
  if (runtime) runtime->Stop();  // a leader releases its Lease
  if (signal_thread.joinable()) {
    pthread_kill(signal_thread.native_handle(), SIGTERM);
    signal_thread.join();
  }
  return 0;
}

}  // namespace
}  // namespace berth::extender

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(berth::extender::kUsage);
  // --help lists the flags of this file (absl's default looks for berth.cc or berth_main.cc).
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view file) { return absl::EndsWith(file, "main.cc"); };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  usage.version_string = [] {
    return berth::StrCat("berth ", berth::extender::kVersion, " (commit ",
                         berth::extender::kGitCommit, ", ", berth::extender::kBuildType, ")\n");
  };
  absl::SetFlagsUsageConfig(usage);
  std::vector<std::string> argv_storage = berth::extender::UnderscoreFlagNames(argc, argv);
  std::vector<char*> argv_underscored;
  for (std::string& a : argv_storage) argv_underscored.push_back(a.data());
  std::vector<char*> args =
      absl::ParseCommandLine(static_cast<int>(argv_underscored.size()), argv_underscored.data());
  if (args.size() < 2) {
    std::cerr << "berth: no command given (expected serve or version)\n\n"
              << berth::extender::kUsage << "\n";
    return 2;
  }
  const std::string command = args[1];
  if (args.size() > 2) {
    return berth::extender::Fail(berth::StrCat("unexpected argument \"", args[2], "\" after ", command));
  }
  if (command == "serve") return berth::extender::Serve();
  if (command == "version") {
    std::cout << "berth " << berth::extender::kVersion << " (commit " << berth::extender::kGitCommit
              << ", " << berth::extender::kBuildType << ")\n";
    return 0;
  }
  return berth::extender::Fail(berth::StrCat("unknown command \"", command, "\" (expected serve or version)"));
}
