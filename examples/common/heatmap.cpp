// heatmap(): cells in viridis with their values written in them, row and column labels (the
// column labels at 45 degrees when too wide for a cell), axis titles and a colour bar.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "examples/common/plot.h"
#include "examples/common/ticks.h"
#include "nabla/core/error.h"

namespace nabla::viz {

namespace {

constexpr double kPad = 12, kCos45 = 0.70710678118654752;
constexpr double kBarGap = 14, kBarWidth = 16;
constexpr Rgb kMissing{200, 200, 200};  // a non-finite cell

double widest(const std::vector<std::string>& texts, const TextStyle& style) {
  double w = 0;
  for (const auto& t : texts) w = std::max(w, measure_text(t, style).width);
  return w;
}

// Labels as drawn: one of only spaces (a space character in a sequence) as an open box.
std::vector<std::string> visible(std::vector<std::string> labels) {
  for (auto& l : labels)
    if (!l.empty() && l.find_first_not_of(' ') == std::string::npos) l = "\u2423";
  return labels;
}

void check_shape(const std::string& path, const std::vector<std::vector<double>>& values,
                 const HeatmapOptions& opts) {
  const size_t rows = values.size(), cols = rows ? values[0].size() : 0;
  if (rows == 0 || cols == 0)
    throw ValueError(fmt::format("heatmap: {}: the matrix is empty ({} rows)", path, rows));
  for (size_t i = 0; i < rows; ++i)
    if (values[i].size() != cols)
      throw ValueError(fmt::format("heatmap: {}: row {} has {} values, row 0 has {}", path, i,
                                   values[i].size(), cols));
  if (!opts.row_labels.empty() && opts.row_labels.size() != rows)
    throw ValueError(
        fmt::format("heatmap: {}: {} row labels for {} rows", path, opts.row_labels.size(), rows));
  if (!opts.col_labels.empty() && opts.col_labels.size() != cols)
    throw ValueError(fmt::format("heatmap: {}: {} column labels for {} columns", path,
                                 opts.col_labels.size(), cols));
}

}  // namespace

void heatmap(const std::string& path, const std::vector<std::vector<double>>& values,
             const HeatmapOptions& opts) {
  check_shape(path, values, opts);
  const auto rows = static_cast<int>(values.size()), cols = static_cast<int>(values[0].size());
  double lo = INFINITY, hi = -INFINITY;
  bool integers = true;
  for (const auto& r : values)
    for (double v : r)
      if (std::isfinite(v)) {
        lo = std::min(lo, v), hi = std::max(hi, v);
        integers = integers && v == std::round(v);
      }
  if (!std::isfinite(lo)) lo = 0, hi = 1;
  if (hi == lo) hi = lo + 1;  // one colour (the lowest) for a constant matrix
  auto colour = [&](double v) {
    return std::isfinite(v) ? colormap((v - lo) / (hi - lo)) : kMissing;
  };

  const double cell =
      opts.cell > 0 ? opts.cell : std::clamp(std::floor(560.0 / std::max(rows, cols)), 8.0, 56.0);
  const double grid_w = cell * cols, grid_h = cell * rows;

  // The values in the cells, shown when every value fits in a cell of 28 px or more (smaller
  // text is noise). Fractions that round to zero stay blank: the colour says it.
  TextStyle value_style{std::clamp(cell * 0.3, 8.0, 12.0)};
  std::vector<std::string> texts;
  for (const auto& r : values)
    for (double v : r)  // format_value shows two decimals below 10
      texts.push_back(!integers && std::abs(v) < 0.005 ? "" : format_value(v, integers));
  const double value_w = widest(texts, value_style);
  const bool annotate = opts.annotate == Annotate::kAlways ||
                        (opts.annotate == Annotate::kAuto && cell >= 28 && value_w <= cell - 4);

  // Labels: rows right-aligned on the left; columns under the grid, at 45 degrees when two
  // neighbours would touch.
  const std::vector<std::string> row_labels = visible(opts.row_labels),
                                 col_labels = visible(opts.col_labels);
  const double row_w = widest(row_labels, kTickStyle);
  const double tick_h = measure_text("Xy", kTickStyle).height;
  std::vector<double> col_w;
  for (const auto& l : col_labels) col_w.push_back(measure_text(l, kTickStyle).width);
  bool rotate = false;
  for (size_t j = 1; j < col_w.size(); ++j)
    rotate = rotate || (col_w[j - 1] + col_w[j]) / 2 + 4 > cell;
  const double widest_col = col_w.empty() ? 0 : *std::max_element(col_w.begin(), col_w.end());
  const double col_band =
      col_w.empty() ? 4 : (rotate ? (widest_col + tick_h) * kCos45 + 8 : tick_h + 8);
  const double label_h = measure_text("Xy", kLabelStyle).height;
  double left = kPad + (opts.ylabel.empty() ? 0 : label_h + 8) + (row_w > 0 ? row_w + 6 : 0);
  for (size_t j = 0; j < col_w.size(); ++j)  // how far a label reaches left of the grid
    left = std::max(left, kPad + (rotate ? (col_w[j] + tick_h / 2) * kCos45 : col_w[j] / 2) -
                              (static_cast<double>(j) + 0.5) * cell);
  left = std::round(left);
  const double title_w = opts.title.empty() ? 0 : measure_text(opts.title, kTitleStyle).width;
  const double top = std::round(
      kPad + (opts.title.empty() ? 0 : measure_text(opts.title, kTitleStyle).height + 10));

  // The colour bar: as tall as the grid, nice ticks on its right.
  const std::vector<double> bar_ticks =
      nice_ticks(lo, hi, std::clamp(static_cast<int>(grid_h / 40) + 1, 2, 8));
  const TickLabels bar_labels = linear_tick_labels(bar_ticks);
  TextStyle bar_style = kTickStyle;
  bar_style.markup = true;
  const double bar_label_w = std::max(widest(bar_labels.labels, bar_style),
                                      measure_text(bar_labels.multiplier, bar_style).width);
  const double bar_x = left + grid_w + kBarGap;
  const int width = static_cast<int>(
      std::ceil(std::max(bar_x + kBarWidth + 4 + 4 + bar_label_w + kPad, title_w + 2 * kPad)));
  const double under_grid = std::max(col_band, bar_labels.multiplier.empty() ? 0 : tick_h + 8);
  const int height = static_cast<int>(
      std::ceil(top + grid_h + under_grid + (opts.xlabel.empty() ? 0 : label_h + 6) + kPad));

  render(path, width, height, [&](Painter& p) {
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < cols; ++j) {
        const double v = values[static_cast<size_t>(i)][static_cast<size_t>(j)];
        const Rgb c = colour(v);
        const double x = left + j * cell, y = top + i * cell;
        p.fill_rect(x, y, cell, cell, c);
        if (!annotate) continue;
        value_style.color = luminance(c) > 0.179 ? kInk : kWhite;  // the higher WCAG contrast
        p.text(x + cell / 2, y + cell / 2, texts[static_cast<size_t>(i * cols + j)], value_style,
               Anchor::kMiddle, Anchor::kMiddle);
      }
    p.stroke_rect(left - 0.5, top - 0.5, grid_w + 1, grid_h + 1, kGrey);
    for (int i = 0; i < static_cast<int>(row_labels.size()); ++i)
      p.text(left - 6, top + (i + 0.5) * cell, row_labels[static_cast<size_t>(i)], kTickStyle,
             Anchor::kEnd, Anchor::kMiddle);
    for (int j = 0; j < static_cast<int>(col_labels.size()); ++j) {
      const std::string& l = col_labels[static_cast<size_t>(j)];
      const double x = left + (j + 0.5) * cell;
      if (rotate)
        p.text(x, top + grid_h + 6, l, kTickStyle, Anchor::kEnd, Anchor::kMiddle, 45);
      else
        p.text(x, top + grid_h + 4, l, kTickStyle, Anchor::kMiddle);
    }
    if (!opts.xlabel.empty())
      p.text(left + grid_w / 2, height - kPad, opts.xlabel, kLabelStyle, Anchor::kMiddle,
             Anchor::kEnd);
    if (!opts.ylabel.empty())
      p.text(kPad, top + grid_h / 2, opts.ylabel, kLabelStyle, Anchor::kMiddle, Anchor::kStart, 90);
    if (!opts.title.empty()) p.text(width / 2.0, kPad, opts.title, kTitleStyle, Anchor::kMiddle);

    const int bar_h = static_cast<int>(grid_h);
    p.pixels(bar_x, top, bar_h, static_cast<int>(kBarWidth), 1, [&](int i, int) {
      return colormap(1.0 - static_cast<double>(i) / std::max(1, bar_h - 1));
    });
    p.stroke_rect(bar_x - 0.5, top - 0.5, kBarWidth + 1, bar_h + 1, kGrey);
    for (size_t k = 0; k < bar_ticks.size(); ++k) {
      const double y = std::round(top + grid_h * (1 - (bar_ticks[k] - lo) / (hi - lo))) + 0.5;
      p.line(bar_x + kBarWidth, y, bar_x + kBarWidth + 4, y, kGrey);
      p.text(bar_x + kBarWidth + 7, y, bar_labels.labels[k], bar_style, Anchor::kStart,
             Anchor::kMiddle);
    }
    if (!bar_labels.multiplier.empty())
      p.text(bar_x, top + grid_h + 4, bar_labels.multiplier, bar_style);
  });
}

}  // namespace nabla::viz
