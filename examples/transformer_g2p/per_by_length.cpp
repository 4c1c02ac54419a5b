// g2p_per_by_length: the per_by_length.csv files of several g2p runs (transformer_g2p,
// seq2seq_attention --task g2p) drawn as one chart of phoneme error rate by source-word length.
//
//   g2p_per_by_length --out per_by_length.png runs/gru/per_by_length.csv=GRU
//       "runs/bahdanau/per_by_length.csv=GRU + Bahdanau" runs/transformer_g2p/per_by_length.csv
//   (one command line)
//
// A `file=name` argument renames that file's model in the legend.
#include <fmt/format.h>

#include "examples/common/g2p_data.h"
#include "examples/common/progress.h"
#include "nabla/core/error.h"

using namespace nabla;

namespace {

int run(int argc, char** argv) {
  std::string out = "per_by_length.png";
  std::vector<std::string> files, names;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--out" && i + 1 < argc) {
      out = argv[++i];
    } else if (a == "--help" || a == "-h") {
      fmt::print("usage: g2p_per_by_length [--out chart.png] run.csv[=name] ...\n");
      return 0;
    } else {
      const size_t eq = a.find('=');
      files.push_back(a.substr(0, eq));
      names.push_back(eq == std::string::npos ? std::string() : a.substr(eq + 1));
    }
  }
  if (files.empty())
    throw ValueError(
        "g2p_per_by_length: no CSV given (usage: g2p_per_by_length [--out chart.png] "
        "run.csv[=name] ...)");
  examples::plot_per_by_length(out, files, names);
  fmt::print("wrote {} and its .svg ({} runs)\n", out, files.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return examples::guarded_main(argc, argv, run); }
