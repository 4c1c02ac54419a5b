#include "examples/common/plot.h"

#include <fmt/format.h>
#include <stb_easy_font.h>
#include <stb_image_write.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/io/safetensors.h"

namespace nabla::viz {

Canvas::Canvas(int width, int height, Rgb bg)
    : w_(width), h_(height), pixels_(static_cast<size_t>(width * height * 3)) {
  fill_rect(0, 0, w_, h_, bg);
}

void Canvas::set(int x, int y, Rgb c) {
  if (x < 0 || y < 0 || x >= w_ || y >= h_) return;
  auto i = static_cast<size_t>((y * w_ + x) * 3);
  pixels_[i] = c.r;
  pixels_[i + 1] = c.g;
  pixels_[i + 2] = c.b;
}

void Canvas::fill_rect(int x0, int y0, int x1, int y1, Rgb c) {
  for (int y = std::max(0, y0); y < std::min(h_, y1); ++y)
    for (int x = std::max(0, x0); x < std::min(w_, x1); ++x) set(x, y, c);
}

void Canvas::line(double x0, double y0, double x1, double y1, Rgb c, int thickness) {
  const double steps = std::max(std::abs(x1 - x0), std::abs(y1 - y0)) + 1;
  for (int i = 0; i <= static_cast<int>(steps); ++i) {
    const double t = i / steps;
    const int x = static_cast<int>(std::lround(x0 + t * (x1 - x0)));
    const int y = static_cast<int>(std::lround(y0 + t * (y1 - y0)));
    fill_rect(x - thickness / 2, y - thickness / 2, x - thickness / 2 + thickness,
              y - thickness / 2 + thickness, c);
  }
}

int Canvas::text(int x, int y, const std::string& s, Rgb c, int scale) {
  // stb_easy_font emits quads (4 vertices of 16 bytes each); we fill their bounding boxes.
  static char buffer[99999];
  std::string copy = s;
  const int quads =
      stb_easy_font_print(0, 0, copy.data(), nullptr, buffer, static_cast<int>(sizeof(buffer)));
  for (int q = 0; q < quads; ++q) {
    const float* v = reinterpret_cast<const float*>(buffer + q * 64);
    const float qx0 = v[0], qy0 = v[1], qx1 = v[8], qy1 = v[9];
    fill_rect(x + static_cast<int>(qx0 * static_cast<float>(scale)),
              y + static_cast<int>(qy0 * static_cast<float>(scale)),
              x + static_cast<int>(qx1 * static_cast<float>(scale)),
              y + static_cast<int>(qy1 * static_cast<float>(scale)), c);
  }
  return text_width(s, scale);
}

int Canvas::text_width(const std::string& s, int scale) {
  std::string copy = s;
  return stb_easy_font_width(copy.data()) * scale;
}

void Canvas::save_png(const std::string& path) const {
  std::string bytes;
  auto append = [](void* ctx, void* data, int size) {
    static_cast<std::string*>(ctx)->append(static_cast<const char*>(data),
                                           static_cast<size_t>(size));
  };
  if (!stbi_write_png_to_func(append, &bytes, w_, h_, 3, pixels_.data(), w_ * 3))
    throw IOError(fmt::format("{}: PNG encoding failed", path));
  io::atomic_write(path, bytes);
}

Rgb colormap(double t) {
  // A compact viridis approximation: dark purple -> blue -> green -> yellow.
  static const Rgb stops[] = {
      {68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37}};
  t = std::clamp(std::isfinite(t) ? t : 0.0, 0.0, 1.0) * 4;
  const int i = std::min(3, static_cast<int>(t));
  const double f = t - i;
  auto mix = [&](uint8_t a, uint8_t b) {
    return static_cast<uint8_t>(std::lround(a + f * (b - a)));
  };
  return {mix(stops[i].r, stops[i + 1].r), mix(stops[i].g, stops[i + 1].g),
          mix(stops[i].b, stops[i + 1].b)};
}

namespace {

std::string tick_label(double v) {
  if (v == 0) return "0";
  const double a = std::abs(v);
  if (a >= 1e4 || a < 1e-3) return fmt::format("{:.1e}", v);
  if (a >= 100) return fmt::format("{:.0f}", v);
  if (a >= 1) return fmt::format("{:.2g}", v);
  return fmt::format("{:.3g}", v);
}

}  // namespace

void line_plot(const std::string& path, const std::vector<Series>& series,
               const PlotOptions& opts) {
  Canvas c(opts.width, opts.height);
  const int left = 80, right = 20, top = 40, bottom = 60;
  const int pw = opts.width - left - right, ph = opts.height - top - bottom;
  auto tx = [&](double v) { return opts.log_x ? std::log10(std::max(v, 1e-300)) : v; };
  auto ty = [&](double v) { return opts.log_y ? std::log10(std::max(v, 1e-300)) : v; };
  double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY;
  for (const Series& s : series)
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.y[i])) continue;
      xmin = std::min(xmin, tx(s.x[i]));
      xmax = std::max(xmax, tx(s.x[i]));
      ymin = std::min(ymin, ty(s.y[i]));
      ymax = std::max(ymax, ty(s.y[i]));
    }
  if (!std::isfinite(xmin)) xmin = 0, xmax = 1, ymin = 0, ymax = 1;
  if (xmax == xmin) xmax = xmin + 1;
  if (ymax == ymin) ymax = ymin + 1;
  const double pad = (ymax - ymin) * 0.05;
  ymin -= pad;
  ymax += pad;
  auto px = [&](double v) { return left + (tx(v) - xmin) / (xmax - xmin) * pw; };
  auto py = [&](double v) { return top + ph - (ty(v) - ymin) / (ymax - ymin) * ph; };
  const Rgb axis{60, 60, 60}, grid{225, 225, 225};
  for (int k = 0; k <= 5; ++k) {
    const double fy = ymin + (ymax - ymin) * k / 5.0, fx = xmin + (xmax - xmin) * k / 5.0;
    const double ypix = top + ph - ph * k / 5.0, xpix = left + pw * k / 5.0;
    c.line(left, ypix, left + pw, ypix, grid);
    c.line(xpix, top, xpix, top + ph, grid);
    const std::string yl = tick_label(opts.log_y ? std::pow(10, fy) : fy);
    const std::string xl = tick_label(opts.log_x ? std::pow(10, fx) : fx);
    c.text(left - 6 - Canvas::text_width(yl), static_cast<int>(ypix) - 4, yl, axis);
    c.text(static_cast<int>(xpix) - Canvas::text_width(xl) / 2, top + ph + 6, xl, axis);
  }
  c.line(left, top, left, top + ph, axis);
  c.line(left, top + ph, left + pw, top + ph, axis);
  for (const Series& s : series) {
    for (size_t i = 1; s.lines && i < s.x.size() && i < s.y.size(); ++i)
      if (std::isfinite(s.y[i]) && std::isfinite(s.y[i - 1]))
        c.line(px(s.x[i - 1]), py(s.y[i - 1]), px(s.x[i]), py(s.y[i]), s.color, 2);
    if (s.markers)
      for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i)
        if (std::isfinite(s.y[i])) {
          const int mx = static_cast<int>(px(s.x[i])), my = static_cast<int>(py(s.y[i]));
          c.fill_rect(mx - 2, my - 2, mx + 3, my + 3, s.color);
        }
  }
  int ly = top + 8;
  for (const Series& s : series) {
    if (s.label.empty()) continue;
    const int lx = left + pw - Canvas::text_width(s.label) - 40;
    c.fill_rect(lx, ly + 3, lx + 20, ly + 6, s.color);
    c.text(lx + 26, ly, s.label, axis);
    ly += 14;
  }
  c.text(opts.width / 2 - Canvas::text_width(opts.title, 2) / 2, 10, opts.title, axis, 2);
  c.text(left + pw / 2 - Canvas::text_width(opts.xlabel) / 2, opts.height - 24, opts.xlabel, axis);
  c.text(8, top - 16, opts.ylabel, axis);
  c.save_png(path);
}

