// A killed berth comes back: the real binary in Kubernetes mode against the fake API server is
// killed with SIGKILL, restarted, relists, and answers exactly as before; pods bound while it
// was down are seen and nothing is counted twice. Also when it dies in the middle of things: a
// gang half bound, half reserved, and a reclaim whose victim is still terminating.

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "catch2/catch.hpp"
#include "httplib.h"
#include "tests/testing/builders.h"
#include "tests/testing/fake_apiserver.h"

namespace berth::testing {
namespace {

/// The real berth binary, started with arguments; killed with SIGKILL on destruction.
class BerthProcess {
 public:
  explicit BerthProcess(const std::vector<std::string>& args) {
    int out[2];
    REQUIRE(pipe(out) == 0);
    pid_ = fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      dup2(out[1], STDOUT_FILENO);
      const int devnull = open("/dev/null", O_WRONLY);
      dup2(devnull, STDERR_FILENO);
      close(out[0]);
      std::vector<char*> argv;
      std::string binary = BERTH_BINARY;
      argv.push_back(binary.data());
      std::vector<std::string> copy = args;
      for (std::string& a : copy) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(binary.c_str(), argv.data());
      _exit(127);
    }
    close(out[1]);
    // The first line says where berth listens.
    std::string line;
    char c;
    while (read(out[0], &c, 1) == 1 && c != '\n') line.push_back(c);
    stdout_fd_ = out[0];
    std::smatch m;
    if (std::regex_search(line, m, std::regex("listening on http://127\\.0\\.0\\.1:([0-9]+)"))) {
      port_ = std::stoi(m[1]);
    }
    INFO("berth said: " << line);
    REQUIRE(port_ > 0);
  }
  ~BerthProcess() { Kill(); }

  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    close(stdout_fd_);
  }

  /// GET path; "" on a transport failure.
  std::string Get(const std::string& path, int* status = nullptr) {
    httplib::Client c("127.0.0.1", port_);
    auto r = c.Get(path.c_str());
    if (status) *status = r ? r->status : 0;
    return r ? r->body : "";
  }
  std::string Post(const std::string& path, const std::string& body) {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(10, 0);
    auto r = c.Post(path.c_str(), body, "application/json");
    return r ? r->body : "";
  }
  bool WaitReady() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      Get("/readyz", &status);
      if (status == 200) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  int stdout_fd_ = -1;
};

/// `berth serve` against the fake API server, with a one-second Lease (files named after `tag`).
std::vector<std::string> ServeArgs(const FakeApiServer& api, const std::string& tag) {
  const std::string dir = api.tls().dir;
  const std::string kubeconfig = dir + "/" + tag + "-kubeconfig.yaml";
  const std::string config = dir + "/" + tag + "-berth.json";
  std::ofstream(kubeconfig) << api.Kubeconfig();
  std::ofstream(config) << R"({"kubernetes": {"leaderElection": {"leaseNamespace": "berth-system",
      "leaseDurationSeconds": 1, "renewDeadlineSeconds": 0.6, "retryPeriodSeconds": 0.05}}})";
  return {"serve", "--listen", "127.0.0.1:0", "--kubeconfig", kubeconfig, "--config", config};
}

Json Nodes(BerthProcess& berth) { return Json::parse(berth.Get("/debug/nodes"))["nodes"]; }

std::string UsedCpu(const Json& nodes, const std::string& name) {
  for (const Json& n : nodes) {
    if (n["name"] == name) return n["used"].value("cpu", "0");
  }
  return "missing";
}

