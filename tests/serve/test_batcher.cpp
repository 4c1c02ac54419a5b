// nabla-serve without HTTP: the dynamic batcher (batched answers equal the alone ones, grouping
// by length, a full queue, cancelled requests, draining on stop), request validation, metrics.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>

#include "examples/serve/batcher.h"
#include "examples/serve/langid_adapter.h"
#include "examples/serve/metrics.h"
#include "examples/serve/request.h"
#include "nabla/data/tokenizer.h"

using namespace nabla;
using namespace nabla::serve;
using namespace std::chrono_literals;

namespace {

LangIdConfig tiny_config() {
  LangIdConfig c;
  c.d_model = 16;
  c.heads = 2;
  c.layers = 2;
  c.ffn = 32;
  c.max_len = 32;
  c.ngram_buckets = 64;
  c.classes = 4;
  return c;
}

Input text_input(const std::string& text, bool attention = false) {
  Input in;
  in.tokens = data::ByteTokenizer().encode(text);
  in.want_attention = attention;
  return in;
}

// Records every batch's lengths; can hold the worker until released.
class RecordingAdapter : public ModelAdapter {
 public:
  const std::vector<std::string>& labels() const override { return labels_; }
  int64_t length(const Input& in) const override { return static_cast<int64_t>(in.tokens.size()); }
  std::vector<Prediction> predict(const std::vector<const Input*>& batch) override {
    ++calls_started;
    while (hold.load()) std::this_thread::sleep_for(1ms);
    std::vector<int64_t> lengths;
    std::vector<Prediction> out;
    for (const Input* in : batch) {
      lengths.push_back(length(*in));
      Prediction p;
      p.label = length(*in);
      out.push_back(p);
    }
    std::lock_guard lock(mu);
    batches.push_back(lengths);
    return out;
  }
  std::string describe() const override { return "recording"; }
  std::atomic<bool> hold{false};
  std::atomic<int> calls_started{0};
  std::mutex mu;
  std::vector<std::vector<int64_t>> batches;

 private:
  std::vector<std::string> labels_ = {"a"};
};

}  // namespace

TEST_CASE("batcher: each batched answer equals the request run alone", "[serve]") {
  LangIdAdapter model(tiny_config(), {nn::LongInputMode::Windows, 0, 0}, 7);
  // Mixed lengths, one far over max_len (several windows), some asking for attention.
  const std::vector<std::string> texts = {
      "hi",
      "Wer nicht wagt, der nicht gewinnt.",
      "a",
      "El que no arriesga no gana.",
      std::string(150, 'x') + " and then something else entirely, much longer than max_len",
      "Chi non risica non rosica",
      "ok?"};
  std::vector<Prediction> alone;
  for (size_t i = 0; i < texts.size(); ++i) {
    const Input in = text_input(texts[i], i % 2 == 0);
    alone.push_back(model.predict({&in})[0]);
  }
  REQUIRE(alone[4].windows > 1);
  Batcher batcher(model, {.max_batch = 16, .max_wait_ms = 200, .max_queue = 64});
  std::vector<Batcher::Ticket> tickets;
  for (size_t i = 0; i < texts.size(); ++i)
    tickets.push_back(batcher.submit(text_input(texts[i], i % 2 == 0)));
  for (size_t i = 0; i < texts.size(); ++i) {
    REQUIRE(tickets[i].result.wait_for(30s) == std::future_status::ready);
    const Prediction p = tickets[i].result.get();
    INFO("text " << i);
    REQUIRE(p.label == alone[i].label);
    REQUIRE(p.windows == alone[i].windows);
    for (size_t k = 0; k < p.probabilities.size(); ++k)
      REQUIRE(std::abs(p.probabilities[k] - alone[i].probabilities[k]) <= 1e-6);
    REQUIRE(p.attention.size() == alone[i].attention.size());
    for (size_t k = 0; k < p.attention.size(); ++k)
      REQUIRE(std::abs(p.attention[k] - alone[i].attention[k]) <= 1e-6);
    if (i % 2 == 0) {
      REQUIRE(p.attention.size() == texts[i].size());  // every byte, windows included
      double total = 0;
      for (double w : p.attention) total += w;
      REQUIRE(total == Approx(1.0).epsilon(1e-9));
    }
  }
}

