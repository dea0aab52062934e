#include "policy/pipeline.h"

#include <algorithm>
#include <bitset>
#include <optional>

#include "core/placement.h"
#include "core/quotient.h"
#include "core/strings.h"

namespace berth::policy {

NodeVerdict UnknownNodeVerdict() {
  return NodeVerdict{.fit = Fit::kUnschedulable,
                     .reason = Reason::kUnknownNode,
                     .message = "unknown node",
                     .detail = "berth's model has no node of this name"};
}

std::string_view PointName(Point p) {
  switch (p) {
    case Point::kPreFilter: return "PreFilter";
    case Point::kFilter: return "Filter";
    case Point::kPostFilter: return "PostFilter";
    case Point::kPreemptionReview: return "PreemptionReview";
    case Point::kScore: return "Score";
    case Point::kPermit: return "Permit";
    case Point::kReserve: return "Reserve";
    case Point::kQueueSort: return "QueueSort";
  }
  return "?";
}

std::string PointNames(PointMask mask) {
  std::string out;
  for (size_t i = 0; i < kPointCount; ++i) {
    const auto p = static_cast<Point>(i);
    if (mask & Bit(p)) StrAppend(&out, out.empty() ? "" : ", ", PointName(p));
  }
  return out.empty() ? std::string("none") : out;
}

PointMask PointsOf(const Module& m) {
  PointMask mask = 0;
  if (dynamic_cast<const PreFilterPlugin*>(&m) != nullptr) mask |= Bit(Point::kPreFilter);
  if (dynamic_cast<const FilterPlugin*>(&m) != nullptr) mask |= Bit(Point::kFilter);
  if (dynamic_cast<const PostFilterPlugin*>(&m) != nullptr) mask |= Bit(Point::kPostFilter);
  if (dynamic_cast<const PreemptionReviewPlugin*>(&m) != nullptr) {
    mask |= Bit(Point::kPreemptionReview);
  }
  if (dynamic_cast<const ScorePlugin*>(&m) != nullptr) mask |= Bit(Point::kScore);
  if (dynamic_cast<const PermitPlugin*>(&m) != nullptr) mask |= Bit(Point::kPermit);
  if (dynamic_cast<const ReservePlugin*>(&m) != nullptr) mask |= Bit(Point::kReserve);
  if (dynamic_cast<const QueueSortPlugin*>(&m) != nullptr) mask |= Bit(Point::kQueueSort);
  return mask;
}

Pipeline::Pipeline(Points points, std::shared_ptr<const GangPlanner> gangs,
                   std::shared_ptr<FairShare> fair_share)
    : points_(std::move(points)), gangs_(std::move(gangs)), fair_share_(std::move(fair_share)) {
  for (const WeightedScore& s : points_.score) total_weight_ += s.weight;
  for (const auto& p : points_.prefilter) {
    const bool has_permit = std::any_of(
        points_.permit.begin(), points_.permit.end(),
        [&](const auto& q) { return static_cast<const Module*>(q.get()) ==
                                    static_cast<const Module*>(p.get()); });
    if (!has_permit) bind_prefilter_.push_back(p.get());
  }
}

void PassedCandidates::Remember(const core::ClusterState& state, const core::Pod& pod,
                                std::span<const std::string_view> names,
                                std::span<const core::NodeState* const> nodes,
                                std::span<const NodeVerdict> verdicts,
                                const std::vector<int64_t>* scores) {
  int64_t best = -1;
  if (scores != nullptr) {
    for (size_t i = 0; i < verdicts.size(); ++i) {
      if (verdicts[i].ok()) best = std::max(best, (*scores)[i]);
    }
  }
  absl::MutexLock lock(&mu_);
  instance_ = state.instance();
  node_labels_generation_ = state.node_labels_generation();
  uid_.assign(pod.uid.view());
  names_.clear();
  ends_.clear();
  slots_.clear();
  ends_.reserve(names.size());
  slots_.reserve(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    if (nodes[i] == nullptr || !verdicts[i].ok()) continue;
    if (scores != nullptr && (*scores)[i] != best) continue;
    names_.append(names[i]);
    ends_.push_back(static_cast<uint32_t>(names_.size()));
    slots_.push_back(nodes[i]->slot);
  }
  best_.reset();
  if (scores != nullptr && !slots_.empty()) {
    best_ = best;
    pod_ = pod;
    generation_ = state.generation();
  }
}

bool PassedCandidates::RecallLocked(const core::ClusterState& state, std::string_view uid,
                                    std::span<const std::string_view> names,
                                    const core::NodeState** out) const {
  if (instance_ != state.instance() || node_labels_generation_ != state.node_labels_generation() ||
      uid.empty() || uid != uid_ || names.size() != slots_.size()) {
    return false;
  }
  // One pass over both lists, in order; the names were remembered end to end, so this reads
  // memory in sequence, where a lookup by name misses the cache twice.
  uint32_t begin = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    if (std::string_view(names_).substr(begin, ends_[i] - begin) != names[i]) return false;
    begin = ends_[i];
  }
  for (size_t i = 0; i < names.size(); ++i) {
    const core::NodeState& n = state.node(slots_[i]);
    out[i] = n.present ? &n : nullptr;
  }
  return true;
}

