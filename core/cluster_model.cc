#include "core/cluster_model.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <string_view>

#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "core/quotient.h"
#include "core/strings.h"

namespace berth::core {

ResourceVector NodeState::Free() const {
  ResourceVector free = node.allocatable;
  free.Sub(requested);
  free.Sub(assumed);
  free.Sub(reserved);
  return free;
}

void NodeState::RefreshRoom() {
  for (size_t i = 0; i < WellKnownAmounts::kResources; ++i) {
    const auto id = static_cast<ResourceId>(i);
    room.free[i] = FreeFromVectors(id);
    room.allocatable[i] = node.allocatable.Get(id);
    room.inverse_allocatable[i] = Inverse(room.allocatable[i]);
  }
}

// ---- ClusterState (reads) --------------------------------------------------------------------

NodeSlot ClusterState::FindNodeSlot(std::string_view name) const {
  const NodeSlot slot = node_by_name_.Find(name);
  return slot == kNoNode || !nodes_[slot].present ? kNoNode : slot;
}

void ClusterState::FindNodes(std::span<const std::string_view> names, const NodeState** out) const {
  static_assert(sizeof(NodeSlot) == sizeof(NodeDirectory::Slot));
  std::vector<NodeSlot> slots(names.size());
  node_by_name_.FindMany(names, slots.data());
  // Each node's `present` is a cache miss of its own (the states are far apart): ask for it
  // several names ahead so that the misses overlap.
  constexpr size_t kAhead = 8;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i + kAhead < names.size() && slots[i + kAhead] != kNoNode) {
      __builtin_prefetch(&nodes_[slots[i + kAhead]].present);
    }
    const NodeState* n = slots[i] == kNoNode ? nullptr : &nodes_[slots[i]];
    out[i] = n != nullptr && n->present ? n : nullptr;
  }
}

const NodeState* ClusterState::FindNode(std::string_view name) const {
  const NodeSlot slot = FindNodeSlot(name);
  return slot == kNoNode ? nullptr : &nodes_[slot];
}

const PodState* ClusterState::FindPod(std::string_view uid) const {
  auto it = pod_by_uid_.find(uid);
  return it == pod_by_uid_.end() ? nullptr : &pods_[it->second];
}

const PodState* ClusterState::FindPodByName(std::string_view ns, std::string_view name) const {
  auto it = pod_by_name_.find(std::make_pair(ns, name));
  return it == pod_by_name_.end() ? nullptr : &pods_[it->second];
}

void ClusterState::ForEachNode(const std::function<void(NodeSlot, const NodeState&)>& fn) const {
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].present) fn(static_cast<NodeSlot>(i), nodes_[i]);
  }
}

void ClusterState::ForEachPod(const std::function<void(PodSlot, const PodState&)>& fn) const {
  for (size_t i = 0; i < pods_.size(); ++i) {
    if (pods_[i].live) fn(static_cast<PodSlot>(i), pods_[i]);
  }
}

const LedgerEntry* ClusterState::FindBind(std::string_view uid) const {
  auto it = ledger_.find(uid);
  return it == ledger_.end() ? nullptr : &it->second;
}

const Reservation* ClusterState::FindReservation(std::string_view uid) const {
  auto it = reservations_.find(uid);
  return it == reservations_.end() ? nullptr : &it->second;
}

std::string_view GangNameOf(const Pod& pod) {
  if (auto v = pod.labels.Get("scheduling.x-k8s.io/pod-group"); v && !v->empty()) return *v;
  if (auto v = pod.annotations.Get("scheduling.k8s.io/group-name"); v && !v->empty()) return *v;
  return {};
}

void ClusterState::ForEachGangMember(std::string_view ns, std::string_view name,
                                     const std::function<void(const PodState&)>& fn) const {
  auto it = gang_members_.find(std::make_pair(ns, name));
  if (it == gang_members_.end()) return;
  for (PodSlot slot : it->second) fn(pods_[slot]);
}

void ClusterState::ForEachGang(
    const std::function<void(std::string_view, std::string_view)>& fn) const {
  for (const auto& [key, members] : gang_members_) fn(key.first, key.second);
}

const GangRecord* ClusterState::FindGangRecord(std::string_view ns, std::string_view name) const {
  auto it = gang_records_.find(std::make_pair(ns, name));
  return it == gang_records_.end() ? nullptr : &it->second;
}

void ClusterState::ForEachFinishedRun(const std::function<void(const FinishedRun&)>& fn) const {
  for (const FinishedRun& r : finished_runs_) fn(r);
}

int ClusterState::SucceededGangTombstones(std::string_view ns, std::string_view name) const {
  auto it = tombstones_.find(std::make_pair(ns, name));
  if (it == tombstones_.end()) return 0;
  int n = 0;
  for (const std::string& uid : it->second.uids) {
    if (!pod_by_uid_.contains(std::string_view(uid))) ++n;
  }
  return n;
}

void ClusterState::ForEachReservation(
    const std::function<void(std::string_view, const Reservation&)>& fn) const {
  for (const auto& [uid, r] : reservations_) fn(uid, r);
}

const Pool* ClusterState::FindPool(std::string_view name) const {
  auto it = pools_.find(name);
  return it == pools_.end() ? nullptr : &it->second;
}

void ClusterState::ForEachPool(const std::function<void(const Pool&)>& fn) const {
  for (const auto& [name, pool] : pools_) fn(pool);
}

const Queue* ClusterState::FindQueue(std::string_view name) const {
  auto it = queues_.find(name);
  return it == queues_.end() ? nullptr : &it->second;
}

void ClusterState::ForEachQueue(const std::function<void(const Queue&)>& fn) const {
  for (const auto& [name, queue] : queues_) fn(queue);
}

const PodGroup* ClusterState::FindPodGroup(std::string_view ns, std::string_view name) const {
  auto it = podgroups_.find(std::make_pair(ns, name));
  return it == podgroups_.end() ? nullptr : &it->second;
}

void ClusterState::ForEachPodGroup(const std::function<void(const PodGroup&)>& fn) const {
  for (const auto& [key, group] : podgroups_) fn(group);
}

const PriorityClass* ClusterState::FindPriorityClass(std::string_view name) const {
  auto it = priority_classes_.find(name);
  return it == priority_classes_.end() ? nullptr : &it->second;
}

void ClusterState::ForEachPriorityClass(
    const std::function<void(const PriorityClass&)>& fn) const {
  for (const auto& [name, pc] : priority_classes_) fn(pc);
}

