// berth: a Kubernetes scheduler extender for batch and AI training work.

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/synchronization/mutex.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "core/clock.h"
#include "core/cluster_model.h"
#include "core/strings.h"
#include "extender/build_info.h"
#include "extender/config.h"
#include "extender/demo_cluster.h"
#include "extender/http_server.h"
#include "extender/thread_name.h"
#include "extender/kube/kubeconfig.h"
#include "extender/journal.h"
#include "extender/kube/runtime.h"
#include "extender/replay.h"
#include "extender/logging.h"
#include "extender/service.h"
#include "extender/sim/engine.h"
#include "extender/sim/eta_runner.h"
#include "extender/sim/forecast.h"
#include "extender/sim/generate.h"
#include "extender/sim/report.h"
#include "policy/registry.h"
#include "spdlog/spdlog.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:8888", "HOST:PORT to serve the extender and debug API on");
ABSL_FLAG(std::string, ops_listen, "",
          "HOST:PORT to serve only the read-only operations endpoints on (GET /healthz, /readyz, "
          "/version, /debug/*), e.g. 0.0.0.0:8889 for probes while --listen stays on loopback");
ABSL_FLAG(std::string, tls_cert_file, "",
          "serve HTTPS on both ports with this PEM certificate (and its chain); re-read when the "
          "file changes");
ABSL_FLAG(std::string, tls_key_file, "", "the PEM private key of --tls-cert-file");
ABSL_FLAG(std::string, tls_client_ca_file, "",
          "with --tls-cert-file: the verb port (--listen) accepts only clients with a certificate "
          "this PEM CA signed (kube-scheduler's tlsConfig certFile/keyFile)");
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
// The decision journal (docs/decisions.md, "Journal and replay").
ABSL_FLAG(std::string, journal, "",
          "serve, simulate: record every verb, model change and tick in this directory; replay: "
          "the journal to replay");
ABSL_FLAG(int64_t, journal_max_file_mb, 64, "serve, simulate: begin a new journal file past this size");
ABSL_FLAG(int64_t, journal_max_total_mb, 1024,
          "serve, simulate: delete the oldest journal files while the journal holds more than this");
ABSL_FLAG(std::string, log_level, "info", "trace, debug, info, warn, error or off");
ABSL_FLAG(std::string, log_format, "text", "text, or json for one JSON object per line");
// berth simulate (docs/simulate.md).
ABSL_FLAG(std::string, workload, "", "simulate: the workload file (YAML or JSON) to replay");
ABSL_FLAG(std::string, out, "",
          "simulate: the report directory (default simulate-report); with --generate, the "
          "workload file to write");
ABSL_FLAG(uint64_t, seed, 1, "simulate: seed of kube-scheduler's random choices, and of --generate");
ABSL_FLAG(std::string, generate, "",
          "simulate: write a synthetic workload of this profile (gpu-mix, seed-stories, "
          "gang-fat-tree, saturated, saturated-pools) to --out instead of simulating");
ABSL_FLAG(int, jobs, 0, "simulate --generate: how many jobs");
ABSL_FLAG(int, nodes, 0, "simulate --generate: cluster size (0: the profile's default)");
ABSL_FLAG(std::string, cluster_out, "",
          "simulate --generate: also write the profile's cluster (a List for --cluster) here");
ABSL_FLAG(double, sample_seconds, 60, "simulate: how often the report samples the cluster, in simulated seconds");
ABSL_FLAG(int, percentage_of_nodes_to_score, 100,
          "simulate: kube-scheduler's percentageOfNodesToScore (0: its adaptive default)");
ABSL_FLAG(int, extender_weight, 20, "simulate: the extender's weight in the KubeSchedulerConfiguration");
ABSL_FLAG(double, tick_seconds, 1, "simulate: berth's admission tick period, in simulated seconds");
ABSL_FLAG(double, idle_tick_seconds, 10,
          "simulate: while berth's model is unchanged, its admission tick runs at most this often "
          "(docs/simulate.md); equal to --tick-seconds to run every tick");
ABSL_FLAG(double, load, 0,
          "simulate --generate: offered GPU load over the arrival span (0: the profile's default)");
ABSL_FLAG(double, max_hours, 0, "simulate: stop after this many simulated hours (0: when the work is done)");
ABSL_FLAG(double, eta_every_seconds, 0,
          "simulate: the ETA accuracy study: run berth's ETA forecast at most this often (simulated "
          "seconds) whenever its model changed, and compare each prediction with the simulated start "
          "(0: off; docs/simulate.md)");