void heatmap(const std::string& path, const std::vector<std::vector<double>>& values,
             const std::string& title, const std::vector<std::string>& row_labels,
             const std::vector<std::string>& col_labels, int cell) {
  const int rows = static_cast<int>(values.size());
  const int cols = rows ? static_cast<int>(values[0].size()) : 0;
  if (cell <= 0) cell = std::clamp(600 / std::max({rows, cols, 1}), 4, 40);
  int label_w = 0;
  for (const auto& l : row_labels) label_w = std::max(label_w, Canvas::text_width(l));
  int col_label_h = 0;
  for (const auto& l : col_labels) col_label_h = std::max(col_label_h, Canvas::text_width(l));
  const int left = 10 + label_w + 6, top = 36;
  Canvas c(left + cols * cell + 70, top + rows * cell + col_label_h + 16);
  double lo = INFINITY, hi = -INFINITY;
  for (const auto& r : values)
    for (double v : r)
      if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  if (!(hi > lo)) hi = lo + 1;
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j)
      c.fill_rect(left + j * cell, top + i * cell, left + (j + 1) * cell, top + (i + 1) * cell,
                  colormap((values[i][j] - lo) / (hi - lo)));
  const Rgb ink{40, 40, 40};
  for (int i = 0; i < rows && i < static_cast<int>(row_labels.size()); ++i)
    c.text(left - 6 - Canvas::text_width(row_labels[i]), top + i * cell + cell / 2 - 4,
           row_labels[i], ink);
  // Column labels are drawn one character per line (vertical) to fit narrow cells.
  for (int j = 0; j < cols && j < static_cast<int>(col_labels.size()); ++j) {
    int y = top + rows * cell + 4;
    for (char ch : col_labels[j]) {
      c.text(left + j * cell + cell / 2 - 3, y, std::string(1, ch), ink);
      y += 10;
    }
  }
  // Colour bar.
  const int bx = left + cols * cell + 14;
  for (int k = 0; k < rows * cell; ++k)
    c.fill_rect(bx, top + k, bx + 14, top + k + 1,
                colormap(1.0 - static_cast<double>(k) / std::max(1, rows * cell - 1)));
  c.text(bx + 18, top, tick_label(hi), ink);
  c.text(bx + 18, top + rows * cell - 8, tick_label(lo), ink);
  c.text(10, 10, title, ink, 2);
  c.save_png(path);
}