ModelEvent DeleteEventFor(const ModelEvent& upsert) {
  return std::visit(
      [](const auto& e) -> ModelEvent {
        using T = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<T, NodeUpsert>) {
          return NodeDelete{e.node.name};
        } else if constexpr (std::is_same_v<T, PodUpsert>) {
          return PodDelete{e.pod.uid.str(), e.pod.ns.str(), e.pod.name.str()};
        } else if constexpr (std::is_same_v<T, PoolUpsert>) {
          return PoolDelete{e.pool.name};
        } else if constexpr (std::is_same_v<T, QueueUpsert>) {
          return QueueDelete{e.queue.name};
        } else if constexpr (std::is_same_v<T, PodGroupUpsert>) {
          return PodGroupDelete{e.podgroup.ns, e.podgroup.name};
        } else if constexpr (std::is_same_v<T, PriorityClassUpsert>) {
          return PriorityClassDelete{e.priority_class.name};
        } else {
          return e;  // already a delete
        }
      },
      upsert);
}

absl::Status ResolveEventResources(ResourceNames& names, ModelEvent& event) {
  return std::visit(
      [&](auto& e) -> absl::Status {
        using T = std::decay_t<decltype(e)>;
        auto resolve = [&](std::vector<std::string>& provisional,
                           std::span<ResourceVector* const> vectors) {
          absl::Status s = ResolveProvisionalIds(names, provisional, vectors);
          if (s.ok()) provisional.clear();
          return s;
        };
        if constexpr (std::is_same_v<T, NodeUpsert>) {
          ResourceVector* vectors[] = {&e.node.capacity, &e.node.allocatable};
          return resolve(e.new_resources, vectors);
        } else if constexpr (std::is_same_v<T, PodUpsert>) {
          ResourceVector* vectors[] = {&e.pod.request};
          return resolve(e.new_resources, vectors);
        } else if constexpr (std::is_same_v<T, PodGroupUpsert>) {
          ResourceVector* vectors[] = {&e.podgroup.min_resources};
          return resolve(e.new_resources, vectors);
        } else {
          return absl::OkStatus();
        }
      },
      event);
}

// ---- ClusterModel (the writer) ---------------------------------------------------------------

ClusterModel::ClusterModel(const Clock* clock) : clock_(clock) {}

ClusterModel::ReadView::ReadView(const ClusterModel* model) : model_(model) {
  model_->mu_.lock_shared();
}

ClusterModel::ReadView::~ReadView() { model_->mu_.unlock_shared(); }

namespace {

// A grown index has room for half its size again, and for at least this many entries.
constexpr size_t kMinIndexRoom = 64;

// When `live` is not sure to take `inserts` more entries without rehashing (`room` of them it
// takes for sure), puts into `grown` a copy of it with room for at least as many again, and
// \return that room; otherwise returns `room`. Reads `live` only.
template <class Map>
size_t GrowIfShort(const Map& live, size_t inserts, size_t room, std::optional<Map>* grown) {
  if (room >= inserts) return room;
  const size_t want = live.size() + std::max({inserts, live.size() / 2, kMinIndexRoom});
  Map& copy = grown->emplace();
  // A fresh table with room for `want` entries: absl rehashes only when an insert finds no
  // room left, and an insert takes at most one, so `want - size` inserts cannot rehash it.
  copy.reserve(want);
  copy.insert(live.begin(), live.end());
  return want - live.size();
}

// The same for the node directory, whose copy also leaves erased names' bytes behind.
size_t GrowIfShort(const NodeDirectory& live, size_t inserts, size_t room,
                   std::optional<NodeDirectory>* grown) {
  room = std::min(room, live.room());
  if (room >= inserts) return room;
  const size_t more = std::max({inserts, live.size() / 2, kMinIndexRoom});
  grown->emplace(live, more);
  return more;
}

// Counts down the room of an index for one insert.
void Took(size_t* room) {
  if (*room > 0) --*room;
}

}  // namespace

ClusterModel::WriteLock::WriteLock(ClusterModel* model)
    ABSL_NO_THREAD_SAFETY_ANALYSIS : WriteLock(model, Adds{}) {}

ClusterModel::WriteLock::WriteLock(ClusterModel* model, const Adds& adds)
    ABSL_NO_THREAD_SAFETY_ANALYSIS : model_(model) {
  model_->writers_mu_.Lock();
  Lock(adds);
}

ClusterModel::WriteLock::WriteLock(ClusterModel* model, std::span<const ModelEvent> events)
    ABSL_NO_THREAD_SAFETY_ANALYSIS : model_(model) {
  model_->writers_mu_.Lock();
  Lock(model_->AddsOf(events));
}

void ClusterModel::WriteLock::Lock(const Adds& adds) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  prepared_ = model_->Prepare(adds);
  model_->mu_.lock();
  model_->PutInPlace(prepared_);
}

ClusterModel::WriteLock::~WriteLock() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  model_->mu_.unlock();
  prepared_ = Prepared{};  // the indexes replaced, freed off the exclusive lock
  model_->writers_mu_.Unlock();
}

ClusterModel::Prepared ClusterModel::Prepare(const Adds& adds) {
  Prepared prepared;
  room_.nodes = GrowIfShort(node_by_name_, adds.nodes, room_.nodes, &prepared.node_by_name);
  if (room_.pods < adds.pods) {
    // One count for both: every pod has an entry in each.
    room_.pods = std::min(GrowIfShort(pod_by_uid_, adds.pods, 0, &prepared.pod_by_uid),
                          GrowIfShort(pod_by_name_, adds.pods, 0, &prepared.pod_by_name));
  }
  room_.binds = GrowIfShort(ledger_, adds.binds, room_.binds, &prepared.ledger);
  prepared.node_slots = nodes_.Grow(adds.node_slots);
  prepared.pod_slots = pods_.Grow(adds.pod_slots);
  return prepared;
}

void ClusterModel::PutInPlace(Prepared& prepared) {
  if (prepared.node_by_name) node_by_name_.swap(*prepared.node_by_name);
  if (prepared.pod_by_uid) pod_by_uid_.swap(*prepared.pod_by_uid);
  if (prepared.pod_by_name) pod_by_name_.swap(*prepared.pod_by_name);
  if (prepared.ledger) ledger_.swap(*prepared.ledger);
  nodes_.Adopt(prepared.node_slots);
  pods_.Adopt(prepared.pod_slots);
}

