// Scoring and pictures of cross_modal_attention: accuracy per question kind, the attention on the
// target quadrant, and the scenes drawn with their question's attention over them.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "examples/cross_modal_attention/model.h"
#include "examples/cross_modal_attention/scenes.h"

namespace nabla::examples::crossmodal {

struct Scores {
  double where_accuracy = 0, what_accuracy = 0;
  // The mean share of the image-reading attention on the question's quadrant: all questions,
  // and each kind alone.
  double attention_on_target = 0, attention_where = 0, attention_what = 0;
  double loss = 0;  // mean cross-entropy per question (with the training label smoothing)
  int64_t questions = 0;
};

// The first `scenes` scenes of `gen` and both their questions, in eval mode without a graph
// (the model is left in training mode).
Scores evaluate(CrossModalModel& model, const SceneGenerator& gen, int64_t scenes,
                double label_smoothing);

// Scenes `indices` of `gen` (raw pixels from `raw_items`, the split's (N, 28, 28) in [0, 1]) with
// each question's attention over the patches drawn over the scene; captions: question, answer,
// prediction. Writes path (PNG) and its .svg.
void save_attention_grid(CrossModalModel& model, const SceneGenerator& gen, const Tensor& raw_items,
                         const std::vector<int64_t>& indices, const std::string& path);

// One question about one scene: prints the scene, the answer (when the question has one there)
// and the model's three most likely answers; writes path (PNG + SVG) with the attention.
void answer_question(CrossModalModel& model, const SceneGenerator& gen, const Tensor& raw_items,
                     int64_t scene, const Question& q, const std::string& path);

}  // namespace nabla::examples::crossmodal
