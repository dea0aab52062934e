#include "bench/bench_service.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "policy/registry.h"

namespace berth::bench {

std::unique_ptr<BenchService> MakeBenchService(const ClusterProfile& p) {
  auto s = std::make_unique<BenchService>();
  LoadModel(p, &s->model);
  auto pipeline = policy::BuildDefaultRegistry().Build(policy::PolicyConfig{}, s->model.resources());
  if (!pipeline.ok()) {
    std::fprintf(stderr, "cannot build the pipeline: %s\n", std::string(pipeline.status().message()).c_str());
    std::exit(2);
  }
  extender::ServiceOptions so;
  so.mode = extender::Mode::kKubernetes;
  s->service = std::make_unique<extender::Service>(so, &s->model, *std::move(pipeline), &s->binder, &s->clock);
  s->service->SetReady(true);
  return s;
}

}  // namespace berth::bench
