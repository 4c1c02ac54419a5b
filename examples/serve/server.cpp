#include "examples/serve/server.h"

#include <fmt/format.h>
#include <httplib.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>

#include <nlohmann/json.hpp>

#include "examples/serve/page.h"

namespace nabla::serve {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// The handler's CPU time on its thread, added to the metrics when it returns.
class HandlerCpu {
 public:
  explicit HandlerCpu(Metrics& metrics) : metrics_(metrics), start_(thread_cpu_seconds()) {}
  ~HandlerCpu() { metrics_.handler_cpu(thread_cpu_seconds() - start_); }
  HandlerCpu(const HandlerCpu&) = delete;
  HandlerCpu& operator=(const HandlerCpu&) = delete;

 private:
  Metrics& metrics_;
  double start_;
};

// Debian's libcpp-httplib is compiled with a listen backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG):
// 64 clients connecting at once overflow it, and the kernel drops or resets connections. Calling
// listen() again on the bound socket raises the backlog (Linux allows it); the socket is found
// among the process's descriptors by its port and SO_ACCEPTCONN.
void raise_listen_backlog(int port) {
  for (int fd = 0; fd < 1024; ++fd) {
    int listening = 0;
    socklen_t len = sizeof(listening);
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening) continue;
    sockaddr_storage addr{};
    socklen_t addr_len = sizeof(addr);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &addr_len) != 0) continue;
    int bound = 0;
    if (addr.ss_family == AF_INET)
      bound = ntohs(reinterpret_cast<const sockaddr_in*>(&addr)->sin_port);
    else if (addr.ss_family == AF_INET6)
      bound = ntohs(reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_port);
    if (bound == port) ::listen(fd, SOMAXCONN);
  }
}

}  // namespace

HttpServer::HttpServer(ModelAdapter& model, Batcher& batcher, Metrics& metrics,
                       ServerOptions options)
    : model_(model),
      batcher_(batcher),
      metrics_(metrics),
      options_(std::move(options)),
      http_(std::make_unique<httplib::Server>()) {
  const int threads = std::max(1, options_.http_threads);
  http_->new_task_queue = [threads] {
    return new httplib::ThreadPool(static_cast<size_t>(threads));
  };
  http_->set_payload_max_length(options_.max_body_bytes);
  http_->set_read_timeout(5, 0);
  http_->set_write_timeout(5, 0);
  http_->set_keep_alive_timeout(5);
  // Headers and body go out as separate writes: with Nagle's algorithm the second waits for the
  // peer's delayed ACK (tens of ms on loopback).
  http_->set_tcp_nodelay(true);
  routes();
}

HttpServer::~HttpServer() = default;

bool HttpServer::bind() {
  bool bound = false;
  if (options_.port == 0) {
    port_ = http_->bind_to_any_port(options_.host);
    bound = port_ > 0;
  } else {
    port_ = options_.port;
    bound = http_->bind_to_port(options_.host, options_.port);
  }
  if (bound) raise_listen_backlog(port_);
  return bound;
}

void HttpServer::serve() { http_->listen_after_bind(); }

void HttpServer::stop() { http_->stop(); }

void HttpServer::routes() {
  // The body is moved into the response (httplib 0.11's set_content copies it).
  auto answer = [this](httplib::Response& res, const std::string& path, int status,
                       std::string body, const char* type,
                       std::chrono::steady_clock::time_point t0) {
    res.status = status;
    res.body = std::move(body);
    res.set_header("Content-Type", type);
    metrics_.request(path, status, seconds_since(t0));
  };
  http_->Post("/v1/predict", [this, answer](const httplib::Request& req, httplib::Response& res) {
    const auto t0 = std::chrono::steady_clock::now();
    const HandlerCpu cpu(metrics_);
    metrics_.received();
    const char* json = "application/json";
    Input input;
    try {
      input = parse_predict_request(req.body, options_.kind, options_.max_text_bytes);
    } catch (const RequestError& e) {
      return answer(res, req.path, e.status, error_json(e.what()), json, t0);
    }
    Batcher::Ticket ticket;
    try {
      // The answer reads the tokens only to show attention: otherwise the input is moved (its
      // want_attention, false, stays readable).
      if (input.want_attention)
        ticket = batcher_.submit(input);
      else
        ticket = batcher_.submit(std::move(input));
    } catch (const QueueFull& e) {
      res.set_header("Retry-After", "1");
      return answer(res, req.path, 503, error_json(e.what()), json, t0);
    }
    const auto wait = std::chrono::duration<double, std::milli>(options_.timeout_ms);
    if (ticket.result.wait_for(wait) != std::future_status::ready) {
      ticket.cancel();
      return answer(
          res, req.path, 504,
          error_json(fmt::format("no answer within {} ms (--timeout-ms)", options_.timeout_ms)),
          json, t0);
    }
    try {
      const Prediction p = ticket.result.get();
      answer(res, req.path, 200, prediction_json(p, model_.labels(), input, options_.kind), json,
             t0);
    } catch (const std::exception& e) {
      answer(res, req.path, 500, error_json(fmt::format("the model failed: {}", e.what())), json,
             t0);
    }
  });
  http_->Get("/healthz", [this, answer](const httplib::Request& req, httplib::Response& res) {
    const nlohmann::json j = {{"status", "ok"},
                              {"model", model_.describe()},
                              {"labels", model_.labels()},
                              {"queue_depth", batcher_.queue_depth()}};
    answer(res, req.path, 200, j.dump(), "application/json", std::chrono::steady_clock::now());
  });
  http_->Get("/metrics", [this](const httplib::Request& req, httplib::Response& res) {
    metrics_.set_queue_depth(batcher_.queue_depth());
    metrics_.set_work(model_.work_counts());
    metrics_.request(req.path, 200, 0);
    res.set_content(metrics_.render(), "text/plain; version=0.0.4");
  });
  http_->Get("/", [this, answer](const httplib::Request& req, httplib::Response& res) {
    answer(res, req.path, 200, page_html(options_.kind), "text/html; charset=utf-8",
           std::chrono::steady_clock::now());
  });
  // Unknown paths and a body over the limit: httplib answers 404 / 413 itself; give them a JSON
  // message and count them.
  http_->set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;  // a route's own answer (already counted)
    std::string message = fmt::format("{} {}: no such endpoint (status {}); see GET /healthz",
                                      req.method, req.path, res.status);
    if (res.status == 413)
      message = fmt::format("the body is larger than {} bytes (--max-body-bytes)",
                            options_.max_body_bytes);
    res.set_content(error_json(message), "application/json");
    metrics_.request(res.status == 404 ? "other" : req.path, res.status, 0);
  });
}

}  // namespace nabla::serve