TEST_CASE("langid: a batch runs as groups of similar length, each answer as alone", "[serve]") {
  LangIdAdapter model(tiny_config(), {nn::LongInputMode::Windows, 0, 0}, 11);
  // 96 texts of 1 to 32 bytes (max_len 32) in a scrambled order: 1584 real tokens.
  std::vector<Input> inputs;
  for (int i = 0; i < 96; ++i) {
    const int length = 1 + (i * 37) % 32;
    std::string text;
    for (int k = 0; k < length; ++k) text.push_back(static_cast<char>('a' + (i + k * 7) % 26));
    inputs.push_back(text_input(text, i % 5 == 0));
  }
  std::vector<Prediction> alone;
  for (const Input& in : inputs) alone.push_back(model.predict({&in})[0]);
  const WorkCounts before = model.work_counts();
  CHECK(before.forwards == 96);
  CHECK(before.padded_tokens == before.tokens);  // alone: no padding
  std::vector<const Input*> batch;
  for (const Input& in : inputs) batch.push_back(&in);
  const std::vector<Prediction> together = model.predict(batch);
  const WorkCounts after = model.work_counts();
  const int64_t forwards = after.forwards - before.forwards, rows = after.rows - before.rows,
                real = after.tokens - before.tokens,
                padded = after.padded_tokens - before.padded_tokens;
  CAPTURE(forwards, rows, real, padded);
  CHECK(rows == 96);
  CHECK(real == before.tokens);
  // The rule (kMaxPadding 1.25, kMinGroupTokens 256) on these lengths: groups of 38 rows padded
  // to 13 tokens, 25 to 21 and 33 to 32, 2075 tokens in all; padded to the longest text, the
  // batch would hold 96 x 32 = 3072.
  CHECK(forwards == 3);
  CHECK(padded == 38 * 13 + 25 * 21 + 33 * 32);
  REQUIRE(together.size() == alone.size());
  for (size_t i = 0; i < alone.size(); ++i) {
    INFO("text " << i);
    REQUIRE(together[i].label == alone[i].label);
    for (size_t k = 0; k < alone[i].probabilities.size(); ++k)
      REQUIRE(std::abs(together[i].probabilities[k] - alone[i].probabilities[k]) <= 1e-6);
    REQUIRE(together[i].attention.size() == alone[i].attention.size());
    for (size_t k = 0; k < alone[i].attention.size(); ++k)
      REQUIRE(std::abs(together[i].attention[k] - alone[i].attention[k]) <= 1e-6);
  }
  // Prepared on the caller's thread (as Batcher::submit does) or not: the same answer.
  Input prepared = inputs[3];
  model.prepare(prepared);
  REQUIRE(prepared.prepared);
  REQUIRE(prepared.window_tokens.size() == 1);
  const Prediction p = model.predict({&prepared})[0];
  for (size_t k = 0; k < p.probabilities.size(); ++k)
    REQUIRE(p.probabilities[k] == alone[3].probabilities[k]);
}

TEST_CASE("batcher: the worker wakes for a first request or a full batch, not per request",
          "[serve]") {
  RecordingAdapter model;
  model.hold = true;
  std::vector<Batcher::BatchStats> seen;
  std::mutex seen_mu;
  Batcher batcher(model, {.max_batch = 8, .max_wait_ms = 2000, .max_queue = 64},
                  [&](const Batcher::BatchStats& b) {
                    std::lock_guard lock(seen_mu);
                    seen.push_back(b);
                  });
  std::vector<Batcher::Ticket> tickets;
  for (int i = 0; i < 8; ++i) tickets.push_back(batcher.submit(text_input(std::string(5, 'x'))));
  model.hold = false;
  for (auto& t : tickets) REQUIRE(t.result.wait_for(30s) == std::future_status::ready);
  batcher.stop();
  std::lock_guard lock(seen_mu);
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].size == 8);
  // Woken by the first request and by the eighth (a full batch), not by the six between; a
  // spurious wake-up may add one.
  CHECK(seen[0].wakeups >= 2);
  CHECK(seen[0].wakeups <= 4);
  CHECK(seen[0].worker_cpu_seconds >= 0.0);
}

