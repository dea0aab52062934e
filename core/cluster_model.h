#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/checked_math.h"
#include "core/clock.h"
#include "core/node_directory.h"
#include "core/objects.h"
#include "core/rw_mutex.h"
#include "core/resources.h"
#include "core/slot_array.h"
#include "core/strings.h"

namespace berth::core {

using NodeSlot = uint32_t;
using PodSlot = uint32_t;
inline constexpr NodeSlot kNoNode = UINT32_MAX;

/// The amounts of the well-known resources (ids below kNumWellKnownResources) that every
/// filter and score reads for every candidate, kept with the slot's header so that they are in
/// the node's first two cache lines. The model writes it after every change to the node's
/// allocatable or usage (ClusterModel::Touch); everyone else only reads it.
struct WellKnownAmounts {
  static constexpr size_t kResources = kNumWellKnownResources;
  int64_t free[kResources] = {};         ///< NodeState::FreeOf of each
  int64_t allocatable[kResources] = {};  ///< node.allocatable of each
  /// core::Inverse of each allocatable (0 where it is 0), so that a score divides by it with a
  /// multiplication (QuotientByInverse). Floats, to stay in the two cache lines.
  float inverse_allocatable[kResources] = {};
};

/// One node slot of the model. A slot also exists for a node name that bound pods refer to but
/// that berth has not seen as a Node (yet, or any more): `present` is false and the pods' usage
/// is kept there, so it is counted again as soon as the Node (re)appears, whatever the order in
/// which objects arrive.
///
/// Laid out for the filter and score loops, which read, per candidate, only the fields before
/// `node`: they fill the first two cache lines of the (cache-line aligned) slot. The name,
/// labels, taints, pod list and full vectors after them are read to explain, to plan, and for
/// resources beyond the well-known ones.
struct alignas(64) NodeState {
  NodeSlot slot = kNoNode;    ///< this slot's own index (policies index per-node tables by it)
  bool present = false;
  uint32_t binds_in_flight = 0;  ///< ledger entries on this node (keeps the slot alive)
  uint32_t reservations = 0;     ///< reservations on this node (keeps the slot alive)
  uint64_t generation = 0;    ///< model generation of the last change to this slot
  WellKnownAmounts room;      ///< written by the model only (RefreshRoom)
  Node node;
  ResourceVector requested;   ///< effective requests of the bound, non-terminal pods
  ResourceVector assumed;     ///< in-flight binds (see the ledger)
  ResourceVector reserved;    ///< room held for pods not bound yet (see Reservation)
  std::vector<PodSlot> pods;  ///< the bound, non-terminal pods

