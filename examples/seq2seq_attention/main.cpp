// seq2seq_attention: a GRU encoder-decoder with Bahdanau (additive) attention (nn/seq2seq.h, d2l
// 10.4) learns character-level transduction:
//
//   --task dates  "tuesday, march 5 1996" / "5/3/96" / "march 5, 1996" / ... -> "1996-03-05"
//                 (synthetic, drawn from a seeded Generator; the default, runs in a minute)
//   --task g2p    grapheme to phoneme on the CMU Pronouncing Dictionary (Debian's festlex-cmu):
//                 "abbreviate" -> "ax b r iy v iy ey t" (stress marks dropped)
//
//   chars -> Embedding -> GRU encoder -> (S, B, H)
//   <bos> y1 y2 ... -> Embedding ++ AdditiveAttention(context) -> GRU decoder -> Linear -> logits
//
// Teacher forcing with cross-entropy (padding ignored), Adam, gradient clipping at 1.0; greedy
// decoding for evaluation (exact-match word accuracy, and phoneme error rate for g2p). Writes
// metrics.csv, loss.png, attention_<i>.png heatmaps for three test examples and a checkpoint
// (resume with --resume). Ends with a RESULT line.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <unordered_map>

#include "data/dataloader.h"
#include "data/langid.h"
#include "data/tokenizer.h"
#include "examples/common/cli.h"
#include "examples/common/plot.h"
#include "examples/common/progress.h"
#include "examples/common/training.h"
#include "nabla.h"
#include "nn/seq2seq.h"

using namespace nabla;
using data::SpecialTokens;

