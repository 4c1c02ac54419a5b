#include "examples/cross_modal_attention/scenes.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <sstream>
#include <utility>

#include "nabla/nabla.h"

namespace nabla::examples::crossmodal {

namespace {

// Word ids: the frame words, then the class words from kFirstClassWord on.
enum Word : int64_t {
  kWhereW = 1,
  kIsW,
  kTheW,
  kWhatW,
  kAtW,
  kTopW,
  kBottomW,
  kLeftW,
  kRightW,
  kQm
};
constexpr int64_t kFirstClassWord = 11;

// SplitMix64 (Steele, Lea and Flood 2014, "Fast splittable pseudorandom number generators"): a
// Weyl sequence through a bit mixer. Counter-based, so scene i needs no state from scenes before
// it.
constexpr uint64_t kGamma = 0x9e3779b97f4a7c15ULL;

uint64_t finalize(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t mix(uint64_t x) { return finalize(x + kGamma); }

class Draws {
 public:
  explicit Draws(uint64_t state) : state_(state) {}
  // Uniform in [0, n); the modulo bias is below 2^-50 for these n.
  int64_t below(int64_t n) {
    state_ += kGamma;
    return static_cast<int64_t>(finalize(state_) % static_cast<uint64_t>(n));
  }

 private:
  uint64_t state_;
};

std::string join_words() {
  const auto& w = words();
  return fmt::format("{}", fmt::join(w.begin() + 1, w.end(), " "));
}

}  // namespace

const std::vector<std::string>& words() {
  static const std::vector<std::string> w = {
      "<pad>",  "where", "is",     "the",   "what",    "at",      "top",
      "bottom", "left",  "right",  "?",     "t-shirt", "trouser", "pullover",
      "dress",  "coat",  "sandal", "shirt", "sneaker", "bag",     "boot"};
  return w;
}

const std::vector<std::string>& answer_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n = {"top left", "top right", "bottom left", "bottom right"};
    for (int64_t c = 0; c < kClasses; ++c)
      n.push_back(words()[static_cast<size_t>(kFirstClassWord + c)]);
    return n;
  }();
  return names;
}

const std::string& position_name(int64_t quadrant) {
  if (quadrant < 0 || quadrant >= kQuadrants)
    throw IndexError(fmt::format("position_name: quadrant {} is not in [0, 4)", quadrant));
  return answer_names()[static_cast<size_t>(quadrant)];
}

const std::string& class_word(int64_t label) {
  if (label < 0 || label >= kClasses)
    throw IndexError(fmt::format("class_word: class {} is not in [0, 10)", label));
  return words()[static_cast<size_t>(kFirstClassWord + label)];
}

std::vector<int64_t> Question::tokens() const {
  if (kind == QuestionKind::kWhere) return {kWhereW, kIsW, kTheW, kFirstClassWord + subject, kQm};
  return {kWhatW, kIsW, kAtW, subject < 2 ? kTopW : kBottomW, subject % 2 == 0 ? kLeftW : kRightW,
          kQm};
}

std::string Question::text() const {
  std::vector<std::string> w;
  for (int64_t t : tokens()) w.push_back(words()[static_cast<size_t>(t)]);
  return fmt::format("{}", fmt::join(w, " "));
}

