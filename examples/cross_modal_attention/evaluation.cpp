#include "examples/cross_modal_attention/evaluation.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "examples/common/plot.h"

namespace nabla::examples::crossmodal {

namespace {

// Scenes, predictions and attention maps of `indices`, in eval mode without a graph.
struct Answered {
  SceneBatch batch;
  std::vector<int64_t> predicted;  // (B * Q)
  std::vector<float> maps;         // (B * Q, S)
  double loss_sum = 0;             // cross-entropy summed over the questions
};

Answered answer(CrossModalModel& model, const SceneGenerator& gen,
                const std::vector<int64_t>& indices, double label_smoothing = 0) {
  NoGradGuard no_grad;
  model.eval();
  model.set_store_attention(true);
  Answered a{make_batch(gen, indices), {}, {}, 0};
  const Tensor logits = model(a.batch.images, a.batch.questions);
  a.loss_sum = cross_entropy(logits.reshape({-1, kAnswers}), a.batch.answers.reshape({-1}),
                             {.label_smoothing = label_smoothing, .reduction = Reduction::Sum})
                   .item();
  a.predicted = argmax(logits, -1).reshape({-1}).to_vector<int64_t>();
  a.maps = model.patch_attention().contiguous().to_vector<float>();
  model.set_store_attention(false);
  model.train();
  return a;
}

// A patch map drawn at pixel resolution, scaled so its largest weight is 1.
std::vector<double> overlay(const float* map, int64_t grid, int64_t patch) {
  const double top =
      std::max(1e-12, static_cast<double>(*std::max_element(map, map + grid * grid)));
  std::vector<double> px(static_cast<size_t>(kSceneSize * kSceneSize));
  for (int64_t y = 0; y < kSceneSize; ++y)
    for (int64_t x = 0; x < kSceneSize; ++x)
      px[static_cast<size_t>(y * kSceneSize + x)] = map[(y / patch) * grid + x / patch] / top;
  return px;
}

std::vector<std::vector<double>> scene_pixels(const Tensor& raw_items,
                                              const std::vector<Scene>& scenes) {
  const auto v = compose_scenes(raw_items, scenes).to(kFloat64).contiguous().to_vector<double>();
  std::vector<std::vector<double>> out;
  const auto n = static_cast<size_t>(kSceneSize * kSceneSize);
  for (size_t s = 0; s < scenes.size(); ++s)
    out.emplace_back(v.begin() + static_cast<std::ptrdiff_t>(s * n),
                     v.begin() + static_cast<std::ptrdiff_t>((s + 1) * n));
  return out;
}

}  // namespace

Scores evaluate(CrossModalModel& model, const SceneGenerator& gen, int64_t scenes,
                double label_smoothing) {
  Scores s;
  int64_t where = 0, what = 0, where_right = 0, what_right = 0;
  double att_where = 0, att_what = 0;
  const int64_t step = 250;
  for (int64_t first = 0; first < scenes; first += step) {
    std::vector<int64_t> idx(static_cast<size_t>(std::min(step, scenes - first)));
    std::iota(idx.begin(), idx.end(), first);
    const Answered a = answer(model, gen, idx, label_smoothing);
    const auto answers = a.batch.answers.reshape({-1}).to_vector<int64_t>();
    s.loss += a.loss_sum;
    const int64_t S = model.grid() * model.grid();
    const std::vector<double> share =
        attention_on_quadrant(from_vector(a.maps, {static_cast<int64_t>(answers.size()), S}),
                              a.batch.quadrants, model.grid());
    for (size_t k = 0; k < answers.size(); ++k) {
      const bool right = a.predicted[k] == answers[k];
      if (a.batch.kinds[k] == QuestionKind::kWhere) {
        ++where;
        where_right += right;
        att_where += share[k];
      } else {
        ++what;
        what_right += right;
        att_what += share[k];
      }
    }
  }
  s.questions = where + what;
  const auto ratio = [](double a, int64_t b) { return b > 0 ? a / static_cast<double>(b) : 0.0; };
  s.where_accuracy = ratio(static_cast<double>(where_right), where);
  s.what_accuracy = ratio(static_cast<double>(what_right), what);
  s.attention_where = ratio(att_where, where);
  s.attention_what = ratio(att_what, what);
  s.attention_on_target = ratio(att_where + att_what, s.questions);
  s.loss = ratio(s.loss, s.questions);
  return s;
}

void save_attention_grid(CrossModalModel& model, const SceneGenerator& gen, const Tensor& raw_items,
                         const std::vector<int64_t>& indices, const std::string& path) {
  const Answered a = answer(model, gen, indices);
  std::vector<Scene> scenes;
  for (int64_t i : indices) scenes.push_back(gen.scene(i));
  const auto pixels = scene_pixels(raw_items, scenes);
  const auto answers = a.batch.answers.reshape({-1}).to_vector<int64_t>();
  const int64_t S = model.grid() * model.grid();
  viz::ImageGrid grid{.rows = kSceneSize,
                      .cols = kSceneSize,
                      .per_row = 4,
                      .scale = 5,
                      .patch = static_cast<int>(model.config().patch)};
  grid.title = fmt::format(
      "cross_modal_attention ({}): each question's attention over the patches; answer / predicted",
      direction_name(model.config().direction));
  const auto questions_of = [&](size_t s) { return gen.questions(indices[s]); };
  for (size_t s = 0; s < scenes.size(); ++s) {
    const auto qs = questions_of(s);
    for (size_t q = 0; q < qs.size(); ++q) {
      const size_t k = s * qs.size() + q;
      grid.images.push_back(pixels[s]);
      grid.overlays.push_back(
          overlay(a.maps.data() + k * static_cast<size_t>(S), model.grid(), model.config().patch));
      grid.captions.push_back(fmt::format("{}  {} / {}", qs[q].text(),
                                          answer_names()[static_cast<size_t>(answers[k])],
                                          answer_names()[static_cast<size_t>(a.predicted[k])]));
    }
  }
  viz::image_grid(path, grid);
}

void answer_question(CrossModalModel& model, const SceneGenerator& gen, const Tensor& raw_items,
                     int64_t scene, const Question& q, const std::string& path) {
  const Scene s = gen.scene(scene);
  fmt::print("test scene {}: top left {}, top right {}, bottom left {}, bottom right {}\n", scene,
             class_word(s.label[0]), class_word(s.label[1]), class_word(s.label[2]),
             class_word(s.label[3]));
  std::string truth = "none (no such item in this scene)";
  if (q.kind == QuestionKind::kWhat ||
      std::find(s.label.begin(), s.label.end(), q.subject) != s.label.end())
    truth = answer_names()[static_cast<size_t>(answer_of(q, s))];
  NoGradGuard no_grad;
  model.eval();
  model.set_store_attention(true);
  const Tensor images = compose_scenes(gen.items(), {s});
  const Tensor logits = model(images, encode_questions({q}).unsqueeze(0));
  const auto p = softmax(logits, -1).reshape({-1}).to_vector<float>();
  const auto map = model.patch_attention().contiguous().to_vector<float>();
  model.set_store_attention(false);
  std::vector<size_t> order(p.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] > p[b]; });
  fmt::print("question: {}\nanswer: {}\npredicted: {} ({:.3f}), then {} ({:.3f}), {} ({:.3f})\n",
             q.text(), truth, answer_names()[order[0]], p[order[0]], answer_names()[order[1]],
             p[order[1]], answer_names()[order[2]], p[order[2]]);
  viz::ImageGrid grid{.rows = kSceneSize,
                      .cols = kSceneSize,
                      .scale = 6,
                      .patch = static_cast<int>(model.config().patch)};
  grid.title = q.text();
  const std::vector<double> pixels = scene_pixels(raw_items, {s})[0];
  grid.images = {pixels, pixels};
  grid.overlays = {overlay(map.data(), model.grid(), model.config().patch), {}};
  grid.captions = {fmt::format("attention; predicted {}", answer_names()[order[0]]),
                   fmt::format("answer: {}", truth)};
  viz::image_grid(path, grid);
  fmt::print("wrote {} and its .svg\n", path);
}

}  // namespace nabla::examples::crossmodal