namespace {

struct Config {
  std::string task = "dates";
  std::string cmu_dir;  // empty: festlex-cmu's install path, else where get-cmudict.sh unpacks
  int64_t embed = 32, hidden = 128, layers = 1;
  double dropout = 0.1;
  int epochs = 0;  // 0: the task's default
  int64_t batch_size = 64;
  int64_t train_size = 0, test_size = 0;  // 0: the task's default (dates) or all (g2p)
  int64_t eval_size = 500;                // test examples decoded after every epoch
  double lr = 5e-3;                       // peak of a warm-up + cosine schedule
  int64_t warmup_steps = 200;
  uint64_t seed = 42;
  std::string out = "runs/seq2seq_attention";
  bool resume = false, smoke = false;
  int64_t stop_after = 0;  // simulate an interruption after the first epoch end >= this step
  int threads = 0;
};

// One source string (tokenised by characters) and its target as a list of symbols.
struct Pair {
  std::string src;
  std::vector<std::string> tgt;
};

struct Dataset {
  std::vector<Pair> train, test;
};

// ---- dates --------------------------------------------------------------------------------
constexpr std::array<const char*, 12> kMonths = {"january",   "february", "march",    "april",
                                                 "may",       "june",     "july",     "august",
                                                 "september", "october",  "november", "december"};
constexpr std::array<const char*, 7> kDays = {"sunday",   "monday", "tuesday", "wednesday",
                                              "thursday", "friday", "saturday"};

int days_in_month(int y, int m) {
  static constexpr std::array<int, 12> d = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return m == 2 && leap ? 29 : d[static_cast<size_t>(m - 1)];
}

int day_of_week(int y, int m, int d) {  // Sakamoto; 0 = sunday
  static constexpr std::array<int, 12> t = {0, 3, 2, 5, 0, 3, 5, 1, 4, 6, 2, 4};
  if (m < 3) y -= 1;
  return (y + y / 4 - y / 100 + y / 400 + t[static_cast<size_t>(m - 1)] + d) % 7;
}

// A human-readable date in one of seven formats and its ISO form; years 1950..2049 so that a
// two-digit year is unambiguous (50..99 -> 19xx, 00..49 -> 20xx).
Pair random_date(Generator& gen) {
  auto draw = [&](uint64_t n) { return static_cast<int>(gen.bits64(gen.advance(1)) % n); };
  const int y = 1950 + draw(100), m = 1 + draw(12),
            d = 1 + draw(static_cast<uint64_t>(days_in_month(y, m)));
  const std::string month = kMonths[static_cast<size_t>(m - 1)];
  const std::string day = kDays[static_cast<size_t>(day_of_week(y, m, d))];
  std::string src;
  switch (draw(7)) {
    case 0:
      src = fmt::format("{}, {} {} {}", day, month, d, y);
      break;
    case 1:
      src = fmt::format("{}/{}/{:02d}", d, m, y % 100);
      break;
    case 2:
      src = fmt::format("{} {}, {}", month, d, y);
      break;
    case 3:
      src = fmt::format("{} {} {}", d, month.substr(0, 3), y);
      break;
    case 4:
      src = fmt::format("{:02d}.{:02d}.{}", d, m, y);
      break;
    case 5:
      src = fmt::format("{} {} {}", day.substr(0, 3), month.substr(0, 3), d) +
            fmt::format(" '{:02d}", y % 100);
      break;
    default:
      src = fmt::format("the {} of {} {}", d, month, y);
      break;
  }
  return {src, data::utf8_chars(fmt::format("{:04d}-{:02d}-{:02d}", y, m, d))};
}

// Test dates are those whose source text hashes to 0 mod 10, so no source is in both splits.
Dataset make_dates(int64_t n_train, int64_t n_test, uint64_t seed) {
  Generator gen(seed);
  Dataset ds;
  std::set<std::string> seen;
  while (static_cast<int64_t>(ds.train.size()) < n_train ||
         static_cast<int64_t>(ds.test.size()) < n_test) {
    Pair p = random_date(gen);
    if (!seen.insert(p.src).second) continue;
    auto& split = data::fnv1a64(p.src) % 10 == 0 ? ds.test : ds.train;
    const int64_t want = &split == &ds.test ? n_test : n_train;
    if (static_cast<int64_t>(split.size()) < want) split.push_back(std::move(p));
  }
  return ds;
}

// ---- g2p ----------------------------------------------------------------------------------
// festlex-cmu's path when the package is installed, else where scripts/get-cmudict.sh unpacks
// the .deb (it avoids installing festival).
std::string default_cmu_dir() {
  const std::string installed = "/usr/share/festival/dicts/cmu";
  if (std::filesystem::exists(installed + "/cmudict-0.4.out")) return installed;
  std::string base;
  if (const char* d = std::getenv("NABLA_DATA_DIR")) {
    base = d;
  } else if (const char* x = std::getenv("XDG_CACHE_HOME")) {
    base = std::string(x) + "/nabla";
  } else if (const char* h = std::getenv("HOME")) {
    base = std::string(h) + "/.cache/nabla";
  }
  return base + "/festlex-cmu" + installed;
}

// cmudict-0.4.out lines: ("abbreviate" nil (((ax) 0) ((b r iy) 1) ((v iy) 0) ((ey t) 1)))
Dataset load_cmu(const std::string& dir, int64_t n_train, int64_t n_test) {
  const std::string path = dir + "/cmudict-0.4.out";
  std::ifstream in(path);
  if (!in)
    throw std::runtime_error(fmt::format(
        "seq2seq_attention: {} not found. Unpack the CMU dictionary from Debian's festlex-cmu "
        "with scripts/get-cmudict.sh (or `apt-get download festlex-cmu && dpkg -x "
        "festlex-cmu_*.deb <dir>` and pass --cmu-dir <dir>/usr/share/festival/dicts/cmu)",
        path));
  Dataset ds;
  std::set<std::string> seen;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("(\"", 0) != 0) continue;
    const size_t close = line.find('"', 2);
    if (close == std::string::npos) continue;
    const std::string word = line.substr(2, close - 2);
    if (word.empty() || word.size() > 20) continue;
    if (!std::all_of(word.begin(), word.end(),
                     [](char ch) { return (ch >= 'a' && ch <= 'z') || ch == '\''; }))
      continue;
    if (!seen.insert(word).second) continue;  // homographs: keep the first pronunciation
    std::string rest = line.substr(close + 1);
    std::replace(rest.begin(), rest.end(), '(', ' ');
    std::replace(rest.begin(), rest.end(), ')', ' ');
    std::istringstream ss(rest);
    std::string tok;
    ss >> tok;  // the part of speech (nil, n, v, ...)
    std::vector<std::string> phones;
    while (ss >> tok)
      if (!std::isdigit(static_cast<unsigned char>(tok[0]))) phones.push_back(tok);
    if (phones.empty()) continue;
    auto& split = data::fnv1a64(word) % 10 == 0 ? ds.test : ds.train;
    split.push_back({word, std::move(phones)});
  }
  if (ds.train.empty()) throw std::runtime_error("seq2seq_attention: no entries in " + path);
  auto thin = [](std::vector<Pair>& v, int64_t keep) {  // an evenly spaced subset
    if (keep <= 0 || static_cast<int64_t>(v.size()) <= keep) return;
    std::vector<Pair> out;
    const double stride = static_cast<double>(v.size()) / static_cast<double>(keep);
    for (int64_t i = 0; i < keep; ++i)
      out.push_back(v[static_cast<size_t>(static_cast<double>(i) * stride)]);
    v = std::move(out);
  };
  thin(ds.train, n_train);
  thin(ds.test, n_test);
  return ds;
}