bool PassedCandidates::Recall(const core::ClusterState& state, std::string_view uid,
                              std::span<const std::string_view> names,
                              const core::NodeState** out) const {
  absl::MutexLock lock(&mu_);
  return RecallLocked(state, uid, names, out);
}

bool PassedCandidates::RecallScored(const core::ClusterState& state, const core::Pod& pod,
                                    std::span<const std::string_view> names,
                                    const core::NodeState** out, int64_t* score) const {
  absl::MutexLock lock(&mu_);
  if (!best_ || generation_ != state.generation() || !(pod_ == pod)) return false;
  if (!RecallLocked(state, pod.uid.view(), names, out)) return false;
  *score = *best_;
  return true;
}

CycleContext Pipeline::Own(const CycleContext& ctx) const {
  CycleContext c = ctx;
  c.pipeline = this;
  return c;
}

NodeVerdict Pipeline::PreFilter(const CycleContext& in) const {
  const CycleContext ctx = Own(in);
  for (const auto& a : points_.prefilter) {
    NodeVerdict v = a->PreFilter(ctx);
    if (!v.ok()) return v;
  }
  return NodeVerdict::Ok();
}

NodeVerdict Pipeline::Permit(const CycleContext& in, const core::NodeState& node) const {
  const CycleContext ctx = Own(in);
  for (const PreFilterPlugin* a : bind_prefilter_) {
    NodeVerdict v = a->PreFilter(ctx);
    if (!v.ok()) return v;
  }
  for (const auto& p : points_.permit) {
    NodeVerdict v = p->Permit(ctx, node);
    if (!v.ok()) return v;
  }
  return NodeVerdict::Ok();
}

void Pipeline::Reserve(const CycleContext& in, const core::NodeState& node) const {
  const CycleContext ctx = Own(in);
  for (const auto& r : points_.reserve) r->Reserve(ctx, node);
}

void Pipeline::Unreserve(const CycleContext& in, const core::NodeState& node) const {
  const CycleContext ctx = Own(in);
  for (auto it = points_.reserve.rbegin(); it != points_.reserve.rend(); ++it) {
    (*it)->Unreserve(ctx, node);
  }
}

namespace {

// Whether every filter passes the node; the first that fails sets `*why` (a pass, until then).
template <class Filters>
bool RunFilters(const Filters& filters, const CycleContext& ctx, const core::NodeState& node,
                NodeVerdict* why) {
  for (const auto& f : filters) {
    if (!f->Filter(ctx, node, why)) return false;
  }
  return true;
}

// How many candidates ahead the filter and score loops ask for a node's state. A candidate's
// filters and scores take a few hundred cycles, and its state, read from memory, about as long:
// eight ahead is in the caches when its turn comes and still there after the seven before it.
constexpr size_t kPrefetchAhead = 8;

// Asks the caches for the part of a node's state that the filters and scores read: its header
// (slot, counts) and the well-known resources' amounts, the two cache lines before `node`.
// The name, labels and full vectors after them are read only to explain, or for a resource
// beyond the well-known ones.
void PrefetchNode(const core::NodeState* node) {
  if (node == nullptr) return;
  const char* from = reinterpret_cast<const char*>(node);
  const char* to = reinterpret_cast<const char*>(&node->node);
  for (const char* p = from; p < to; p += 64) __builtin_prefetch(p);
}

}  // namespace