  /// allocatable - requested - assumed - reserved, per resource (may be negative when
  /// over-committed, or while room is held for a pod whose victims are still leaving).
  ///
  /// Exact: the model keeps every amount of allocatable, requested, assumed and reserved
  /// between 0 and INT64_MAX, and requested + assumed + reserved at most INT64_MAX (it refuses
  /// any change that would break this), so the difference always fits an int64.
  ResourceVector Free() const;
  /// Free() of one resource, without building the vector: from `room` for a well-known one.
  int64_t FreeOf(ResourceId id) const {
    return id < WellKnownAmounts::kResources ? room.free[id] : FreeFromVectors(id);
  }
  /// node.allocatable of one resource: from `room` for a well-known one.
  int64_t AllocatableOf(ResourceId id) const {
    return id < WellKnownAmounts::kResources ? room.allocatable[id] : node.allocatable.Get(id);
  }
  /// requested + assumed + reserved of one resource (exact, see Free).
  int64_t InUseOf(ResourceId id) const { return AllocatableOf(id) - FreeOf(id); }
  /// Free() of one resource, from the vectors themselves. Saturating: exact whenever the
  /// model's totals are (see Free), and safe in the middle of a change, when RefreshRoom may
  /// see a pod counted both as bound and as in flight for a moment.
  int64_t FreeFromVectors(ResourceId id) const {
    return SaturatingSub(
        SaturatingSub(SaturatingSub(node.allocatable.Get(id), requested.Get(id)), assumed.Get(id)),
        reserved.Get(id));
  }
  /// Copies the well-known amounts into `room`, after a change to allocatable or usage.
  void RefreshRoom();
};
// The filter and score loops' fields end within the slot's first two cache lines.
static_assert(offsetof(NodeState, node) <= 128);

/// One pod of the model.
struct PodState {
  Pod pod;
  NodeSlot counted_on = kNoNode;  ///< node whose `requested` includes this pod
  uint32_t index_on_node = 0;     ///< position in that node's `pods`
  bool live = false;              ///< false for a free slot
};

/// State of an in-flight bind. kAssumed: berth accepted the bind and is creating the Binding;
/// kBound: the Binding was created, the pod watch has not confirmed it yet.
enum class BindState : uint8_t { kAssumed, kBound };

/// One entry of the bind ledger: the pod's request is held on `node` until the pod watch
/// confirms the placement, the bind fails, or the entry expires.
struct LedgerEntry {
  NodeSlot node = kNoNode;
  ResourceVector request;
  BindState state = BindState::kAssumed;
  absl::Time since;  ///< when the entry entered its current state
};

/// Room held on one node for one pod that is not bound yet, so that no other pod takes it: the
/// room a reclaim freed for the pod it evicted for (SPEC 6.1), a gang member's planned place
/// (SPEC 6.2). Every other pod sees the node's free room reduced by it; the pod it is held for
/// sees it as its own. It ends when the pod binds (anywhere), is deleted or bound by someone
/// else, is released, or expires.
struct Reservation {
  NodeSlot node = kNoNode;
  ResourceVector request;
  absl::Time expires;
  /// Why the room is held, for /debug and filter reasons ("reclaim in pool gpu").
  std::string purpose;
  /// Pods evicted to make the room ("ns/name"), for reasons while they leave.
  std::vector<std::string> evicted;
  /// The gang ("namespace/name") whose planned place this is; empty for a reclaim hold.
  std::string gang;
};

/// One reservation of a batch made all at once (ClusterModel::ReserveAll).
struct ReservationRequest {
  std::string uid;
  std::string node;
  Reservation reservation;
};

/// The gang a pod belongs to (SPEC 4): its label `scheduling.x-k8s.io/pod-group`, else
/// Volcano's annotation `scheduling.k8s.io/group-name`; empty when it belongs to none. The gang
/// lives in the pod's namespace.
std::string_view GangNameOf(const Pod& pod);

/// What berth remembers of a gang between decisions. Kept in memory only: after a restart the
/// reservations are planned again and the timers start over (docs/decisions.md).
struct GangRecord {
  /// When room for the gang's minimum was last reserved (its admission).
  absl::Time admitted = absl::InfinitePast();
  /// When the reservations of that admission run out; bound members past it with the gang
  /// still below minMember make the gang incomplete.
  absl::Time deadline = absl::InfiniteFuture();
  /// The last time berth grew or shrank the gang beyond its minimum (elastic members placed
  /// or evicted); the freezing window runs from here.
  absl::Time resized = absl::InfinitePast();
  /// How often its reservations ran out before it completed.
  int timeouts = 0;
  /// The gang was found incomplete past its deadline (reported once per admission).
  bool incomplete = false;
};

/// What bounds the gang tombstones: the model's memory of gang members that finished
/// successfully and left it (PodDelete::succeeded). A tombstone is (namespace, gang, pod uid) and
/// counts as a succeeded member (ClusterState::SucceededGangTombstones) until
/// - the gang's PodGroup is deleted (all of the gang's tombstones go at once), or
/// - the gang has had neither a live member nor a PodGroup for `orphan_grace` (checked at most
///   every `orphan_grace / 10` when events are applied), or
/// - the model holds `limit` tombstones and a new one arrives: the tombstones of the gang without
///   live members whose newest tombstone is oldest are dropped to make room; when every gang with
///   tombstones still has live members, the new tombstone is not kept. Either way
///   gang_tombstones_dropped() counts what was lost.
/// A pod berth saw finish successfully after a known start (status.startTime): what the ETA
/// forecast learns run times from when a pod says nothing of its own (a queue's median).
struct FinishedRun {
  Pod pod;           ///< as it was last known (its labels and annotations name its queue)
  absl::Duration ran;  ///< from status.startTime to when the model learned it succeeded
  absl::Time at;     ///< when the model learned it (the model's clock)
};

/// How many finished runs the model keeps (the newest). A few hundred bytes each.
inline constexpr size_t kFinishedRunLimit = 4096;

struct GangTombstoneLimits {
  size_t limit = 100'000;
  absl::Duration orphan_grace = absl::Minutes(10);
};

// Model events: exactly what the Kubernetes watch (or POST /v1/events) delivers. An upsert
// replaces the whole object of that identity; deleting an object the model lacks changes
// nothing (watches replay deletes).
//
// An upsert decoded from input may use provisional resource ids (ResourceNameScope): its
// `new_resources` names them, and the model adds those names to its table only when it
// commits the object (see ClusterModel::Apply).
struct NodeUpsert {
  Node node;
  std::vector<std::string> new_resources;
};
struct NodeDelete { std::string name; };
struct PodUpsert {
  Pod pod;
  std::vector<std::string> new_resources;
};
struct PodDelete {
  std::string uid;
  std::string ns;
  std::string name;
  /// The pod left because it finished successfully, not because it was deleted (the pod watch
  /// leaves finished pods out). A gang member then leaves a tombstone that keeps counting as a
  /// succeeded member of its gang (see GangTombstoneLimits).
  bool succeeded = false;
};
struct PoolUpsert { Pool pool; };
struct PoolDelete { std::string name; };
struct QueueUpsert { Queue queue; };
struct QueueDelete { std::string name; };
struct PodGroupUpsert {
  PodGroup podgroup;
  std::vector<std::string> new_resources;
};
struct PodGroupDelete { std::string ns; std::string name; };
struct PriorityClassUpsert { PriorityClass priority_class; };
struct PriorityClassDelete { std::string name; };
using ModelEvent =
    std::variant<NodeUpsert, NodeDelete, PodUpsert, PodDelete, PoolUpsert, PoolDelete,
                 QueueUpsert, QueueDelete, PodGroupUpsert, PodGroupDelete, PriorityClassUpsert,
                 PriorityClassDelete>;

/// The delete event of the object an upsert carries (NodeUpsert -> NodeDelete{name}, PodUpsert
/// -> PodDelete{uid, ns, name}, ...); a delete event is returned as it is. For code that must
/// forget an object it only knows by its last state (a relist that no longer shows it).
ModelEvent DeleteEventFor(const ModelEvent& upsert);

/// Gives the provisional resource ids of an upsert (its `new_resources`) their ids in `names`,
/// interning them, and clears `new_resources`; other events are left as they are. All or
/// nothing (see ResolveProvisionalIds). ClusterModel::Apply does this itself when it commits an
/// object; this is for trusted input read before or without a model (the simulator, tests).
absl::Status ResolveEventResources(ResourceNames& names, ModelEvent& event);

/// Orders (namespace, name) keys and looks them up by string views without building strings.
struct NsNameLess {
  using is_transparent = void;
  template <class A, class B>
  bool operator()(const A& a, const B& b) const {
    return std::pair<std::string_view, std::string_view>(a.first, a.second) <
           std::pair<std::string_view, std::string_view>(b.first, b.second);
  }
};

/// Everything the model knows, read-only. Obtained through ClusterModel::Read(), which holds the
/// model's reader lock for as long as the view lives, so every read in one verb sees one
/// consistent state.
class ClusterState {
 public:
  ClusterState() = default;
  ClusterState(const ClusterState&) = delete;
  ClusterState& operator=(const ClusterState&) = delete;