ABSL_FLAG(double, eta_noise, 0,
          "simulate --eta-every-seconds: each job's announced run time is off by a factor drawn from "
          "[1 - N, 1 + N] (0: exact; 0.3: +-30%)");
ABSL_FLAG(bool, eta_knows_arrivals, false,
          "simulate --eta-every-seconds: each pass is also told every job the workload submits later "
          "(a study of what the forecast cannot know; docs/simulate.md)");
ABSL_FLAG(bool, baseline, true, "simulate: also run kube-scheduler alone as the baseline");
ABSL_FLAG(std::string, break_rule, "",
          "simulate, for testing the invariants only: break a rule on purpose (in-tree-fit, "
          "drop-pod-deletes); comma-separated");

namespace berth::extender {
namespace {

// absl prints "berth: " before this in --help.
constexpr char kUsage[] =
    "a Kubernetes scheduler extender for batch and AI training work.\n\n"
    "usage:\n"
    "  berth serve [--listen 127.0.0.1:8888] [--ops-listen HOST:PORT] [--config FILE]\n"
    "              [--tls-cert-file FILE --tls-key-file FILE [--tls-client-ca-file FILE]]\n"
    "              [--cluster FILE | --kubeconfig FILE [--context NAME] | --in-cluster]\n"
    "              [--scheduler-name berth-scheduler] [--log-level info] [--log-format text|json]\n"
    "              [--journal DIR [--journal-max-file-mb 64] [--journal-max-total-mb 1024]]\n"
    "  berth simulate --cluster FILE --workload FILE [--config FILE] [--out DIR] [--seed N]\n"
    "  berth simulate --generate PROFILE --jobs N --out workload.yaml [--cluster-out FILE]\n"
    "  berth replay --journal DIR [--config FILE]\n"
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

// Opens --journal, if given, with the header replay rebuilds the service from. A null journal
// and OK when the flag is empty.
absl::StatusOr<std::unique_ptr<Journal>> OpenJournal(Mode mode, const Config& config) {
  const std::string dir = absl::GetFlag(FLAGS_journal);
  if (dir.empty()) return std::unique_ptr<Journal>();
  const int64_t file_mb = absl::GetFlag(FLAGS_journal_max_file_mb);
  const int64_t total_mb = absl::GetFlag(FLAGS_journal_max_total_mb);
  if (file_mb < 1 || file_mb > 65536) return absl::InvalidArgumentError("--journal-max-file-mb: expected 1..65536");
  if (total_mb < file_mb) return absl::InvalidArgumentError("--journal-max-total-mb: expected at least --journal-max-file-mb");
  JournalHeader header{.mode = std::string(ModeName(mode)),
                       .scheduler_name = config.scheduler_name,
                       .version = StrCat(kVersion, " (", kGitCommit, ")")};
  if (const std::string path = absl::GetFlag(FLAGS_config); !path.empty()) {
    absl::StatusOr<std::string> text = ReadFile(path);
    if (!text.ok()) return text.status();
    header.config_json = *std::move(text);
    header.config_source = path;
  }
  return Journal::Open(JournalOptions{.dir = dir, .max_file_bytes = file_mb << 20, .max_total_bytes = total_mb << 20},
                       std::move(header));
}

int ReplayCommand() {
  if (absl::Status s = SetupLogging("error", absl::GetFlag(FLAGS_log_format)); !s.ok()) return Fail(ToStd(s.message()));
  ReplayOptions o;
  o.dir = absl::GetFlag(FLAGS_journal);
  if (o.dir.empty()) return Fail("replay needs --journal DIR (a directory `berth serve --journal` or `berth simulate --journal` wrote)");
  if (const std::string path = absl::GetFlag(FLAGS_config); !path.empty()) {
    absl::StatusOr<std::string> text = ReadFile(path);
    if (!text.ok()) return Fail(ToStd(text.status().message()));
    // Checked here, so a bad file is named before any replaying.
    if (absl::StatusOr<Config> parsed = ParseConfig(*text, path); !parsed.ok()) return Fail(ToStd(parsed.status().message()));
    o.config_json = *std::move(text);
    o.config_source = path;
  }
  absl::StatusOr<ReplayResult> result = extender::Replay(o);
  if (!result.ok()) return Fail(ToStd(result.status().message()));
  std::cout << ReplayReport(*result);
  return result->differing == 0 ? 0 : 1;
}

int Serve() {
  // SIGINT and SIGTERM are taken by one thread with sigwait (below). They are blocked here,
  // before any thread starts (the operations server, the Kubernetes client's), as threads
  // inherit the mask: a thread started with them unblocked would die of them instead.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
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

  TlsOptions tls_options{.cert_file = absl::GetFlag(FLAGS_tls_cert_file),
                         .key_file = absl::GetFlag(FLAGS_tls_key_file),
                         .client_ca_file = absl::GetFlag(FLAGS_tls_client_ca_file)};
  if (tls_options.cert_file.empty() != tls_options.key_file.empty()) {
    return Fail("--tls-cert-file and --tls-key-file go together (HTTPS needs both)");
  }
  const bool https = !tls_options.cert_file.empty();
  if (!https && !tls_options.client_ca_file.empty()) {
    return Fail("--tls-client-ca-file needs --tls-cert-file and --tls-key-file");
  }

  core::RealClock clock;
  core::ClusterModel model(&clock);
  policy::Registry registry = policy::BuildDefaultRegistry();
  absl::StatusOr<std::unique_ptr<policy::Pipeline>> pipeline =
      registry.Build(config.policy, model.resources());
  if (!pipeline.ok()) return Fail(StrCat("policies: ", pipeline.status().message()));

  std::string policies;
  for (const std::string& m : (*pipeline)->Describe()) StrAppend(&policies, policies.empty() ? "" : " ", m);
  ServiceOptions options = ServiceOptionsFor(config, kubernetes ? Mode::kKubernetes : Mode::kStandalone);
  options.version = kVersion;
  options.git_commit = kGitCommit;
  options.build_type = kBuildType;

  absl::StatusOr<std::unique_ptr<Journal>> journal =
      OpenJournal(kubernetes ? Mode::kKubernetes : Mode::kStandalone, config);
  if (!journal.ok()) return Fail(ToStd(journal.status().message()));

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
    kopts.reflector.journal = journal->get();
    absl::StatusOr<std::unique_ptr<kube::KubernetesRuntime>> rt =
        kube::KubernetesRuntime::Create(*std::move(kc), kopts, &model);
    if (!rt.ok()) return Fail(ToStd(rt.status().message()));
    runtime = *std::move(rt);
    binder = &runtime->binder();
    source = StrCat("kubernetes, ", runtime->client().server());
  }
  std::unique_ptr<JournalingBinder> journaling_binder;
  if (*journal != nullptr && kubernetes) {
    journaling_binder = std::make_unique<JournalingBinder>(binder, journal->get(), &clock);
    binder = journaling_binder.get();
  }
  Service service(options, &model, *std::move(pipeline), binder, &clock);
  if (*journal != nullptr) service.SetJournal(journal->get());
  // Reclaim evicts through the Eviction API in Kubernetes mode (standalone mode's default
  // evictor removes the pod from the model).
  // Jobs admitted by their queue are nudged with a pod annotation patch, so kube-scheduler
  // retries them at once.
  std::unique_ptr<kube::KubeEvictor> evictor;
  std::unique_ptr<kube::KubeNudger> nudger;
  std::unique_ptr<kube::KubePodEventSink> pod_events;
  std::unique_ptr<kube::KubeEtaAnnotator> eta_annotator;
  sim::EtaRunner eta(&service, &clock, config);
  eta.SetLowPriority(true);  // a pass takes only the CPU the verbs leave
  if (config.eta_interval > absl::ZeroDuration()) {
    service.SetForecaster([&config](const core::ClusterModel& m, policy::FairShare* book, absl::Time now) {
      return sim::RunForecast({.model = &m, .book = book, .config = config, .now = now, .horizon = config.eta_horizon,
                               .max_wall = config.eta_max_pass});
    });
  }
  if (runtime) {
    eta_annotator = std::make_unique<kube::KubeEtaAnnotator>(&runtime->writer());
    eta.SetAnnotator(eta_annotator.get());
    evictor = std::make_unique<kube::KubeEvictor>(&runtime->writer());
    service.SetEvictor(evictor.get());
    nudger = std::make_unique<kube::KubeNudger>(&runtime->writer(), &clock);
    service.SetNudger(nudger.get());
    pod_events = std::make_unique<kube::KubePodEventSink>(&runtime->writer());
    service.SetPodEventSink(pod_events.get());
    runtime->pool_status().set_metrics(&service.api_write_metrics());
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

  std::shared_ptr<TlsServerContext> tls;
  if (https) {
    absl::StatusOr<std::shared_ptr<TlsServerContext>> made =
        TlsServerContext::Create(tls_options, &service.transport_metrics().tls);
    if (!made.ok()) return Fail(StrCat("HTTPS: ", made.status().message()));
    tls = *std::move(made);
  }
  HttpServer server(&service, HttpServerOptions{.max_body_bytes = config.max_request_bytes,
                                                .threads = config.http_threads,
                                                .tls = tls,
                                                .tls_verify_client = tls && tls->has_client_ca()});
  absl::StatusOr<int> bound = server.Bind(host, port);
  if (!bound.ok()) return Fail(ToStd(bound.status().message()));
  std::unique_ptr<HttpServer> ops_server;
  if (!ops_host.empty()) {
    HttpServerOptions ops_options = OpsServerOptions();
    ops_options.tls = tls;  // no client certificate asked: the kubelet's probes have none
    ops_server = std::make_unique<HttpServer>(&service, std::move(ops_options));
    absl::StatusOr<int> ops_bound = ops_server->Start(ops_host, ops_port);
    if (!ops_bound.ok()) return Fail(StrCat("--ops-listen: ", ops_bound.status().message()));
  }

  // Signals go to one thread that stops the server (blocked above, before any thread started);
  // housekeeping runs on another.
  // Evictions, nudges and Events are carried out off the request path (extender/intents.h), by
  // a thread started here so that it inherits the blocked signals.
  service.StartIntentWorker();
  std::atomic<bool> stopping{false};
  std::thread signal_thread([&] {
    NameThisThread("signals");
    int sig = 0;
    sigwait(&signals, &sig);
    spdlog::info("signal {} received, shutting down", sig);
    stopping = true;
    server.Stop();
    if (ops_server) ops_server->Stop();
  });
  std::thread housekeeping([&] {
    NameThisThread("housekeeping");
    int ticks = 0;
    while (!stopping) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      // Pool statistics of a model still being listed would be wrong: wait for the first lists.
      if (runtime && runtime->synced()) runtime->pool_status().Tick(absl::Now());
      ++ticks;
      if (ticks % 10 == 0 && (!runtime || runtime->synced())) {
        const AdmissionTickStats t = service.AdmissionTick();
        if (t.evicted > 0) spdlog::info("{} pod(s) to evict for fair share", t.evicted);
        if (t.events > 0) spdlog::debug("{} event(s) to write about waiting pods", t.events);
      }
      if (ticks % 50 != 0) continue;
      if (!runtime || runtime->synced()) {
        if (int n = service.Housekeeping(); n > 0) {
          spdlog::info("housekeeping: {} reclaim(s) started or gang(s) given room", n);
        }
      }
      if (int n = model.ExpireBinds(config.bind_confirm_timeout); n > 0) {
        spdlog::warn("released {} bind(s) never confirmed within the timeout", n);
      }
    }
  });
  // The ETA forecast: a pass at most every eta.intervalSeconds when the model changed, on a
  // thread of its own (a pass at thousands of nodes takes seconds; docs/performance.md).
  // A pass in progress ends at once on SIGTERM (a pass may take eta.maxPassSeconds, more at
  // nice 19 on a busy node): the shutdown below waits for this thread.
  eta.SetStop(&stopping);
  std::thread eta_thread([&] {
    NameThisThread("eta");
    while (!stopping) {
      for (int i = 0; i < 10 && !stopping; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (!stopping && service.ready()) eta.Step();
    }
  });
  // /readyz turns ready only once every watched collection's first list is in the model.
  if (runtime) runtime->Start([&service] { service.SetReady(true); });

  const std::string url = StrCat(https ? "https://" : "http://", host.find(':') != std::string::npos ? StrCat("[", host, "]") : host,
                                 ":", *bound);
  std::cout << "berth " << kVersion << " listening on " << url << " (" << source << ")\n"
            << "try: curl -s " << (https ? "--cacert CA_FILE " : "") << "'" << url
            << "/debug/nodes?format=text'\n"
            << std::flush;
  spdlog::info("serving on {} with policies {}", url, policies);
  server.Run();
  stopping = true;
  housekeeping.join();
  eta_thread.join();
  service.StopIntentWorker();
  if (ops_server) ops_server->Stop();
  if (runtime) runtime->Stop();  // a leader releases its Lease
  if (signal_thread.joinable()) {
    pthread_kill(signal_thread.native_handle(), SIGTERM);
    signal_thread.join();
  }
  return 0;
}


absl::Status WriteText(const std::string& path, std::string_view text) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return absl::InvalidArgumentError(StrCat(path, ": cannot write: ", std::strerror(errno)));
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok) return absl::InvalidArgumentError(StrCat(path, ": write failed"));
  return absl::OkStatus();
}

