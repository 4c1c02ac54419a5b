// examples/cross_modal_attention: the scene generator (each class at most once per scene, answers
// that agree with the placed items, test scenes built only from test-split items), the questions'
// words and errors, and the attention_on_target metric on hand-made attention maps.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <set>

#include "examples/cross_modal_attention/model.h"
#include "examples/cross_modal_attention/scenes.h"
#include "nabla/nabla.h"

using namespace nabla;
using namespace nabla::examples::crossmodal;
using Catch::Matchers::Contains;

namespace {

// A made-up split of n items: item i is class i % 10 and every pixel of it holds `base + i`, so
// a composed scene shows which split and item each tile came from.
struct FakeSplit {
  Tensor items, labels;
};

FakeSplit fake_split(int64_t n, double base) {
  std::vector<float> px(static_cast<size_t>(n * kItemSize * kItemSize));
  std::vector<int64_t> y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    y[static_cast<size_t>(i)] = i % kClasses;
    std::fill_n(px.begin() + static_cast<std::ptrdiff_t>(i * kItemSize * kItemSize),
                kItemSize * kItemSize, static_cast<float>(base + static_cast<double>(i)));
  }
  return {from_vector(px, {n, kItemSize, kItemSize}), from_vector(y, {n})};
}

}  // namespace

TEST_CASE("cross_modal scenes: four different classes, answers agree with the items",
          "[cross_modal]") {
  const FakeSplit split = fake_split(70, 0);
  const auto labels = split.labels.to_vector<int64_t>();
  const SceneGenerator gen(split.items, split.labels, Split::kTrain, 7);
  std::vector<int64_t> class_count(kClasses, 0), where_answer(kQuadrants, 0);
  const int64_t n = 2000;
  for (int64_t i = 0; i < n; ++i) {
    const Scene s = gen.scene(i);
    const std::set<int64_t> distinct(s.label.begin(), s.label.end());
    REQUIRE(distinct.size() == kQuadrants);
    for (size_t k = 0; k < kQuadrants; ++k) {
      REQUIRE(labels[static_cast<size_t>(s.item[k])] == s.label[k]);
      ++class_count[static_cast<size_t>(s.label[k])];
    }
    const auto qs = gen.questions(i);
    REQUIRE(qs[0].kind == QuestionKind::kWhere);
    REQUIRE(qs[1].kind == QuestionKind::kWhat);
    // "where is the <class> ?": the quadrant holding that class.
    const int64_t where = answer_of(qs[0], s);
    REQUIRE(where >= 0);
    REQUIRE(where < kQuadrants);
    REQUIRE(s.label[static_cast<size_t>(where)] == qs[0].subject);
    REQUIRE(quadrant_of(qs[0], s) == where);
    ++where_answer[static_cast<size_t>(where)];
    // "what is at <position> ?": the class there, after the 4 position answers.
    REQUIRE(answer_of(qs[1], s) == kQuadrants + s.label[static_cast<size_t>(qs[1].subject)]);
    REQUIRE(quadrant_of(qs[1], s) == qs[1].subject);
    for (const Question& q : qs) {
      const Question back = parse_question(q.text());
      REQUIRE(back.kind == q.kind);
      REQUIRE(back.subject == q.subject);
    }
  }
  // Uniform choices: every class in about 40% of the scenes, every position answered ~25%.
  const auto share = [&](int64_t count) {
    return static_cast<double>(count) / static_cast<double>(n);
  };
  for (int64_t c : class_count) CHECK(std::abs(share(c) - 0.4) < 0.05);
  for (int64_t w : where_answer) CHECK(std::abs(share(w) - 0.25) < 0.04);
}

TEST_CASE("cross_modal scenes: deterministic, and the splits' scenes differ", "[cross_modal]") {
  const FakeSplit split = fake_split(70, 0);
  const SceneGenerator a(split.items, split.labels, Split::kTrain, 7);
  const SceneGenerator b(split.items, split.labels, Split::kTrain, 7);
  const SceneGenerator test(split.items, split.labels, Split::kTest, 7);
  const SceneGenerator other_seed(split.items, split.labels, Split::kTrain, 8);
  int same_as_test = 0, same_as_other_seed = 0;
  for (int64_t i = 0; i < 100; ++i) {
    REQUIRE(a.scene(i).item == b.scene(i).item);
    REQUIRE(a.questions(i)[0].subject == b.questions(i)[0].subject);
    same_as_test += a.scene(i).item == test.scene(i).item;
    same_as_other_seed += a.scene(i).item == other_seed.scene(i).item;
  }
  CHECK(same_as_test == 0);
  CHECK(same_as_other_seed == 0);
}

