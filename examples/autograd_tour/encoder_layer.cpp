// Part 2 of the tour: one TransformerEncoderLayer inside a small sequence classifier, seen through
// every inspect tool (docs/inspect.md): its graph grouped by module (and collapsed by depth), the
// profiler's table and Chrome trace of one training step, the memory ledger's timeline of one
// step, and the gradient report of one step, with a parameter the forward detaches on purpose.
#include <fmt/format.h>

#include <algorithm>

#include "examples/autograd_tour/tour.h"
#include "examples/common/plot.h"
#include "nabla/nabla.h"

namespace nabla::tour {
namespace {

// layer -> mean over positions -> head -> / temperature. The temperature is read through
// detach(): a deliberate mistake, the kind the gradient report explains (it never learns).
class Classifier : public nn::Module {
 public:
  explicit Classifier(const EncoderSettings& s) : nn::Module("Classifier") {
    nn::TransformerEncoderLayerOptions o;
    o.d_model = s.d_model;
    o.nhead = s.heads;
    o.dim_feedforward = 2 * s.d_model;
    o.dropout = 0.1;
    o.batch_first = true;
    layer_ = register_module("layer", std::make_shared<nn::TransformerEncoderLayer>(o));
    head_ = register_module("head", std::make_shared<nn::Linear>(s.d_model, s.classes));
    temperature_ = register_parameter("temperature", full({1}, 1.0));
  }
  // x (B, T, d) -> logits (B, classes)
  Tensor forward(const Tensor& x) const {
    Tensor pooled = mean((*layer_)(x), {1});
    return div((*head_)(pooled), temperature_.detach());  // the cut
  }
  Tensor operator()(const Tensor& x) const { return call(&Classifier::forward, x); }