  uint64_t generation() const { return generation_; }
  /// A number no other ClusterState of this process has had. With generation() it names one
  /// state of one model: a fork starts at its parent's generation, and a model made where a
  /// destroyed one was has the same address.
  uint64_t instance() const { return instance_; }
  const ResourceNames& resources() const { return *resources_; }

  const NodeState* FindNode(std::string_view name) const;
  const PodState* FindPod(std::string_view uid) const;
  const PodState* FindPodByName(std::string_view ns, std::string_view name) const;
  const NodeState& node(NodeSlot slot) const { return nodes_[slot]; }
  const PodState& pod(PodSlot slot) const { return pods_[slot]; }
  /// \return the slot of a node that is present, or kNoNode.
  NodeSlot FindNodeSlot(std::string_view name) const;
  /// out[i]: the node named names[i] if it is present, else null, for every i (`out` has
  /// names.size() elements). For a verb's candidates: the lookups overlap their cache misses
  /// (NodeDirectory::FindMany), which one FindNode after another cannot.
  void FindNodes(std::span<const std::string_view> names, const NodeState** out) const;

  /// Present nodes, in slot order.
  void ForEachNode(const std::function<void(NodeSlot, const NodeState&)>& fn) const;
  /// Live pods, in slot order.
  void ForEachPod(const std::function<void(PodSlot, const PodState&)>& fn) const;
  size_t node_count() const { return present_nodes_; }
  /// Model generation of the last change to the set of present nodes or to a node's labels
  /// (not to usage or status): what decides which pool a node belongs to.
  uint64_t node_labels_generation() const { return node_labels_generation_; }
  size_t pod_count() const { return live_pods_; }