TEST_CASE("cross_modal scenes: pixels come from the generator's own split", "[cross_modal]") {
  const FakeSplit test = fake_split(30, 1000);  // a training split would hold values < 1000
  const SceneGenerator gen(test.items, test.labels, Split::kTest, 3);
  std::vector<int64_t> idx(40);
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>(i) * 3;
  const SceneBatch b = make_batch(gen, idx);
  REQUIRE(b.images.shape() == Shape{40, 1, kSceneSize, kSceneSize});
  REQUIRE(b.questions.shape() == Shape{40, kQuestionsPerScene, kMaxQuestionTokens});
  REQUIRE(b.answers.shape() == Shape{40, kQuestionsPerScene});
  const auto px = b.images.to_vector<float>();
  for (size_t s = 0; s < idx.size(); ++s) {
    const Scene scene = gen.scene(idx[s]);
    for (int64_t k = 0; k < kQuadrants; ++k) {
      // One pixel inside each quadrant: its tile is test item scene.item[k] (values >= 1000).
      const int64_t y = (k / 2) * kItemSize + 5, x = (k % 2) * kItemSize + 20;
      const float v = px[s * static_cast<size_t>(kSceneSize * kSceneSize) +
                         static_cast<size_t>(y * kSceneSize + x)];
      REQUIRE(v == Approx(1000.0 + static_cast<double>(scene.item[static_cast<size_t>(k)])));
    }
  }
  // The padded "where" question: 5 words then padding.
  const auto q = b.questions.to_vector<int64_t>();
  CHECK(q[4] != kPadToken);
  CHECK(q[5] == kPadToken);
  CHECK(q[11] != kPadToken);
}

TEST_CASE("cross_modal scenes: Fashion-MNIST test scenes use test items only", "[cross_modal]") {
  const data::ImageDataset test = data::read_mnist_style(data::kFashionMnistDir, "t10k");
  const SceneGenerator gen(test.images, test.labels, Split::kTest, 20261126);
  const auto labels = test.labels.to_vector<int64_t>();
  const auto images = test.images;
  std::vector<Scene> scenes;
  for (int64_t i = 0; i < 50; ++i) scenes.push_back(gen.scene(i));
  const Tensor composed = compose_scenes(images, scenes);
  for (size_t s = 0; s < scenes.size(); ++s)
    for (int64_t k = 0; k < kQuadrants; ++k) {
      const int64_t item = scenes[s].item[static_cast<size_t>(k)];
      REQUIRE(item < test.images.size(0));
      REQUIRE(labels[static_cast<size_t>(item)] == scenes[s].label[static_cast<size_t>(k)]);
      const Tensor tile = composed.select(0, static_cast<int64_t>(s))
                              .select(0, 0)
                              .narrow(0, (k / 2) * kItemSize, kItemSize)
                              .narrow(1, (k % 2) * kItemSize, kItemSize);
      REQUIRE(tile.contiguous().to_vector<float>() == images.select(0, item).to_vector<float>());
    }
}