ClusterModel::Adds ClusterModel::AddsOf(std::span<const ModelEvent> events) const {
  Adds adds;
  // Slots go to pods and nodes not known yet, once each (a node is named by many pods). One
  // deleted and added again in the same batch takes a slot again, but its delete freed one.
  absl::flat_hash_set<std::string_view> new_pods;
  absl::flat_hash_set<std::string_view> new_nodes;
  auto node = [&](std::string_view name) {
    ++adds.nodes;
    if (!node_by_name_.Contains(name)) new_nodes.insert(name);
  };
  for (const ModelEvent& event : events) {
    if (const auto* e = std::get_if<PodUpsert>(&event)) {
      ++adds.pods;
      if (!pod_by_uid_.contains(std::string_view(e->pod.uid))) new_pods.insert(std::string_view(e->pod.uid));
      if (!e->pod.node_name.empty()) node(e->pod.node_name);
    } else if (const auto* n = std::get_if<NodeUpsert>(&event)) {
      node(n->node.name);
    }
  }
  adds.node_slots = new_nodes.size();
  adds.pod_slots = new_pods.size();
  return adds;
}

void ClusterModel::Touch(NodeSlot slot) {
  nodes_[slot].generation = generation_;
  nodes_[slot].RefreshRoom();
}

NodeSlot ClusterModel::NodeSlotFor(std::string_view name) {
  if (const NodeSlot known = node_by_name_.Find(name); known != kNoNode) return known;
  const NodeSlot slot = nodes_.Take();  // a fresh NodeState: MaybeFreeNodeSlot clears it
  nodes_[slot].node.name = name;
  nodes_[slot].slot = slot;
  node_by_name_.Insert(name, slot);
  Took(&room_.nodes);
  return slot;
}

void ClusterModel::MaybeFreeNodeSlot(NodeSlot slot) {
  NodeState& n = nodes_[slot];
  if (n.present || !n.pods.empty() || n.binds_in_flight > 0 || n.reservations > 0) return;
  node_by_name_.Erase(n.node.name);
  n = NodeState{};
  nodes_.Free(slot);
}

uint64_t ClusterState::NextInstance() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

std::unique_ptr<ClusterModel> ClusterModel::Fork(const Clock* clock) const {
  auto fork = std::make_unique<ClusterModel>(clock);
  ReadView view(this);
  // The same names under the same ids: interned in id order (the well-known ones are pinned).
  for (size_t id = kNumWellKnownResources; id < resources_->size(); ++id) {
    (void)fork->resources_->Intern(resources_->Name(static_cast<ResourceId>(id)));
  }
  fork->generation_ = generation_;
  fork->nodes_.CopyFrom(nodes_);
  fork->node_by_name_ = NodeDirectory(node_by_name_, 0);
  fork->present_nodes_ = present_nodes_;
  fork->pods_.CopyFrom(pods_);
  // The pod indexes hold views into the pods' own strings: made again over the copies.
  fork->pod_by_uid_.reserve(pod_by_uid_.size());
  fork->pod_by_name_.reserve(pod_by_name_.size());
  for (const auto& [uid, slot] : pod_by_uid_) {
    const Pod& p = fork->pods_[slot].pod;
    fork->pod_by_uid_.emplace(p.uid.view(), slot);
    fork->pod_by_name_.emplace(std::make_pair(p.ns.view(), p.name.view()), slot);
  }
  fork->live_pods_ = live_pods_;
  fork->ledger_ = ledger_;
  fork->reservations_ = reservations_;
  fork->gang_members_ = gang_members_;
  fork->gang_records_ = gang_records_;
  fork->tombstones_ = tombstones_;
  fork->tombstone_count_ = tombstone_count_;
  fork->tombstones_dropped_ = tombstones_dropped_;
  fork->finished_runs_ = finished_runs_;
  fork->finished_runs_total_ = finished_runs_total_;
  fork->tombstone_limits_ = tombstone_limits_;
  fork->next_tombstone_sweep_ = next_tombstone_sweep_;
  fork->pools_ = pools_;
  fork->queues_ = queues_;
  fork->podgroups_ = podgroups_;
  fork->priority_classes_ = priority_classes_;
  fork->node_labels_generation_ = node_labels_generation_;
  fork->pools_generation_ = pools_generation_;
  fork->queues_generation_ = queues_generation_;
  fork->podgroups_generation_ = podgroups_generation_;
  fork->priority_classes_generation_ = priority_classes_generation_;
  return fork;
}

void ClusterModel::SetGangTombstoneLimits(GangTombstoneLimits limits) {
  WriteLock lock(this);
  tombstone_limits_ = limits;
  next_tombstone_sweep_ = absl::InfinitePast();
}

ApplyStats ClusterModel::Apply(std::span<const ModelEvent> events) {
  ApplyStats stats;
  WriteLock lock(this, events);
  SweepGangTombstones();
  for (const ModelEvent& event : events) {
    // The annotation lets the analysis check the calls below: the lambda runs under `lock`.
    std::visit(
        [&](const auto& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          using T = std::decay_t<decltype(e)>;
          if constexpr (std::is_same_v<T, NodeUpsert>) {
            Node node = e.node;
            if (absl::Status s = PrepareNode(node, e.new_resources); !s.ok()) {
              stats.refused.push_back(StrCat("node ", e.node.name, ": ", s.message()));
              return;
            }
            ++generation_;
            UpsertNode(std::move(node), &stats);
          } else if constexpr (std::is_same_v<T, PodUpsert>) {
            Pod pod = e.pod;
            if (absl::Status s = PreparePod(pod, e.new_resources); !s.ok()) {
              stats.refused.push_back(StrCat("pod ", e.pod.Key(), ": ", s.message()));
              return;
            }
            ++generation_;
            UpsertPod(std::move(pod), &stats);
          } else if constexpr (std::is_same_v<T, PodGroupUpsert>) {
            PodGroupUpsert group = e;
            if (absl::Status s = PreparePodGroup(group.podgroup, e.new_resources); !s.ok()) {
              stats.refused.push_back(StrCat("PodGroup ", e.podgroup.Key(), ": ", s.message()));
              return;
            }
            group.new_resources.clear();
            ++generation_;
            ApplyKind(ModelEvent(std::move(group)), &stats);
          } else if constexpr (std::is_same_v<T, NodeDelete>) {
            ++generation_;
            DeleteNode(e.name, &stats);
          } else if constexpr (std::is_same_v<T, PodDelete>) {
            ++generation_;
            DeletePod(e, &stats);
          } else {
            ++generation_;
            ApplyKind(event, &stats);
          }
        },
        event);
  }
  return stats;
}

