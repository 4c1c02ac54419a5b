// The HTTP layer of nabla-serve (cpp-httplib): routes, limits, metrics, graceful stop.
//   POST /v1/predict  JSON in, JSON out (request.h); 4xx with {"error"} for bad input, 503 when
//                     the queue is full or the server is stopping, 504 after --timeout-ms
//   GET  /healthz     {"status": "ok", "model": ...}
//   GET  /metrics     Prometheus text format (metrics.h)
//   GET  /            the page (page.h)
#pragma once
#include <memory>
#include <string>

#include "examples/serve/batcher.h"
#include "examples/serve/metrics.h"
#include "examples/serve/request.h"

namespace httplib {
class Server;
}

namespace nabla::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (see HttpServer::port)
  // HTTP worker threads. They only parse JSON and sleep on a batch's result, so there can be
  // many (one per concurrent client); the model's compute threads are --threads.
  int http_threads = 80;
  size_t max_body_bytes = 1 << 20;
  size_t max_text_bytes = 64 * 1024;
  double timeout_ms = 10000;  // a request not answered by then gets 504
  ModelKind kind = ModelKind::LangId;
};

class HttpServer {
 public:
  HttpServer(ModelAdapter& model, Batcher& batcher, Metrics& metrics, ServerOptions options);
  ~HttpServer();
  // Binds (port 0: a free one); returns false when the address cannot be bound.
  bool bind();
  int port() const { return port_; }
  // Serves until stop(); returns after every request in flight has been answered.
  void serve();
  // Stops accepting; the requests in flight are finished by serve(). Safe from any thread.
  void stop();

 private:
  void routes();
  ModelAdapter& model_;
  Batcher& batcher_;
  Metrics& metrics_;
  ServerOptions options_;
  std::unique_ptr<httplib::Server> http_;
  int port_ = 0;
};

}  // namespace nabla::serve