int Generate() {
  const std::string out = absl::GetFlag(FLAGS_out);
  if (out.empty()) return Fail("simulate --generate needs --out FILE for the workload");
  if (!absl::GetFlag(FLAGS_workload).empty()) return Fail("--generate writes a workload; --workload is for simulating one");
  sim::GenerateOptions g{.profile = absl::GetFlag(FLAGS_generate),
                         .jobs = absl::GetFlag(FLAGS_jobs),
                         .nodes = absl::GetFlag(FLAGS_nodes),
                         .seed = absl::GetFlag(FLAGS_seed),
                         .load = absl::GetFlag(FLAGS_load)};
  absl::StatusOr<sim::Generated> made = sim::Generate(g);
  if (!made.ok()) return Fail(ToStd(made.status().message()));
  if (absl::Status s = WriteText(out, sim::WorkloadToYaml(made->workload)); !s.ok()) return Fail(ToStd(s.message()));
  std::cout << "wrote " << out << ": profile " << g.profile << ", " << made->workload.jobs.size() << " jobs, "
            << made->workload.PodCount() << " pods, seed " << g.seed << "\n";
  if (const std::string cluster = absl::GetFlag(FLAGS_cluster_out); !cluster.empty()) {
    if (absl::Status s = WriteText(cluster, made->cluster_json); !s.ok()) return Fail(ToStd(s.message()));
    std::cout << "wrote " << cluster << ": the profile's cluster\n";
  }
  return 0;
}