namespace {

// Erases the object under `key`. \return false when there was none (an idempotent delete).
template <class Map, class Key>
bool EraseFrom(Map& map, const Key& key) {
  auto it = map.find(key);
  if (it == map.end()) return false;
  map.erase(it);
  return true;
}

}  // namespace

void ClusterModel::ApplyKind(const ModelEvent& event, ApplyStats* stats) {
  // Each change stamps its kind's generation with the event's model generation; an idempotent
  // delete changes nothing and stamps nothing.
  std::visit(
      [&](const auto& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        using T = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<T, PoolUpsert>) {
          pools_.insert_or_assign(e.pool.name, e.pool);
          pools_generation_ = generation_;
          ++stats->pools_upserted;
        } else if constexpr (std::is_same_v<T, PoolDelete>) {
          if (!EraseFrom(pools_, std::string_view(e.name))) return;
          pools_generation_ = generation_;
          ++stats->pools_deleted;
        } else if constexpr (std::is_same_v<T, QueueUpsert>) {
          queues_.insert_or_assign(e.queue.name, e.queue);
          queues_generation_ = generation_;
          ++stats->queues_upserted;
        } else if constexpr (std::is_same_v<T, QueueDelete>) {
          if (!EraseFrom(queues_, std::string_view(e.name))) return;
          queues_generation_ = generation_;
          ++stats->queues_deleted;
        } else if constexpr (std::is_same_v<T, PodGroupUpsert>) {
          podgroups_.insert_or_assign(std::make_pair(e.podgroup.ns, e.podgroup.name),
                                      e.podgroup);
          MarkTombstonesOrphaned(e.podgroup.ns, e.podgroup.name);
          podgroups_generation_ = generation_;
          ++stats->podgroups_upserted;
        } else if constexpr (std::is_same_v<T, PodGroupDelete>) {
          if (!EraseFrom(podgroups_, std::make_pair(std::string_view(e.ns),
                                                    std::string_view(e.name)))) {
            return;
          }
          // The gang is over: what berth remembered of its finished members goes with it.
          DropGangTombstones(e.ns, e.name);
          podgroups_generation_ = generation_;
          ++stats->podgroups_deleted;
        } else if constexpr (std::is_same_v<T, PriorityClassUpsert>) {
          priority_classes_.insert_or_assign(e.priority_class.name, e.priority_class);
          priority_classes_generation_ = generation_;
          ++stats->priorityclasses_upserted;
        } else if constexpr (std::is_same_v<T, PriorityClassDelete>) {
          if (!EraseFrom(priority_classes_, std::string_view(e.name))) return;
          priority_classes_generation_ = generation_;
          ++stats->priorityclasses_deleted;
        }
        // Nodes and pods are applied by Apply itself and never reach here.
      },
      event);
}

namespace {

__extension__ typedef __int128 Int128;

/// A change to node totals (requested + assumed + reserved, per resource), summed exactly in
/// 128 bits so that it can be checked before anything is changed.
class TotalsChange {
 public:
  /// `slot` may be kNoNode: a node slot the change would create (its totals start at zero).
  void Add(NodeSlot slot, const ResourceVector& v, int sign) {
    auto it = std::find_if(d_.begin(), d_.end(), [&](const auto& e) { return e.first == slot; });
    if (it == d_.end()) it = d_.insert(d_.end(), {slot, {}});
    if (it->second.size() < v.size()) it->second.resize(v.size(), 0);
    for (size_t i = 0; i < v.size(); ++i) {
      it->second[i] += static_cast<Int128>(sign) * v.Get(static_cast<ResourceId>(i));
    }
  }

  /// \return OutOfRange, naming the resource and the node, when a total would not fit.
  /// `nodes`: the model's node slots, indexed by NodeSlot.
  template <class NodeSlots>
  absl::Status Check(const NodeSlots& nodes, const ResourceNames& names,
                     std::string_view node_name_if_new) const {
    for (const auto& [slot, delta] : d_) {
      const NodeState* n = slot == kNoNode ? nullptr : &nodes[slot];
      for (size_t i = 0; i < delta.size(); ++i) {
        const auto id = static_cast<ResourceId>(i);
        Int128 total = delta[i];
        if (n != nullptr) {
          total += static_cast<Int128>(n->requested.Get(id)) + n->assumed.Get(id) +
                   n->reserved.Get(id);
        }
        if (total > ResourceVector::kMaxAmount || total < 0) {
          return absl::OutOfRangeError(StrCat(
              "requests.", names.Name(id), ": node ",
              n != nullptr ? std::string_view(n->node.name) : node_name_if_new,
              " would hold more ", names.Name(id),
              " than berth can count (its requested + in-flight + reserved total would exceed ",
              ResourceVector::kMaxAmount, names.Scale(id) == ResourceScale::kMilli ? "m" : "",
              "); refused, the node's totals are unchanged"));
        }
      }
    }
    return absl::OkStatus();
  }

 private:
  std::vector<std::pair<NodeSlot, std::vector<Int128>>> d_;
};

// The name of a table id, or of a provisional one among `provisional`.
std::string_view NameOf(ResourceId id, const ResourceNames& names,
                        std::span<const std::string> provisional) {
  if (IsProvisional(id)) {
    const size_t i = id - ResourceNameScope::kFirstProvisional;
    return i < provisional.size() ? std::string_view(provisional[i]) : "<unknown-resource>";
  }
  return names.Name(id);
}

absl::Status CheckNotNegative(const ResourceVector& v, std::string_view field,
                              const ResourceNames& names,
                              std::span<const std::string> provisional = {}) {
  for (size_t i = 0; i < v.size(); ++i) {
    const auto id = static_cast<ResourceId>(i);
    if (v.Get(id) < 0) {
      return absl::InvalidArgumentError(StrCat(field, ".", NameOf(id, names, provisional),
                                               ": must not be negative, got ", v.Get(id)));
    }
  }
  return absl::OkStatus();
}

}  // namespace

// Each Prepare* checks first and resolves provisional ids last: resolving is the only step that
// changes anything (the name table), so an object refused for any reason adds no name.