NodeVerdict Pipeline::FilterNode(const CycleContext& in, const core::NodeState& node) const {
  // Called once per candidate node: the context is copied only when it does not name this
  // pipeline yet (Filter's own context does).
  NodeVerdict v;
  if (in.pipeline != this) {
    RunFilters(points_.filter, Own(in), node, &v);
  } else {
    RunFilters(points_.filter, in, node, &v);
  }
  return v;
}

namespace {

// The score modules that apply to one pod: `applies[i]` for module i, and `only` the index of
// the one module that applies when exactly one does (-1 otherwise); their total weight and its
// inverse, so that the mean of every candidate multiplies where it would divide.
struct Applying {
  std::vector<char> applies;
  int only = -1;
  int64_t weight = 0;
  float inverse_weight = 0;
  Applying() = default;
  Applying(const std::vector<Pipeline::WeightedScore>& scores, const CycleContext& ctx)
      : applies(scores.size()) {
    int count = 0;
    for (size_t i = 0; i < scores.size(); ++i) {
      applies[i] = scores[i].policy->Applies(ctx) ? 1 : 0;
      if (applies[i]) {
        ++count;
        only = static_cast<int>(i);
        weight += scores[i].weight;
      }
    }
    if (count != 1) only = -1;
    inverse_weight = core::Inverse(weight);
  }
};

// Rounded weighted mean of the modules that apply; stays in [0, kMaxScore] because each term
// does. The mean of one module is its own score: (s * w + w / 2) / w is s for any weight, so
// a pod that one module scores (most pods: binpack alone) skips the weighing and its division,
// one of the four divisions a candidate's binpack score took.
int64_t WeightedMean(const std::vector<Pipeline::WeightedScore>& scores, const Applying& applying,
                     const CycleContext& ctx, const core::NodeState& node) {
  if (applying.only >= 0) {
    return std::clamp<int64_t>(scores[static_cast<size_t>(applying.only)].policy->Score(ctx, node), 0,
                               kMaxScore);
  }
  int64_t sum = 0;
  for (size_t i = 0; i < scores.size(); ++i) {
    if (!applying.applies[i]) continue;
    sum += std::clamp<int64_t>(scores[i].policy->Score(ctx, node), 0, kMaxScore) * scores[i].weight;
  }
  // Weights are 1..100 (the registry checks) and scores 0..kMaxScore: sum is not negative, and
  // the quotient is at most kMaxScore + 1.
  const int64_t weight = applying.weight;
  return weight <= 0 ? 0 : core::QuotientByInverse(sum + weight / 2, weight, applying.inverse_weight);
}

}  // namespace

