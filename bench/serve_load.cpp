// Load test of nabla-serve on loopback (issue 23 item 5): starts the server (a child process)
// with dynamic batching on (--max-batch 64) and off (--max-batch 1), and for 1, 8 and 64
// concurrent clients sends a bounded number of /v1/predict requests (fortune texts from the
// langid test split, mixed lengths), each client on its own keep-alive connection. Reports
// throughput, p50/p99 latency, errors (non-200) and lost requests (no answer), and the server's
// RSS at start, after a warm-up and at the end (memory flat over the run), then one RESULT
// line.
// Where the time goes, in CPU time (meaningful on a shared machine, unlike wall time): per
// request, the load client's own CPU (getrusage: is the client the bottleneck on the shared
// cores?), the server process's, and from the server's /metrics its predict handlers' CPU on the
// HTTP threads, its batch worker's, the batch sizes, the worker's wake-ups and the padding.
// Two model sizes (--model-size): "small", the trained checkpoint (the default langid model, ~1 ms
// a request, where HTTP work bounds throughput), and "large", a randomly initialised langid model
// of d_model 256, 4 layers, ffn 1024 (nabla-serve --random-model), whose forward dominates the
// cost of a request, as the batching target (issue 23: >= 4x at 64 clients) presumes.
// Timing only means something on a quiet machine (see bench/run.py); run here for correctness.
//
//   bench_serve_load --server build/release/examples/serve/nabla-serve
//                    --checkpoint runs/transformer_langid/checkpoint.safetensors
//                    [--model-size small|large|both]
#include <fmt/format.h>
#include <httplib.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
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
  std::string model_size = "both";
};

double self_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto sec = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec);
  };
  return sec(u.ru_utime) + sec(u.ru_stime);
}