  /// The in-flight bind of a pod, if any.
  const LedgerEntry* FindBind(std::string_view uid) const;
  size_t binds_in_flight() const { return ledger_.size(); }

  /// The room held for a pod, if any.
  const Reservation* FindReservation(std::string_view uid) const;
  size_t reservation_count() const { return reservations_.size(); }
  /// Reservations by pod uid, in uid order.
  void ForEachReservation(
      const std::function<void(std::string_view uid, const Reservation&)>& fn) const;
  /// Live pods of the gang `name` in namespace `ns` (see GangNameOf), in slot order.
  void ForEachGangMember(std::string_view ns, std::string_view name,
                         const std::function<void(const PodState&)>& fn) const;
  /// Every gang that has at least one live pod, in (namespace, name) order.
  void ForEachGang(const std::function<void(std::string_view ns, std::string_view name)>& fn) const;
  /// berth's record of a gang, if it has one.
  const GangRecord* FindGangRecord(std::string_view ns, std::string_view name) const;
  /// Members of gang `ns/name` that finished successfully and left the model (their tombstones),
  /// leaving out any uid that is a live pod again (counted as such).
  int SucceededGangTombstones(std::string_view ns, std::string_view name) const;
  /// Tombstones held, over all gangs, and how many were dropped at the limit.
  size_t gang_tombstone_count() const { return tombstone_count_; }
  uint64_t gang_tombstones_dropped() const { return tombstones_dropped_; }

  /// The newest pods that finished successfully with a known start (at most
  /// kFinishedRunLimit), oldest first. A pod counts once: when its phase turns Succeeded, or
  /// when it leaves with PodDelete::succeeded while still running in the model.
  void ForEachFinishedRun(const std::function<void(const FinishedRun&)>& fn) const;
  /// Finished runs recorded since the model began (including those no longer kept).
  uint64_t finished_runs_total() const { return finished_runs_total_; }

  /// The room on `node` held for this pod (nullptr if none there). Cheap when nothing is held.
  const ResourceVector* OwnReservation(std::string_view uid, const NodeState& node) const {
    if (reservations_.empty() || node.reservations == 0) return nullptr;
    const Reservation* r = FindReservation(uid);
    return r != nullptr && r->node == node.slot ? &r->request : nullptr;
  }

  // Pools, queues, PodGroups and PriorityClasses, as the API server (or POST /v1/events) last
  // described them. The `default` pool and queue always exist for policies, but the model
  // holds only real objects: a policy supplies the defaults where no object of that name exists.
  // ForEach* visit in name order ((namespace, name) order for PodGroups), so debug output is
  // stable. The *_generation() accessors give the model generation of the last change to any
  // object of the kind (0: none yet), so a policy can cache what it derives from them (which
  // pool each node belongs to) and recompute only when they change.
  const Pool* FindPool(std::string_view name) const;
  void ForEachPool(const std::function<void(const Pool&)>& fn) const;
  size_t pool_count() const { return pools_.size(); }
  uint64_t pools_generation() const { return pools_generation_; }

  const Queue* FindQueue(std::string_view name) const;
  void ForEachQueue(const std::function<void(const Queue&)>& fn) const;
  size_t queue_count() const { return queues_.size(); }
  uint64_t queues_generation() const { return queues_generation_; }