std::vector<NodeVerdict> Pipeline::Filter(const CycleContext& ctx, std::span<const std::string_view> candidates,
                                          std::vector<int64_t>* scores) const {
  std::vector<NodeVerdict> out(candidates.size());
  CycleState state;
  CycleContext cycle = Own(ctx);
  if (cycle.cycle == nullptr) cycle.cycle = &state;
  NodeVerdict admitted = PreFilter(cycle);
  // The scores' context is Score's: the filters' cycle state and settings are not the scores'.
  CycleState score_state;
  CycleContext scoring = Own(CycleContext{.state = ctx.state, .pod = ctx.pod, .now = ctx.now, .explain = false});
  scoring.cycle = &score_state;
  Applying applies;
  const bool score = scores != nullptr && admitted.ok() && total_weight_ > 0;
  if (scores != nullptr) scores->assign(candidates.size(), 0);
  if (score) applies = Applying(points_.score, scoring);
  // The filters that may fail a node for this pod: one that passes every node (Skips) is asked
  // about none.
  std::vector<const FilterPlugin*> filters;
  if (admitted.ok()) {
    for (const auto& f : points_.filter) {
      if (!f->Skips(cycle)) filters.push_back(f.get());
    }
  }
  std::vector<const core::NodeState*> nodes(candidates.size());
  cycle.state.FindNodes(candidates, nodes.data());
  for (size_t i = 0; i < candidates.size() && i < kPrefetchAhead; ++i) PrefetchNode(nodes[i]);
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (i + kPrefetchAhead < candidates.size()) PrefetchNode(nodes[i + kPrefetchAhead]);
    const core::NodeState* node = nodes[i];
    if (node == nullptr) {
      out[i] = cycle.messages ? UnknownNodeVerdict() : UnknownNodeVerdict().Bare();
    } else if (!admitted.ok()) {
      out[i] = cycle.messages ? admitted : admitted.Bare();
    } else if (RunFilters(filters, cycle, *node, &out[i]) && score) {  // out[i]: a pass until then
      (*scores)[i] = WeightedMean(points_.score, applies, scoring, *node);
    }
  }
  if (!cycle.messages) GiveFirstWords(cycle, admitted, nodes, out);
  // With scores the caller answers only the best-scoring nodes that pass (filterAnswer
  // "best"): those are what the prioritize that follows names, so only they are remembered.
  if (admitted.ok()) passed_->Remember(cycle.state, cycle.pod, candidates, nodes, out, scores);
  return out;
}

void Pipeline::GiveFirstWords(const CycleContext& cycle, const NodeVerdict& admitted,
                              std::span<const core::NodeState* const> nodes,
                              std::vector<NodeVerdict>& out) const {
  CycleContext worded = cycle;
  worded.messages = true;
  std::bitset<256> seen;  // by reason (a uint8_t)
  for (size_t i = 0; i < out.size(); ++i) {
    NodeVerdict& v = out[i];
    const auto r = static_cast<size_t>(v.reason);
    if (v.ok() || seen[r]) continue;
    seen[r] = true;
    // The same decision again with words: the same model and the same cycle's memos.
    NodeVerdict again = nodes[i] == nullptr ? UnknownNodeVerdict()
                        : !admitted.ok()    ? admitted
                                            : FilterNode(worded, *nodes[i]);
    if (again.fit == v.fit && again.reason == v.reason) v = std::move(again);
  }
}

std::optional<ReclaimPlan> Pipeline::PostFilter(const CycleContext& in) const {
  const CycleContext ctx = Own(in);
  if (points_.postfilter.empty() || !PreFilter(ctx).ok()) return std::nullopt;
  for (const auto& r : points_.postfilter) {
    if (std::optional<ReclaimPlan> plan = r->PostFilter(ctx)) return plan;
  }
  return std::nullopt;
}

std::vector<const core::PodState*> Pipeline::ReclaimCandidates(const CycleContext& in,
                                                                const core::NodeState& node) const {
  const CycleContext ctx = Own(in);
  std::vector<const core::PodState*> out;
  for (const auto& r : points_.postfilter) {
    for (const core::PodState* p : r->ReclaimCandidates(ctx, node)) {
      if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
    }
  }
  return out;
}


int64_t Pipeline::ScoreNode(const CycleContext& in, const core::NodeState& node) const {
  if (total_weight_ <= 0) return 0;
  const CycleContext ctx = Own(in);
  return WeightedMean(points_.score, Applying(points_.score, ctx), ctx, node);
}

