// PyTorch parity for nn::LSTM and the bidirectional nn::GRU: outputs, final states and the
// gradients of every input and parameter (tests/nn/module_parity.h), against torch.nn.LSTM and
// torch.nn.GRU(bidirectional=True). Fixture: tests/fixtures/gen_rnn.py.
#include "nabla/nn/gru.h"
#include "nabla/nn/lstm.h"
#include "tests/nn/module_parity.h"

namespace {
namespace NABLA_UNITY_ID {

using namespace nabla;

namespace {

std::vector<Tensor> all(const nn::LSTM::Output& o) { return {o.output, o.h_n, o.c_n}; }
std::vector<Tensor> all(const nn::GRU::Output& o) { return {o.output, o.h_n}; }

// The LSTM with or without the stored (h0, c0).
test::ModuleFn lstm_fn(nn::LSTM& m) {
  return [&m](const std::vector<Tensor>& x) {
    return x.size() == 3 ? all(m(x[0], {x[1], x[2]})) : all(m(x[0]));
  };
}
test::ModuleFn gru_fn(nn::GRU& m) {
  return [&m](const std::vector<Tensor>& x) {
    return x.size() == 2 ? all(m(x[0], x[1])) : all(m(x[0]));
  };
}

}  // namespace

TEST_CASE("Parity with torch.nn.LSTM: outputs, h_n, c_n, every gradient", "[nn][parity]") {
  SECTION("1 layer, (h0, c0)") {
    nn::LSTM m(3, 4);
    test::check_module_parity("rnn", "lstm_1layer", m, lstm_fn(m));
  }
  SECTION("2 layers, (h0, c0)") {
    nn::LSTM m(3, 4, {.num_layers = 2});
    test::check_module_parity("rnn", "lstm_2layer", m, lstm_fn(m));
  }
  SECTION("2 layers, batch_first, zero state") {
    nn::LSTM m(2, 3, {.num_layers = 2, .batch_first = true});
    test::check_module_parity("rnn", "lstm_2layer_batch_first", m, lstm_fn(m));
  }
  SECTION("bidirectional") {
    nn::LSTM m(3, 4, {.bidirectional = true});
    test::check_module_parity("rnn", "lstm_bidirectional", m, lstm_fn(m));
  }
  SECTION("bidirectional, 2 layers, batch_first") {
    nn::LSTM m(3, 2, {.num_layers = 2, .batch_first = true, .bidirectional = true});
    test::check_module_parity("rnn", "lstm_bidirectional_2layer_batch_first", m, lstm_fn(m));
  }
  SECTION("unbatched") {
    nn::LSTM m(3, 4, {.num_layers = 2});
    test::check_module_parity("rnn", "lstm_unbatched", m, lstm_fn(m));
  }
  SECTION("unbatched, bidirectional") {
    nn::LSTM m(2, 3, {.bidirectional = true});
    test::check_module_parity("rnn", "lstm_unbatched_bidirectional", m, lstm_fn(m));
  }
  SECTION("no bias") {
    nn::LSTM m(3, 4, {.bias = false});
    test::check_module_parity("rnn", "lstm_nobias", m, lstm_fn(m));
  }
}

TEST_CASE("Parity with torch.nn.GRU(bidirectional=True)", "[nn][parity]") {
  SECTION("1 layer, h0") {
    nn::GRU m(3, 4, {.bidirectional = true});
    test::check_module_parity("rnn", "gru_bidirectional", m, gru_fn(m));
  }
  SECTION("2 layers, h0") {
    nn::GRU m(3, 4, {.num_layers = 2, .bidirectional = true});
    test::check_module_parity("rnn", "gru_bidirectional_2layer", m, gru_fn(m));
  }
  SECTION("2 layers, batch_first, zero state") {
    nn::GRU m(2, 3, {.num_layers = 2, .batch_first = true, .bidirectional = true});
    test::check_module_parity("rnn", "gru_bidirectional_batch_first", m, gru_fn(m));
  }
  SECTION("unbatched") {
    nn::GRU m(3, 2, {.bidirectional = true});
    test::check_module_parity("rnn", "gru_bidirectional_unbatched", m, gru_fn(m));
  }
}

}  // namespace NABLA_UNITY_ID
}  // namespace