  const PodGroup* FindPodGroup(std::string_view ns, std::string_view name) const;
  void ForEachPodGroup(const std::function<void(const PodGroup&)>& fn) const;
  size_t podgroup_count() const { return podgroups_.size(); }
  uint64_t podgroups_generation() const { return podgroups_generation_; }

  const PriorityClass* FindPriorityClass(std::string_view name) const;
  void ForEachPriorityClass(const std::function<void(const PriorityClass&)>& fn) const;
  size_t priorityclass_count() const { return priority_classes_.size(); }
  uint64_t priorityclasses_generation() const { return priority_classes_generation_; }

 protected:
  static uint64_t NextInstance();
  std::shared_ptr<ResourceNames> resources_ = std::make_shared<ResourceNames>();
  const uint64_t instance_ = NextInstance();
  uint64_t generation_ = 0;
  // The hash indexes: the writer grows them off the exclusive lock (ClusterModel::WriteLock).
  // Every candidate of a verb is looked up here (core/node_directory.h).
  using NodeIndex = NodeDirectory;
  using PodUidIndex = absl::flat_hash_map<std::string_view, PodSlot, StringHash, StringEq>;
  using PodNameIndex =
      absl::flat_hash_map<std::pair<std::string_view, std::string_view>, PodSlot, StringPairHash>;
  using Ledger = absl::flat_hash_map<std::string, LedgerEntry, StringHash, StringEq>;

  // Slots never move, so views into them stay valid. A chunk is 256 nodes (about 100 KB) or
  // 512 pods (about 150 KB).
  using NodeSlots = SlotArray<NodeState, 256>;
  using PodSlots = SlotArray<PodState, 512>;

  NodeSlots nodes_;
  NodeIndex node_by_name_;
  size_t present_nodes_ = 0;
  PodSlots pods_;
  PodUidIndex pod_by_uid_;  // views into pods_[].pod.uid
  PodNameIndex pod_by_name_;
  size_t live_pods_ = 0;
  Ledger ledger_;  // by pod uid
  std::map<std::string, Reservation, std::less<>> reservations_;  // by pod uid; few
  // Gang members by (namespace, gang name), and berth's records of gangs.
  std::map<std::pair<std::string, std::string>, std::vector<PodSlot>, NsNameLess> gang_members_;
  std::map<std::pair<std::string, std::string>, GangRecord, NsNameLess> gang_records_;
  // Gang members that finished successfully and left (see GangTombstoneLimits).
  struct GangTombstones {
    std::vector<std::string> uids;
    absl::Time newest = absl::InfinitePast();  ///< when the last one was added
    /// Since when the gang has had neither a live member nor a PodGroup; InfiniteFuture: it has.
    absl::Time orphaned = absl::InfiniteFuture();
  };
  std::map<std::pair<std::string, std::string>, GangTombstones, NsNameLess> tombstones_;
  size_t tombstone_count_ = 0;
  uint64_t tombstones_dropped_ = 0;
  std::deque<FinishedRun> finished_runs_;  // newest at the back
  uint64_t finished_runs_total_ = 0;
  GangTombstoneLimits tombstone_limits_;
  absl::Time next_tombstone_sweep_ = absl::InfinitePast();
  // Rare kinds (tens of objects): ordered maps, read in name order.
  std::map<std::string, Pool, std::less<>> pools_;
  std::map<std::string, Queue, std::less<>> queues_;
  std::map<std::pair<std::string, std::string>, PodGroup, NsNameLess> podgroups_;
  std::map<std::string, PriorityClass, std::less<>> priority_classes_;
  uint64_t node_labels_generation_ = 0;
  uint64_t pools_generation_ = 0;
  uint64_t queues_generation_ = 0;
  uint64_t podgroups_generation_ = 0;
  uint64_t priority_classes_generation_ = 0;
};

/// Counts of what one Apply() changed.
struct ApplyStats {
  /// One message per event refused (the model is as if it had not been given), naming the
  /// object and the field: a resource name that does not fit in the full name table, a
  /// negative amount, or a pod whose request would take a node's total past what an int64
  /// holds.
  std::vector<std::string> refused;
  int nodes_upserted = 0;
  int nodes_deleted = 0;
  int pods_upserted = 0;
  int pods_deleted = 0;
  int binds_confirmed = 0;
  int pools_upserted = 0;
  int pools_deleted = 0;
  int queues_upserted = 0;
  int queues_deleted = 0;
  int podgroups_upserted = 0;
  int podgroups_deleted = 0;
  int priorityclasses_upserted = 0;
  int priorityclasses_deleted = 0;
};

/// The cluster model: the single writer of ClusterState. Every mutation takes the model's lock
/// exclusively; every verb reads through a ReadView that holds it shared. Applying one event
/// touches only the node and pod it names (no rebuild), so events cost microseconds.
class ClusterModel : private ClusterState {
 public:
  /// \param clock used to stamp ledger entries; must outlive the model.
  explicit ClusterModel(const Clock* clock);