std::vector<int64_t> Pipeline::Score(const CycleContext& ctx,
                                     std::span<const std::string_view> candidates) const {
  std::vector<int64_t> out(candidates.size(), 0);
  if (total_weight_ <= 0) return out;
  CycleState state;
  CycleContext cycle = Own(ctx);
  if (cycle.cycle == nullptr) cycle.cycle = &state;
  std::vector<const core::NodeState*> nodes(candidates.size());
  // The prioritize after a "best" filter, with nothing changed since: every node it names had
  // the best score, and still has it (scores read only the pod and the model).
  int64_t same = 0;
  if (cycle.whatif == nullptr && !cycle.planning &&
      passed_->RecallScored(cycle.state, cycle.pod, candidates, nodes.data(), &same)) {
    for (size_t i = 0; i < candidates.size(); ++i) out[i] = nodes[i] != nullptr ? same : 0;
    return out;
  }
  const Applying applies(points_.score, cycle);
  if (!passed_->Recall(cycle.state, cycle.pod.uid.view(), candidates, nodes.data())) {
    cycle.state.FindNodes(candidates, nodes.data());
  }
  for (size_t i = 0; i < candidates.size() && i < kPrefetchAhead; ++i) PrefetchNode(nodes[i]);
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (i + kPrefetchAhead < candidates.size()) PrefetchNode(nodes[i + kPrefetchAhead]);
    if (const core::NodeState* node = nodes[i]) {
      out[i] = WeightedMean(points_.score, applies, cycle, *node);
    }
  }
  return out;
}

EligibleFn Pipeline::Eligibility(const core::ClusterState& state, absl::Time now) const {
  return [this, &state, now](const core::Pod& pod, const core::NodeState& node) {
    if (!core::PlacementAllows(pod, node.node)) return false;
    const CycleContext ctx{.state = state,
                           .pod = pod,
                           .now = now,
                           .explain = false,
                           .messages = false,  // whether, not why
                           .reclaim_blocked = true,
                           .planning = true,
                           .pipeline = this};
    return FilterNode(ctx, node).ok();
  };
}

std::vector<NodeVictims> Pipeline::ReviewPreemption(
    const CycleContext& in, std::vector<NodeVictims> proposal,
    std::vector<std::pair<std::string, NodeVerdict>>* dropped) const {
  const CycleContext ctx = Own(in);
  std::vector<NodeVictims> kept;
  kept.reserve(proposal.size());
  auto drop = [&](std::string node, NodeVerdict why) {
    if (dropped != nullptr) dropped->emplace_back(std::move(node), std::move(why));
  };
  for (NodeVictims& nv : proposal) {
    const core::NodeState* node = ctx.state.FindNode(nv.node);
    if (node == nullptr) {
      drop(std::move(nv.node), UnknownNodeVerdict());
      continue;
    }
    bool keep = true;
    for (const auto& p : points_.review) {
      NodeVerdict why;
      if (!p->Review(ctx, *node, &nv, &why)) {
        drop(nv.node, std::move(why));
        keep = false;
        break;
      }
    }
    if (!keep) continue;
    if (nv.victims.empty()) {
      drop(std::move(nv.node), NodeVerdict{.fit = Fit::kUnresolvable,
                                           .reason = Reason::kPreemptionNotHelpful,
                                           .message = "no victim on this node",
                                           .detail = "kube-scheduler rejects empty victim lists"});
      continue;
    }
    std::stable_sort(nv.victims.begin(), nv.victims.end(),
                     [](const Victim& a, const Victim& b) { return a.priority > b.priority; });
    kept.push_back(std::move(nv));
  }
  return kept;
}

std::vector<std::string> Pipeline::Describe() const {
  std::vector<std::string> out;
  for (const auto& m : points_.prefilter) out.push_back(StrCat("prefilter:", m->Name()));
  for (const auto& m : points_.filter) out.push_back(StrCat("filter:", m->Name()));
  for (const auto& m : points_.postfilter) out.push_back(StrCat("postfilter:", m->Name()));
  for (const auto& m : points_.review) out.push_back(StrCat("review:", m->Name()));
  for (const auto& s : points_.score) {
    out.push_back(StrCat("score:", s.policy->Name(), "*", s.weight));
  }
  for (const auto& m : points_.permit) out.push_back(StrCat("permit:", m->Name()));
  for (const auto& m : points_.reserve) out.push_back(StrCat("reserve:", m->Name()));
  for (const auto& m : points_.queue_sort) out.push_back(StrCat("queuesort:", m->Name()));
  return out;
}

}  // namespace berth::policy
