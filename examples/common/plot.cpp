// line_plot and the colour map; heatmap.cpp and images.cpp draw the other figures.
#include "examples/common/plot.h"

#include <cairo.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "examples/common/ticks.h"
#include "nabla/core/error.h"

namespace nabla::viz {

Rgb colormap(double t) {
  // viridis at t = 0, 0.1, ..., 1 (matplotlib's _viridis_data rows 0, 25, 51, ..., 255), linear
  // in between: within one 8-bit step of the 256-entry table.
  static constexpr Rgb stops[] = {{68, 1, 84},    {72, 36, 117},  {65, 68, 135},  {53, 95, 141},
                                  {42, 120, 142}, {33, 145, 140}, {34, 168, 132}, {68, 191, 112},
                                  {122, 209, 81}, {189, 223, 38}, {253, 231, 37}};
  t = std::clamp(std::isfinite(t) ? t : 0.0, 0.0, 1.0) * 10;
  const int i = std::min(9, static_cast<int>(t));
  const double f = t - i;
  auto mix = [&](uint8_t a, uint8_t b) {
    return static_cast<uint8_t>(std::lround(a + f * (b - a)));
  };
  return {mix(stops[i].r, stops[i + 1].r), mix(stops[i].g, stops[i + 1].g),
          mix(stops[i].b, stops[i + 1].b)};
}

std::vector<double> running_mean(const std::vector<double>& values, int window) {
  if (window < 1)
    throw ValueError(fmt::format("running_mean: window must be >= 1, got {}", window));
  const size_t n = values.size(), half = static_cast<size_t>(window / 2);
  std::vector<double> sum(n + 1, 0), count(n + 1, 0);  // prefix sums over the finite values
  for (size_t i = 0; i < n; ++i) {
    const bool finite = std::isfinite(values[i]);
    sum[i + 1] = sum[i] + (finite ? values[i] : 0);
    count[i + 1] = count[i] + finite;
  }
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) {
    const size_t a = i >= half ? i - half : 0, b = std::min(n, i + half + 1);
    out[i] = count[b] > count[a] ? (sum[b] - sum[a]) / (count[b] - count[a]) : NAN;
  }
  return out;
}

namespace {

constexpr double kPad = 12, kTickLength = 5;
constexpr Rgb kMinorGridLine{243, 243, 243};

// One axis: its view interval, ticks and their labels, and the map to [0, 1] along it.
struct Axis {
  double lo = 0, hi = 1;
  bool log = false;
  std::vector<double> ticks;
  std::vector<std::string> labels;
  std::string multiplier;     // "×10<sup>k</sup>" shared by the labels, or empty
  std::vector<double> minor;  // unlabelled: 2..9 x 10^k between the decades of a log axis
  bool minor_grid = false;    // their grid lines too (when decades are far enough apart)

  double unit(double v) const {
    return log ? (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo))
               : (v - lo) / (hi - lo);
  }
};

// `pixels` long, a tick about every `spacing` pixels at most.
Axis make_axis(double data_lo, double data_hi, bool log, double pixels, double spacing) {
  Axis a;
  a.log = log;
  std::tie(a.lo, a.hi) = axis_limits(data_lo, data_hi, 0.04, log);
  const int max_ticks = std::clamp(static_cast<int>(pixels / spacing) + 1, 3, 11);
  if (log) {
    a.ticks = log_ticks(a.lo, a.hi, max_ticks);
    a.labels = log_tick_labels(a.ticks);
    const bool decades = a.ticks.size() >= 2 && std::abs(a.ticks[1] / a.ticks[0] - 10) < 1e-6;
    for (double k = std::floor(std::log10(a.lo)); decades && k <= std::log10(a.hi); ++k)
      for (int m = 2; m <= 9; ++m)
        if (const double v = m * std::pow(10.0, k); v > a.lo && v < a.hi) a.minor.push_back(v);
    a.minor_grid = pixels / (std::log10(a.hi) - std::log10(a.lo)) >= 80;
  } else {
    a.ticks = nice_ticks(a.lo, a.hi, max_ticks);
    TickLabels l = linear_tick_labels(a.ticks);
    a.labels = std::move(l.labels);
    a.multiplier = std::move(l.multiplier);
  }
  return a;
}

bool usable(double v, bool log) { return std::isfinite(v) && (!log || v > 0); }

struct Rect {
  double x, y, w, h;
  bool contains(double px, double py) const {
    return px >= x && px <= x + w && py >= y && py <= y + h;
  }
};

// Whether the segment crosses the rectangle (Liang and Barsky's clipping test).
bool segment_hits(double x0, double y0, double x1, double y1, const Rect& r) {
  double t0 = 0, t1 = 1;
  const double dx = x1 - x0, dy = y1 - y0;
  const std::array<std::pair<double, double>, 4> sides = {
      {{-dx, x0 - r.x}, {dx, r.x + r.w - x0}, {-dy, y0 - r.y}, {dy, r.y + r.h - y0}}};
  for (const auto& [p, q] : sides) {
    if (p == 0) {
      if (q < 0) return false;
    } else if (p < 0) {
      t0 = std::max(t0, q / p);
    } else {
      t1 = std::min(t1, q / p);
    }
  }
  return t0 <= t1;
}