  /// A consistent, read-only view of the model; holds the reader lock while it lives.
  class ReadView {
   public:
    explicit ReadView(const ClusterModel* model) ABSL_NO_THREAD_SAFETY_ANALYSIS;
    ~ReadView() ABSL_NO_THREAD_SAFETY_ANALYSIS;
    ReadView(const ReadView&) = delete;
    ReadView& operator=(const ReadView&) = delete;
    const ClusterState& operator*() const { return *model_; }
    const ClusterState* operator->() const { return model_; }

   private:
    const ClusterModel* model_;
  };

  ReadView Read() const { return ReadView(this); }

  /// The resource-name table. Thread-safe on its own: decoders intern names without the lock.
  ResourceNames& resources() { return *resources_; }
  const ResourceNames& resources() const { return *resources_; }

  /// A copy of the whole model: every object, the bind ledger, the reservations, the gang
  /// records and tombstones, the generations, and a resource-name table of its own with the
  /// same ids, on `clock`. For what-ifs and forecasts that must see exactly this state and change
  /// nothing in it. Holds the reader lock while it copies (O(nodes + pods)).
  std::unique_ptr<ClusterModel> Fork(const Clock* clock) const;

  /// Replaces the bounds of gang tombstones (before events are applied).
  void SetGangTombstoneLimits(GangTombstoneLimits limits);

  /// Applies events in order, atomically with respect to readers.
  ///
  /// Each upsert is checked before it changes anything, and refused (ApplyStats::refused; the
  /// model and the generation stay as they were, the other events still apply) when:
  /// - it names resources new to the table and they do not all fit (the table is full:
  ///   ResourceNames::refusals() counts it); only here are names added to the table;
  /// - an amount is negative;
  /// - it is a pod that would take its node's requested + assumed + reserved of a resource
  ///   past INT64_MAX, counting exactly what the upsert also releases (its old version, a bind
  ///   it confirms, the room held for it).
  /// So every total is exact, and removing what was added restores it exactly.
  ApplyStats Apply(std::span<const ModelEvent> events);
  ApplyStats Apply(const ModelEvent& event) { return Apply(std::span<const ModelEvent>(&event, 1)); }

  /// Checks a placement against the current state, under the write lock.
  using PlacementCheck =
      std::function<absl::Status(const ClusterState&, const PodState&, const NodeState&)>;

  /// Records that pod `uid` is being bound to `node`: its request is held on the node at once,
  /// so the next filter sees the node's capacity reduced before any confirmation arrives.
  /// `check` runs first, under the same lock, so two concurrent binds cannot both take the last
  /// room. Idempotent for a pod already bound or being bound to the same node.
  /// \return true when the room is now held; false when the pod is already bound to that node,
  /// or its bind there has returned and awaits the watch (nothing changed, the bind succeeded);
  /// NotFound for an unknown pod or node; FailedPrecondition when the pod is bound elsewhere or
  /// another bind of it has not returned yet (kube-scheduler retries); `check`'s own error when
  /// it refuses; OutOfRange when the node's total would not fit an int64.
  absl::StatusOr<bool> Assume(std::string_view uid, std::string_view node,
                              const PlacementCheck& check);
  /// The Binding was created; the entry now waits for the pod watch to confirm it.
  void BindSucceeded(std::string_view uid);
  /// Drops an in-flight bind (the Binding failed): the held room is released.
  void Forget(std::string_view uid);
  /// Marks pod `uid` as bound to its ledger node and running, as the API server and kubelet
  /// would; used in standalone mode, where berth itself is the source of truth.
  absl::Status ConfirmBindLocally(std::string_view uid);
  /// Drops ledger entries that have waited in kBound longer than `ttl` for their confirmation.
  /// Entries still in kAssumed never expire: their bind call has not returned yet.
  /// \return how many were dropped.
  int ExpireBinds(absl::Duration ttl);