TEST_CASE("batcher: the oldest request's batch takes the closest lengths", "[serve]") {
  RecordingAdapter model;
  model.hold = true;  // the first batch blocks the worker while the rest queue up
  Batcher batcher(model, {.max_batch = 3, .max_wait_ms = 0, .max_queue = 64});
  std::vector<Batcher::Ticket> tickets;
  tickets.push_back(batcher.submit(text_input(std::string(1, 'x'))));
  std::this_thread::sleep_for(50ms);  // the worker is now inside predict, holding
  for (int n : {10, 90, 11, 50, 12, 88, 89})
    tickets.push_back(batcher.submit(text_input(std::string(static_cast<size_t>(n), 'x'))));
  model.hold = false;
  for (auto& t : tickets) REQUIRE(t.result.wait_for(10s) == std::future_status::ready);
  std::lock_guard lock(model.mu);
  REQUIRE(model.batches.size() == 4);
  REQUIRE(model.batches[0] == std::vector<int64_t>{1});
  REQUIRE(model.batches[1] == std::vector<int64_t>{10, 11, 12});  // oldest 10, then nearest
  REQUIRE(model.batches[2] == std::vector<int64_t>{90, 88, 89});  // arrival order inside
  REQUIRE(model.batches[3] == std::vector<int64_t>{50});
}

TEST_CASE("batcher: without grouping, batches follow arrival order", "[serve]") {
  RecordingAdapter model;
  model.hold = true;
  Batcher batcher(model,
                  {.max_batch = 2, .max_wait_ms = 0, .max_queue = 64, .group_by_length = false});
  std::vector<Batcher::Ticket> tickets;
  tickets.push_back(batcher.submit(text_input("x")));
  std::this_thread::sleep_for(50ms);
  for (int n : {10, 90, 11, 89})
    tickets.push_back(batcher.submit(text_input(std::string(static_cast<size_t>(n), 'x'))));
  model.hold = false;
  for (auto& t : tickets) REQUIRE(t.result.wait_for(10s) == std::future_status::ready);
  std::lock_guard lock(model.mu);
  REQUIRE(model.batches.size() == 3);
  REQUIRE(model.batches[1] == std::vector<int64_t>{10, 90});
  REQUIRE(model.batches[2] == std::vector<int64_t>{11, 89});
}

TEST_CASE("batcher: a full queue refuses, cancelled requests are skipped, stop drains", "[serve]") {
  RecordingAdapter model;
  model.hold = true;
  Batcher batcher(model, {.max_batch = 8, .max_wait_ms = 0, .max_queue = 3});
  // Declared after the batcher, so destroyed first: a failed REQUIRE releases the worker
  // before ~Batcher waits for it (else the test hangs instead of failing).
  struct Release {
    std::atomic<bool>& hold;
    ~Release() { hold = false; }
  } release{model.hold};
  auto first = batcher.submit(text_input("a"));
  // Wait until the worker holds `first` (the queue is empty again); a fixed sleep was too
  // short on a loaded machine.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (model.calls_started.load() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  REQUIRE(model.calls_started.load() == 1);
  auto a = batcher.submit(text_input("bb"));
  auto b = batcher.submit(text_input("ccc"));
  auto c = batcher.submit(text_input("dddd"));
  REQUIRE(batcher.queue_depth() == 3);
  REQUIRE_THROWS_AS(batcher.submit(text_input("e")), QueueFull);
  b.cancel();  // its caller timed out
  model.hold = false;
  batcher.stop();  // finishes everything queued before returning
  REQUIRE(first.result.wait_for(0s) == std::future_status::ready);
  REQUIRE(a.result.get().label == 2);
  REQUIRE(c.result.get().label == 4);
  REQUIRE_THROWS_AS(b.result.get(), std::future_error);  // dropped unanswered, never run
  REQUIRE_THROWS_WITH(batcher.submit(text_input("late")), Catch::Contains("shutting down"));
  std::lock_guard lock(model.mu);
  REQUIRE(model.batches.size() == 2);
  REQUIRE(model.batches[1] == std::vector<int64_t>{2, 4});
}

TEST_CASE("batcher: max_wait gathers requests that arrive close together", "[serve]") {
  RecordingAdapter model;
  Batcher batcher(model, {.max_batch = 4, .max_wait_ms = 2000, .max_queue = 64});
  std::vector<Batcher::Ticket> tickets;
  for (int i = 0; i < 4; ++i) tickets.push_back(batcher.submit(text_input("same")));
  for (auto& t : tickets) REQUIRE(t.result.wait_for(10s) == std::future_status::ready);
  std::lock_guard lock(model.mu);
  REQUIRE(model.batches.size() == 1);  // max_batch reached: no need to wait the 2 s out
  REQUIRE(model.batches[0].size() == 4);
}

