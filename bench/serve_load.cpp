// Load test of nabla-serve on loopback (issue 23 item 5): starts the server (a child process)
// with dynamic batching on (--max-batch 64) and off (--max-batch 1), and for 1, 8 and 64
// concurrent clients sends a bounded number of /v1/predict requests (fortune texts from the
// langid test split, mixed lengths), each client on its own keep-alive connection. Reports
// throughput, p50/p99 latency, errors (non-200) and lost requests (no answer), and the server's
// RSS at start, after a warm-up and at the end (memory flat over the run), then one RESULT
// line.
// Timing only means something on a quiet machine (see bench/run.py); run here for correctness.
//
//   bench_serve_load --server build/release/examples/serve/nabla-serve
//                    --checkpoint runs/transformer_langid/checkpoint.safetensors
#include <fmt/format.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "nabla/data/langid.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string server, checkpoint;
  int64_t requests = 2000;  // per (mode, concurrency)
  double max_seconds = 60;  // per (mode, concurrency): stop sending after this
  int threads = 0;          // the server's --threads
};

double rss_mb(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/status", pid));
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return 0;
}

// A nabla-serve child on a free port; SIGTERM and wait on destruction.
class ServerProcess {
 public:
  ServerProcess(const Options& o, const std::vector<std::string>& flags) {
    port_file_ = fmt::format("/tmp/nabla_serve_load_{}.port", getpid());
    std::remove(port_file_.c_str());
    std::vector<std::string> args = {o.server,
                                     "--checkpoint",
                                     o.checkpoint,
                                     "--port",
                                     "0",
                                     "--port-file",
                                     port_file_,
                                     "--threads",
                                     std::to_string(o.threads)};
    args.insert(args.end(), flags.begin(), flags.end());
    std::fflush(stdout);  // the child must not inherit (and print again) unflushed output
    pid_ = fork();
    if (pid_ == 0) {
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      freopen("/dev/null", "w", stdout);
      execv(argv[0], argv.data());
      _exit(127);
    }
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    while (!std::ifstream(port_file_).good()) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_ || Clock::now() > deadline)
        throw std::runtime_error("serve_load: nabla-serve did not start: " + o.server);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::ifstream(port_file_) >> port_;
  }
  ~ServerProcess() {
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    std::remove(port_file_.c_str());
  }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }

 private:
  std::string port_file_;
  pid_t pid_ = -1;
  int port_ = 0;
};

struct RunResult {
  double rps = 0, p50_ms = 0, p99_ms = 0;
  int64_t ok = 0, errors = 0, lost = 0;
};

