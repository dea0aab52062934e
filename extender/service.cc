#include "extender/service.h"

#include "extender/journal.h"

#include <algorithm>
#include <cctype>

#include "core/strings.h"
#include "extender/config.h"
#include "extender/journal.h"
#include "extender/json.h"
#include "extender/k8s_codec.h"
#include "extender/protocol.h"
#include "extender/text_table.h"
#include "extender/wait_escape.h"
#include "policy/fit/resource_fit.h"
#include "policy/fragmentation/fragmentation.h"
#include "policy/gang/gang.h"
#include "policy/pools/pools.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace berth::extender {
namespace {

// A parsed request body, valid while this object lives.
class ParsedBody {
 public:
  absl::Status Parse(std::string_view body) {
    if (body.size() <= kReusedParserLimit) {
      absl::StatusOr<simdjson::dom::element> el = ParseReused(body);
      if (!el.ok()) return el.status();
      root_ = *el;
    } else {
      absl::StatusOr<JsonDocument> doc = JsonDocument::Parse(body);
      if (!doc.ok()) return doc.status();
      doc_ = *std::move(doc);
      root_ = doc_->root();
    }
    return absl::OkStatus();
  }
  simdjson::dom::element root() const { return root_; }

 private:
  std::optional<JsonDocument> doc_;
  simdjson::dom::element root_;
};

// ExtenderArgs from a verb's body. kube-scheduler's own form is read without a parse of the
// whole body (DecodeNodeNamesArgs); any other, and any error, goes the general way, which gives
// the same answer and names the error. `parsed` holds what the general way parsed.
absl::StatusOr<ExtenderArgs> ReadExtenderArgs(std::string_view body, const core::ResourceNames& names,
                                              DecodedPodCache* pods, ParsedBody* parsed) {
  if (std::optional<ExtenderArgs> args = DecodeNodeNamesArgs(body, names, pods)) return *std::move(args);
  if (absl::Status s = parsed->Parse(body); !s.ok()) return s;
  return DecodeExtenderArgs(parsed->root(), names, body, pods);
}

std::string_view LabelOr(const core::Labels& labels, std::string_view key, std::string_view dflt) {
  auto v = labels.Get(key);
  return v && !v->empty() ? *v : dflt;
}

// The pod's home pool, queue and gang as SPEC 4 names them.
std::string PoolOf(const core::Pod& pod) { return std::string(policy::HomePoolName(pod)); }
std::string QueueOf(const core::Pod& pod) { return std::string(policy::QueueNameOf(pod)); }
std::string GangOf(const core::Pod& pod) { return std::string(core::GangNameOf(pod)); }

std::string FormatPair(const core::ResourceNames& names, core::ResourceId id, int64_t free,
                       int64_t alloc) {
  return StrCat(core::FormatAmount(names, id, free), "/", core::FormatAmount(names, id, alloc));
}

// Present nodes sorted by name, and live pods sorted by namespace/name: the debug endpoints
// print in a stable order.
std::vector<const core::NodeState*> SortedNodes(const core::ClusterState& state) {
  std::vector<const core::NodeState*> nodes;
  nodes.reserve(state.node_count());
  state.ForEachNode([&](core::NodeSlot, const core::NodeState& n) { nodes.push_back(&n); });
  std::sort(nodes.begin(), nodes.end(),
            [](const auto* a, const auto* b) { return a->node.name < b->node.name; });
  return nodes;
}

template <class Keep>
std::vector<const core::PodState*> SortedPods(const core::ClusterState& state, Keep keep) {
  std::vector<const core::PodState*> pods;
  state.ForEachPod([&](core::PodSlot, const core::PodState& p) {
    if (keep(p)) pods.push_back(&p);
  });
  std::sort(pods.begin(), pods.end(), [](const auto* a, const auto* b) {
    return std::tie(a->pod.ns, a->pod.name) < std::tie(b->pod.ns, b->pod.name);
  });
  return pods;
}

}  // namespace

absl::Status LocalEvictor::Evict(const core::Pod& victim, const core::Pod& for_pod,
                                 std::string_view why) {
  spdlog::info("evicting pod={} for pod={} ({})", victim.Key(), for_pod.Key(), why);
  model_->Apply(core::PodDelete{.uid = victim.uid.str(), .ns = victim.ns.str(), .name = victim.name.str()});
  return absl::OkStatus();
}

absl::Status LocalBinder::Bind(const core::Pod& pod, std::string_view node) {
  (void)node;  // the ledger entry already names the node
  return model_->ConfirmBindLocally(pod.uid);
}

ServiceOptions ServiceOptionsFor(const Config& config, Mode mode) {
  auto policy = std::make_shared<policy::PolicyConfig>(config.policy);
  policy->scheduler_name = config.scheduler_name;  // as main.cc builds the pipeline
  return ServiceOptions{.mode = mode,
                        .scheduler_name = config.scheduler_name,
                        .topology_levels = config.topology_levels,
                        .bind_confirm_timeout = config.bind_confirm_timeout,
                        .reclaim_timeout = config.policy.pools.reclaim_timeout,
                        .pod_events = {.repeat_after = config.events_repeat_after,
                                       .min_interval = config.events_min_interval,
                                       .max_per_tick = config.events_max_per_second},
                        .nudges = {.max_per_tick = config.nudges_per_second},
                        .filter_answer = config.filter_answer,
                        .policy = std::move(policy),
                        .eta_interval = config.eta_interval};
}

