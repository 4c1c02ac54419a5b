// nabla-serve: serves a trained transformer_langid (or, with --model vit, vit_fashion_mnist)
// checkpoint over HTTP with dynamic batching. See server.h for the endpoints, batcher.h for the
// batching and README.md ("Serving a trained model") for examples.
//
//   nabla-serve --checkpoint runs/transformer_langid/checkpoint.safetensors --port 8080
//   curl -s localhost:8080/v1/predict -d '{"text": "Wer nicht wagt, der nicht gewinnt."}'
#include <fmt/format.h>
#include <pthread.h>

#include <atomic>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>

#include "examples/common/cli.h"
#include "examples/common/progress.h"
#include "examples/serve/langid_adapter.h"
#include "examples/serve/server.h"
#include "examples/serve/vit_adapter.h"
#include "nabla/nabla.h"

using namespace nabla;

namespace {

struct Config {
  std::string checkpoint = "runs/transformer_langid/checkpoint.safetensors";
  std::string model = "langid", long_input = "windows", host = "127.0.0.1", port_file;
  int port = 8080, threads = 0, http_threads = 80;
  int64_t stride = 0, max_batch = 32, max_queue = 256, heads = 4, max_len = 128;
  int64_t max_body_bytes = 1 << 20, max_text_bytes = 64 * 1024;
  double max_wait_ms = 5, timeout_ms = 10000;
  bool no_length_grouping = false;
  // Load tests only: a randomly initialised langid model of this size instead of a checkpoint
  // (its answers mean nothing; its cost per request is that of a trained model of that size).
  bool random_model = false;
  int64_t d_model = 256, layers = 4, ffn = 1024;
};

std::optional<int> parse_flags(Config& c, int argc, char** argv) {
  examples::CommandLine cli(
      "nabla-serve: a trained transformer_langid (or vit_fashion_mnist) checkpoint behind HTTP "
      "with dynamic batching. POST /v1/predict, GET /healthz, GET /metrics, GET / (a page).");
  cli.option("--checkpoint", c.checkpoint, "checkpoint.safetensors written by the example")
      .choice("--model", c.model, {"langid", "vit"}, "transformer_langid or vit_fashion_mnist")
      .option("--host", c.host, "address to listen on")
      .option("--port", c.port, "TCP port (0: any free port, see --port-file)")
      .option("--port-file", c.port_file, "write the bound port to this file once serving")
      .option("--threads", c.threads,
              "the model's compute threads (0: nabla's default); HTTP threads never compute")
      .option("--http-threads", c.http_threads,
              "HTTP worker threads (they sleep while a request waits: one per client is fine)")
      .option("--max-batch", c.max_batch, "requests per batch at most (1: no dynamic batching)")
      .option("--max-wait-ms", c.max_wait_ms, "how long a request may wait for batch company")
      .option("--max-queue", c.max_queue, "queued requests at most; beyond: 503")
      .flag("--no-length-grouping", c.no_length_grouping,
            "batch in arrival order instead of grouping similar lengths")
      .option("--timeout-ms", c.timeout_ms, "answer 504 when a request takes longer")
      .option("--max-body-bytes", c.max_body_bytes, "larger bodies get 413")
      .option("--max-text-bytes", c.max_text_bytes, "longer texts get 413")
      .choice("--long-input", c.long_input, {"truncate", "windows"},
              "texts longer than max_len: first max_len bytes, or overlapping windows")
      .option("--stride", c.stride, "window stride in bytes (0: max_len / 2)")
      .option("--heads", c.heads, "attention heads, if the checkpoint has no model.json")
      .option("--max-len", c.max_len, "the model's max_len, if the checkpoint has no model.json")
      .flag("--random-model", c.random_model,
            "load tests: serve a randomly initialised langid model of --d-model, --layers, "
            "--heads, --ffn, --max-len instead of --checkpoint (meaningless answers, real cost)")
      .option("--d-model", c.d_model, "with --random-model: the model width")
      .option("--layers", c.layers, "with --random-model: encoder layers")
      .option("--ffn", c.ffn, "with --random-model: feed-forward width");
  return cli.parse(argc, argv);
}

int run(int argc, char** argv) {
  Config c;
  if (auto exit_code = parse_flags(c, argc, argv)) return *exit_code;
  if (c.threads > 0) set_num_threads(c.threads);
  // SIGTERM and SIGINT are taken by one thread with sigwait (below), so they are blocked in
  // every thread, including the ones started from here on.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  const bool vit = c.model == "vit";
  if (c.random_model && vit)
    throw ValueError("nabla-serve: --random-model makes a langid model; not with --model vit");
  if (!c.random_model && !std::filesystem::exists(c.checkpoint))
    throw IOError(
        fmt::format("nabla-serve: --checkpoint {} does not exist (train one first: "
                    "bash scripts/run-main.sh writes {})",
                    c.checkpoint, Config().checkpoint));
  std::unique_ptr<serve::ModelAdapter> model;
  const nn::LongInputOptions long_input{nn::parse_long_input_mode(c.long_input), 0,
                                        static_cast<size_t>(c.stride)};
  if (vit) {
    model = std::make_unique<serve::VitAdapter>(c.checkpoint, c.heads);
  } else if (c.random_model) {
    serve::LangIdConfig size;
    size.d_model = c.d_model, size.heads = c.heads, size.layers = c.layers, size.ffn = c.ffn;
    size.max_len = c.max_len;
    for (const auto& l : data::fortune_languages()) size.languages.push_back(l.code);
    size.classes = static_cast<int64_t>(size.languages.size());
    if (size.d_model <= 0 || size.heads <= 0 || size.d_model % size.heads != 0 ||
        size.layers <= 0 || size.ffn <= 0 || size.max_len <= 0)
      throw ValueError(fmt::format(
          "nabla-serve: --random-model needs positive sizes and --d-model ({}) divisible by "
          "--heads ({})",
          size.d_model, size.heads));
    model = std::make_unique<serve::LangIdAdapter>(size, long_input, 0);
  } else {
    serve::LangIdConfig fallback;
    fallback.heads = c.heads;
    fallback.max_len = c.max_len;
    model = std::make_unique<serve::LangIdAdapter>(c.checkpoint, fallback, long_input);
  }
  serve::Metrics metrics;
  serve::Batcher batcher(*model,
                         {.max_batch = c.max_batch,
                          .max_wait_ms = c.max_wait_ms,
                          .max_queue = c.max_queue,
                          .group_by_length = !c.no_length_grouping},
                         [&metrics](const serve::Batcher::BatchStats& b) {
                           metrics.batch(b.size, b.queue_depth, b.worker_cpu_seconds, b.wakeups);
                         });
  serve::HttpServer server(*model, batcher, metrics,
                           {.host = c.host,
                            .port = c.port,
                            .http_threads = c.http_threads,
                            .max_body_bytes = static_cast<size_t>(c.max_body_bytes),
                            .max_text_bytes = static_cast<size_t>(c.max_text_bytes),
                            .timeout_ms = c.timeout_ms,
                            .kind = vit ? serve::ModelKind::Vit : serve::ModelKind::LangId});
  if (!server.bind())
    throw IOError(fmt::format("nabla-serve: cannot listen on {}:{}", c.host, c.port));
  fmt::print("nabla-serve: {}\n{}\nlistening on http://{}:{} (batches of <= {}, wait <= {} ms)\n",
             model->describe(), runtime_info(), c.host, server.port(), c.max_batch, c.max_wait_ms);
  std::fflush(stdout);
  if (!c.port_file.empty()) {
    const std::string tmp = c.port_file + ".tmp";
    std::ofstream(tmp) << server.port() << "\n";
    std::rename(tmp.c_str(), c.port_file.c_str());  // readers never see a partial file
  }
  std::atomic<bool> signalled{false};
  std::thread signal_waiter([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    signalled = true;
    fmt::print("nabla-serve: signal {}: finishing the requests in flight\n", sig);
    std::fflush(stdout);
    server.stop();
  });
  server.serve();  // returns once stopped and every accepted request is answered
  // serve() also returns when listening fails: wake the waiter so that it can be joined.
  if (!signalled) pthread_kill(signal_waiter.native_handle(), SIGTERM);
  signal_waiter.join();
  batcher.stop();
  // Every /v1/predict request a handler read got its answer (the SIGTERM test checks this line).
  int64_t answered = 0;
  for (int code : {200, 400, 413, 422, 500, 503, 504}) answered += metrics.requests(code);
  fmt::print("nabla-serve: stopped: {} predict requests received, {} answered ({} ok)\n",
             metrics.received_count(), answered, metrics.requests(200));
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return examples::guarded_main(argc, argv, run); }