RunResult run_clients(int port, int clients, const Options& o,
                      const std::vector<std::string>& bodies) {
  std::atomic<int64_t> next{0}, errors{0}, lost{0};
  std::vector<std::vector<double>> latencies(static_cast<size_t>(clients));
  const auto t0 = Clock::now();
  const auto stop_at = t0 + std::chrono::duration<double>(o.max_seconds);
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      httplib::Client cli("127.0.0.1", port);
      cli.set_keep_alive(true);
      cli.set_tcp_nodelay(true);  // else Nagle + delayed ACK add ~40-100 ms per request
      cli.set_read_timeout(30, 0);
      for (int64_t i; (i = next++) < o.requests && Clock::now() < stop_at;) {
        const std::string& body = bodies[static_cast<size_t>(i) % bodies.size()];
        const auto s = Clock::now();
        auto res = cli.Post("/v1/predict", body, "application/json");
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - s).count();
        if (!res) {
          if (lost++ == 0)
            fmt::print(stderr, "serve_load: no answer: {}\n", httplib::to_string(res.error()));
        } else if (res->status != 200) {
          ++errors;
        } else {
          latencies[static_cast<size_t>(c)].push_back(ms);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  std::vector<double> all;
  for (const auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  std::sort(all.begin(), all.end());
  RunResult r;
  r.ok = static_cast<int64_t>(all.size());
  r.errors = errors;
  r.lost = lost;
  r.rps = static_cast<double>(r.ok) / seconds;
  auto pct = [&](double q) {
    return all.empty() ? 0.0
                       : all[std::min(all.size() - 1,
                                      static_cast<size_t>(q * static_cast<double>(all.size())))];
  };
  r.p50_ms = pct(0.50);
  r.p99_ms = pct(0.99);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app("nabla-serve load test on loopback: dynamic batching on and off, 1/8/64 clients");
  app.add_option("--server", o.server, "the nabla-serve binary")->required();
  app.add_option("--checkpoint", o.checkpoint, "a transformer_langid checkpoint")->required();
  app.add_option("--requests", o.requests, "requests per (mode, clients)")->capture_default_str();
  app.add_option("--max-seconds", o.max_seconds, "time cap per (mode, clients)")
      ->capture_default_str();
  app.add_option("--threads", o.threads, "the server's model threads (0: default)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  signal(SIGPIPE, SIG_IGN);

  std::vector<std::string> bodies;
  for (const auto& ex : nabla::data::load_fortune_langid().test) {
    bodies.push_back(nlohmann::json{{"text", ex.text}}.dump());
    if (bodies.size() == 512) break;
  }
  std::string result = "RESULT bench=serve_load";
  int64_t total_errors = 0, total_lost = 0, total_ok = 0;
  double rss_start = 0, rss_warm = 0, rss_end = 0;
  std::map<std::string, double> rps;
  for (const bool batching : {true, false}) {
    const std::string mode = batching ? "batched" : "single";
    ServerProcess server(
        o, batching ? std::vector<std::string>{"--max-batch", "64", "--max-wait-ms", "5"}
                    : std::vector<std::string>{"--max-batch", "1", "--max-wait-ms", "0"});
    const double start = rss_mb(server.pid());
    // A warm-up at the largest concurrency first: the allocator's caches fill for every batch
    // shape, so "memory flat" compares the end with this point, not with an idle server.
    Options warmup = o;
    warmup.requests = std::max<int64_t>(64, o.requests / 4);
    const RunResult w = run_clients(server.port(), 64, warmup, bodies);
    total_errors += w.errors;
    total_lost += w.lost;
    if (batching) {
      rss_start = start;
      rss_warm = rss_mb(server.pid());
    }
    for (const int clients : {1, 8, 64}) {
      const RunResult r = run_clients(server.port(), clients, o, bodies);
      fmt::print(
          "{:8} {:3} clients: {:5} ok, {} errors, {} lost, {:8.1f} req/s, p50 {:7.2f} ms, "
          "p99 {:7.2f} ms, server RSS {:.1f} MiB\n",
          mode, clients, r.ok, r.errors, r.lost, r.rps, r.p50_ms, r.p99_ms, rss_mb(server.pid()));
      result += fmt::format(" {}_c{}_rps={:.1f} {}_c{}_p50_ms={:.2f} {}_c{}_p99_ms={:.2f}", mode,
                            clients, r.rps, mode, clients, r.p50_ms, mode, clients, r.p99_ms);
      rps[fmt::format("{}_{}", mode, clients)] = r.rps;
      total_errors += r.errors;
      total_lost += r.lost;
      total_ok += r.ok;
    }
    if (batching) rss_end = rss_mb(server.pid());
  }
  const double speedup = rps["single_64"] > 0 ? rps["batched_64"] / rps["single_64"] : 0;
  fmt::print(
      "{} speedup_c64={:.2f} ok={} errors={} lost={} rss_start_mb={:.1f} "
      "rss_after_warmup_mb={:.1f} rss_end_mb={:.1f}\n",
      result, speedup, total_ok, total_errors, total_lost, rss_start, rss_warm, rss_end);
  return total_errors == 0 && total_lost == 0 ? 0 : 1;
}