absl::Status ClusterModel::PrepareNode(Node& node, std::span<const std::string> new_resources) {
  if (absl::Status s = CheckNotNegative(node.capacity, "status.capacity", *resources_,
                                        new_resources);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckNotNegative(node.allocatable, "status.allocatable", *resources_,
                                        new_resources);
      !s.ok()) {
    return s;
  }
  ResourceVector* vectors[] = {&node.capacity, &node.allocatable};
  if (absl::Status s = ResolveProvisionalIds(*resources_, new_resources, vectors); !s.ok()) {
    return absl::Status(s.code(), StrCat("status.capacity/allocatable: ", s.message()));
  }
  return absl::OkStatus();
}

absl::Status ClusterModel::PreparePod(Pod& pod, std::span<const std::string> new_resources) {
  if (absl::Status s = CheckNotNegative(pod.request, "requests", *resources_, new_resources);
      !s.ok()) {
    return s;
  }
  // A resource new to the table has no total on any node yet, so provisional ids can be
  // checked as they are (a node's Get() of an id it lacks is 0).
  if (absl::Status s = CheckPodTotals(pod); !s.ok()) return s;
  ResourceVector* vectors[] = {&pod.request};
  if (absl::Status s = ResolveProvisionalIds(*resources_, new_resources, vectors); !s.ok()) {
    return absl::Status(s.code(), StrCat("requests: ", s.message()));
  }
  return absl::OkStatus();
}

absl::Status ClusterModel::PreparePodGroup(PodGroup& group,
                                           std::span<const std::string> new_resources) {
  if (absl::Status s = CheckNotNegative(group.min_resources, "spec.minResources", *resources_,
                                        new_resources);
      !s.ok()) {
    return s;
  }
  ResourceVector* vectors[] = {&group.min_resources};
  if (absl::Status s = ResolveProvisionalIds(*resources_, new_resources, vectors); !s.ok()) {
    return absl::Status(s.code(), StrCat("spec.minResources: ", s.message()));
  }
  return absl::OkStatus();
}

absl::Status ClusterModel::CheckPodTotals(const Pod& pod) const {
  // Everything UpsertPod (with RemovePodSlot, Uncount, Count and ReconcileLedger) adds to and
  // takes from node totals, in the same cases.
  TotalsChange change;
  auto release_ledger_and_reservation = [&](std::string_view uid) {
    if (auto it = ledger_.find(uid); it != ledger_.end()) change.Add(it->second.node, it->second.request, -1);
    if (auto it = reservations_.find(uid); it != reservations_.end()) {
      change.Add(it->second.node, it->second.request, -1);
    }
  };
  if (auto it = pod_by_name_.find(std::make_pair(std::string_view(pod.ns),
                                                 std::string_view(pod.name)));
      it != pod_by_name_.end() && pods_[it->second].pod.uid != pod.uid) {
    const PodState& old = pods_[it->second];
    release_ledger_and_reservation(old.pod.uid);
    if (old.counted_on != kNoNode) change.Add(old.counted_on, old.pod.request, -1);
  }
  if (auto it = pod_by_uid_.find(pod.uid); it != pod_by_uid_.end()) {
    const PodState& old = pods_[it->second];
    if (old.counted_on != kNoNode) change.Add(old.counted_on, old.pod.request, -1);
  }
  const bool placed = !pod.node_name.empty() && !IsTerminal(pod.phase);
  if (!pod.node_name.empty() || IsTerminal(pod.phase)) release_ledger_and_reservation(pod.uid);
  if (!placed) return absl::OkStatus();  // nothing is added anywhere
  change.Add(node_by_name_.Find(pod.node_name), pod.request, +1);
  return change.Check(nodes_, *resources_, pod.node_name);
}

void ClusterModel::UpsertNode(Node node, ApplyStats* stats) {
  const NodeSlot slot = NodeSlotFor(node.name);
  NodeState& n = nodes_[slot];
  if (!n.present || !(n.node.labels == node.labels)) node_labels_generation_ = generation_;
  if (!n.present) ++present_nodes_;
  n.present = true;
  n.node = std::move(node);
  Touch(slot);
  ++stats->nodes_upserted;
}

void ClusterModel::DeleteNode(const std::string& name, ApplyStats* stats) {
  const NodeSlot slot = node_by_name_.Find(name);
  if (slot == kNoNode || !nodes_[slot].present) return;  // idempotent
  NodeState& n = nodes_[slot];
  n.present = false;
  --present_nodes_;
  node_labels_generation_ = generation_;
  // Bound pods keep their usage in the slot: Kubernetes deletes them separately, and a node
  // that comes back (same name) must see them.
  n.node = Node{.name = n.node.name};
  Touch(slot);
  ++stats->nodes_deleted;
  MaybeFreeNodeSlot(slot);
}

void ClusterModel::Uncount(PodSlot slot) {
  PodState& p = pods_[slot];
  if (p.counted_on == kNoNode) return;
  NodeState& n = nodes_[p.counted_on];
  n.requested.Sub(p.pod.request);
  // Swap-remove from the node's pod list.
  const uint32_t idx = p.index_on_node;
  const PodSlot last = n.pods.back();
  n.pods[idx] = last;
  pods_[last].index_on_node = idx;
  n.pods.pop_back();
  const NodeSlot node_slot = p.counted_on;
  p.counted_on = kNoNode;
  Touch(node_slot);
  MaybeFreeNodeSlot(node_slot);
}

void ClusterModel::Count(PodSlot slot) {
  PodState& p = pods_[slot];
  if (p.pod.node_name.empty() || IsTerminal(p.pod.phase)) return;
  const NodeSlot node_slot = NodeSlotFor(p.pod.node_name);
  NodeState& n = nodes_[node_slot];
  n.requested.Add(p.pod.request);
  p.counted_on = node_slot;
  p.index_on_node = static_cast<uint32_t>(n.pods.size());
  n.pods.push_back(slot);
  Touch(node_slot);
}

void ClusterModel::EraseLedger(std::string_view uid) {
  auto it = ledger_.find(uid);
  if (it == ledger_.end()) return;
  const NodeSlot slot = it->second.node;
  nodes_[slot].assumed.Sub(it->second.request);
  --nodes_[slot].binds_in_flight;
  Touch(slot);
  ledger_.erase(it);
  MaybeFreeNodeSlot(slot);
}

void ClusterModel::EraseReservation(std::string_view uid) {
  auto it = reservations_.find(uid);
  if (it == reservations_.end()) return;
  const NodeSlot slot = it->second.node;
  nodes_[slot].reserved.Sub(it->second.request);
  --nodes_[slot].reservations;
  Touch(slot);
  reservations_.erase(it);
  MaybeFreeNodeSlot(slot);
}