  /// Holds `request` on `node` for pod `uid` until `expires` (replacing any earlier
  /// reservation of that pod). `check` runs first under the same lock, against the state the
  /// reservation will be made in.\return NotFound for an unknown pod or node,
  /// FailedPrecondition for a pod that is bound or being bound, or `check`'s error.
  using ReservationCheck = std::function<absl::Status(const ClusterState&)>;
  absl::Status Reserve(std::string_view uid, std::string_view node, Reservation reservation,
                       const ReservationCheck& check = nullptr);
  /// Holds room for several pods at once, all or nothing (a gang's members): every pod must
  /// be known and unbound and every node known, and `check` must accept, or nothing changes.
  absl::Status ReserveAll(std::vector<ReservationRequest> requests,
                          const ReservationCheck& check = nullptr);
  /// Changes berth's record of a gang (creating it when missing).
  void UpdateGangRecord(std::string_view ns, std::string_view name,
                        const std::function<void(GangRecord&)>& fn);
  /// Drops the reservation of a pod, if any.\return whether there was one.
  bool Unreserve(std::string_view uid);
  /// Drops reservations whose time has passed.\return the pod uids whose reservation expired.
  std::vector<std::string> ExpireReservations(absl::Time now);

  /// How long each write (every call above that changes the model) held the model's lock
  /// exclusively, stalling every verb and watch event meanwhile (GET /metrics).
  const HoldTimes& write_lock_holds() const { return mu_.write_holds(); }
  HoldTimes& write_lock_holds() { return mu_.write_holds(); }

 private:
  /// At most how much one write adds to the model's tables.
  struct Adds {
    size_t nodes = 0;       ///< entries to node_by_name_
    size_t pods = 0;        ///< entries to pod_by_uid_ and to pod_by_name_
    size_t binds = 0;       ///< entries to ledger_
    size_t node_slots = 0;  ///< slots taken in nodes_ (by nodes not known yet)
    size_t pod_slots = 0;   ///< slots taken in pods_ (by pods not known yet)
  };
  /// What a write prepares off the lock: copies of hash indexes grown for it, and room in the
  /// slot arrays. Under the exclusive lock the copies are swapped with the live indexes and the
  /// room is adopted; this then holds the indexes and free lists replaced, freed after the lock
  /// is released.
  struct Prepared {
    std::optional<NodeIndex> node_by_name;
    std::optional<PodUidIndex> pod_by_uid;
    std::optional<PodNameIndex> pod_by_name;
    std::optional<Ledger> ledger;
    NodeSlots::Growth node_slots;
    PodSlots::Growth pod_slots;
  };

  /// One write to the model, for the scope of the object. Writers take turns (writers_mu_), and
  /// only writers change the model, so a writer in its turn may read the model without mu_ (as
  /// readers do, beside them) and prepare there what costs more than the change itself:
  /// - an absl hash index rehashes every entry when an insert finds it full (of entries or of
  ///   tombstones): an index that might not take the write's entries is copied into a bigger
  ///   table first;
  /// - slots come in chunks allocated ahead, and a free list with room for every slot
  ///   (SlotArray::Grow).
  /// Then mu_ is taken exclusively and what was prepared is put in place by swaps and pointer
  /// moves. Leaving the scope releases mu_, then frees what was replaced, then ends the turn.
  class ABSL_SCOPED_LOCKABLE WriteLock {
   public:
    /// A write that adds nothing.
    explicit WriteLock(ClusterModel* model) ABSL_EXCLUSIVE_LOCK_FUNCTION(model->mu_);
    /// A write that adds at most `adds`.
    WriteLock(ClusterModel* model, const Adds& adds) ABSL_EXCLUSIVE_LOCK_FUNCTION(model->mu_);
    /// A write that applies `events`.
    WriteLock(ClusterModel* model, std::span<const ModelEvent> events)
        ABSL_EXCLUSIVE_LOCK_FUNCTION(model->mu_);
    ~WriteLock() ABSL_UNLOCK_FUNCTION();
    WriteLock(const WriteLock&) = delete;
    WriteLock& operator=(const WriteLock&) = delete;