 private:
  std::shared_ptr<nn::TransformerEncoderLayer> layer_;
  std::shared_ptr<nn::Linear> head_;
  Tensor temperature_;
};

struct Batch {
  Tensor x, y;
};

void train_step(const Classifier& model, optim::Optimizer& opt, const Batch& b) {
  Tensor loss = cross_entropy(model(b.x), b.y);
  opt.zero_grad();
  loss.backward();
  opt.step();
}

void write_graph(const inspect::Graph& g, const inspect::DotOptions& opts,
                 const std::string& stem) {
  const std::string dot = inspect::to_dot(g, opts);
  for (const char* ext : {"dot", "svg", "png"})
    inspect::write_graph(dot, fmt::format("{}.{}", stem, ext));
}

// Step 1: the graph with saved tensors and gradient norms, and the gradient report. The
// backward keeps the graph (retain_graph) so the picture shows what each node saved.
void graph_and_report(const Classifier& model, optim::Optimizer& opt, const Batch& b,
                      const EncoderSettings& s, const std::string& out_dir, EncoderResult& r) {
  nn::GradientMonitor monitor(model);  // records module scopes and where paths are cut
  Tensor loss = cross_entropy(model(b.x), b.y);
  inspect::GradientProbe probe({loss});
  opt.zero_grad();
  autograd::backward({loss}, {}, /*retain_graph=*/true);
  const inspect::Graph g = nn::export_graph({loss}, model, &probe);
  r.graph_nodes = g.nodes.size();
  r.boxes = inspect::collapsed_scopes(g, s.collapse_depth).size();
  write_graph(g, {.title = "Classifier: every node, grouped by module"},
              out_dir + "/encoder_graph_full");
  write_graph(g,
              {.collapse_depth = s.collapse_depth,
               .title = fmt::format("Classifier, modules at depth {} collapsed", s.collapse_depth)},
              out_dir + "/encoder_graph");
  fmt::print("graph: {} nodes, saved tensors {}; at depth {} the modules", g.nodes.size(),
             inspect::format_bytes(g.saved_bytes()), s.collapse_depth);
  for (const std::string& scope : inspect::collapsed_scopes(g, s.collapse_depth))
    fmt::print(" {}", scope);
  fmt::print(
      " become one box each\nwrote {0}/encoder_graph.svg/.png (collapsed) and "
      "{0}/encoder_graph_full.svg/.png\n\n",
      out_dir);

  monitor.snapshot_before_step();
  opt.step();
  const inspect::GradientReport report = monitor.report();
  fmt::print(
      "gradient report after one AdamW step (update ratio = |w - w_before| / |w_before|):\n"
      "{}",
      report.to_string());
  fmt::print("(inf: all zeros before the step, as attention and LayerNorm biases start)\n\n");
  const auto& why = report.at("temperature").why;
  r.detached_explained = why && why->kind == inspect::NoGradientReason::Kind::Cut &&
                         why->cut == inspect::CutKind::Detach;
}

// Step 2: the profile of one whole training step.
void profile_step(const Classifier& model, optim::Optimizer& opt, const Batch& b,
                  const std::string& out_dir, EncoderResult& r) {
  inspect::Profiler profiler;
  train_step(model, opt, b);
  const inspect::Profile profile = profiler.stop();
  r.flops = profile.total_flops();
  r.gemm_fraction = profile.gemm_fraction();
  fmt::print("profile of one training step (forward, backward, AdamW step), by op:\n{}\n",
             profile.table(inspect::GroupBy::Op, 20));
  profile.write_chrome_trace(out_dir + "/trace.json");
  fmt::print("wrote {}/trace.json: open it in https://ui.perfetto.dev or chrome://tracing\n\n",
             out_dir);
}

// The timeline as one line per category and their sum, in KiB against the op index, with a
// vertical line where the phase changes (forward, backward, optimizer step).
void plot_timeline(const inspect::MemoryTimeline& t, const std::string& path) {
  struct Category {
    const char* label;
    int64_t inspect::MemoryCategories::*bytes;
  };
  const Category categories[] = {
      {"parameters", &inspect::MemoryCategories::parameters},
      {"gradients", &inspect::MemoryCategories::gradients},
      {"optimizer state", &inspect::MemoryCategories::optimizer_state},
      {"saved activations", &inspect::MemoryCategories::saved_activations},
      {"other", &inspect::MemoryCategories::other}};
  std::vector<viz::Series> series;
  std::vector<double> x, live;
  for (const inspect::TimelinePoint& p : t.points) {
    x.push_back(static_cast<double>(p.index));
    live.push_back(static_cast<double>(p.bytes.live()) / 1024);
  }
  const double top = *std::max_element(live.begin(), live.end());
  std::string phases;
  for (size_t i = 0; i < t.points.size(); ++i) {
    if (i > 0 && t.points[i].phase == t.points[i - 1].phase) continue;
    size_t end = i;
    while (end + 1 < t.points.size() && t.points[end + 1].phase == t.points[i].phase) ++end;
    const bool step = t.points[i].phase == inspect::Phase::NoGrad;
    phases += fmt::format("{}{} {}", phases.empty() ? "" : " | ",
                          step ? "optimizer step" : inspect::phase_name(t.points[i].phase),
                          end > i ? fmt::format("{}-{}", t.points[i].index, t.points[end].index)
                                  : fmt::format("{}", t.points[i].index));
    if (i > 0) {
      const double boundary = static_cast<double>(t.points[i].index) - 0.5;
      // Up to 1.6 times the highest curve: room above the curves for the legend.
      series.push_back({"", {boundary, boundary}, {0, top * 1.6}, {170, 170, 170}});
      series.back().width = 1;
    }
  }
  size_t colour = 0;
  for (const Category& c : categories) {
    std::vector<double> y;
    for (const inspect::TimelinePoint& p : t.points)
      y.push_back(static_cast<double>(p.bytes.*c.bytes) / 1024);
    series.push_back({c.label, x, y, viz::kPalette[colour++]});
  }
  series.push_back({"live (their sum)", x, live, {40, 40, 40}});
  series.back().width = 3;
  viz::line_plot(path, series,
                 {.title = fmt::format("memory during one training step (peak {} live)",
                                       inspect::format_bytes(t.peak_live_bytes)),
                  .xlabel = "op index (" + phases + ")",
                  .ylabel = "live bytes (KiB)"});
}

// Step 3: the memory ledger over one whole training step.
void memory_step(const Classifier& model, optim::Optimizer& opt, const Batch& b,
                 const std::string& out_dir, EncoderResult& r) {
  inspect::MemoryLedger ledger;
  ledger.track_parameters(model.named_parameters());
  ledger.track_optimizer_state([&opt] {
    std::vector<Tensor> state;
    for (size_t i = 0; i < opt.num_params(); ++i)
      for (const auto& [key, t] : opt.state(i)) state.push_back(t);
    return state;
  });
  nn::RecordScopes scopes(model);  // saved activations by module
  // Gradients dropped before the forward rather than after it: they are then not held while
  // the activations are (a lower peak).
  opt.zero_grad();
  ledger.start();
  Tensor loss = cross_entropy(model(b.x), b.y);
  fmt::print("memory after the forward (saved activations by the op that saved them):\n{}\n",
             ledger.snapshot({loss}).table());
  loss.backward();
  opt.step();
  const inspect::MemoryTimeline timeline = ledger.stop();
  r.peak_live_bytes = timeline.peak_live_bytes;
  timeline.write_csv(out_dir + "/memory.csv");
  plot_timeline(timeline, out_dir + "/memory.png");
  fmt::print(
      "memory timeline: {} points, peak {} live; wrote {}/memory.png/.svg and memory.csv\n\n",
      timeline.points.size(), inspect::format_bytes(timeline.peak_live_bytes), out_dir);
}

}  // namespace

EncoderResult encoder_layer(const std::string& out_dir, const EncoderSettings& s) {
  EncoderResult r;
  fmt::print("== Part 2: one TransformerEncoderLayer (d = {}, {} heads, T = {}, B = {}) ==\n\n",
             s.d_model, s.heads, s.seq_len, s.batch);
  manual_seed(s.seed);
  Classifier model(s);
  Generator gen(s.seed + 1);
  const Batch batch{randn({s.batch, s.seq_len, s.d_model}, gen),
                    randint(0, s.classes, {s.batch}, gen)};
  optim::AdamW opt(model.parameters(), {.lr = 1e-3});
  fmt::print("{} parameters in {} tensors; a detached temperature divides the logits\n\n",
             model.num_parameters(), model.named_parameters().size());

  graph_and_report(model, opt, batch, s, out_dir, r);
  for (int i = 0; i < s.warmup_steps; ++i) train_step(model, opt, batch);
  profile_step(model, opt, batch, out_dir, r);
  memory_step(model, opt, batch, out_dir, r);
  return r;
}

}  // namespace nabla::tour