Question parse_question(const std::string& text) {
  std::vector<int64_t> ids;
  std::istringstream in(text);
  for (std::string w; in >> w;) {
    std::transform(w.begin(), w.end(), w.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    const bool question_mark = w.size() > 1 && w.back() == '?';
    if (question_mark) w.pop_back();
    const auto& vocab = words();
    const auto at = std::find(vocab.begin() + 1, vocab.end(), w);
    if (at == vocab.end())
      throw ValueError(fmt::format("question \"{}\": unknown word \"{}\" (known words: {})", text,
                                   w, join_words()));
    ids.push_back(at - vocab.begin());
    if (question_mark) ids.push_back(kQm);
  }
  Question q;
  if (ids.size() == 5 && ids[0] == kWhereW && ids[1] == kIsW && ids[2] == kTheW &&
      ids[3] >= kFirstClassWord && ids[4] == kQm) {
    q.kind = QuestionKind::kWhere;
    q.subject = ids[3] - kFirstClassWord;
    return q;
  }
  if (ids.size() == 6 && ids[0] == kWhatW && ids[1] == kIsW && ids[2] == kAtW &&
      (ids[3] == kTopW || ids[3] == kBottomW) && (ids[4] == kLeftW || ids[4] == kRightW) &&
      ids[5] == kQm) {
    q.kind = QuestionKind::kWhat;
    q.subject = (ids[3] == kBottomW ? 2 : 0) + (ids[4] == kRightW ? 1 : 0);
    return q;
  }
  throw ValueError(fmt::format(
      "question \"{}\": not a question this model was trained on; ask \"where is the <class> ?\" "
      "or \"what is at <top|bottom> <left|right> ?\"",
      text));
}

int64_t quadrant_of(const Question& q, const Scene& s) {
  if (q.kind == QuestionKind::kWhat) return q.subject;
  for (int64_t k = 0; k < kQuadrants; ++k)
    if (s.label[static_cast<size_t>(k)] == q.subject) return k;
  throw ValueError(fmt::format("question \"{}\": there is no {} in this scene ({}, {}, {}, {})",
                               q.text(), class_word(q.subject), class_word(s.label[0]),
                               class_word(s.label[1]), class_word(s.label[2]),
                               class_word(s.label[3])));
}

int64_t answer_of(const Question& q, const Scene& s) {
  const int64_t quadrant = quadrant_of(q, s);
  return q.kind == QuestionKind::kWhere ? quadrant
                                        : kQuadrants + s.label[static_cast<size_t>(quadrant)];
}

int64_t patch_quadrant(int64_t patch_index, int64_t grid) {
  if (grid <= 0 || grid % 2 != 0 || patch_index < 0 || patch_index >= grid * grid)
    throw ValueError(
        fmt::format("patch_quadrant: patch {} of a {} x {} grid (the grid must be even)",
                    patch_index, grid, grid));
  const int64_t r = patch_index / grid, c = patch_index % grid;
  return (r >= grid / 2 ? 2 : 0) + (c >= grid / 2 ? 1 : 0);
}

SceneGenerator::SceneGenerator(Tensor items, const Tensor& labels, Split split, uint64_t seed)
    : items_(std::move(items)),
      by_class_(static_cast<size_t>(kClasses)),
      split_(split),
      seed_(seed) {
  if (items_.dim() != 3 || items_.size(1) != kItemSize || items_.size(2) != kItemSize ||
      labels.dim() != 1 || labels.size(0) != items_.size(0) || labels.dtype() != kInt64)
    throw ShapeError(fmt::format(
        "SceneGenerator: expected items (N, 28, 28) and int64 labels (N), got {} and {} {}",
        shape_str(items_.shape()), shape_str(labels.shape()), dtype_name(labels.dtype())));
  const auto y = labels.to_vector<int64_t>();
  for (size_t i = 0; i < y.size(); ++i) {
    if (y[i] < 0 || y[i] >= kClasses)
      throw ValueError(
          fmt::format("SceneGenerator: label {} of item {} is not in [0, 10)", y[i], i));
    by_class_[static_cast<size_t>(y[i])].push_back(static_cast<int64_t>(i));
  }
  for (int64_t c = 0; c < kClasses; ++c)
    if (by_class_[static_cast<size_t>(c)].empty())
      throw ValueError(fmt::format("SceneGenerator: no item of class {} ({}) among {} labels", c,
                                   class_word(c), y.size()));
}

uint64_t SceneGenerator::stream(int64_t i) const {
  return mix(mix(seed_ * 2 + (split_ == Split::kTest ? 1 : 0)) + static_cast<uint64_t>(i));
}

Scene SceneGenerator::scene(int64_t i) const {
  Draws d(stream(i));
  std::array<int64_t, kClasses> classes{};
  for (int64_t c = 0; c < kClasses; ++c) classes[static_cast<size_t>(c)] = c;
  Scene s;
  // The first four steps of a Fisher-Yates shuffle: four different classes.
  for (int64_t k = 0; k < kQuadrants; ++k) {
    const auto at = static_cast<size_t>(k);
    std::swap(classes[at], classes[static_cast<size_t>(k + d.below(kClasses - k))]);
    s.label[at] = classes[at];
    const auto& pool = by_class_[static_cast<size_t>(classes[at])];
    s.item[at] = pool[static_cast<size_t>(d.below(static_cast<int64_t>(pool.size())))];
  }
  return s;
}

std::array<Question, kQuestionsPerScene> SceneGenerator::questions(int64_t i) const {
  Draws d(mix(stream(i) ^ 0x5bd1e9955bd1e995ULL));  // a stream apart from the scene's
  const Scene s = scene(i);
  return {Question{QuestionKind::kWhere, s.label[static_cast<size_t>(d.below(kQuadrants))]},
          Question{QuestionKind::kWhat, d.below(kQuadrants)}};
}

Tensor compose_scenes(const Tensor& items, const std::vector<Scene>& scenes) {
  if (items.dim() != 3 || items.size(1) != kItemSize || items.size(2) != kItemSize)
    throw ShapeError(fmt::format("compose_scenes: expected items (N, 28, 28), got {}",
                                 shape_str(items.shape())));
  std::vector<int64_t> idx;
  for (const Scene& s : scenes)
    for (int64_t k : s.item) {
      if (k < 0 || k >= items.size(0))
        throw IndexError(
            fmt::format("compose_scenes: item {} of a split of {} items", k, items.size(0)));
      idx.push_back(k);
    }
  const auto b = static_cast<int64_t>(scenes.size());
  // (B, row, col, y, x) -> (B, row, y, col, x): the four tiles side by side.
  return index_select(items, 0, from_vector(idx, {b * kQuadrants}))
      .reshape({b, 2, 2, kItemSize, kItemSize})
      .permute({0, 1, 3, 2, 4})
      .reshape({b, 1, kSceneSize, kSceneSize});
}

Tensor encode_questions(const std::vector<Question>& questions) {
  std::vector<int64_t> ids(questions.size() * kMaxQuestionTokens, kPadToken);
  for (size_t i = 0; i < questions.size(); ++i) {
    const auto t = questions[i].tokens();
    std::copy(t.begin(), t.end(),
              ids.begin() + static_cast<std::ptrdiff_t>(i * kMaxQuestionTokens));
  }
  return from_vector(ids, {static_cast<int64_t>(questions.size()), kMaxQuestionTokens});
}

SceneBatch make_batch(const SceneGenerator& gen, const std::vector<int64_t>& indices) {
  std::vector<Scene> scenes;
  std::vector<Question> questions;
  std::vector<int64_t> answers;
  SceneBatch b;
  for (int64_t i : indices) {
    scenes.push_back(gen.scene(i));
    for (const Question& q : gen.questions(i)) {
      questions.push_back(q);
      answers.push_back(answer_of(q, scenes.back()));
      b.quadrants.push_back(quadrant_of(q, scenes.back()));
      b.kinds.push_back(q.kind);
    }
  }
  const auto n = static_cast<int64_t>(indices.size());
  b.images = compose_scenes(gen.items(), scenes);
  b.questions = encode_questions(questions).reshape({n, kQuestionsPerScene, kMaxQuestionTokens});
  b.answers = from_vector(answers, {n, kQuestionsPerScene});
  return b;
}

}  // namespace nabla::examples::crossmodal