   private:
    /// In the turn: prepares for `adds`, takes mu_ and puts it in place.
    void Lock(const Adds& adds);

    ClusterModel* model_;
    Prepared prepared_;
  };

  /// In a writer's turn, off mu_: copies, with room to spare, the indexes not sure to take the
  /// entries of `adds` without rehashing, and makes room for the slots of `adds`.
  Prepared Prepare(const Adds& adds);
  /// Puts what was prepared in place: swaps the grown indexes with the live ones, adopts the
  /// slots' room.
  void PutInPlace(Prepared& prepared) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// In a writer's turn: upper bounds of what `events` add (reads the model for the slots: only
  /// pods and nodes it does not know yet take one).
  Adds AddsOf(std::span<const ModelEvent> events) const;

  NodeSlot NodeSlotFor(std::string_view name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybeFreeNodeSlot(NodeSlot slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Checks an upsert and resolves its provisional resource ids (see Apply); nothing changes
  /// when it fails.
  absl::Status PrepareNode(Node& node, std::span<const std::string> new_resources)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status PreparePod(Pod& pod, std::span<const std::string> new_resources)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status PreparePodGroup(PodGroup& group, std::span<const std::string> new_resources)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Checks that the node totals stay within INT64_MAX after UpsertPod(pod) would run.
  absl::Status CheckPodTotals(const Pod& pod) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UpsertNode(Node node, ApplyStats* stats) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DeleteNode(const std::string& name, ApplyStats* stats) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UpsertPod(Pod pod, ApplyStats* stats) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DeletePod(const PodDelete& del, ApplyStats* stats) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemovePodSlot(PodSlot slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Records that `pod` (last known as this, not yet terminal) finished successfully now.
  void RecordFinishedRun(const Pod& pod) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Uncount(PodSlot slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Count(PodSlot slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EraseLedger(std::string_view uid) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EraseReservation(std::string_view uid) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Adds or removes a pod slot in the gang index.
  void IndexGang(PodSlot slot, bool add) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Remembers that pod `uid` of gang `ns/gang` finished successfully (within the limit).
  void AddGangTombstone(std::string_view ns, std::string_view gang, std::string_view uid)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Starts or stops the orphan clock of the gang's tombstones, if it has any.
  void MarkTombstonesOrphaned(std::string_view ns, std::string_view gang)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropGangTombstones(std::string_view ns, std::string_view gang)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Drops the tombstones of gangs orphaned longer than the grace (at most every grace / 10).
  void SweepGangTombstones() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Places a reservation already validated (the lock is held).
  void PlaceReservation(std::string_view uid, NodeSlot slot, Reservation reservation)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Reconciles the ledger entry of a pod with what the pod object now says.
  void ReconcileLedger(PodSlot slot, ApplyStats* stats) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Marks a node slot changed (its generation) and refreshes its room: called after every
  /// change to its allocatable, requested, assumed or reserved.
  void Touch(NodeSlot slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  /// Upserts and deletes of the rare kinds (pools, queues, PodGroups, PriorityClasses).
  void ApplyKind(const ModelEvent& event, ApplyStats* stats) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Clock* clock_;
  // The writers' turns (see WriteLock): every write holds it for its whole length, mu_ only for
  // its commit.
  absl::Mutex writers_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  // Writer-preferring: see rw_mutex.h. Every write takes it with WriteLock, so the analysis
  // checks the ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) helpers above. The state it guards lives in
  // the ClusterState base, which views read under the shared lock (ReadView), so those fields
  // cannot name mu_ in ABSL_GUARDED_BY.
  mutable RwMutex mu_;
  // How many more entries each hash index takes without rehashing, at least: set when a grown
  // copy is swapped in, counted down by every insert. Read and written only by writers, in
  // their turn (under writers_mu_, and under mu_ too when an insert counts it down).
  struct IndexRoom {
    size_t nodes = 0;  ///< node_by_name_
    size_t pods = 0;   ///< pod_by_uid_ and pod_by_name_ (every pod has an entry in each)
    size_t binds = 0;  ///< ledger_
  };
  IndexRoom room_;
};

}  // namespace berth::core