Reply JsonReply(int status, const nlohmann::json& j) {
  return Reply{.status = status, .body = j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n"};
}

Reply TextReply(std::string text) {
  return Reply{.status = 200, .body = std::move(text), .content_type = "text/plain; charset=utf-8"};
}

Reply ErrorReply(int status, std::string_view message) {
  std::string body;
  JsonWriter(&body).BeginObject().Key("error").String(message).EndObject();
  body += "\n";
  return Reply{.status = status, .body = std::move(body)};
}

Reply VerbErrorReply(int status, std::string_view message) {
  return Reply{.status = status, .body = EncodeVerbError(message)};
}

// The framework's side effects, recorded as intents (carried out by the intent worker, off the
// request path), counted in /metrics and written to the log.
class Service::Effects final : public policy::EffectSink {
 public:
  explicit Effects(Service* service) : s_(service) {}
  bool CanEvict() const override {
    return s_->evictor_ != nullptr && s_->evictor_->CanEvict().ok();
  }
  void Evict(Eviction e) override {
    s_->intents_.Record(Intent{.kind = IntentKind::kEviction,
                               .pod = std::move(e.pod),
                               .for_pod = std::move(e.for_pod),
                               .why = std::move(e.why),
                               .cause = std::move(e.cause),
                               .undo = std::move(e.undo),
                               .cancelled = std::move(e.cancelled)});
  }
  void Nudge(const core::Pod& pod, std::string why) override {
    if (s_->nudger_ == nullptr) return;
    s_->intents_.Record(Intent{.kind = IntentKind::kNudge, .pod = pod, .why = std::move(why)});
  }
  void NudgeAtNextTick(std::string uid, std::string why) override {
    if (s_->nudger_ == nullptr) return;
    absl::MutexLock lock(&s_->nudge_mu_);
    s_->pending_nudges_.emplace_back(std::move(uid), std::move(why));
  }
  void Counted(Count what) override {
    switch (what) {
      case Count::kReclaim: s_->metrics_.reclaims.fetch_add(1, std::memory_order_relaxed); break;
      case Count::kGangAdmission:
        s_->metrics_.gang_admissions.fetch_add(1, std::memory_order_relaxed);
        break;
      case Count::kGangTimeout:
        s_->metrics_.gang_timeouts.fetch_add(1, std::memory_order_relaxed);
        break;
    }
  }
  void Log(Level level, std::string message) override {
    switch (level) {
      case Level::kDebug: spdlog::debug("{}", message); break;
      case Level::kInfo: spdlog::info("{}", message); break;
      case Level::kWarn: spdlog::warn("{}", message); break;
    }
  }

 private:
  Service* s_;
};

Service::Service(ServiceOptions options, core::ClusterModel* model,
                 std::unique_ptr<policy::Pipeline> pipeline, BinderInterface* binder,
                 const core::Clock* clock)
    : options_(std::move(options)),
      model_(model),
      effects_(std::make_unique<Effects>(this)),
      framework_(std::make_unique<policy::Framework>(
          std::move(pipeline),
          policy::FrameworkOptions{.scheduler_name = options_.scheduler_name,
                                   .reclaim_timeout = options_.reclaim_timeout},
          model, clock)),
      pipeline_(&framework_->pipeline()),
      binder_(binder),
      intents_(clock, &metrics_, options_.intents),
      clock_(clock) {
  framework_->SetEffects(effects_.get());
  if (options_.mode == Mode::kStandalone) {
    local_evictor_ = std::make_unique<LocalEvictor>(model_);
    SetEvictor(local_evictor_.get());
  }
}

Service::~Service() { intents_.Stop(); }

void Service::SetEvictor(EvictorInterface* evictor) {
  evictor_ = evictor;
  intents_.SetEvictor(evictor);
}

void Service::SetNudger(NudgerInterface* nudger) {
  nudger_ = nudger;
  intents_.SetNudger(nudger);
}

void Service::SetPodEventSink(PodEventSinkInterface* sink) {
  pod_events_ = sink;
  intents_.SetPodEventSink(sink);
}

template <class Fn>
Reply Service::Observed(VerbKind verb, std::string_view body, Fn&& fn) {
  const auto i = static_cast<size_t>(verb);
  const absl::Time start = absl::Now();
  Reply r = fn();
  metrics_.latency[i].Observe(absl::Now() - start);
  metrics_.requests[i].fetch_add(1, std::memory_order_relaxed);
  if (r.status != 200) metrics_.errors[i].fetch_add(1, std::memory_order_relaxed);
  if (journal_ != nullptr) journal_->Verb(verb, clock_->Now(), body, r.status, r.body);
  return r;
}

Reply Service::Filter(std::string_view body, std::vector<policy::NodeVerdict>* verdicts) {
  return Observed(VerbKind::kFilter, body, [&] { return FilterVerb(body, verdicts); });
}
Reply Service::Prioritize(std::string_view body) {
  return Observed(VerbKind::kPrioritize, body, [&] { return PrioritizeVerb(body); });
}
Reply Service::Bind(std::string_view body) {
  return Observed(VerbKind::kBind, body, [&] {
    Reply r = BindVerb(body);
    if (r.status == 200) metrics_.binds.Add(r.body == EncodeBindingResult("") ? "bound" : "refused");
    return r;
  });
}
Reply Service::Preempt(std::string_view body) {
  return Observed(VerbKind::kPreempt, body, [&] { return PreemptVerb(body); });
}

void Service::StampCreation(std::vector<core::ModelEvent>* events) const {
  const absl::Time now = clock_->Now();
  auto view = model_->Read();
  for (core::ModelEvent& e : *events) {
    auto* up = std::get_if<core::PodUpsert>(&e);
    if (up == nullptr || up->pod.creation != absl::InfinitePast()) continue;
    const core::PodState* known = view->FindPod(up->pod.uid.view());
    up->pod.creation = known != nullptr ? known->pod.creation : now;
  }
}

void Service::Learn(const core::Pod& pod, std::vector<core::NodeUpsert> nodes) {
  if (options_.mode != Mode::kStandalone) return;
  std::vector<core::ModelEvent> events;
  {
    auto view = model_->Read();
    if (view->FindPod(pod.uid) == nullptr) {
      core::Pod learned = pod;
      if (learned.creation == absl::InfinitePast()) learned.creation = clock_->Now();
      events.emplace_back(core::PodUpsert{std::move(learned)});
    }
    for (core::NodeUpsert& n : nodes) {
      if (view->FindNode(n.node.name) == nullptr) events.emplace_back(std::move(n));
    }
  }
  if (events.empty()) return;
  // A refused object stays unknown to the model (the verb then treats it so); say why.
  for (const std::string& why : model_->Apply(events).refused) {
    spdlog::warn("standalone: not learned from a verb request: {}", why);
  }
}

Reply Service::FilterVerb(std::string_view body, std::vector<policy::NodeVerdict>* verdicts_out) {
  ParsedBody parsed;
  absl::StatusOr<ExtenderArgs> args = ReadExtenderArgs(body, model_->resources(), &verb_pods_, &parsed);
  if (!args.ok()) return VerbErrorReply(400, ToStd(args.status().message()));
  if (options_.mode == Mode::kStandalone) {
    std::vector<core::NodeUpsert> nodes;
    const JsonPath top;
    const JsonPath nodes_path = top.Field("Nodes");
    for (size_t i = 0; i < args->node_objects.size(); ++i) {
      core::ResourceNameScope names(model_->resources());
      absl::StatusOr<core::Node> node =
          DecodeNode(args->node_objects[i], names, nodes_path.Item("items", int64_t(i)));
      if (!node.ok()) return VerbErrorReply(400, ToStd(node.status().message()));
      nodes.push_back(core::NodeUpsert{*std::move(node), names.TakeProvisional()});
    }
    Learn(args->pod, std::move(nodes));
  }
  // With filterAnswer "best", the nodes that pass are scored in the filters' pass.
  const bool best = options_.filter_answer == FilterAnswer::kBest;
  std::vector<int64_t> scores;
  // The short answer names each failing node's reason by its summary, and the waiting pod's
  // Event quotes the first message of the reason most nodes gave: no other message is read.
  const bool every_message = options_.answers == AnswerForm::kLong || verdicts_out != nullptr;
  const std::vector<policy::NodeVerdict> verdicts =
      framework_->Filter(args->pod, args->node_names, best ? &scores : nullptr, every_message);
  const bool none_fit = std::none_of(verdicts.begin(), verdicts.end(),
                                     [](const policy::NodeVerdict& v) { return v.ok(); });
  // One count per reason code this call gave (not per node: a call over 5,000 nodes is one
  // pod's answer), and one log line per decision: how many nodes gave each reason.
  std::vector<std::pair<policy::Reason, int>> reasons;
  for (const policy::NodeVerdict& v : verdicts) {
    if (v.ok()) continue;
    auto it = std::find_if(reasons.begin(), reasons.end(), [&](const auto& r) { return r.first == v.reason; });
    if (it == reasons.end()) {
      reasons.emplace_back(v.reason, 1);
      metrics_.rejections.Add(policy::ReasonCode(v.reason));
    } else {
      ++it->second;
    }
  }
  if (args->pod.scheduler_name == options_.scheduler_name) {
    if (none_fit) NoteWaiting(args->pod, verdicts, reasons);
    NoteAnswer(args->pod.uid.view(), none_fit);
  }
  if (spdlog::should_log(spdlog::level::debug)) {
    int rejected = 0;
    std::string summary;
    for (const auto& [reason, n] : reasons) {
      rejected += n;
      StrAppend(&summary, summary.empty() ? "" : ",", policy::ReasonCode(reason), ":", n);
    }
    spdlog::debug("filter pod={}/{} candidates={} fit={} rejected={}", args->pod.ns, args->pod.name,
                  verdicts.size(), verdicts.size() - static_cast<size_t>(rejected),
                  summary.empty() ? "-" : summary);
  }
  const std::vector<char> shown = best ? BestFitting(verdicts, scores) : std::vector<char>{};
  Reply reply{.status = 200, .body = EncodeFilterResult(*args, verdicts, options_.answers, shown)};
  if (verdicts_out != nullptr) *verdicts_out = verdicts;
  return reply;
}

std::vector<char> Service::BestFitting(const std::vector<policy::NodeVerdict>& verdicts,
                                       const std::vector<int64_t>& scores) {
  // The scores prioritize would give the nodes that fit (Framework::Filter's).
  int64_t best = -1;
  size_t fitting = 0;
  for (size_t i = 0; i < verdicts.size(); ++i) {
    if (!verdicts[i].ok()) continue;
    ++fitting;
    best = std::max(best, scores[i]);
  }
  if (fitting < 2) return {};
  std::vector<char> shown(verdicts.size(), 0);
  size_t kept = 0;
  for (size_t i = 0; i < verdicts.size(); ++i) {
    if (!verdicts[i].ok() || scores[i] != best) continue;
    shown[i] = 1;
    ++kept;
  }
  metrics_.filter_left_out.fetch_add(fitting - kept, std::memory_order_relaxed);
  if (kept == 1) metrics_.filter_one_node.fetch_add(1, std::memory_order_relaxed);
  return shown;
}

int Service::Housekeeping() {
  const int reclaims = framework_->Housekeeping(/*reclaim_pending=*/options_.mode == Mode::kKubernetes);
  if (journal_ != nullptr) journal_->Tick(kJournalHousekeeping, clock_->Now(), reclaims);
  return reclaims;
}

AdmissionTickStats Service::AdmissionTick() {
  const AdmissionTickStats stats = RunAdmissionTick();
  if (journal_ != nullptr) journal_->Tick(kJournalTick, clock_->Now(), stats.evicted);
  return stats;
}

void Service::SetJournal(Journal* journal) {
  journal_ = journal;
  if (journal_ == nullptr) return;
  journal_->SetSnapshotSource([this] { return DebugSnapshot(/*text=*/false, /*compact=*/true).body; });
  journal_->Snapshot(clock_->Now());
}

void Service::SetForecast(std::shared_ptr<const Forecast> forecast) {
  absl::MutexLock lock(&forecast_mu_);
  forecast_ = std::move(forecast);
}

std::shared_ptr<const Forecast> Service::forecast() const {
  absl::MutexLock lock(&forecast_mu_);
  return forecast_;
}

policy::FairShare* Service::fair_share() const { return pipeline_->fair_share(); }

Reply Service::PrioritizeVerb(std::string_view body) {
  ParsedBody parsed;
  absl::StatusOr<ExtenderArgs> args = ReadExtenderArgs(body, model_->resources(), &verb_pods_, &parsed);
  if (!args.ok()) return VerbErrorReply(400, ToStd(args.status().message()));
  const std::vector<int64_t> scores = framework_->Score(args->pod, args->node_names);
  if (spdlog::should_log(spdlog::level::debug)) {
    auto best = std::max_element(scores.begin(), scores.end());
    spdlog::debug("prioritize pod={}/{} candidates={} best={} score={}", args->pod.ns,
                  args->pod.name, scores.size(),
                  best == scores.end() ? std::string_view("-")
                                       : args->node_names[static_cast<size_t>(best - scores.begin())],
                  best == scores.end() ? 0 : *best);
  }
  return Reply{.status = 200, .body = EncodePriorityList(args->node_names, scores, options_.answers,
                                                          args->names_plain)};
}

/// How long a Kubernetes-mode bind waits for a pod berth's watch has not delivered yet.
constexpr absl::Duration kUnknownPodGrace = absl::Seconds(1);

Reply Service::BindVerb(std::string_view body) {
  ParsedBody parsed;
  if (absl::Status s = parsed.Parse(body); !s.ok()) return VerbErrorReply(400, ToStd(s.message()));
  absl::StatusOr<BindingArgs> args = DecodeBindingArgs(parsed.root());
  if (!args.ok()) return VerbErrorReply(400, ToStd(args.status().message()));
  const std::string key = StrCat(args->pod_namespace, "/", args->pod_name);
  if (absl::Status can = binder_->CanBind(); !can.ok()) {
    spdlog::info("bind refused pod={} node={}: {}", key, args->node, ToStd(can.message()));
    return Reply{.body = EncodeBindingResult(ToStd(can.message()))};
  }
  std::string uid(args->pod_uid);
  core::Pod pod;
  {
    auto find = [&](const core::ClusterState& state) {
      return uid.empty() ? state.FindPodByName(args->pod_namespace, args->pod_name)
                         : state.FindPod(uid);
    };
    if (options_.mode == Mode::kKubernetes) {
      // kube-scheduler and berth watch the same API server, but berth's pod watch may trail
      // kube-scheduler's informer by a few milliseconds: give it a moment before refusing.
      const absl::Time deadline = absl::Now() + kUnknownPodGrace;
      while (absl::Now() < deadline) {
        if (find(*model_->Read()) != nullptr) break;
        WaitEscape::BeforeBlindWait();
        absl::SleepFor(absl::Milliseconds(5));
      }
    }
    auto view = model_->Read();
    const core::PodState* p = find(*view);
    if (p == nullptr) {
      return Reply{.body = EncodeBindingResult(StrCat("pod ", key, " is not known to berth"))};
    }
    if (p->pod.ns != args->pod_namespace || p->pod.name != args->pod_name) {
      return Reply{.body = EncodeBindingResult(
                       StrCat("pod uid ", uid, " belongs to ", p->pod.Key(), ", not ", key))};
    }
    pod = p->pod;
    uid = pod.uid;
  }
  const std::string node(args->node);
  const policy::BindResult r = framework_->Bind(
      pod, node, [&](const core::Pod& p, std::string_view n) { return binder_->Bind(p, n); });
  switch (r.outcome) {
    case policy::BindResult::Outcome::kRefused:
      spdlog::info("bind refused pod={} node={}: {}", key, node, ToStd(r.status.message()));
      return Reply{.body = EncodeBindingResult(ToStd(r.status.message()))};
    case policy::BindResult::Outcome::kAlreadyPlaced:
      spdlog::debug("bind pod={} node={}: already placed there", key, node);
      return Reply{.body = EncodeBindingResult("")};
    case policy::BindResult::Outcome::kBinderFailed:
      spdlog::warn("bind failed pod={} node={}: {}", key, node, ToStd(r.status.message()));
      return Reply{.body = EncodeBindingResult(StrCat("binding ", key, " to ", node, " failed: ",
                                                      r.status.message()))};
    case policy::BindResult::Outcome::kBound:
      break;
  }
  spdlog::debug("bind pod={} node={}", key, node);
  return Reply{.body = EncodeBindingResult("")};
}

Reply Service::PreemptVerb(std::string_view body) {
  ParsedBody parsed;
  if (absl::Status s = parsed.Parse(body); !s.ok()) return VerbErrorReply(400, ToStd(s.message()));
  absl::StatusOr<PreemptionArgs> args = DecodePreemptionArgs(parsed.root(), model_->resources());
  if (!args.ok()) return VerbErrorReply(400, ToStd(args.status().message()));
  Learn(args->pod, {});
  std::vector<policy::NodeVictims> proposal;
  proposal.reserve(args->candidates.size());
  for (const PreemptionCandidate& c : args->candidates) {
    policy::NodeVictims nv{.node = std::string(c.node), .pdb_violations = c.pdb_violations};
    for (const auto& [uid, priority] : c.victims) {
      nv.victims.push_back(policy::Victim{.uid = std::string(uid), .priority = priority.value_or(0)});
    }
    proposal.push_back(std::move(nv));
  }
  std::vector<std::pair<std::string, policy::NodeVerdict>> dropped;
  std::vector<MetaVictims> out;
  for (policy::NodeVictims& nv : framework_->ReviewPreemption(args->pod, std::move(proposal), &dropped)) {
    MetaVictims mv{.node = std::move(nv.node), .pdb_violations = nv.pdb_violations};
    for (policy::Victim& v : nv.victims) mv.uids.push_back(std::move(v.uid));
    out.push_back(std::move(mv));
  }
  for (const auto& [node, why] : dropped) {
    spdlog::debug("preempt pod={} dropped node={}: {} {}", args->pod.Key(), node, why.message,
                  why.detail);
  }
  // kube-scheduler asks for victims only after every node failed its own checks, without a
  // filter call. If berth refused every candidate it proposed, the pod waits for berth's answer
  // (its queue holds it back, for instance), and a nudge helps once that changes.
  if (args->pod.scheduler_name == options_.scheduler_name && out.empty() && !dropped.empty()) {
    NoteAnswer(args->pod.uid.view(), /*none_fit=*/true);
  }
  uint64_t victims = 0;
  for (const MetaVictims& mv : out) victims += mv.uids.size();
  metrics_.preemption_victims.fetch_add(victims, std::memory_order_relaxed);
  spdlog::debug("preempt pod={} nodes_kept={} victims={}", args->pod.Key(), out.size(), victims);
  return Reply{.body = EncodePreemptionResult(out)};
}

Reply Service::Events(std::string_view body) {
  if (options_.mode != Mode::kStandalone) {
    return ErrorReply(403, "berth runs in Kubernetes mode: the API server is the source of truth, "
                           "change objects there");
  }
  ParsedBody parsed;
  if (absl::Status s = parsed.Parse(body); !s.ok()) return ErrorReply(400, ToStd(s.message()));
  absl::StatusOr<std::vector<core::ModelEvent>> events =
      DecodeWatchEvents(parsed.root(), model_->resources());
  if (!events.ok()) return ErrorReply(400, ToStd(events.status().message()));
  StampCreation(&*events);
  if (journal_ != nullptr) journal_->ModelEvents(clock_->Now(), *events, model_->resources());
  core::ApplyStats stats = model_->Apply(*events);
  uint64_t generation;
  {
    auto view = model_->Read();
    generation = view->generation();
  }
  // Events the model refused changed nothing; the others were applied, as a watch applies
  // each event on its own. The reply says which were refused and why (HTTP 422).
  nlohmann::json j = {{"applied", events->size() - stats.refused.size()},
                      {"nodesUpserted", stats.nodes_upserted},
                      {"nodesDeleted", stats.nodes_deleted},
                      {"podsUpserted", stats.pods_upserted},
                      {"podsDeleted", stats.pods_deleted},
                      {"bindsConfirmed", stats.binds_confirmed},
                      {"poolsUpserted", stats.pools_upserted},
                      {"poolsDeleted", stats.pools_deleted},
                      {"queuesUpserted", stats.queues_upserted},
                      {"queuesDeleted", stats.queues_deleted},
                      {"podGroupsUpserted", stats.podgroups_upserted},
                      {"podGroupsDeleted", stats.podgroups_deleted},
                      {"priorityClassesUpserted", stats.priorityclasses_upserted},
                      {"priorityClassesDeleted", stats.priorityclasses_deleted},
                      {"generation", generation}};
  if (!stats.refused.empty()) {
    j["refused"] = stats.refused;
    j["error"] = StrCat(stats.refused.size(), " of ", events->size(),
                        " events refused, the model is unchanged by them: ", stats.refused[0]);
    spdlog::warn("events refused={} of {}: {}", stats.refused.size(), events->size(),
                 stats.refused[0]);
    return JsonReply(422, j);
  }
  spdlog::debug("events applied={} generation={}", events->size(), generation);
  return JsonReply(200, j);
}

absl::StatusOr<size_t> Service::LoadList(std::string_view json, std::string_view source) {
  absl::StatusOr<JsonDocument> doc = JsonDocument::Parse(json);
  if (!doc.ok()) return absl::InvalidArgumentError(StrCat(source, ": ", doc.status().message()));
  absl::StatusOr<std::vector<core::ModelEvent>> events = DecodeList(doc->root(), model_->resources());
  if (!events.ok()) {
    return absl::InvalidArgumentError(StrCat(source, ": ", events.status().message()));
  }
  if (journal_ != nullptr) journal_->ModelEvents(clock_->Now(), *events, model_->resources());
  const core::ApplyStats stats = model_->Apply(*events);
  if (!stats.refused.empty()) {
    std::string why;
    for (const std::string& r : stats.refused) StrAppend(&why, why.empty() ? "" : "; ", r);
    return absl::InvalidArgumentError(
        StrCat(source, ": ", stats.refused.size(), " objects refused: ", why));
  }
  return events->size();
}

Reply Service::Healthz(bool text) const {
  if (text) return TextReply("ok\n");
  return Reply{.body = "{\"status\":\"ok\"}\n"};
}

Reply Service::Readyz(bool text) const {
  constexpr std::string_view kNotReady = "not ready: the model has not synced yet (Kubernetes mode: every watched collection listed and, with leader election, the Lease read)";
  if (!ready_.load()) {
    if (text) return Reply{.status = 503, .body = StrCat(kNotReady, "\n"), .content_type = "text/plain; charset=utf-8"};
    return ErrorReply(503, kNotReady);
  }
  if (text) return TextReply("ready\n");
  return Reply{.body = "{\"ready\":true}\n"};
}

Reply Service::Version(bool text) const {
  if (text) {
    return TextReply(StrCat("berth ", options_.version, " (commit ", options_.git_commit, ", ",
                            options_.build_type, ")\n"));
  }
  return JsonReply(200, {{"version", options_.version},
                         {"gitCommit", options_.git_commit},
                         {"buildType", options_.build_type},
                         {"mode", options_.mode == Mode::kStandalone ? "standalone" : "kubernetes"}});
}

std::vector<std::string> Service::TopologyPath(const core::Node& node) const {
  std::vector<std::string> path;
  for (const std::string& level : options_.topology_levels) {
    path.emplace_back(LabelOr(node.labels, level, "-"));
  }
  return path;
}

Reply Service::DebugNodes(bool text) const {
  auto view = model_->Read();
  const core::ResourceNames& names = view->resources();
  const std::vector<const core::NodeState*> nodes = SortedNodes(*view);
  const std::shared_ptr<const policy::PoolMap> pools = policy::PoolMap::Build(*view);
  auto pool_of = [&](const core::NodeState* n) -> const std::string& {
    return pools->pool(pools->PoolOf(n->slot)).name;
  };
  if (text) {
    TextTable t({"NODE", "POOL", "TOPOLOGY", "CPU FREE/ALLOC", "MEMORY FREE/ALLOC",
                 "GPU FREE/ALLOC", "PODS FREE/ALLOC", "IN-FLIGHT"});
    for (const core::NodeState* n : nodes) {
      const core::ResourceVector free = n->Free();
      std::vector<std::string> row = {n->node.name, pool_of(n)};
      std::string topo;
      for (const std::string& p : TopologyPath(n->node)) StrAppend(&topo, topo.empty() ? "" : "/", p);
      row.push_back(topo);
      for (core::ResourceId id : {core::kCpu, core::kMemory, core::kNvidiaGpu, core::kPods}) {
        row.push_back(FormatPair(names, id, free.Get(id), n->node.allocatable.Get(id)));
      }
      row.push_back(n->assumed.IsZero() ? "-" : n->assumed.DebugString(names));
      t.AddRow(std::move(row));
    }
    return TextReply(t.Render());
  }
  nlohmann::json arr = nlohmann::json::array();
  for (const core::NodeState* n : nodes) {
    arr.push_back({{"name", n->node.name},
                   {"pool", pool_of(n)},
                   {"topology", TopologyPath(n->node)},
                   {"unschedulable", n->node.unschedulable},
                   {"allocatable", EncodeResourceList(n->node.allocatable, names)},
                   {"used", EncodeResourceList(n->requested, names)},
                   {"reserved", EncodeResourceList(n->assumed, names)},
                   {"held", EncodeResourceList(n->reserved, names)},
                   {"free", EncodeResourceList(n->Free(), names)},
                   {"pods", n->pods.size()}});
  }
  return JsonReply(200, {{"generation", view->generation()},
                         {"topologyLevels", options_.topology_levels},
                         {"nodes", std::move(arr)}});
}

namespace {

nlohmann::json EncodeFragmentation(const policy::Fragmentation& f, const core::ResourceNames& names) {
  return {{"request", policy::DescribeRequest(names, f.request)},
          {"resource", names.Name(f.resource)},
          {"nodes", f.nodes},
          {"wholeNodesFree", f.whole_nodes},
          {"free", core::FormatAmount(names, f.resource, f.free)},
          {"podsThatFit", f.fits},
          {"stranded", core::FormatAmount(names, f.resource, f.stranded)},
          {"index", f.index}};
}

std::string FormatIndex(double index) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%.2f", index);
  return buf;
}

}  // namespace