TEST_CASE("cross_modal questions: words, forms and errors", "[cross_modal]") {
  const Question where = parse_question("Where is the SANDAL?");
  CHECK(where.kind == QuestionKind::kWhere);
  CHECK(class_word(where.subject) == "sandal");
  CHECK(where.text() == "where is the sandal ?");
  const Question what = parse_question("what is at bottom right ?");
  CHECK(what.kind == QuestionKind::kWhat);
  CHECK(what.subject == 3);
  CHECK(position_name(what.subject) == "bottom right");
  CHECK(what.tokens().size() == kMaxQuestionTokens);
  CHECK(answer_names().size() == kAnswers);
  CHECK_THROWS_AS(parse_question("where is the hat ?"), ValueError);
  CHECK_THROWS_WITH(
      parse_question("where is the hat ?"),
      Catch::Matchers::Equals("question \"where is the hat ?\": unknown word \"hat\" (known "
                              "words: where is the what at top bottom left right ? t-shirt "
                              "trouser pullover dress coat sandal shirt sneaker bag boot)"));
  CHECK_THROWS_WITH(parse_question("where is top left ?"), Contains("not a question this model"));
  CHECK_THROWS_WITH(parse_question(""), Contains("not a question this model"));
  const Scene s{{0, 1, 2, 3}, {0, 1, 2, 3}};
  CHECK_THROWS_WITH(answer_of(parse_question("where is the bag ?"), s),
                    Contains("there is no bag in this scene"));
}

TEST_CASE("cross_modal attention_on_target: hand-made maps", "[cross_modal]") {
  // An 8 x 8 grid (7-pixel patches): quadrant 0 is rows 0-3 x columns 0-3, and so on.
  CHECK(patch_quadrant(3, 8) == 0);
  CHECK(patch_quadrant(4, 8) == 1);
  CHECK(patch_quadrant(32, 8) == 2);
  CHECK(patch_quadrant(63, 8) == 3);
  CHECK_THROWS_AS(patch_quadrant(64, 8), ValueError);
  std::vector<float> maps(3 * 64, 0.0f);
  for (int64_t p = 0; p < 64; ++p) {
    maps[static_cast<size_t>(p)] = patch_quadrant(p, 8) == 1 ? 1.0f / 16 : 0.0f;  // all on q1
    maps[static_cast<size_t>(64 + p)] = 1.0f / 64;                                // uniform
  }
  maps[128 + 5 * 8 + 6] = 0.7f;  // row 5, column 6: quadrant 3
  maps[128 + 0] = 0.3f;          // quadrant 0
  const Tensor m = from_vector(maps, {3, 64});
  const auto share = attention_on_quadrant(m, {1, 2, 3}, 8);
  CHECK(share[0] == Approx(1.0));
  CHECK(share[1] == Approx(0.25));
  CHECK(share[2] == Approx(0.7));
  CHECK(attention_on_quadrant(m, {0, 0, 0}, 8)[2] == Approx(0.3));
  CHECK_THROWS_AS(attention_on_quadrant(m, {0, 4, 0}, 8), IndexError);
  CHECK_THROWS_AS(attention_on_quadrant(m, {0, 0}, 8), ShapeError);

  // mean_attention: the mean over heads and the question's non-padding tokens.
  // weights (1, 2 heads, 3 queries, 2 keys); the third query is padding.
  const Tensor w = from_vector(std::vector<float>{1, 0, 0, 1, 0.5f, 0.5f,   // head 0
                                                  0, 1, 0, 1, 0.5f, 0.5f},  // head 1
                               {1, 2, 3, 2});
  const Tensor padding = eq(from_vector(std::vector<int64_t>{0, 0, 1}, {1, 3}), 1.0);
  const auto avg = mean_attention(w, padding).to_vector<float>();
  // head mean: query 0 (0.5, 0.5), query 1 (0, 1) -> over the two real queries (0.25, 0.75)
  CHECK(avg[0] == Approx(0.25));
  CHECK(avg[1] == Approx(0.75));
  const auto all = mean_attention(w, Tensor()).to_vector<float>();
  CHECK(all[0] == Approx((0.5 + 0 + 0.5) / 3));
  CHECK_THROWS_AS(mean_attention(w, eq(from_vector(std::vector<int64_t>{0, 0}, {1, 2}), 1.0)),
                  ShapeError);
}