void ClusterModel::IndexGang(PodSlot slot, bool add) {
  const Pod& pod = pods_[slot].pod;
  const std::string_view gang = GangNameOf(pod);
  if (gang.empty()) return;
  auto key = std::make_pair(std::string_view(pod.ns), gang);
  auto it = gang_members_.find(key);
  if (add) {
    if (it == gang_members_.end()) {
      it = gang_members_.emplace(std::make_pair(std::string(pod.ns), std::string(gang)),
                                 std::vector<PodSlot>{}).first;
    }
    it->second.push_back(slot);
    MarkTombstonesOrphaned(key.first, key.second);
    return;
  }
  if (it == gang_members_.end()) return;
  std::erase(it->second, slot);
  if (it->second.empty()) {
    // The gang's last pod is gone: so is what berth remembered of it.
    if (auto rit = gang_records_.find(key); rit != gang_records_.end()) gang_records_.erase(rit);
    gang_members_.erase(it);
    MarkTombstonesOrphaned(key.first, key.second);
  }
}

void ClusterModel::MarkTombstonesOrphaned(std::string_view ns, std::string_view gang) {
  auto it = tombstones_.find(std::make_pair(ns, gang));
  if (it == tombstones_.end()) return;
  const bool orphan = !gang_members_.contains(it->first) && !podgroups_.contains(it->first);
  if (!orphan) {
    it->second.orphaned = absl::InfiniteFuture();
  } else if (it->second.orphaned == absl::InfiniteFuture()) {
    it->second.orphaned = clock_->Now();
  }
}

void ClusterModel::DropGangTombstones(std::string_view ns, std::string_view gang) {
  auto it = tombstones_.find(std::make_pair(ns, gang));
  if (it == tombstones_.end()) return;
  tombstone_count_ -= it->second.uids.size();
  tombstones_.erase(it);
}

void ClusterModel::AddGangTombstone(std::string_view ns, std::string_view gang,
                                    std::string_view uid) {
  if (auto it = tombstones_.find(std::make_pair(ns, gang));
      it != tombstones_.end() && std::find(it->second.uids.begin(), it->second.uids.end(), uid) !=
                                     it->second.uids.end()) {
    return;
  }
  if (tombstone_count_ >= tombstone_limits_.limit) {
    // Make room from the gang without live members that finished longest ago.
    auto victim = tombstones_.end();
    for (auto it = tombstones_.begin(); it != tombstones_.end(); ++it) {
      if (gang_members_.contains(it->first)) continue;
      if (victim == tombstones_.end() || it->second.newest < victim->second.newest) victim = it;
    }
    if (victim == tombstones_.end()) {
      ++tombstones_dropped_;
      return;
    }
    tombstones_dropped_ += victim->second.uids.size();
    tombstone_count_ -= victim->second.uids.size();
    tombstones_.erase(victim);
    if (tombstone_count_ >= tombstone_limits_.limit) {  // a limit of 0 keeps none
      ++tombstones_dropped_;
      return;
    }
  }
  auto it = tombstones_.find(std::make_pair(ns, gang));
  if (it == tombstones_.end()) {
    it = tombstones_.emplace(std::make_pair(std::string(ns), std::string(gang)), GangTombstones{})
             .first;
  }
  it->second.uids.emplace_back(uid);
  it->second.newest = clock_->Now();
  ++tombstone_count_;
  MarkTombstonesOrphaned(ns, gang);
}

void ClusterModel::SweepGangTombstones() {
  if (tombstones_.empty()) return;
  const absl::Time now = clock_->Now();
  if (now < next_tombstone_sweep_) return;
  next_tombstone_sweep_ = now + tombstone_limits_.orphan_grace / 10;
  for (auto it = tombstones_.begin(); it != tombstones_.end();) {
    const absl::Time orphaned = it->second.orphaned;
    if (orphaned != absl::InfiniteFuture() && now - orphaned >= tombstone_limits_.orphan_grace) {
      tombstone_count_ -= it->second.uids.size();
      it = tombstones_.erase(it);
    } else {
      ++it;
    }
  }
}

void ClusterModel::ReconcileLedger(PodSlot slot, ApplyStats* stats) {
  const Pod& pod = pods_[slot].pod;
  // Room held for a pod ends once it is placed (by anyone) or finished.
  if (!pod.node_name.empty() || IsTerminal(pod.phase)) EraseReservation(pod.uid);
  auto it = ledger_.find(pod.uid);
  if (it == ledger_.end()) return;
  if (IsTerminal(pod.phase)) {
    EraseLedger(pod.uid);
    return;
  }
  if (pod.node_name.empty()) return;  // the Binding has not shown up yet
  // The pod is bound: on our node this confirms the bind, elsewhere the API server overruled
  // it. Either way the pod's own accounting takes over from the ledger.
  if (nodes_[it->second.node].node.name == pod.node_name) ++stats->binds_confirmed;
  EraseLedger(pod.uid);
}

void ClusterModel::UpsertPod(Pod pod, ApplyStats* stats) {
  // A pod recreated under the same name (new uid) replaces the old object.
  if (auto it = pod_by_name_.find(std::make_pair(std::string_view(pod.ns),
                                                 std::string_view(pod.name)));
      it != pod_by_name_.end() && pods_[it->second].pod.uid != pod.uid) {
    const std::string old_uid = pods_[it->second].pod.uid.str();
    EraseLedger(old_uid);
    EraseReservation(old_uid);
    RemovePodSlot(it->second);
  }
  PodSlot slot;
  if (auto it = pod_by_uid_.find(pod.uid); it != pod_by_uid_.end()) {
    slot = it->second;
    Uncount(slot);
    IndexGang(slot, /*add=*/false);
    PodState& p = pods_[slot];
    if (pod.phase == PodPhase::kSucceeded && !IsTerminal(p.pod.phase)) {
      Pod last = pod;  // the newest labels and startTime, as it was while it ran
      last.phase = p.pod.phase;
      RecordFinishedRun(last);
    }
    // Keys are views into the stored strings: drop them while the strings are replaced.
    pod_by_uid_.erase(it);
    pod_by_name_.erase(std::make_pair(std::string_view(p.pod.ns), std::string_view(p.pod.name)));
    p.pod = std::move(pod);
  } else {
    slot = pods_.Take();  // a fresh PodState: RemovePodSlot clears it
    PodState& p = pods_[slot];
    p.pod = std::move(pod);
    p.live = true;
    ++live_pods_;
  }
  PodState& p = pods_[slot];
  pod_by_uid_.emplace(std::string_view(p.pod.uid), slot);
  pod_by_name_.emplace(std::make_pair(std::string_view(p.pod.ns), std::string_view(p.pod.name)),
                       slot);
  Took(&room_.pods);
  Count(slot);
  IndexGang(slot, /*add=*/true);
  ReconcileLedger(slot, stats);
  ++stats->pods_upserted;
}