struct Frame {
  Rect area;  // the plotting area in pixels
  Axis x, y;
  double px(double v) const { return area.x + x.unit(v) * area.w; }
  double py(double v) const { return area.y + area.h - y.unit(v) * area.h; }
};

// How many points and line pieces of the series the rectangle would cover.
int covered(const Frame& f, const std::vector<Series>& series, const Rect& r) {
  int hits = 0;
  for (const Series& s : series) {
    bool have_prev = false;
    double qx = 0, qy = 0;
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!usable(s.x[i], f.x.log) || !usable(s.y[i], f.y.log)) {
        have_prev = false;
        continue;
      }
      const double px = f.px(s.x[i]), py = f.py(s.y[i]);
      hits += r.contains(px, py);
      if (s.lines && have_prev) hits += segment_hits(qx, qy, px, py, r);
      qx = px, qy = py, have_prev = true;
    }
  }
  return hits;
}

void draw_series(Painter& p, const Frame& f, const Series& s) {
  cairo_t* cr = p.cairo();
  cairo_save(cr);
  cairo_rectangle(cr, f.area.x, f.area.y, f.area.w, f.area.h);
  cairo_clip(cr);
  if (s.lines) {
    bool pen_down = false;
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!usable(s.x[i], f.x.log) || !usable(s.y[i], f.y.log)) {
        pen_down = false;
        continue;
      }
      (pen_down ? cairo_line_to : cairo_move_to)(cr, f.px(s.x[i]), f.py(s.y[i]));
      pen_down = true;
    }
    cairo_set_source_rgba(cr, s.color.r / 255.0, s.color.g / 255.0, s.color.b / 255.0, s.alpha);
    cairo_set_line_width(cr, s.width);
    cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
    cairo_set_line_cap(cr, CAIRO_LINE_CAP_ROUND);
    cairo_stroke(cr);
  }
  if (s.markers)
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i)
      if (usable(s.x[i], f.x.log) && usable(s.y[i], f.y.log))
        p.circle(f.px(s.x[i]), f.py(s.y[i]), 3.5, s.color);
  cairo_restore(cr);
}

void draw_legend(Painter& p, const Frame& f, const std::vector<Series>& series) {
  std::vector<const Series*> shown;
  double text_w = 0, text_h = 0;
  for (const Series& s : series)
    if (!s.label.empty()) {
      shown.push_back(&s);
      const TextSize size = measure_text(s.label, kLegendStyle);
      text_w = std::max(text_w, size.width);
      text_h = std::max(text_h, size.height);
    }
  if (shown.empty()) return;
  const double swatch = 28, row = text_h + 3, inset = 10;
  const double w = 8 + swatch + 6 + text_w + 8, h = 6 + row * static_cast<double>(shown.size()) + 3;
  const Rect& a = f.area;
  const Rect corners[] = {{a.x + a.w - w - inset, a.y + inset, w, h},
                          {a.x + inset, a.y + inset, w, h},
                          {a.x + a.w - w - inset, a.y + a.h - h - inset, w, h},
                          {a.x + inset, a.y + a.h - h - inset, w, h}};
  const Rect* best = &corners[0];
  int fewest = covered(f, series, corners[0]);
  for (const Rect& r : corners)
    if (const int c = covered(f, series, r); c < fewest) best = &r, fewest = c;
  p.fill_rect(best->x, best->y, w, h, kWhite, 0.9);
  p.stroke_rect(std::round(best->x) + 0.5, std::round(best->y) + 0.5, std::round(w), std::round(h),
                {204, 204, 204});
  double y = best->y + 6 + row / 2 - 1.5;
  for (const Series* s : shown) {
    const double x = best->x + 8;
    if (s->lines) {
      cairo_t* cr = p.cairo();
      cairo_set_source_rgba(cr, s->color.r / 255.0, s->color.g / 255.0, s->color.b / 255.0,
                            std::max(s->alpha, 0.35));
      cairo_set_line_width(cr, std::max(s->width, 2.0));
      cairo_move_to(cr, x, y);
      cairo_line_to(cr, x + swatch, y);
      cairo_stroke(cr);
    }
    if (s->markers) p.circle(x + swatch / 2, y, 3.5, s->color);
    p.text(x + swatch + 6, y, s->label, kLegendStyle, Anchor::kStart, Anchor::kMiddle);
    y += row;
  }
}

}  // namespace