TEST_CASE("restart: a killed berth relists and answers exactly as before", "[restart]") {
  FakeApiServer api;
  REQUIRE(api.Create("nodes", "", MakeNode("n1").Cpu("4").Pods(110).Obj()).ok());
  REQUIRE(api.Create("nodes", "", MakeNode("n2").Cpu("8").Pods(110).Obj()).ok());
  REQUIRE(api.Create("pods", "web", MakePod("frontend").Namespace("web").Scheduler("default-scheduler")
                                        .Cpu("1").Node("n1").Phase("Running").Obj()).ok());
  REQUIRE(api.Create("pods", "ml", MakePod("train-0").Namespace("ml").Cpu("2").Obj()).ok());
  REQUIRE(api.Create("pods", "ml", MakePod("train-1").Namespace("ml").Cpu("6").Obj()).ok());

  const std::vector<std::string> args = ServeArgs(api, "restart");

  const Json train0 = api.Get("pods", "ml", "train-0").value();
  const Json train1 = api.Get("pods", "ml", "train-1").value();
  const std::string filter1 = ArgsNames(train1, {"n1", "n2"}).dump();

  Json nodes_before;
  std::string filtered_before;
  {
    BerthProcess berth(args);
    REQUIRE(berth.WaitReady());
    // berth binds train-0 to n2 (once it leads).
    const Json bind = {{"PodName", "train-0"}, {"PodNamespace", "ml"},
                       {"PodUID", train0["metadata"]["uid"]}, {"Node", "n2"}};
    Json result = Json::parse(berth.Post("/bind", bind.dump()));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (result["Error"] != "" && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      result = Json::parse(berth.Post("/bind", bind.dump()));
    }
    REQUIRE(result["Error"] == "");
    REQUIRE(api.WaitFor([](FakeApiServer& s) { return s.bindings().size() == 1; }));
    // Wait for the watch to confirm it, then remember the answers.
    const auto settle = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (UsedCpu(Nodes(berth), "n2") != "2" && std::chrono::steady_clock::now() < settle) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    nodes_before = Nodes(berth);
    filtered_before = berth.Post("/filter", filter1);
    berth.Kill();
  }
  REQUIRE(UsedCpu(nodes_before, "n1") == "1");
  REQUIRE(UsedCpu(nodes_before, "n2") == "2");
  // train-1 (6 CPUs) fits only n2 (8 - 2).
  CHECK(Json::parse(filtered_before)["NodeNames"] == Json::array({"n2"}));

  SECTION("nothing changed while it was down: the same answers") {
    BerthProcess berth(args);
    REQUIRE(berth.WaitReady());
    CHECK(Nodes(berth) == nodes_before);
    CHECK(berth.Post("/filter", filter1) == filtered_before);
  }
  SECTION("pods bound while it was down are counted, the ones it bound are not counted twice") {
    REQUIRE(api.Create("pods", "web", MakePod("api").Namespace("web").Scheduler("default-scheduler")
                                          .Cpu("3").Node("n2").Phase("Running").Obj()).ok());
    REQUIRE(api.Delete("pods", "web", "frontend").ok());
    BerthProcess berth(args);
    REQUIRE(berth.WaitReady());
    const Json nodes = Nodes(berth);
    CHECK(UsedCpu(nodes, "n1") == "0");
    CHECK(UsedCpu(nodes, "n2") == "5");  // train-0 (2, bound by berth before) + api (3)
    // train-1 (6 CPUs) now fits nowhere: n2 has 3 free, n1 only 4 allocatable.
    const Json filtered = Json::parse(berth.Post("/filter", filter1));
    CHECK(filtered["NodeNames"].empty());
    CHECK(filtered["FailedNodes"].size() + filtered["FailedAndUnresolvableNodes"].size() == 2);
  }
}