Reply Service::DebugPools(bool text) const {
  auto view = model_->Read();
  const core::ResourceNames& names = view->resources();
  const std::shared_ptr<const policy::PoolMap> map = policy::PoolMap::Build(*view);
  const std::vector<policy::PoolStats> stats =
      policy::ComputePoolStats(*view, *map, options_.scheduler_name);
  const policy::FragmentationReport frag =
      policy::MeasureFragmentation(*view, *map, *topology_.Get(*view), options_.scheduler_name);
  if (text) {
    TextTable t({"POOL", "FLAGS", "", "CPU", "GPU", "MEMORY", "STORAGE", "NODES", "PODS"});
    for (const policy::PoolStats& p : stats) {
      bool first = true;
      for (const auto& [row, member] : policy::kPoolStatsRows) {
        const policy::PoolStats::Row& r = p.*member;
        std::string label(row);  // the seed's table capitalises the row names
        label[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(label[0])));
        std::vector<std::string> cells = {first ? p.name : "", first ? p.Flags() : "", label};
        for (const auto& [name, id] : policy::kPoolStatsResources) {
          cells.push_back(core::FormatAmount(names, id, r.resources.Get(id)));
        }
        cells.push_back(StrCat(r.nodes));
        cells.push_back(StrCat(r.pods));
        t.AddRow(std::move(cells));
        first = false;
      }
    }
    // Fragmentation: per pool, then per topology domain (docs/decisions.md, "Fragmentation").
    TextTable f({"SCOPE", "NAME", "COUNTED IN PODS OF", "NODES", "WHOLE NODES FREE", "FREE",
                 "PODS THAT FIT", "STRANDED", "INDEX"});
    for (const auto* scopes : {&frag.pools, &frag.domains}) {
      for (const policy::FragmentationReport::Scope& sc : *scopes) {
        const policy::Fragmentation& x = sc.figures;
        f.AddRow({sc.level, sc.name, policy::DescribeRequest(names, x.request), StrCat(x.nodes),
                  StrCat(x.whole_nodes), StrCat(core::FormatAmount(names, x.resource, x.free), " ", names.Name(x.resource)),
                  StrCat(x.fits), core::FormatAmount(names, x.resource, x.stranded), FormatIndex(x.index)});
      }
    }
    return TextReply(StrCat(t.Render(), "\n", f.Render()));
  }
  nlohmann::json arr = nlohmann::json::array();
  for (size_t i = 0; i < stats.size(); ++i) {
    const policy::PoolStats& p = stats[i];
    nlohmann::json j = EncodePoolStats(p, names);
    j["name"] = p.name;
    j["disablePreemption"] = p.disable_preemption;
    j["disableBorrowing"] = p.disable_borrowing;
    j["disableSharing"] = p.disable_sharing;
    for (const policy::FragmentationReport::Scope& sc : frag.pools) {
      if (sc.name == p.name) j["fragmentation"] = EncodeFragmentation(sc.figures, names);
    }
    arr.push_back(std::move(j));
  }
  nlohmann::json domains = nlohmann::json::array();
  for (const policy::FragmentationReport::Scope& sc : frag.domains) {
    nlohmann::json d = EncodeFragmentation(sc.figures, names);
    d["level"] = sc.level;
    d["domain"] = sc.name;
    domains.push_back(std::move(d));
  }
  return JsonReply(200, {{"generation", view->generation()},
                         {"pools", std::move(arr)},
                         {"domains", std::move(domains)}});
}

