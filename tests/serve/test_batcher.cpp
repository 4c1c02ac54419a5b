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
  auto first = batcher.submit(text_input("a"));
  std::this_thread::sleep_for(50ms);  // taken by the worker: the queue is empty again
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
  m.batch(3, 5);
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
  REQUIRE(m.requests(200) == 2);
}