/// /bind until berth leads (the Lease of the berth killed before runs out first); the last Error.
std::string BindRetrying(BerthProcess& berth, const Json& pod, const std::string& node) {
  const Json bind = {{"PodName", pod["metadata"]["name"]}, {"PodNamespace", "ml"},
                     {"PodUID", pod["metadata"]["uid"]}, {"Node", node}};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (true) {
    const Json result = Json::parse(berth.Post("/bind", bind.dump()), nullptr, false);
    const std::string error = result.is_object() ? result.value("Error", "no answer") : "no answer";
    if (error.empty() || std::chrono::steady_clock::now() > deadline) return error;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

/// The nodes berth's /filter lets the pod go to.
Json FilterFit(BerthProcess& berth, const Json& pod, const std::vector<std::string>& nodes) {
  const Json r = Json::parse(berth.Post("/filter", ArgsNames(pod, nodes).dump()), nullptr, false);
  return r.is_object() && r.contains("NodeNames") ? r["NodeNames"] : Json::array();
}

int64_t UsedCpuSum(const Json& nodes) {
  int64_t sum = 0;
  for (const Json& n : nodes) sum += std::stoll(n["used"].value("cpu", "0"));
  return sum;
}

TEST_CASE("restart: killed with a gang half reserved and a victim terminating, berth neither "
          "loses nor doubles room", "[restart]") {
  // No kubelet: the evicted pod terminates until the test ends it.
  FakeApiServerOptions options;
  options.kubelet = false;
  FakeApiServer api(options);
  REQUIRE(api.start_status().ok());
  REQUIRE(api.Create("pools", "", MakePool("team-a").Label("pool", "a").Obj()).ok());
  REQUIRE(api.Create("pools", "", MakePool("team-b").Label("pool", "b").Obj()).ok());
  const std::vector<std::string> all = {"a1", "a2", "b1", "b2"};
  for (const std::string& n : all) {
    REQUIRE(api.Create("nodes", "", MakeNode(n).Cpu("8").Memory("32Gi").Pods(110)
                                         .Label("pool", n.substr(0, 1)).Obj()).ok());
  }
  // team-b's nodes are lent to team-a borrowers; team-b's b-job will reclaim one.
  for (const char* n : {"b1", "b2"}) {
    REQUIRE(api.Create("pods", "ml", MakePod(std::string("borrow-") + n).Namespace("ml")
                                         .Scheduler("berth-scheduler").Pool("team-a").Cpu("6")
                                         .Priority(5000).Node(n).Phase("Running").Obj()).ok());
  }
  REQUIRE(api.Create("pods", "ml", MakePod("b-job").Namespace("ml").Scheduler("berth-scheduler")
                                       .Pool("team-b").Cpu("4").Obj()).ok());
  // A gang of three 4-CPU members in team-a (two nodes of 8).
  REQUIRE(api.Create("podgroups", "ml", MakePodGroup("train").Namespace("ml").MinMember(3).Obj())
              .ok());
  for (int i = 0; i < 3; ++i) {
    REQUIRE(api.Create("pods", "ml", MakePod("g-" + std::to_string(i)).Namespace("ml")
                                         .Scheduler("berth-scheduler").Pool("team-a")
                                         .Gang("train").Cpu("4").Obj()).ok());
  }
  auto pod = [&](const std::string& name) { return api.Get("pods", "ml", name).value(); };

  const std::vector<std::string> args = ServeArgs(api, "restart-gang");
  {
    BerthProcess berth(args);
    REQUIRE(berth.WaitReady());
    // The gang is admitted at g-0's filter (room reserved for all three); g-0 binds.
    const Json fit = FilterFit(berth, pod("g-0"), all);
    REQUIRE(fit.size() == 1);
    REQUIRE(BindRetrying(berth, pod("g-0"), fit[0]) == "");
    // b-job's filter starts a reclaim: one borrower is evicted (once berth leads).
    REQUIRE(api.WaitFor([&](FakeApiServer& s) {
      FilterFit(berth, pod("b-job"), all);
      return s.evictions().size() == 1;
    }));
    REQUIRE(api.evictions()[0]["metadata"]["name"] == "borrow-b1");
    // Killed now: g-1 and g-2 have room reserved and are not bound; borrow-b1 is terminating.
    berth.Kill();
  }
  REQUIRE(pod("borrow-b1")["metadata"].contains("deletionTimestamp"));
  const std::string g0_node = pod("g-0")["spec"]["nodeName"];

  BerthProcess berth(args);
  REQUIRE(berth.WaitReady());
  // Every pod counted once: the terminating victim still holds b1, g-0 its node.
  const Json nodes = Nodes(berth);
  CHECK(UsedCpu(nodes, "b1") == "6");
  CHECK(UsedCpu(nodes, "b2") == "6");
  CHECK(UsedCpu(nodes, g0_node) == "4");
  CHECK(UsedCpuSum(nodes) == 16);
  // The rest of the gang is placed again, in room that exists.
  for (const char* name : {"g-1", "g-2"}) {
    const Json fit = FilterFit(berth, pod(name), all);
    REQUIRE(fit.size() == 1);
    CHECK(BindRetrying(berth, pod(name), fit[0]) == "");
  }
  // Once the watch has the binds: the whole gang, each node within its size.
  Json placed;
  auto gang_cpu = [&] {
    placed = Nodes(berth);
    return std::stoll(UsedCpu(placed, "a1")) + std::stoll(UsedCpu(placed, "a2"));
  };
  const auto settle = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (gang_cpu() != 12 && std::chrono::steady_clock::now() < settle) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  CHECK(gang_cpu() == 12);
  CHECK(std::stoll(UsedCpu(placed, "a1")) <= 8);
  CHECK(std::stoll(UsedCpu(placed, "a2")) <= 8);
  // b-job waits for the victim already leaving: no second victim.
  CHECK(FilterFit(berth, pod("b-job"), all).empty());
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  FilterFit(berth, pod("b-job"), all);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(api.evictions().size() == 1);
  CHECK_FALSE(pod("borrow-b2")["metadata"].contains("deletionTimestamp"));
  // The victim's containers stop: b1 is b-job's.
  REQUIRE(api.Delete("pods", "ml", "borrow-b1").ok());
  Json fit;
  REQUIRE(api.WaitFor([&](FakeApiServer&) {
    fit = FilterFit(berth, pod("b-job"), all);
    return !fit.empty();
  }));
  CHECK(fit == Json::array({"b1"}));
  CHECK(BindRetrying(berth, pod("b-job"), "b1") == "");
}

}  // namespace
}  // namespace berth::testing