void ClusterModel::RecordFinishedRun(const Pod& pod) {
  if (pod.started == absl::InfinitePast() || IsTerminal(pod.phase)) return;
  const absl::Time now = clock_->Now();
  if (now < pod.started) return;  // a clock behind the kubelet's: no run time to learn
  if (finished_runs_.size() >= kFinishedRunLimit) finished_runs_.pop_front();
  finished_runs_.push_back(FinishedRun{.pod = pod, .ran = now - pod.started, .at = now});
  ++finished_runs_total_;
}

void ClusterModel::RemovePodSlot(PodSlot slot) {
  PodState& p = pods_[slot];
  Uncount(slot);
  IndexGang(slot, /*add=*/false);
  pod_by_uid_.erase(std::string_view(p.pod.uid));
  pod_by_name_.erase(std::make_pair(std::string_view(p.pod.ns), std::string_view(p.pod.name)));
  p = PodState{};
  pods_.Free(slot);
  --live_pods_;
}

void ClusterModel::DeletePod(const PodDelete& del, ApplyStats* stats) {
  PodSlot slot;
  if (auto it = pod_by_uid_.find(std::string_view(del.uid));
      !del.uid.empty() && it != pod_by_uid_.end()) {
    slot = it->second;
  } else if (auto it2 = pod_by_name_.find(
                 std::make_pair(std::string_view(del.ns), std::string_view(del.name)));
             del.uid.empty() && it2 != pod_by_name_.end()) {
    slot = it2->second;
  } else {
    EraseLedger(del.uid);
    EraseReservation(del.uid);
    return;  // idempotent: deleting an unknown pod changes nothing
  }
  EraseLedger(pods_[slot].pod.uid);
  EraseReservation(pods_[slot].pod.uid);
  std::string gang;
  std::string ns;
  std::string uid;
  if (del.succeeded) {
    const Pod& pod = pods_[slot].pod;
    RecordFinishedRun(pod);
    gang = std::string(GangNameOf(pod));
    ns = pod.ns.str();
    uid = pod.uid.str();
  }
  RemovePodSlot(slot);
  if (!gang.empty()) AddGangTombstone(ns, gang, uid);
  ++stats->pods_deleted;
}

absl::StatusOr<bool> ClusterModel::Assume(std::string_view uid, std::string_view node,
                                          const PlacementCheck& check) {
  WriteLock lock(this, {.binds = 1});
  auto pit = pod_by_uid_.find(uid);
  if (pit == pod_by_uid_.end()) {
    return absl::NotFoundError(StrCat("pod with uid ", uid, " is not known to berth"));
  }
  const PodState& p = pods_[pit->second];
  const NodeSlot slot = FindNodeSlot(node);
  if (slot == kNoNode) {
    return absl::NotFoundError(StrCat("node ", node, " is not known to berth"));
  }
  if (!p.pod.node_name.empty()) {
    if (p.pod.node_name == node) return false;
    return absl::FailedPreconditionError(StrCat("pod ", p.pod.ns, "/", p.pod.name,
                                                      " is already bound to node ",
                                                      p.pod.node_name));
  }
  if (IsTerminal(p.pod.phase)) {
    return absl::FailedPreconditionError(StrCat("pod ", p.pod.ns, "/", p.pod.name, " has ",
                                                      PodPhaseName(p.pod.phase)));
  }
  if (auto lit = ledger_.find(uid); lit != ledger_.end()) {
    // A bind that returned successfully makes a repeat harmless. One still in flight may yet
    // fail, so answering success now could leave the pod pending while kube-scheduler thinks it
    // is bound: refuse, and kube-scheduler retries after the first call has settled.
    if (lit->second.node == slot && lit->second.state == BindState::kBound) return false;
    return absl::FailedPreconditionError(
        StrCat("pod ", p.pod.ns, "/", p.pod.name, " is already being bound to node ",
               nodes_[lit->second.node].node.name,
               lit->second.state == BindState::kAssumed ? " (bind in progress)" : ""));
  }
  if (check) {
    if (absl::Status s = check(*this, p, nodes_[slot]); !s.ok()) return s;
  }
  {
    TotalsChange change;
    if (auto rit = reservations_.find(uid); rit != reservations_.end()) {
      change.Add(rit->second.node, rit->second.request, -1);
    }
    change.Add(slot, p.pod.request, +1);
    if (absl::Status s = change.Check(nodes_, *resources_, node); !s.ok()) {
      return absl::Status(s.code(), StrCat("pod ", p.pod.Key(), ": ", s.message()));
    }
  }
  ++generation_;
  // The pod's reservation (wherever it was) becomes this in-flight bind.
  EraseReservation(uid);
  nodes_[slot].assumed.Add(p.pod.request);
  ++nodes_[slot].binds_in_flight;
  Touch(slot);
  ledger_.emplace(std::string(uid), LedgerEntry{.node = slot,
                                                 .request = p.pod.request,
                                                 .state = BindState::kAssumed,
                                                 .since = clock_->Now()});
  Took(&room_.binds);
  return true;
}

void ClusterModel::BindSucceeded(std::string_view uid) {
  WriteLock lock(this);
  if (auto it = ledger_.find(uid); it != ledger_.end()) {
    it->second.state = BindState::kBound;
    it->second.since = clock_->Now();
  }
}

void ClusterModel::Forget(std::string_view uid) {
  WriteLock lock(this);
  ++generation_;
  EraseLedger(uid);
}

