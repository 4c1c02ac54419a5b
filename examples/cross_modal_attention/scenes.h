// The data of cross_modal_attention: 2 x 2 scenes of Fashion-MNIST items (56 x 56 pixels) and
// the questions asked about them.
//
//   quadrants  0 top left | 1 top right      questions  "where is the sandal ?"  -> a position
//              2 bottom left | 3 bottom right            "what is at top left ?" -> a class
//
// A scene holds four items of four different classes, so every "where" question has one answer.
// Training scenes take their items from the training split, test scenes from the test split.
// Scene i of a split is a function of (seed, split, i) alone: a loader can build any scene on
// demand, a resumed run sees the same scenes, and the test set is fixed by its seed.
//
// Words: the questions' vocabulary is fixed (kPad, 10 frame words, 10 class words). Each class is
// one token: Fashion-MNIST's "T-shirt/top" is "t-shirt" and "Ankle boot" is "boot" (the names of
// examples/common/fashion_mnist.h, lower-cased), so both question forms have a fixed length.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "nabla/core/tensor.h"

namespace nabla::examples::crossmodal {

inline constexpr int64_t kItemSize = 28, kSceneSize = 56, kQuadrants = 4, kClasses = 10;
// Answers: the 4 positions, then the 10 classes (one classifier head over all 14).
inline constexpr int64_t kAnswers = kQuadrants + kClasses;
inline constexpr int64_t kQuestionsPerScene = 2;  // one "where", one "what"
inline constexpr int64_t kMaxQuestionTokens = 6;  // "what is at top left ?"
inline constexpr int64_t kPadToken = 0;

enum class Split { kTrain, kTest };

struct Scene {
  std::array<int64_t, kQuadrants> item{};   // index into its split's images, per quadrant
  std::array<int64_t, kQuadrants> label{};  // the items' classes, all different
};

enum class QuestionKind { kWhere, kWhat };

struct Question {
  QuestionKind kind = QuestionKind::kWhere;
  int64_t subject = 0;  // kWhere: the class asked for; kWhat: the quadrant asked about
  std::vector<int64_t> tokens() const;  // word ids, unpadded
  std::string text() const;
};

// The vocabulary: word id -> word (id 0 is "<pad>").
const std::vector<std::string>& words();
// Answer id -> name: "top left", ..., "bottom right", "t-shirt", ..., "boot".
const std::vector<std::string>& answer_names();
// Quadrant q's name ("top left"), class c's word ("sandal").
const std::string& position_name(int64_t quadrant);
const std::string& class_word(int64_t label);

// Parses "where is the <class> ?" or "what is at <top|bottom> <left|right> ?" (words separated by
// spaces; a '?' may touch the last word; upper case is folded). Throws ValueError naming an
// unknown word, or the expected form when the words are known but do not make a question.
Question parse_question(const std::string& text);

// The question's answer id on this scene, and the quadrant it is about (the named item's or the
// asked one). A "where" question about a class not in the scene has neither: ValueError.
int64_t answer_of(const Question& q, const Scene& s);
int64_t quadrant_of(const Question& q, const Scene& s);

// Patch (r, c) of a grid x grid patch layout (row-major index r * grid + c) lies in quadrant
// (r >= grid/2) * 2 + (c >= grid/2). grid must be even so quadrants hold whole patches.
int64_t patch_quadrant(int64_t patch_index, int64_t grid);

class SceneGenerator {
 public:
  // items: the split's (N, 28, 28) pixels as the model sees them (normalised); labels: its (N,)
  // int64 classes, every class present. Scenes of this generator use only these items.
  SceneGenerator(Tensor items, const Tensor& labels, Split split, uint64_t seed);
  Scene scene(int64_t i) const;
  // Scene i's questions: a "where" about one of its four classes and a "what" about one of its
  // quadrants, each chosen uniformly.
  std::array<Question, kQuestionsPerScene> questions(int64_t i) const;
  Split split() const { return split_; }
  const Tensor& items() const { return items_; }
  int64_t size() const { return items_.size(0); }

 private:
  uint64_t stream(int64_t i) const;
  Tensor items_;
  std::vector<std::vector<int64_t>> by_class_;
  Split split_;
  uint64_t seed_;
};

// The model's inputs for a batch of scenes.
struct SceneBatch {
  Tensor images;                    // (B, 1, 56, 56) float32, normalised as the items are
  Tensor questions;                 // (B, Q, kMaxQuestionTokens) int64, padded with kPadToken
  Tensor answers;                   // (B, Q) int64 answer ids
  std::vector<int64_t> quadrants;   // (B * Q) the quadrant each question is about
  std::vector<QuestionKind> kinds;  // (B * Q)
};

// items: a split's (N, 28, 28) pixels (normalised or raw) -> (B, 1, 56, 56) scenes.
Tensor compose_scenes(const Tensor& items, const std::vector<Scene>& scenes);
// Scenes `indices` of `gen` (pixels from gen.items()), their questions, answers and quadrants.
SceneBatch make_batch(const SceneGenerator& gen, const std::vector<int64_t>& indices);
// Encodes questions as a (count, kMaxQuestionTokens) int64 tensor padded with kPadToken.
Tensor encode_questions(const std::vector<Question>& questions);

}  // namespace nabla::examples::crossmodal