int Simulate() {
  // A simulation logs only what is wrong unless asked for more: berth's info lines (reclaims,
  // gang admissions) would be thousands per simulated hour.
  std::string level = absl::GetFlag(FLAGS_log_level);
  if (level == "info") level = "error";
  if (absl::Status s = SetupLogging(level, absl::GetFlag(FLAGS_log_format)); !s.ok()) return Fail(ToStd(s.message()));
  if (!absl::GetFlag(FLAGS_generate).empty()) return Generate();
  sim::SimOptions o;
  o.cluster_source = absl::GetFlag(FLAGS_cluster);
  o.workload_source = absl::GetFlag(FLAGS_workload);
  if (o.cluster_source.empty()) return Fail("simulate needs --cluster FILE (a List of nodes, Pools, Queues, PriorityClasses)");
  if (o.workload_source.empty()) return Fail("simulate needs --workload FILE (or --generate PROFILE to make one)");
  absl::StatusOr<std::string> cluster = ReadFile(o.cluster_source);
  if (!cluster.ok()) return Fail(ToStd(cluster.status().message()));
  o.cluster_json = *std::move(cluster);
  absl::StatusOr<sim::Workload> workload = sim::LoadWorkloadFile(o.workload_source);
  if (!workload.ok()) return Fail(ToStd(workload.status().message()));
  o.workload = *std::move(workload);
  if (const std::string path = absl::GetFlag(FLAGS_config); !path.empty()) {
    absl::StatusOr<Config> loaded = LoadConfigFile(path);
    if (!loaded.ok()) return Fail(ToStd(loaded.status().message()));
    o.config = *std::move(loaded);
    o.config_source = path;
  }
  if (const std::string name = absl::GetFlag(FLAGS_scheduler_name); !name.empty()) o.config.scheduler_name = name;
  o.seed = absl::GetFlag(FLAGS_seed);
  const double sample = absl::GetFlag(FLAGS_sample_seconds);
  if (!(sample >= 1 && sample <= 86400)) return Fail("--sample-seconds: expected 1..86400");
  o.sample_interval = absl::Seconds(sample);
  const int pct = absl::GetFlag(FLAGS_percentage_of_nodes_to_score);
  if (pct < 0 || pct > 100) return Fail("--percentage-of-nodes-to-score: expected 0..100");
  o.percentage_of_nodes_to_score = pct;
  const int weight = absl::GetFlag(FLAGS_extender_weight);
  if (weight < 1 || weight > 1000) return Fail("--extender-weight: expected 1..1000");
  o.extender_weight = weight;
  const double tick = absl::GetFlag(FLAGS_tick_seconds);
  if (!(tick >= 0.1 && tick <= 3600)) return Fail("--tick-seconds: expected 0.1..3600");
  o.admission_tick = absl::Seconds(tick);
  const double idle = absl::GetFlag(FLAGS_idle_tick_seconds);
  if (!(idle >= 0.1 && idle <= 3600)) return Fail("--idle-tick-seconds: expected 0.1..3600");
  o.idle_tick = absl::Seconds(idle);
  const double hours = absl::GetFlag(FLAGS_max_hours);
  if (!(hours >= 0)) return Fail("--max-hours: expected 0 or more");
  o.max_time = absl::Seconds(hours * 3600);
  o.run_baseline = absl::GetFlag(FLAGS_baseline);
  const double eta_every = absl::GetFlag(FLAGS_eta_every_seconds);
  if (!(eta_every >= 0 && eta_every <= 86400)) return Fail("--eta-every-seconds: expected 0..86400");
  o.eta_every = absl::Seconds(eta_every);
  const double noise = absl::GetFlag(FLAGS_eta_noise);
  if (!(noise >= 0 && noise < 1)) return Fail("--eta-noise: expected 0 or more, below 1");
  if (noise > 0 && eta_every == 0) return Fail("--eta-noise needs --eta-every-seconds");
  o.eta_noise = noise;
  o.eta_knows_arrivals = absl::GetFlag(FLAGS_eta_knows_arrivals);
  if (o.eta_knows_arrivals && eta_every == 0) return Fail("--eta-knows-arrivals needs --eta-every-seconds");
  for (const std::string& rule :
       std::vector<std::string>(absl::StrSplit(absl::GetFlag(FLAGS_break_rule), ',', absl::SkipEmpty()))) {
    if (rule != sim::kBreakInTreeFit && rule != sim::kBreakPodDeletes) {
      return Fail(StrCat("--break-rule: unknown rule \"", rule, "\" (known: in-tree-fit, drop-pod-deletes)"));
    }
    o.break_rules.emplace(rule);
  }
  std::string dir = absl::GetFlag(FLAGS_out);
  if (dir.empty()) dir = "simulate-report";
  if (absl::Status s = sim::PrepareReportDir(dir); !s.ok()) return Fail(ToStd(s.message()));
  absl::StatusOr<std::unique_ptr<Journal>> journal = OpenJournal(Mode::kKubernetes, o.config);
  if (!journal.ok()) return Fail(ToStd(journal.status().message()));
  o.journal = journal->get();
  absl::StatusOr<sim::SimResult> result = sim::RunSimulation(o);
  if (*journal != nullptr) {
    (*journal)->Flush();
    const JournalStats js = (*journal)->stats();
    std::cout << "journal: " << absl::GetFlag(FLAGS_journal) << ", " << js.entries << " entries, " << js.bytes
              << " bytes\n";
  }
  if (!result.ok()) return Fail(ToStd(result.status().message()));
  result->info.berth_version = StrCat(kVersion, " (", kGitCommit, ")");
  std::cout << sim::SummaryTable(*result);
  if (absl::Status s = sim::WriteReport(*result, dir); !s.ok()) return Fail(ToStd(s.message()));
  std::cout << "report: " << dir << "/index.html (report.json, plots)\n";
  return 0;
}
}  // namespace
}  // namespace berth::extender

int main(int argc, char** argv) {
  // Debian builds abseil without NDEBUG, which leaves absl::Mutex's debug-mode deadlock
  // detection on: every lock and unlock records the lock order in a process-wide graph under a
  // global lock, and a lock-order cycle aborts the process. berth runs as abseil's release
  // builds do, without it (docs/decisions.md, "Mutexes"); the unit tests, which never enter
  // main, keep it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
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
    std::cerr << "berth: no command given (expected serve, simulate, replay or version)\n\n"
              << berth::extender::kUsage << "\n";
    return 2;
  }
  const std::string command = args[1];
  if (args.size() > 2) {
    return berth::extender::Fail(berth::StrCat("unexpected argument \"", args[2], "\" after ", command));
  }
  if (command == "serve") return berth::extender::Serve();
  if (command == "simulate") return berth::extender::Simulate();
  if (command == "replay") return berth::extender::ReplayCommand();
  if (command == "version") {
    std::cout << "berth " << berth::extender::kVersion << " (commit " << berth::extender::kGitCommit
              << ", " << berth::extender::kBuildType << ")\n";
    return 0;
  }
  return berth::extender::Fail(berth::StrCat("unknown command \"", command, "\" (expected serve, simulate, replay or version)"));
}