// utime + stime of a process (/proc/<pid>/stat fields 14 and 15, in clock ticks).
double process_cpu_seconds(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');  // the command name may hold spaces
  if (close == std::string::npos) return 0;
  std::istringstream fields(stat.substr(close + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; fields >> field && i <= 15; ++i)
    if (i >= 14) ticks += std::stod(field);
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// The server's /metrics as {series (name with labels): value}.
std::map<std::string, double> scrape(int port) {
  std::map<std::string, double> out;
  httplib::Client cli("127.0.0.1", port);
  auto res = cli.Get("/metrics");
  if (!res || res->status != 200) return out;
  std::istringstream lines(res->body);
  for (std::string line; std::getline(lines, line);) {
    const size_t space = line.rfind(' ');
    if (line.empty() || line[0] == '#' || space == std::string::npos) continue;
    out[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return out;
}

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
  double client_cpu_s = 0;  // the load client's CPU over the run
};

RunResult run_clients(int port, int clients, const Options& o,
                      const std::vector<std::string>& bodies) {
  std::atomic<int64_t> next{0}, errors{0}, lost{0};
  std::vector<std::vector<double>> latencies(static_cast<size_t>(clients));
  const double cpu0 = self_cpu_seconds();
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
  r.client_cpu_s = self_cpu_seconds() - cpu0;
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
  app.add_option("--checkpoint", o.checkpoint,
                 "a transformer_langid checkpoint (the small model; needed unless "
                 "--model-size large)");
  app.add_option("--model-size", o.model_size,
                 "small: the checkpoint; large: a random d_model 256 / 4-layer langid model "
                 "(nabla-serve --random-model); both")
      ->check(CLI::IsMember({"small", "large", "both"}))
      ->capture_default_str();
  app.add_option("--requests", o.requests, "requests per (mode, clients)")->capture_default_str();
  app.add_option("--max-seconds", o.max_seconds, "time cap per (mode, clients)")
      ->capture_default_str();
  app.add_option("--threads", o.threads, "the server's model threads (0: default)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  signal(SIGPIPE, SIG_IGN);
  if (o.model_size != "large" && o.checkpoint.empty()) {
    fmt::print(stderr, "serve_load: --checkpoint is needed for --model-size {}\n", o.model_size);
    return 2;
  }

  std::vector<std::string> bodies;
  for (const auto& ex : nabla::data::load_fortune_langid().test) {
    bodies.push_back(nlohmann::json{{"text", ex.text}}.dump());
    if (bodies.size() == 512) break;
  }
  std::string result = "RESULT bench=serve_load";
  int64_t total_errors = 0, total_lost = 0, total_ok = 0;
  double rss_start = 0, rss_warm = 0, rss_end = 0;
  std::map<std::string, double> rps;
  std::vector<std::string> sizes = {"small", "large"};
  if (o.model_size != "both") sizes = {o.model_size};
  for (const std::string& size : sizes) {
    const std::vector<std::string> model_flags =
        size == "small"
            ? std::vector<std::string>{}
            : std::vector<std::string>{
                  "--random-model", "--d-model", "256",       "--layers", "4", "--heads", "8",
                  "--ffn",          "1024",      "--max-len", "128"};
    for (const bool batching : {true, false}) {
      const std::string mode = batching ? "batched" : "single";
      std::vector<std::string> flags =
          batching ? std::vector<std::string>{"--max-batch", "64", "--max-wait-ms", "5"}
                   : std::vector<std::string>{"--max-batch", "1", "--max-wait-ms", "0"};
      flags.insert(flags.end(), model_flags.begin(), model_flags.end());
      ServerProcess server(o, flags);
      const double start = rss_mb(server.pid());
      // A warm-up at the largest concurrency first: the allocator's caches fill for every batch
      // shape, so "memory flat" compares the end with this point, not with an idle server.
      Options warmup = o;
      warmup.requests = std::max<int64_t>(64, o.requests / 4);
      const RunResult w = run_clients(server.port(), 64, warmup, bodies);
      total_errors += w.errors;
      total_lost += w.lost;
      if (batching && size == sizes.front()) {
        rss_start = start;
        rss_warm = rss_mb(server.pid());
      }
      for (const int clients : {1, 8, 64}) {
        const auto m0 = scrape(server.port());
        const double server_cpu0 = process_cpu_seconds(server.pid());
        const RunResult r = run_clients(server.port(), clients, o, bodies);
        const double server_cpu = process_cpu_seconds(server.pid()) - server_cpu0;
        auto m1 = scrape(server.port());
        auto delta = [&](const std::string& k) { return m1[k] - (m0.count(k) ? m0.at(k) : 0); };
        const double n = std::max<double>(1, static_cast<double>(r.ok + r.errors));
        const double batches = delta("nabla_serve_batch_size_count");
        const double real = delta("nabla_serve_model_tokens_total{kind=\"real\"}");
        const double padded = delta("nabla_serve_model_tokens_total{kind=\"padded\"}");
        const std::string tag = fmt::format("{}_{}_c{}", size, mode, clients);
        fmt::print(
            "{:5} {:8} {:3} clients: {:5} ok, {} errors, {} lost, {:8.1f} req/s, p50 {:7.2f} ms, "
            "p99 {:7.2f} ms, server RSS {:.1f} MiB\n",
            size, mode, clients, r.ok, r.errors, r.lost, r.rps, r.p50_ms, r.p99_ms,
            rss_mb(server.pid()));
        // CPU per request (us): client, server process, its predict handlers, its batch worker;
        // batches: mean size, worker wake-ups per batch; real tokens (all windows) per request and
        // tokens padded per real token.
        fmt::print(
            "      cpu us/request: client {:.0f}, server {:.0f} (handlers {:.0f}, batch worker "
            "{:.0f}); mean batch {:.1f}, wake-ups/batch {:.1f}, forwards/batch {:.2f}, "
            "tokens/request {:.0f}, padded/real tokens {:.2f}\n",
            1e6 * r.client_cpu_s / n, 1e6 * server_cpu / n,
            1e6 * delta("nabla_serve_cpu_seconds_total{part=\"http_handlers\"}") / n,
            1e6 * delta("nabla_serve_cpu_seconds_total{part=\"batch_worker\"}") / n,
            batches > 0 ? delta("nabla_serve_batch_size_sum") / batches : 0,
            batches > 0 ? delta("nabla_serve_worker_wakeups_total") / batches : 0,
            batches > 0 ? delta("nabla_serve_model_forwards_total") / batches : 0, real / n,
            real > 0 ? padded / real : 0);
        result += fmt::format(
            " {}_rps={:.1f} {}_p50_ms={:.2f} {}_p99_ms={:.2f} {}_client_cpu_us={:.0f} "
            "{}_server_cpu_us={:.0f}",
            tag, r.rps, tag, r.p50_ms, tag, r.p99_ms, tag, 1e6 * r.client_cpu_s / n, tag,
            1e6 * server_cpu / n);
        rps[tag] = r.rps;
        total_errors += r.errors;
        total_lost += r.lost;
        total_ok += r.ok;
      }
      if (batching && size == sizes.front()) rss_end = rss_mb(server.pid());
    }
  }
  std::string speedups;
  for (const std::string& size : sizes) {
    const double single = rps[size + "_single_c64"], batched = rps[size + "_batched_c64"];
    speedups += fmt::format(" {}_speedup_c64={:.2f}", size, single > 0 ? batched / single : 0);
  }
  fmt::print(
      "{}{} ok={} errors={} lost={} rss_start_mb={:.1f} rss_after_warmup_mb={:.1f} "
      "rss_end_mb={:.1f}\n",
      result, speedups, total_ok, total_errors, total_lost, rss_start, rss_warm, rss_end);
  return total_errors == 0 && total_lost == 0 ? 0 : 1;
}
