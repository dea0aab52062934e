#pragma once

// The Service the transport, HTTPS and lock benchmarks serve: berth's default policies in
// Kubernetes mode over a generated cluster, with a binder that accepts every bind.

#include <memory>
#include <string_view>

#include "bench/cluster_profiles.h"
#include "core/clock.h"
#include "core/cluster_model.h"
#include "extender/service.h"

namespace berth::bench {

/// Accepts every bind at once (the API server's answer is not what these benches measure).
class AcceptingBinder final : public extender::BinderInterface {
 public:
  absl::Status Bind(const core::Pod&, std::string_view) override { return absl::OkStatus(); }
};

struct BenchService {
  core::RealClock clock;
  core::ClusterModel model{&clock};
  AcceptingBinder binder;
  std::unique_ptr<extender::Service> service;
};

/// Profile `p` loaded into a model and a ready Service over it (Kubernetes mode: binds wait for
/// the watch, as the ledger holds them). Exits with status 2 if the policies do not build.
std::unique_ptr<BenchService> MakeBenchService(const ClusterProfile& p);

}  // namespace berth::bench