Reply Service::DebugPods(bool text, bool all) const {
  auto view = model_->Read();
  const core::ResourceNames& names = view->resources();
  const std::vector<const core::PodState*> pods = SortedPods(*view, [&](const core::PodState& p) {
    return all || p.pod.scheduler_name == options_.scheduler_name;
  });
  const absl::Time now = clock_->Now();
  const std::shared_ptr<const policy::PoolMap> pools = policy::PoolMap::Build(*view);
  struct Row {
    const core::PodState* p;
    std::string bind;
    bool admitted;
    std::string why;
  };
  std::vector<Row> rows;
  for (const core::PodState* p : pods) {
    Row r{p, "", true, ""};
    if (const core::LedgerEntry* e = view->FindBind(p->pod.uid)) {
      r.bind = StrCat(e->state == core::BindState::kAssumed ? "binding to " : "bound, unconfirmed: ",
                      view->node(e->node).node.name);
    }
    if (p->pod.node_name.empty() && !core::IsTerminal(p->pod.phase)) {
      policy::NodeVerdict v =
          pipeline_->PreFilter({.state = *view, .pod = p->pod, .now = now, .read_only = true});
      r.admitted = v.ok();
      r.why = v.message;
    }
    rows.push_back(std::move(r));
  }
  if (text) {
    TextTable t({"NAMESPACE", "NAME", "PHASE", "NODE", "POOL", "QUEUE", "GANG", "BORROWER",
                 "ADMITTED", "PRIORITY", "REQUEST"});
    for (const Row& r : rows) {
      const core::Pod& pod = r.p->pod;
      std::string gang = GangOf(pod);
      t.AddRow({pod.ns.str(), pod.name.str(), std::string(core::PodPhaseName(pod.phase)),
                pod.node_name.empty() ? (r.bind.empty() ? "-" : r.bind) : pod.node_name.str(),
                PoolOf(pod), QueueOf(pod), gang.empty() ? "-" : gang,
                policy::IsBorrower(*r.p, *pools) ? "yes" : "no",
                r.admitted ? "yes" : "no", StrCat(pod.priority), pod.request.DebugString(names)});
    }
    return TextReply(t.Render());
  }
  nlohmann::json arr = nlohmann::json::array();
  for (const Row& r : rows) {
    const core::Pod& pod = r.p->pod;
    nlohmann::json j = {{"namespace", pod.ns},
                        {"name", pod.name},
                        {"uid", pod.uid},
                        {"schedulerName", pod.scheduler_name},
                        {"phase", core::PodPhaseName(pod.phase)},
                        {"node", pod.node_name},
                        {"pool", PoolOf(pod)},
                        {"queue", QueueOf(pod)},
                        {"gang", GangOf(pod)},
                        {"borrower", policy::IsBorrower(*r.p, *pools)},
                        {"admitted", r.admitted},
                        {"priority", pod.priority},
                        {"request", EncodeResourceList(pod.request, names)}};
    if (!r.bind.empty()) j["bind"] = r.bind;
    if (!r.why.empty()) j["waiting"] = r.why;
    arr.push_back(std::move(j));
  }
  return JsonReply(200, {{"generation", view->generation()},
                         {"schedulerName", options_.scheduler_name},
                         {"pods", std::move(arr)}});
}