// Target symbols (characters for dates, phonemes for g2p) after the special tokens, in order
// of first appearance in the training set.
struct SymbolVocab {
  std::vector<std::string> symbols;
  std::unordered_map<std::string, int64_t> ids;
  explicit SymbolVocab(const std::vector<Pair>& train) {
    for (const auto& p : train)
      for (const auto& s : p.tgt)
        if (ids.emplace(s, SpecialTokens::kCount + static_cast<int64_t>(symbols.size())).second)
          symbols.push_back(s);
  }
  int64_t size() const { return SpecialTokens::kCount + static_cast<int64_t>(symbols.size()); }
  std::vector<int64_t> encode(const std::vector<std::string>& s) const {
    std::vector<int64_t> out;
    for (const auto& x : s) {
      auto it = ids.find(x);
      out.push_back(it == ids.end() ? SpecialTokens::kUnk : it->second);
    }
    return out;
  }
  std::string name(int64_t id) const {
    if (id >= SpecialTokens::kCount && id < size())
      return symbols[static_cast<size_t>(id - SpecialTokens::kCount)];
    return id == SpecialTokens::kEos ? "<eos>" : "<unk>";
  }
};

int64_t edit_distance(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  std::vector<int64_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = static_cast<int64_t>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = static_cast<int64_t>(i);
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

struct Batch {
  data::PaddedBatch src;
  Tensor tgt_in, tgt_out;  // (B, T): <bos> y..., and y... <eos>, padded with PAD
  int64_t tokens = 0;
};

struct Encoded {
  std::vector<std::vector<int64_t>> src, tgt;
};

int run(int argc, char** argv) {
  Config c;
  examples::CommandLine cli(
      "GRU encoder-decoder with Bahdanau attention: dates -> ISO, or grapheme -> phoneme");
  cli.choice("--task", c.task, {"dates", "g2p"}, "dates (synthetic) or g2p (CMU dictionary)")
      .option("--cmu-dir", c.cmu_dir,
              "directory holding cmudict-0.4.out (g2p; default: festlex-cmu's, or where "
              "scripts/get-cmudict.sh unpacks it)")
      .option("--epochs", c.epochs, "training epochs (0: dates 6, g2p 10)")
      .option("--batch-size", c.batch_size, "examples per batch")
      .option("--embed", c.embed, "embedding size")
      .option("--hidden", c.hidden, "GRU hidden size")
      .option("--layers", c.layers, "GRU layers")
      .option("--dropout", c.dropout, "dropout")
      .option("--warmup", c.warmup_steps, "linear warm-up steps, then cosine decay")
      .option("--lr", c.lr, "peak learning rate (Adam)")
      .option("--train-size", c.train_size, "training examples (0: dates 20000, g2p all)")
      .option("--test-size", c.test_size, "test examples (0: dates 1000, g2p all)")
      .option("--eval-size", c.eval_size, "test examples decoded after each epoch")
      .run_flags(c.seed, c.out, c.threads, c.resume, c.smoke, c.stop_after,
                 "a few steps on a few hundred examples (for tests)");
  if (auto exit_code = cli.parse(argc, argv)) return *exit_code;
  if (c.threads > 0) set_num_threads(c.threads);
  std::filesystem::create_directories(c.out);
  const auto t0 = std::chrono::steady_clock::now();
  const bool g2p = c.task == "g2p";
  if (c.epochs <= 0) c.epochs = g2p ? 10 : 6;
  if (c.smoke) {
    c.train_size = 256;
    c.test_size = 32;
    c.eval_size = 32;
    c.epochs = 2;
    c.hidden = std::min<int64_t>(c.hidden, 32);
    c.embed = std::min<int64_t>(c.embed, 16);
  }

  // --- data ---------------------------------------------------------------------------------
  if (c.cmu_dir.empty()) c.cmu_dir = default_cmu_dir();
  Dataset ds = g2p ? load_cmu(c.cmu_dir, c.train_size, c.test_size)
                   : make_dates(c.train_size > 0 ? c.train_size : 20000,
                                c.test_size > 0 ? c.test_size : 1000, c.seed);
  std::vector<std::string> sources;
  for (const auto& p : ds.train) sources.push_back(p.src);
  const data::CharTokenizer src_tok = data::CharTokenizer::build(sources);
  const SymbolVocab tgt_vocab(ds.train);
  auto encode = [&](const std::vector<Pair>& v) {
    Encoded e;
    for (const auto& p : v) {
      e.src.push_back(src_tok.encode(p.src, false, true));  // chars <eos>
      e.tgt.push_back(tgt_vocab.encode(p.tgt));
    }
    return e;
  };
  const Encoded train = encode(ds.train), test = encode(ds.test);
  size_t max_tgt = 0;
  for (const auto& t : train.tgt) max_tgt = std::max(max_tgt, t.size());
  fmt::print(
      "seq2seq_attention ({}): {} train / {} test pairs, {} source / {} target symbols, {}\n",
      c.task, ds.train.size(), ds.test.size(), src_tok.vocab_size(), tgt_vocab.size(),
      runtime_info());
  for (size_t i = 0; i < 3 && i < ds.train.size(); ++i)
    fmt::print("  e.g. \"{}\" -> \"{}\"\n", ds.train[i].src,
               fmt::join(ds.train[i].tgt, g2p ? " " : ""));

  auto make_batch = [&](const std::vector<int64_t>& idx) {
    std::vector<std::vector<int64_t>> s, tin, tout;
    Batch b;
    for (int64_t i : idx) {
      s.push_back(train.src[static_cast<size_t>(i)]);
      const auto& y = train.tgt[static_cast<size_t>(i)];
      tin.push_back({SpecialTokens::kBos});
      tin.back().insert(tin.back().end(), y.begin(), y.end());
      tout.push_back(y);
      tout.back().push_back(SpecialTokens::kEos);
      b.tokens += static_cast<int64_t>(tout.back().size());
    }
    b.src = data::pad_sequences(s, SpecialTokens::kPad);
    b.tgt_in = data::pad_sequences(tin, SpecialTokens::kPad).tokens;
    b.tgt_out = data::pad_sequences(tout, SpecialTokens::kPad).tokens;
    return b;
  };
  // Batches of equal-length sources: the encoder's final state, the decoder's first, then never
  // runs over padding, as when one word is decoded alone.
  std::vector<size_t> src_lengths;
  for (const auto& s : train.src) src_lengths.push_back(s.size());
  const auto buckets = examples::length_buckets(src_lengths, c.batch_size, c.seed);
  data::DataLoader<Batch>::Options lopts;
  lopts.batch_size = 1;  // one "item" = one pre-built length bucket
  lopts.seed = c.seed;
  data::DataLoader<Batch> loader(static_cast<int64_t>(buckets.size()), lopts,
                                 [&](const std::vector<int64_t>& bucket_ids) {
                                   return make_batch(buckets[static_cast<size_t>(bucket_ids[0])]);
                                 });

  // --- model and optimisation ---------------------------------------------------------------
  manual_seed(c.seed);
  auto encoder = std::make_shared<nn::Seq2SeqEncoder>(src_tok.vocab_size(), c.embed, c.hidden,
                                                      c.layers, c.dropout);
  auto decoder = std::make_shared<nn::AttentionDecoder>(tgt_vocab.size(), c.embed, c.hidden,
                                                        c.layers, c.dropout);
  nn::EncoderDecoder model(encoder, decoder);
  optim::Adam opt(model.parameters(), {.lr = c.lr});
  const int64_t steps_per_epoch = loader.batches_per_epoch();
  const int64_t total_steps = steps_per_epoch * c.epochs;
  auto sched = examples::warmup_cosine(opt, c.lr, c.warmup_steps, total_steps);
  fmt::print("model: {} parameters, {} steps ({} per epoch)\n", model.num_parameters(), total_steps,
             steps_per_epoch);

  const examples::Checkpointer checkpointer(c.out + "/checkpoint.safetensors", model, opt,
                                            sched.get());
  examples::RunState state;
  if (c.resume) {
    if (auto saved = checkpointer.load()) {
      state = saved->first;
      loader.restore(saved->second);
      fmt::print("resumed from {} at step {}\n", checkpointer.path(), state.step);
    }
  }
  const std::vector<std::string> columns =
      g2p ? std::vector<std::string>{"step", "epoch", "loss", "word_accuracy", "per"}
          : std::vector<std::string>{"step", "epoch", "loss", "word_accuracy"};
  examples::CsvLogger csv(c.out + "/metrics.csv", columns, c.resume);

  const auto max_len = static_cast<int64_t>(max_tgt) + 5;
  auto decode = [&](size_t i) {
    const auto& s = test.src[i];
    return model.greedy_decode(from_vector(s, {static_cast<int64_t>(s.size())}),
                               static_cast<int64_t>(s.size()), SpecialTokens::kBos,
                               SpecialTokens::kEos, max_len);
  };
  struct Scores {
    double word_accuracy = 0, per = 0;
  };
  // On `limit` test pairs spread evenly over the test set (0: all of it). Not the first ones:
  // the CMU test split is in dictionary order, and its first 500 words (acronyms, names in
  // "aa...") score 0.44 where the whole set scores 0.63.
  auto evaluate = [&](int64_t limit) {
    const size_t total = test.src.size();
    const size_t stride =
        limit > 0 ? std::max<size_t>(1, total / static_cast<size_t>(limit)) : size_t{1};
    int64_t n = 0, correct = 0, edits = 0, ref = 0;
    for (size_t i = 0; i < total && (limit <= 0 || n < limit); i += stride, ++n) {
      const auto out = decode(i);
      correct += out.tokens == test.tgt[i];
      edits += edit_distance(out.tokens, test.tgt[i]);
      ref += static_cast<int64_t>(test.tgt[i].size());
    }
    return Scores{static_cast<double>(correct) / static_cast<double>(std::max<int64_t>(1, n)),
                  static_cast<double>(edits) / static_cast<double>(std::max<int64_t>(1, ref))};
  };

  // --- training -------------------------------------------------------------------------------
  examples::LossCurve losses(state.loss_ema);
  examples::ProgressBar bar("train", total_steps, 50, state.step, "target tokens");
  model.train();
  while (state.step < total_steps) {
    auto batch = loader.next();
    if (!batch) {
      loader.next_epoch();
      continue;
    }
    Tensor logits = model.forward(batch->src.tokens, batch->tgt_in, batch->src.valid_lens);
    const int64_t V = logits.size(-1);
    Tensor loss = cross_entropy(logits.reshape({-1, V}), batch->tgt_out.reshape({-1}),
                                {.ignore_index = SpecialTokens::kPad});
    opt.zero_grad();
    loss.backward();
    optim::clip_grad_norm_(model.parameters(), 1.0);
    opt.step();
    sched->step();
    const int64_t step = ++state.step;
    state.loss_ema = losses.add(step, loss.item());
    bar.update(step, {{"loss", state.loss_ema}}, batch->tokens);
    if (step % steps_per_epoch == 0 || step == total_steps) {
      bar.finish();
      const Scores s = evaluate(c.eval_size);
      const double epoch = static_cast<double>(step) / static_cast<double>(steps_per_epoch);
      if (g2p) {
        fmt::print("epoch {:.0f} step {}: train loss {:.4f}, word accuracy {:.4f}, PER {:.4f}\n",
                   epoch, step, state.loss_ema, s.word_accuracy, s.per);
        csv.row({static_cast<double>(step), epoch, state.loss_ema, s.word_accuracy, s.per});
      } else {
        fmt::print("epoch {:.0f} step {}: train loss {:.4f}, word accuracy {:.4f}\n", epoch, step,
                   state.loss_ema, s.word_accuracy);
        csv.row({static_cast<double>(step), epoch, state.loss_ema, s.word_accuracy});
      }
      checkpointer.save(state, loader.cursor());
      if (c.stop_after > 0 && step >= c.stop_after && step < total_steps) {
        fmt::print("stopping at step {} as asked (--stop-after); continue with --resume\n", step);
        return 0;
      }
    }
  }
  const double train_s = examples::seconds_since(t0);

  // --- report ---------------------------------------------------------------------------------
  const Scores final_scores = evaluate(0);
  for (size_t k = 0; k < 3 && k < test.src.size(); ++k) {
    const size_t i = k * test.src.size() / 3;
    const auto out = decode(i);
    const auto steps = out.attention.size(0), cols = out.attention.size(1);
    const auto w = out.attention.contiguous().to_vector<float>();
    std::vector<std::vector<double>> rows(static_cast<size_t>(steps));
    std::vector<std::string> row_labels, col_labels = data::utf8_chars(ds.test[i].src);
    col_labels.push_back("<eos>");
    for (int64_t r = 0; r < steps; ++r) {
      for (int64_t q = 0; q < cols; ++q)
        rows[static_cast<size_t>(r)].push_back(w[static_cast<size_t>(r * cols + q)]);
      row_labels.push_back(r < static_cast<int64_t>(out.tokens.size())
                               ? tgt_vocab.name(out.tokens[static_cast<size_t>(r)])
                               : "<eos>");
    }
    std::vector<std::string> pred;
    for (int64_t t : out.tokens) pred.push_back(tgt_vocab.name(t));
    const std::string sep = g2p ? " " : "";
    fmt::print("  \"{}\" -> \"{}\" (reference \"{}\")\n", ds.test[i].src, fmt::join(pred, sep),
               fmt::join(ds.test[i].tgt, sep));
    viz::heatmap(fmt::format("{}/attention_{}.png", c.out, k), rows,
                 fmt::format("attention: {} -> {}", ds.test[i].src, fmt::join(pred, sep)),
                 row_labels, col_labels);
  }
  losses.plot(c.out + "/loss.png", "seq2seq_attention: training loss", "cross-entropy per token");
  fmt::print(
      "test word accuracy {:.4f}{} after {} steps in {:.1f} s; wrote {}/metrics.csv, "
      "loss.png, attention_0..2.png\n",
      final_scores.word_accuracy,
      g2p ? fmt::format(", phoneme error rate {:.4f}", final_scores.per) : std::string(),
      state.step, train_s, c.out);
  fmt::print(
      "RESULT example=seq2seq_attention task={} word_accuracy={:.4f}{} steps={} params={} "
      "train_s={:.1f}\n",
      c.task, final_scores.word_accuracy,
      g2p ? fmt::format(" per={:.4f}", final_scores.per) : std::string(), state.step,
      model.num_parameters(), train_s);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return examples::guarded_main(argc, argv, run); }