void line_plot(const std::string& path, const std::vector<Series>& series,
               const PlotOptions& opts) {
  double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
  for (const Series& s : series) {
    if (s.x.size() != s.y.size())
      throw ValueError(fmt::format("line_plot: {}: series \"{}\" has {} x but {} y values", path,
                                   s.label, s.x.size(), s.y.size()));
    for (size_t i = 0; i < s.x.size(); ++i)
      if (usable(s.x[i], opts.log_x) && usable(s.y[i], opts.log_y)) {
        xlo = std::min(xlo, s.x[i]), xhi = std::max(xhi, s.x[i]);
        ylo = std::min(ylo, s.y[i]), yhi = std::max(yhi, s.y[i]);
      }
  }
  if (!std::isfinite(xlo)) xlo = 1, xhi = 10, ylo = 1, yhi = 10;  // nothing to draw: empty axes

  // Layout: the vertical extent first (it fixes the y ticks), then the y tick labels' width
  // fixes the left margin and with it the x axis.
  const double tick_h = measure_text("0", kTickStyle).height;
  const double label_h = measure_text("Xy", kLabelStyle).height;
  double top = kPad + (opts.title.empty() ? 4 : measure_text(opts.title, kTitleStyle).height + 8);
  const double bottom = kPad + (opts.xlabel.empty() ? 0 : label_h + 6) + tick_h + kTickLength + 4;
  Frame f;
  f.y = make_axis(ylo, yhi, opts.log_y, opts.height - top - bottom, 45);
  if (!f.y.multiplier.empty()) top += tick_h + 4;  // room for "×10^k" above the axis
  f.area.y = top;
  f.area.h = opts.height - top - bottom;
  f.y = make_axis(ylo, yhi, opts.log_y, f.area.h, 45);
  double ytick_w = 0;
  for (const std::string& l : f.y.labels)
    ytick_w = std::max(ytick_w, measure_text(l, {.size = kTickStyle.size, .markup = true}).width);
  f.area.x = kPad + (opts.ylabel.empty() ? 0 : label_h + 8) + ytick_w + kTickLength + 4;
  f.area.w = opts.width - f.area.x - kPad - 16;
  if (f.area.w < 40 || f.area.h < 40)
    throw ValueError(fmt::format("line_plot: {}: {}x{} pixels leave no room to plot", path,
                                 opts.width, opts.height));
  f.x = make_axis(xlo, xhi, opts.log_x, f.area.w, 90);

  render(path, opts.width, opts.height, [&](Painter& p) {
    const Rect& a = f.area;
    TextStyle tick = kTickStyle;
    tick.markup = true;
    for (double v : f.y.minor) {
      const double y = std::round(f.py(v)) + 0.5;
      if (f.y.minor_grid) p.line(a.x, y, a.x + a.w, y, kMinorGridLine);
      p.line(a.x - kTickLength / 2, y, a.x, y, kGrey);
    }
    for (double v : f.x.minor) {
      const double x = std::round(f.px(v)) + 0.5;
      if (f.x.minor_grid) p.line(x, a.y, x, a.y + a.h, kMinorGridLine);
      p.line(x, a.y + a.h, x, a.y + a.h + kTickLength / 2, kGrey);
    }
    for (size_t i = 0; i < f.y.ticks.size(); ++i) {
      const double y = std::round(f.py(f.y.ticks[i])) + 0.5;
      p.line(a.x, y, a.x + a.w, y, kGridLine);
      p.line(a.x - kTickLength, y, a.x, y, kGrey);
      p.text(a.x - kTickLength - 3, y, f.y.labels[i], tick, Anchor::kEnd, Anchor::kMiddle);
    }
    for (size_t i = 0; i < f.x.ticks.size(); ++i) {
      const double x = std::round(f.px(f.x.ticks[i])) + 0.5;
      p.line(x, a.y, x, a.y + a.h, kGridLine);
      p.line(x, a.y + a.h, x, a.y + a.h + kTickLength, kGrey);
      p.text(x, a.y + a.h + kTickLength + 2, f.x.labels[i], tick, Anchor::kMiddle);
    }
    if (!f.y.multiplier.empty()) p.text(a.x, a.y - 4, f.y.multiplier, tick, {}, Anchor::kEnd);
    if (!f.x.multiplier.empty())
      p.text(a.x + a.w, a.y + a.h + kTickLength + 2 + tick_h, f.x.multiplier, tick, Anchor::kEnd);
    for (const Series& s : series) draw_series(p, f, s);
    p.stroke_rect(std::round(a.x) + 0.5, std::round(a.y) + 0.5, std::round(a.w), std::round(a.h),
                  kGrey);
    draw_legend(p, f, series);
    if (!opts.title.empty())
      p.text(opts.width / 2.0, kPad, opts.title, kTitleStyle, Anchor::kMiddle);
    if (!opts.xlabel.empty())
      p.text(a.x + a.w / 2, opts.height - kPad, opts.xlabel, kLabelStyle, Anchor::kMiddle,
             Anchor::kEnd);
    if (!opts.ylabel.empty())
      p.text(kPad, a.y + a.h / 2, opts.ylabel, kLabelStyle, Anchor::kMiddle, Anchor::kStart, 90);
  });
}

}  // namespace nabla::viz