absl::Status ClusterModel::ConfirmBindLocally(std::string_view uid) {
  WriteLock lock(this, {.nodes = 1, .pods = 1});
  auto lit = ledger_.find(uid);
  auto pit = pod_by_uid_.find(uid);
  if (lit == ledger_.end() || pit == pod_by_uid_.end()) {
    return absl::NotFoundError(StrCat("no bind in flight for pod uid ", uid));
  }
  // The bind was checked against the request the ledger holds; a pod event since then that
  // changed it (MODIFIED with larger requests) voids the check. The caller forgets the entry.
  if (!(pods_[pit->second].pod.request == lit->second.request)) {
    const Pod& now = pods_[pit->second].pod;
    return absl::FailedPreconditionError(
        StrCat("pod ", now.ns, "/", now.name, " changed its requests while it was being bound to node ",
               nodes_[lit->second.node].node.name, "; it is scheduled again"));
  }
  ++generation_;
  Pod pod = pods_[pit->second].pod;
  pod.node_name = nodes_[lit->second.node].node.name;
  pod.phase = PodPhase::kRunning;
  pod.started = clock_->Now();
  pod.nominated_node.clear();
  ApplyStats stats;
  UpsertPod(std::move(pod), &stats);
  return absl::OkStatus();
}

int ClusterModel::ExpireBinds(absl::Duration ttl) {
  WriteLock lock(this);
  const absl::Time now = clock_->Now();
  std::vector<std::string> expired;
  for (const auto& [uid, entry] : ledger_) {
    if (entry.state == BindState::kBound && now - entry.since > ttl) expired.push_back(uid);
  }
  if (!expired.empty()) ++generation_;
  for (const std::string& uid : expired) EraseLedger(uid);
  return static_cast<int>(expired.size());
}

absl::Status ClusterModel::Reserve(std::string_view uid, std::string_view node,
                                   Reservation reservation, const ReservationCheck& check) {
  WriteLock lock(this);
  auto pit = pod_by_uid_.find(uid);
  if (pit == pod_by_uid_.end()) {
    return absl::NotFoundError(StrCat("pod with uid ", uid, " is not known to berth"));
  }
  const Pod& pod = pods_[pit->second].pod;
  const NodeSlot slot = FindNodeSlot(node);
  if (slot == kNoNode) return absl::NotFoundError(StrCat("node ", node, " is not known to berth"));
  if (!pod.node_name.empty() || ledger_.contains(uid)) {
    return absl::FailedPreconditionError(
        StrCat("pod ", pod.ns, "/", pod.name, " is already bound or being bound"));
  }
  if (check) {
    if (absl::Status s = check(*this); !s.ok()) return s;
  }
  {
    TotalsChange change;
    if (auto rit = reservations_.find(uid); rit != reservations_.end()) {
      change.Add(rit->second.node, rit->second.request, -1);
    }
    change.Add(slot, reservation.request, +1);
    if (absl::Status s = CheckNotNegative(reservation.request, "reservation", *resources_);
        !s.ok()) {
      return s;
    }
    if (absl::Status s = change.Check(nodes_, *resources_, node); !s.ok()) {
      return absl::Status(s.code(), StrCat("pod ", pod.Key(), ": ", s.message()));
    }
  }
  ++generation_;
  PlaceReservation(uid, slot, std::move(reservation));
  return absl::OkStatus();
}

void ClusterModel::PlaceReservation(std::string_view uid, NodeSlot slot, Reservation reservation) {
  EraseReservation(uid);
  reservation.node = slot;
  nodes_[slot].reserved.Add(reservation.request);
  ++nodes_[slot].reservations;
  Touch(slot);
  reservations_.emplace(std::string(uid), std::move(reservation));
}

absl::Status ClusterModel::ReserveAll(std::vector<ReservationRequest> requests,
                                      const ReservationCheck& check) {
  WriteLock lock(this);
  std::vector<NodeSlot> slots;
  slots.reserve(requests.size());
  for (const ReservationRequest& r : requests) {
    auto pit = pod_by_uid_.find(std::string_view(r.uid));
    if (pit == pod_by_uid_.end()) {
      return absl::NotFoundError(StrCat("pod with uid ", r.uid, " is not known to berth"));
    }
    const Pod& pod = pods_[pit->second].pod;
    if (!pod.node_name.empty() || ledger_.contains(r.uid) || IsTerminal(pod.phase)) {
      return absl::FailedPreconditionError(
          StrCat("pod ", pod.ns, "/", pod.name, " is already bound, being bound or finished"));
    }
    const NodeSlot slot = FindNodeSlot(r.node);
    if (slot == kNoNode) {
      return absl::NotFoundError(StrCat("node ", r.node, " is not known to berth"));
    }
    slots.push_back(slot);
  }
  if (check) {
    if (absl::Status s = check(*this); !s.ok()) return s;
  }
  {
    // What PlaceReservation will do, in order: each pod's earlier reservation (held before, or
    // placed earlier in this call) is released as its new one is placed.
    TotalsChange change;
    std::map<std::string_view, std::pair<NodeSlot, const ResourceVector*>> held;
    for (const auto& [uid, r] : reservations_) held[uid] = {r.node, &r.request};
    for (size_t i = 0; i < requests.size(); ++i) {
      const ResourceVector& want = requests[i].reservation.request;
      if (absl::Status s = CheckNotNegative(want, "reservation", *resources_); !s.ok()) return s;
      if (auto it = held.find(requests[i].uid); it != held.end()) {
        change.Add(it->second.first, *it->second.second, -1);
      }
      change.Add(slots[i], want, +1);
      held[requests[i].uid] = {slots[i], &want};
    }
    if (absl::Status s = change.Check(nodes_, *resources_, ""); !s.ok()) return s;
  }
  ++generation_;
  for (size_t i = 0; i < requests.size(); ++i) {
    PlaceReservation(requests[i].uid, slots[i], std::move(requests[i].reservation));
  }
  return absl::OkStatus();
}

void ClusterModel::UpdateGangRecord(std::string_view ns, std::string_view name,
                                    const std::function<void(GangRecord&)>& fn) {
  WriteLock lock(this);
  auto it = gang_records_.find(std::make_pair(ns, name));
  if (it == gang_records_.end()) {
    it = gang_records_.emplace(std::make_pair(std::string(ns), std::string(name)), GangRecord{})
             .first;
  }
  fn(it->second);
}

bool ClusterModel::Unreserve(std::string_view uid) {
  WriteLock lock(this);
  if (!reservations_.contains(uid)) return false;
  ++generation_;
  EraseReservation(uid);
  return true;
}

std::vector<std::string> ClusterModel::ExpireReservations(absl::Time now) {
  WriteLock lock(this);
  std::vector<std::string> expired;
  for (const auto& [uid, r] : reservations_) {
    if (r.expires <= now) expired.push_back(uid);
  }
  if (!expired.empty()) ++generation_;
  for (const std::string& uid : expired) EraseReservation(uid);
  return expired;
}

}  // namespace berth::core
