// image_grid() and patch_attention_strip(): images drawn pixel for pixel (each a square block,
// no smoothing), optionally under a heat overlay, with captions.
#include <cairo.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "examples/common/plot.h"
#include "nabla/core/error.h"

namespace nabla::viz {

namespace {

constexpr double kPad = 12, kGap = 10, kOverlayAlpha = 0.6;

void check_grid(const std::string& path, const ImageGrid& g) {
  const size_t n = g.images.size(), pixels = static_cast<size_t>(std::max(0, g.rows * g.cols));
  if (n == 0 || g.rows <= 0 || g.cols <= 0 || g.scale <= 0)
    throw ValueError(fmt::format("image_grid: {}: {} images of {}x{} pixels at scale {}", path, n,
                                 g.rows, g.cols, g.scale));
  for (size_t k = 0; k < n; ++k) {
    if (g.images[k].size() != pixels)
      throw ValueError(fmt::format("image_grid: {}: image {} has {} values, not {}x{}", path, k,
                                   g.images[k].size(), g.rows, g.cols));
    if (k < g.overlays.size() && !g.overlays[k].empty() && g.overlays[k].size() != pixels)
      throw ValueError(fmt::format("image_grid: {}: overlay {} has {} values, not {}x{}", path, k,
                                   g.overlays[k].size(), g.rows, g.cols));
  }
  if ((!g.overlays.empty() && g.overlays.size() != n) ||
      (!g.captions.empty() && g.captions.size() != n))
    throw ValueError(fmt::format("image_grid: {}: {} images but {} overlays and {} captions", path,
                                 n, g.overlays.size(), g.captions.size()));
}

uint8_t blend(double grey, uint8_t heat, double alpha) {
  return static_cast<uint8_t>(std::lround((1 - alpha) * grey * 255 + alpha * heat));
}

}  // namespace

void image_grid(const std::string& path, const ImageGrid& g) {
  check_grid(path, g);
  const int n = static_cast<int>(g.images.size());
  const int per_row = g.per_row > 0 ? std::min(g.per_row, n) : n;
  const int lines = (n + per_row - 1) / per_row;
  if (!g.line_titles.empty() && static_cast<int>(g.line_titles.size()) != lines)
    throw ValueError(fmt::format("image_grid: {}: {} line titles for {} lines", path,
                                 g.line_titles.size(), lines));
  const double tile_w = g.cols * g.scale, tile_h = g.rows * g.scale;
  // A caption too wide for its tile is set smaller (down to 7 px).
  std::vector<TextStyle> caption_style(g.captions.size(), kTickStyle);
  for (size_t k = 0; k < g.captions.size(); ++k) {
    const double w = measure_text(g.captions[k], kTickStyle).width;
    if (w > tile_w + kGap - 2)
      caption_style[k].size = std::max(7.0, kTickStyle.size * (tile_w + kGap - 2) / w);
  }
  const double caption_h = measure_text("Xy", kTickStyle).height + 4;
  std::vector<double> line_top(static_cast<size_t>(lines));
  const double title_h = g.title.empty() ? 0 : measure_text(g.title, kTitleStyle).height + 10;
  double y = kPad + title_h;
  for (int l = 0; l < lines; ++l) {
    line_top[static_cast<size_t>(l)] = std::round(y);
    bool captioned = false;
    for (int k = l * per_row; k < std::min(n, (l + 1) * per_row); ++k)
      captioned = captioned || (k < static_cast<int>(g.captions.size()) &&
                                !g.captions[static_cast<size_t>(k)].empty());
    y += tile_h + (captioned ? caption_h : 0) + kGap;
  }
  const double left =
      kPad + (g.line_titles.empty() ? 0 : measure_text("Xy", kLabelStyle).height + 8);
  const double title_w = g.title.empty() ? 0 : measure_text(g.title, kTitleStyle).width;
  const int width = static_cast<int>(std::ceil(
      std::max(left + per_row * tile_w + (per_row - 1) * kGap + kPad, title_w + 2 * kPad)));
  const int height = static_cast<int>(std::ceil(y - kGap + kPad));

  render(path, width, height, [&](Painter& p) {
    if (!g.title.empty()) p.text(width / 2.0, kPad, g.title, kTitleStyle, Anchor::kMiddle);
    for (int l = 0; l < static_cast<int>(g.line_titles.size()); ++l) {
      const std::string& t = g.line_titles[static_cast<size_t>(l)];
      TextStyle style = kLabelStyle;  // smaller when longer than the tiles are tall
      style.size *= std::min(1.0, tile_h / measure_text(t, kLabelStyle).width);
      p.text(kPad, line_top[static_cast<size_t>(l)] + tile_h / 2, t, style, Anchor::kMiddle,
             Anchor::kStart, 90);
    }
    for (int k = 0; k < n; ++k) {
      const auto ks = static_cast<size_t>(k);
      const double x = left + (k % per_row) * (tile_w + kGap), top = line_top[ks / per_row];
      const std::vector<double>& image = g.images[ks];
      const std::vector<double>* overlay =
          ks < g.overlays.size() && !g.overlays[ks].empty() ? &g.overlays[ks] : nullptr;
      p.pixels(x, top, g.rows, g.cols, g.scale, [&](int i, int j) {
        const auto idx = static_cast<size_t>(i * g.cols + j);
        const double grey = std::clamp(std::isfinite(image[idx]) ? image[idx] : 0.0, 0.0, 1.0);
        if (!overlay) {
          const auto v = static_cast<uint8_t>(std::lround(grey * 255));
          return Rgb{v, v, v};
        }
        const Rgb heat = colormap((*overlay)[idx]);
        return Rgb{blend(grey, heat.r, kOverlayAlpha), blend(grey, heat.g, kOverlayAlpha),
                   blend(grey, heat.b, kOverlayAlpha)};
      });
      if (overlay && g.patch > 0) {  // patch borders, so the map reads as one value per patch
        cairo_t* cr = p.cairo();
        cairo_set_source_rgba(cr, 1, 1, 1, 0.35);
        cairo_set_line_width(cr, 1);
        for (int r = g.patch; r < g.rows; r += g.patch) {
          cairo_move_to(cr, x, top + r * g.scale + 0.5);
          cairo_line_to(cr, x + tile_w, top + r * g.scale + 0.5);
        }
        for (int c = g.patch; c < g.cols; c += g.patch) {
          cairo_move_to(cr, x + c * g.scale + 0.5, top);
          cairo_line_to(cr, x + c * g.scale + 0.5, top + tile_h);
        }
        cairo_stroke(cr);
      }
      if (ks < g.captions.size() && !g.captions[ks].empty())
        p.text(x + tile_w / 2, top + tile_h + 3, g.captions[ks], caption_style[ks],
               Anchor::kMiddle);
    }
  });
}

void patch_attention_strip(const std::string& path, const PatchAttention& a, int scale) {
  const size_t n = a.captions.size(), pixels = static_cast<size_t>(std::max(0, a.rows * a.cols)),
               cells = static_cast<size_t>(std::max(0, a.grid_rows * a.grid_cols));
  if (n == 0 || a.grid_rows <= 0 || a.grid_cols <= 0 || a.rows % a.grid_rows != 0 ||
      a.cols % a.grid_cols != 0 || a.images.size() != n * pixels || a.maps.size() != n * cells)
    throw ValueError(fmt::format(
        "patch_attention_strip: {}: {} captions, {} image values ({}x{} each), {} map values "
        "({}x{} each): the counts disagree or the grid does not divide the image",
        path, n, a.images.size(), a.rows, a.cols, a.maps.size(), a.grid_rows, a.grid_cols));
  const int patch_h = a.rows / a.grid_rows, patch_w = a.cols / a.grid_cols;
  ImageGrid g{.rows = a.rows,
              .cols = a.cols,
              .per_row = static_cast<int>(n),
              .scale = scale,
              .patch = patch_h == patch_w ? patch_h : 0,
              .title = a.title,
              .line_titles = {"attention", "image"}};
  std::vector<std::vector<double>> plain;
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
    g.images.push_back(image);
    g.overlays.push_back(std::move(overlay));
    g.captions.emplace_back();
    plain.push_back(std::move(image));
  }
  for (size_t b = 0; b < n; ++b) {
    g.images.push_back(std::move(plain[b]));
    g.overlays.emplace_back();
    g.captions.push_back(a.captions[b]);
  }
  image_grid(path, g);
}

}  // namespace nabla::viz