void image_grid(const std::string& path, const std::vector<std::vector<double>>& images, int rows,
                int cols, const std::vector<std::vector<double>>& overlays,
                const std::vector<std::string>& captions, int scale) {
  const int n = static_cast<int>(images.size());
  const int tile_w = cols * scale, tile_h = rows * scale, gap = 10, caption_h = 16;
  Canvas c(gap + n * (tile_w + gap), gap + tile_h + caption_h + gap);
  for (int k = 0; k < n; ++k) {
    const int ox = gap + k * (tile_w + gap), oy = gap;
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < cols; ++j) {
        const auto idx = static_cast<size_t>(i * cols + j);
        const double g = std::clamp(images[k][idx], 0.0, 1.0);
        Rgb px{static_cast<uint8_t>(g * 255), static_cast<uint8_t>(g * 255),
               static_cast<uint8_t>(g * 255)};
        if (k < static_cast<int>(overlays.size())) {
          const Rgb h = colormap(overlays[k][idx]);
          const double a = 0.55;
          px = {static_cast<uint8_t>(a * h.r + (1 - a) * px.r),
                static_cast<uint8_t>(a * h.g + (1 - a) * px.g),
                static_cast<uint8_t>(a * h.b + (1 - a) * px.b)};
        }
        c.fill_rect(ox + j * scale, oy + i * scale, ox + (j + 1) * scale, oy + (i + 1) * scale, px);
      }
    if (k < static_cast<int>(captions.size()))
      c.text(ox, oy + tile_h + 4, captions[k], {40, 40, 40});
  }
  c.save_png(path);
}

void patch_attention_strip(const std::string& path, const PatchAttention& a, int scale) {
  const size_t n = a.captions.size(), pixels = static_cast<size_t>(a.rows * a.cols),
               cells = static_cast<size_t>(a.grid_rows * a.grid_cols);
  if (a.grid_rows <= 0 || a.grid_cols <= 0 || a.rows % a.grid_rows != 0 ||
      a.cols % a.grid_cols != 0 || a.images.size() != n * pixels || a.maps.size() != n * cells)
    throw ValueError(fmt::format(
        "patch_attention_strip: {} captions, {} image values ({}x{} each), {} map values "
        "({}x{} each): the counts disagree or the grid does not divide the image",
        n, a.images.size(), a.rows, a.cols, a.maps.size(), a.grid_rows, a.grid_cols));
  const int patch_h = a.rows / a.grid_rows, patch_w = a.cols / a.grid_cols;
  std::vector<std::vector<double>> blended, plain, overlays;
  for (size_t b = 0; b < n; ++b) {
    const float* map = a.maps.data() + b * cells;
    const auto [lo, hi] = std::minmax_element(map, map + cells);
    std::vector<double> image(pixels), overlay(pixels);
    for (int i = 0; i < a.rows; ++i)
      for (int j = 0; j < a.cols; ++j) {
        const auto idx = static_cast<size_t>(i * a.cols + j);
        image[idx] = a.images[b * pixels + idx];
        const float v = map[(i / patch_h) * a.grid_cols + j / patch_w];
        overlay[idx] = *hi > *lo ? (v - *lo) / (*hi - *lo) : 0.0;
      }
    blended.push_back(image);
    plain.push_back(std::move(image));
    overlays.push_back(std::move(overlay));
  }
  blended.insert(blended.end(), plain.begin(), plain.end());
  std::vector<std::string> captions = a.captions;
  captions.insert(captions.end(), a.captions.begin(), a.captions.end());
  image_grid(path, blended, a.rows, a.cols, overlays, captions, scale);
}

}  // namespace nabla::viz