Reply Service::DebugSnapshot(bool text, bool compact) const {
  auto view = model_->Read();
  const core::ResourceNames& names = view->resources();
  const std::vector<const core::NodeState*> nodes = SortedNodes(*view);
  const std::vector<const core::PodState*> pods =
      SortedPods(*view, [](const core::PodState&) { return true; });
  if (text) {
    TextTable t({"KIND", "NAMESPACE", "NAME", "NODE", "PHASE"});
    for (const auto* n : nodes) t.AddRow({"Node", "-", n->node.name, "-", "-"});
    for (const auto* p : pods) {
      t.AddRow({"Pod", p->pod.ns.str(), p->pod.name.str(),
                p->pod.node_name.empty() ? "-" : p->pod.node_name.str(),
                std::string(core::PodPhaseName(p->pod.phase))});
    }
    // The model visits these kinds in name order already.
    view->ForEachPool([&](const core::Pool& o) { t.AddRow({"Pool", "-", o.name, "-", "-"}); });
    view->ForEachQueue([&](const core::Queue& o) { t.AddRow({"Queue", "-", o.name, "-", "-"}); });
    view->ForEachPodGroup(
        [&](const core::PodGroup& o) { t.AddRow({"PodGroup", o.ns, o.name, "-", "-"}); });
    view->ForEachPriorityClass(
        [&](const core::PriorityClass& o) { t.AddRow({"PriorityClass", "-", o.name, "-", "-"}); });
    return TextReply(t.Render());
  }
  nlohmann::json items = nlohmann::json::array();
  for (const auto* n : nodes) items.push_back(EncodeNode(n->node, names));
  for (const auto* p : pods) items.push_back(EncodePod(p->pod, names));
  view->ForEachPool([&](const core::Pool& o) { items.push_back(EncodePool(o)); });
  view->ForEachQueue([&](const core::Queue& o) { items.push_back(EncodeQueue(o)); });
  view->ForEachPodGroup(
      [&](const core::PodGroup& o) { items.push_back(EncodePodGroup(o, names)); });
  view->ForEachPriorityClass(
      [&](const core::PriorityClass& o) { items.push_back(EncodePriorityClass(o)); });
  nlohmann::json list = {{"apiVersion", "v1"},
                         {"kind", "List"},
                         {"metadata", {{"resourceVersion", StrCat(view->generation())}}},
                         {"items", std::move(items)}};
  if (compact) return Reply{.body = list.dump()};
  return JsonReply(200, list);
}

}  // namespace berth::extender