TEST_CASE("request: validation names the problem", "[serve]") {
  auto status_of = [](const std::string& body) {
    try {
      parse_predict_request(body, ModelKind::LangId, 100);
    } catch (const RequestError& e) {
      return std::pair{e.status, std::string(e.what())};
    }
    return std::pair{200, std::string()};
  };
  REQUIRE(status_of(R"({"text": "hello"})").first == 200);
  REQUIRE(status_of("").first == 400);
  REQUIRE(status_of(R"({"text": )").second.find("malformed JSON") != std::string::npos);
  REQUIRE(status_of("[1, 2]").second.find("must be a JSON object, not array") != std::string::npos);
  REQUIRE(status_of(R"({"txt": "a"})").second.find("missing field \"text\"") != std::string::npos);
  REQUIRE(status_of(R"({"text": 5})").second.find("must be a string, not number") !=
          std::string::npos);
  REQUIRE(status_of(R"({"text": ""})").first == 422);
  REQUIRE(status_of("{\"text\": \"\xff\"}").second.find("not valid UTF-8 (byte offset 10)") !=
          std::string::npos);
  REQUIRE(status_of(R"({"text": "a", "attention": "yes"})").second.find("true or false") !=
          std::string::npos);
  REQUIRE(status_of("{\"text\": \"" + std::string(101, 'a') + "\"}").first == 413);
  REQUIRE(valid_utf8("h\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));  // é € 😀
  size_t at = 0;
  REQUIRE_FALSE(valid_utf8("ab\xc0\xaf", &at));  // overlong '/'
  REQUIRE(at == 2);
  REQUIRE_FALSE(valid_utf8("\xed\xa0\x80"));  // a UTF-16 surrogate
  REQUIRE_FALSE(valid_utf8("\xe2\x82"));      // cut short
  // vit: 28 rows of 28 numbers in [0, 1].
  auto image = [](double v, int rows) {
    std::string s = R"({"image": [)";
    for (int r = 0; r < rows; ++r) {
      s += r ? ",[" : "[";
      for (int c = 0; c < 28; ++c) s += (c ? "," : "") + std::to_string(v);
      s += "]";
    }
    return s + "]}";
  };
  REQUIRE(parse_predict_request(image(0.5, 28), ModelKind::Vit, 0).pixels.size() == 784);
  REQUIRE_THROWS_WITH(parse_predict_request(image(0.5, 27), ModelKind::Vit, 0),
                      Catch::Contains("array of 28 rows"));
  REQUIRE_THROWS_WITH(parse_predict_request(image(2.0, 28), ModelKind::Vit, 0),
                      Catch::Contains("[0][0] must be a number in [0, 1]"));
}

TEST_CASE("metrics: Prometheus text with cumulative buckets", "[serve]") {
  Metrics m;
  m.request("/v1/predict", 200, 0.004);
  m.request("/v1/predict", 200, 0.3);
  m.request("/v1/predict", 400, 0.0001);
  m.batch(3, 5, 0.25, 2);
  m.handler_cpu(0.5);
  m.set_work({.forwards = 2, .rows = 3, .tokens = 40, .padded_tokens = 48});
  const std::string text = m.render();
  REQUIRE(text.find("nabla_serve_requests_total{path=\"/v1/predict\",code=\"200\"} 2") !=
          std::string::npos);
  REQUIRE(text.find("nabla_serve_requests_total{path=\"/v1/predict\",code=\"400\"} 1") !=
          std::string::npos);
  REQUIRE(text.find("nabla_serve_request_duration_seconds_bucket{le=\"0.005\"} 2") !=
          std::string::npos);
  REQUIRE(text.find("nabla_serve_request_duration_seconds_bucket{le=\"+Inf\"} 3") !=
          std::string::npos);
  REQUIRE(text.find("nabla_serve_batch_size_bucket{le=\"2\"} 0") != std::string::npos);
  REQUIRE(text.find("nabla_serve_batch_size_bucket{le=\"4\"} 1") != std::string::npos);
  REQUIRE(text.find("nabla_serve_queue_depth 5") != std::string::npos);
  REQUIRE(text.find("nabla_serve_cpu_seconds_total{part=\"http_handlers\"} 0.500000") !=
          std::string::npos);
  REQUIRE(text.find("nabla_serve_cpu_seconds_total{part=\"batch_worker\"} 0.250000") !=
          std::string::npos);
  REQUIRE(text.find("nabla_serve_cpu_seconds_total{part=\"process\"}") != std::string::npos);
  REQUIRE(text.find("nabla_serve_worker_wakeups_total 2") != std::string::npos);
  REQUIRE(text.find("nabla_serve_model_forwards_total 2") != std::string::npos);
  REQUIRE(text.find("nabla_serve_model_tokens_total{kind=\"padded\"} 48") != std::string::npos);
  REQUIRE(m.requests(200) == 2);
}