TEST_CASE("cross_modal model: both directions, shapes and attention maps", "[cross_modal]") {
  const FakeSplit split = fake_split(40, 0);
  const SceneGenerator gen(div(split.items, 40.0), split.labels, Split::kTrain, 1);
  const SceneBatch b = make_batch(gen, {0, 1, 2});
  for (Direction d : {Direction::kTextToImage, Direction::kImageToText}) {
    manual_seed(1);
    CrossModalModel model({.direction = d, .dim = 16, .heads = 2, .ffn = 32, .image_layers = 1});
    model.set_store_attention(true);
    const Tensor logits = model(b.images, b.questions);
    REQUIRE(logits.shape() == Shape{3, kQuestionsPerScene, kAnswers});
    const Tensor maps = model.patch_attention();
    REQUIRE(maps.shape() == Shape{3, kQuestionsPerScene, 64});
    const auto row_sums = sum(maps, {2}).to_vector<float>();
    for (float v : row_sums) CHECK(v == Approx(1.0).epsilon(1e-5));
    // A gradient reaches the image side through the cross-attention.
    model.set_store_attention(false);
    sum(model(b.images, b.questions)).backward();
    bool reached = false;
    for (const auto& [name, p] : model.named_parameters())
      if (name == "patch_embed.proj.weight") reached = sum(abs(p.grad())).item() > 0;
    CHECK(reached);
  }
  CHECK_THROWS_WITH(CrossModalModel({.patch = 8}), Contains("--patch 8 must divide 28"));
}

TEST_CASE("cross_modal model: --window keeps an item's patches to themselves", "[cross_modal]") {
  const FakeSplit split = fake_split(40, 0);
  const SceneGenerator gen(div(split.items, 40.0), split.labels, Split::kTrain, 1);
  const Tensor images = make_batch(gen, {0}).images;
  Tensor changed = images.clone();
  {
    NoGradGuard no_grad;
    changed.narrow(2, kItemSize, kItemSize).narrow(3, kItemSize, kItemSize).fill_(3.0);
  }
  // The largest change of the patches of quadrant q (grid 8: 4 x 4 patches each).
  const auto change_in = [](const Tensor& a, const Tensor& b, int64_t q) {
    const Tensor diff = abs(sub(a, b)).reshape({8, 8, -1});
    return max(diff.narrow(0, q / 2 * 4, 4).narrow(1, q % 2 * 4, 4)).item();
  };
  for (int64_t window : {0, 28}) {
    manual_seed(1);
    CrossModalModel model({.dim = 16, .heads = 2, .ffn = 32, .image_layers = 2, .window = window});
    NoGradGuard no_grad;
    const Tensor a = model.image_features(images), b = model.image_features(changed);
    REQUIRE(a.shape() == Shape{1, 64, 16});
    CHECK(change_in(a, b, 3) > 0.01);  // the changed item itself
    if (window == 28)
      CHECK(change_in(a, b, 0) == 0.0);  // an item's window holds only its own patches
    else
      CHECK(change_in(a, b, 0) > 1e-4);  // global self-attention mixes the items
  }
  CHECK_THROWS_WITH(CrossModalModel({.window = 21}),
                    Contains("--window 21 must be 0 (no windows) or a multiple of --patch 7 that "
                             "divides 56"));
}

TEST_CASE("cross_modal checkpoints: an older layout or other flags are refused", "[cross_modal]") {
  manual_seed(1);
  const CrossModalModel model({.dim = 16, .heads = 2, .ffn = 32, .image_layers = 1, .window = 0});
  const CrossModalModel windowed(
      {.dim = 16, .heads = 2, .ffn = 32, .image_layers = 1, .window = 28});
  const std::string path =
      (std::filesystem::temp_directory_path() / "cross_modal_layout_test.safetensors").string();
  const auto save_config = [&](const std::vector<int64_t>& config) {
    io::Checkpoint ck;
    ck.put_section("model",
                   {{"config", from_vector(config, {static_cast<int64_t>(config.size())})}});
    ck.save(path);
  };
  // Layout 1 recorded 8 numbers (no --window, no layout entry).
  save_config({0, 16, 2, 32, 1, 1, 1, 7});
  CHECK_THROWS_WITH(check_checkpoint_config(path, model),
                    Contains("holds a model of an older layout of this example ([0, 16, 2, 32, "
                             "1, 1, 1, 7])") &&
                        Contains("train again with another --out"));
  save_config(windowed.signature());
  CHECK_THROWS_WITH(check_checkpoint_config(path, model), Contains("--window differs"));
  save_config(model.signature());
  CHECK_NOTHROW(check_checkpoint_config(path, model));
  std::filesystem::remove(path);
}
