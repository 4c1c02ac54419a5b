// Consistency across the library: one exception type (IndexError) for an out-of-range index in
// every op and module, messages that name the likely fix, and constructors that agree (required
// sizes first, the rest in an options struct; d_model first, query before key).
#include <memory>
#include <string>
#include <vector>

#include "tests/helpers.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;
using Catch::Matchers::Contains;

// The exception's type and its message.
#define CHECK_ERROR(expr, type, matcher) \
  do {                                   \
    CHECK_THROWS_AS(expr, type);         \
    CHECK_THROWS_WITH(expr, matcher);    \
  } while (0)

namespace {

Tensor idx(std::vector<int64_t> v, Shape s) { return from_vector<int64_t>(v, s); }

// The message of the nabla::Error that f throws ("" if none), for asserting what it does not say.
template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("an out-of-range index is an IndexError from every op and module", "[errors]") {
  const Tensor a = zeros({2, 3});
  // Views.
  CHECK_ERROR(a.select(1, 3), IndexError,
              Contains("select") && Contains("index 3") && Contains("(2, 3)"));
  CHECK_ERROR(a.select(0, -3), IndexError, Contains("index -3"));
  CHECK_ERROR(a.narrow(1, 4, 0), IndexError, Contains("narrow") && Contains("start 4"));
  CHECK_ERROR(a.narrow(1, 2, 2), IndexError, Contains("narrow") && Contains("size 3"));
  CHECK_ERROR(a.narrow(1, 0, -1), ValueError,
              Contains("start 0 and length -1") && Contains("length must be >= 0"));
  // Indexing ops.
  CHECK_THROWS_AS(index_select(a, 1, idx({3}, {1})), IndexError);
  CHECK_THROWS_AS(index_select(a, 1, idx({-1}, {1})), IndexError);
  CHECK_THROWS_AS(index_add(a, 0, idx({2}, {1}), zeros({1, 3})), IndexError);
  CHECK_THROWS_AS(gather(a, 1, idx({3}, {1, 1})), IndexError);
  CHECK_THROWS_AS(scatter_add(a, 0, idx({2}, {1, 1}), ones({1, 1})), IndexError);
  CHECK_THROWS_AS(one_hot(idx({0, 4}, {2}), 4), IndexError);
  CHECK_THROWS_AS(embedding(ones({4, 2}), idx({4}, {1})), IndexError);
  CHECK_THROWS_AS(embedding(ones({4, 2}), idx({0}, {1}), 4), IndexError);
  CHECK_THROWS_AS(embedding_composite(ones({4, 2}), idx({-1}, {1})), IndexError);
  // Class targets.
  CHECK_ERROR(cross_entropy(ones({2, 5}), idx({0, 5}, {2})), IndexError,
              Contains("cross_entropy") && Contains("target index 5") && Contains("5 classes") &&
                  Contains("ignore_index is -100"));
  CHECK_THROWS_AS(cross_entropy_composite(ones({2, 5}), idx({0, -2}, {2})), IndexError);
  CHECK_THROWS_AS(nll_loss(ones({2, 5}), idx({7, 0}, {2})), IndexError);
  // Modules and containers.
  nn::Embedding emb(4, 2);
  CHECK_THROWS_AS(emb(idx({4}, {1})), IndexError);
  CHECK_THROWS_AS(nn::Embedding(4, 2, {.padding_idx = 4}), IndexError);
  nn::Sequential seq(std::make_shared<nn::ReLU>());
  CHECK_THROWS_AS(seq[1], IndexError);
  nn::ModuleList list;
  CHECK_THROWS_AS(list[0], IndexError);
  nn::EncoderDecoder seq2seq(std::make_shared<nn::Seq2SeqEncoder>(6, 2, 3),
                             std::make_shared<nn::AttentionDecoder>(8, 2, 3));
  CHECK_ERROR(seq2seq.greedy_decode(from_vector<int64_t>({1, 2}, {2}), 2, 1, 8, 4), IndexError,
              Contains("eos 8") && Contains("[0, 8)"));
  // Optimizer state of a parameter it does not hold.
  Tensor w = zeros({2}).requires_grad_();
  optim::SGD sgd(std::vector<Tensor>{w}, {.lr = 0.1});
  CHECK_ERROR(sgd.state(1), IndexError, Contains("parameter index 1") && Contains("1 parameters"));
  // Every one of them is still a nabla::Error.
  CHECK_THROWS_AS(a.select(0, 2), Error);
}

TEST_CASE("a float target to cross_entropy or nll_loss says to pass int64 class indices",
          "[errors]") {
  const Tensor logits = zeros({4, 10}), labels = from_vector<float>({1, 0, 3, 9}, {4});
  // The helpful part of the message: what a target must be, what was passed, both ways out.
  auto check_labels_hint = [&](const std::string& message, const std::string& dtype) {
    INFO(message);
    for (const std::string& part :
         {std::string("targets must be int64 class indices"), dtype + " of shape (4,)",
          std::string("logits' shape (4, 10)"), std::string("target.to(kInt64)")})
      CHECK(message.find(part) != std::string::npos);
  };
  CHECK_THROWS_AS(cross_entropy(logits, labels), DTypeError);
  check_labels_hint(message_of([&] { cross_entropy(logits, labels); }), "float32");
  CHECK_THROWS_AS(cross_entropy_composite(logits, labels), DTypeError);
  check_labels_hint(message_of([&] { cross_entropy_composite(logits, labels); }), "float32");
  // A float64 target shaped like labels for float32 logits: still the labels hint, not a dtype
  // mismatch between two probability tensors.
  check_labels_hint(message_of([&] { cross_entropy(logits, labels.to(kFloat64)); }), "float64");
  CHECK_ERROR(cross_entropy(zeros({2, 3, 5}), zeros({2, 5})), DTypeError,
              Contains("float32 of shape (2, 5)") && Contains("(2, 3, 5)"));
  // Probabilities of the wrong shape: the message says which shape each kind of target has.
  CHECK_ERROR(cross_entropy(logits, zeros({4, 3})), ShapeError,
              Contains("class probabilities") && Contains("(4, 10)") && Contains("(4, 3)") &&
                  Contains("int64 of shape (4,)"));
  CHECK_ERROR(
      nll_loss(logits, labels), DTypeError,
      Contains("nll_loss") && Contains("int64 class indices") && Contains("target.to(kInt64)"));
  // The intended call works.
  CHECK(std::isfinite(cross_entropy(logits, labels.to(kInt64)).item()));
}

TEST_CASE("matmul shape errors show both full shapes", "[errors]") {
  CHECK_ERROR(matmul(zeros({2, 3, 4}), zeros({5, 4, 6})), ShapeError,
              Contains("matmul") && Contains("batch dims") && Contains("(2, 3, 4)") &&
                  Contains("(5, 4, 6)") && Contains("2 vs 5"));
  CHECK_THROWS_WITH(matmul(zeros({7, 2, 3, 4}), zeros({3, 4, 6})),
                    Contains("(7, 2, 3, 4)") && Contains("(3, 4, 6)") && Contains("dim -3"));
  CHECK_ERROR(matmul(zeros({2, 3}), zeros({4, 5})), ShapeError,
              Contains("(2, 3)") && Contains("(4, 5)") && Contains("dim -2 of the second (4)"));
  CHECK_THROWS_WITH(matmul(zeros({2, 3}), zeros({4})), Contains("the size of the second (4)"));
  // Batch dims that broadcast are still fine.
  CHECK(matmul(zeros({2, 1, 3, 4}), zeros({5, 4, 6})).shape() == Shape{2, 5, 3, 6});
  CHECK(matmul(zeros({4}), zeros({3, 4, 2})).shape() == Shape{3, 2});
}

TEST_CASE("dtype errors name the public call and the way out", "[errors]") {
  const Tensor x = zeros({2, 3});
  CHECK_ERROR(x.to_vector<double>(), DTypeError,
              Contains("Tensor::to_vector<double>") && Contains("float32") && Contains("float64") &&
                  Contains("(2, 3)") && Contains("to_vector<float>()") &&
                  Contains(".to(kFloat64)"));
  CHECK_THROWS_WITH(zeros({2}, kInt64).to_vector<bool>(),
                    Contains("Tensor::to_vector<bool>") && Contains("to_vector<int64_t>()"));
  CHECK_THROWS_WITH(x.data_ptr<int64_t>(),
                    Contains("Tensor::data_ptr<int64_t>") && Contains("data_ptr<float>()"));
  CHECK_THROWS_WITH(softmax(arange(4), 0),
                    Contains("softmax") && Contains("convert with .to(kFloat32)"));
  // No internal function names in any of these messages.
  const std::vector<std::string> messages = {
      message_of([&] { x.to_vector<double>(); }),
      message_of([&] {
        cross_entropy(zeros({4, 10}), zeros({4}));
      }),
      message_of([&] {
        matmul(zeros({2, 3, 4}), zeros({5, 4, 6}));
      }),
      message_of([&] { index_select(x, 0, from_vector<int64_t>({9}, {1})); }),
  };
  for (const std::string& m : messages) {
    INFO(m);
    CHECK(!m.empty());
    for (const char* internal : {"detail::", "_impl", "_kernel", "dispatch", "check_"})
      CHECK(m.find(internal) == std::string::npos);
  }
}

TEST_CASE("loss and positional-encoding errors suggest the fix", "[errors]") {
  CHECK_ERROR(mse_loss(zeros({4, 1}), zeros({4})), ShapeError,
              Contains("(4, 1)") && Contains("(4,)") && Contains("squeeze(-1)"));
  nn::PositionalEncoding pe(/*d_model=*/4, /*dropout=*/0.0, /*max_len=*/8);
  CHECK_ERROR(pe(zeros({1, 9, 4})), ShapeError,
              Contains("9 positions") && Contains("max_len = 8") && Contains("larger max_len"));
  CHECK_THROWS_WITH(pe(zeros({1, 3, 4}, kFloat64)),
                    Contains("convert the module with .to(kFloat64)"));
  CHECK_THROWS_WITH(pe(zeros({1, 3, 5})), Contains("(batch, T <= 8, 4)"));
}

TEST_CASE("constructors agree: sizes first, options after, query before key", "[nn]") {
  // Both positional encodings: (d_model, dropout, max_len).
  nn::PositionalEncoding sin_pe(8, 0.0, 16);
  nn::LearnedPositionalEncoding learned(8, 0.0, 16);
  CHECK(sin_pe.table().shape() == Shape{1, 16, 8});
  CHECK(learned.weight().shape() == Shape{1, 16, 8});

  // Every scorer takes query_size before key_size.
  nn::AdditiveAttention additive(/*query_size=*/5, /*key_size=*/3, /*num_hiddens=*/4,
                                 {.dropout = 0.25, .dtype = kFloat64});
  auto p = additive.named_parameters();
  REQUIRE(p.size() == 3);
  CHECK((p[0].first == "W_k.weight" && p[0].second.shape() == Shape{4, 3}));
  CHECK((p[1].first == "W_q.weight" && p[1].second.shape() == Shape{4, 5}));
  CHECK(p[1].second.dtype() == kFloat64);
  CHECK(additive.dropout_p() == 0.25);
  const Tensor q = zeros({1, 2, 5}, kFloat64), k = zeros({1, 6, 3}, kFloat64);
  const Tensor v = zeros({1, 6, 2}, kFloat64);
  CHECK(additive(q, k, v).shape() == Shape{1, 2, 2});
  nn::ConcatLinearAttention concat(5, 3, {.dtype = kFloat64});
  CHECK(concat(q, k, v).shape() == Shape{1, 2, 2});
  nn::ConcatTanhSumAttention tanh_sum(5, 3, 7, {.dtype = kFloat64});
  CHECK(tanh_sum(q, k, v).shape() == Shape{1, 2, 2});
  CHECK_ERROR(nn::LocationBasedAttention({.query_size = 3, .key_size = 2, .value_size1 = 4}),
              ValueError, Contains("value_size2 0") && Contains("output_size 0"));

  // Options structs, and the positional forms kept for Linear, Embedding and LayerNorm.
  nn::Linear lin(3, 2, {.bias = false, .dtype = kFloat64});
  CHECK(!lin.bias().defined());
  CHECK(lin.weight().dtype() == kFloat64);
  nn::Linear lin_positional(3, 2, false, kFloat64);
  CHECK((!lin_positional.bias().defined() && lin_positional.weight().dtype() == kFloat64));
  nn::Embedding emb(5, 2, {.padding_idx = -1, .dtype = kFloat64});
  CHECK(emb.weight().select(0, 4).to_vector<double>() == std::vector<double>{0, 0});
  nn::LayerNorm ln(4, {.eps = 1e-3, .elementwise_affine = false});
  CHECK((ln.eps() == 1e-3 && !ln.weight().defined()));
  nn::LayerNorm ln_positional(Shape{2, 3}, 1e-4, true, kFloat64);
  CHECK((ln_positional.eps() == 1e-4 && ln_positional.weight().shape() == Shape{2, 3}));
  nn::GroupNorm gn(2, 4, {.affine = false});
  CHECK(!gn.weight().defined());
  nn::RMSNorm rms(Shape{3}, {.dtype = kFloat64});
  CHECK(rms.weight().dtype() == kFloat64);
  nn::Seq2SeqEncoder enc(10, 4, 6, {.num_layers = 2, .dtype = kFloat64});
  CHECK((enc.rnn().num_layers() == 2 && enc.embedding().weight().dtype() == kFloat64));
  nn::AttentionDecoder dec(10, 4, 6, {.num_layers = 2});
  CHECK(dec.num_layers() == 2);
}

}  // namespace NABLA_UNITY_ID
}  // namespace
#undef CHECK_ERROR
