// A killed berth comes back: the real binary in Kubernetes mode against the fake API server is
// killed with SIGKILL, restarted, relists, and answers exactly as before; pods bound while it
// was down are seen and nothing is counted twice.

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
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

  const std::string dir = api.tls().dir;
  const std::string kubeconfig = dir + "/restart-kubeconfig.yaml";
  const std::string config = dir + "/restart-berth.json";
  std::ofstream(kubeconfig) << api.Kubeconfig();
  std::ofstream(config) << R"({"kubernetes": {"leaderElection": {"leaseNamespace": "berth-system",
      "leaseDurationSeconds": 1, "renewDeadlineSeconds": 0.6, "retryPeriodSeconds": 0.05}}})";
  const std::vector<std::string> args = {"serve", "--listen", "127.0.0.1:0", "--kubeconfig",
                                         kubeconfig, "--config", config};

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

}  // namespace
}  // namespace berth::testing
